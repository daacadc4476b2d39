#!/usr/bin/env bash
# upstream-pr.sh PRISTINE PATCHED writes the upstream pull request (make upstream-pr):
#   _output/upstream/series/*.patch  a git format-patch series against the pinned tag, one commit
#                                    per feature of build/upstream-pr/features.txt, each combining
#                                    that feature's patches with its overlay files and tests;
#   _output/upstream/PR.md           the description: what it fixes, measured figures, API and
#                                    flag changes, release note (from build/upstream-pr/PR.md).
# It then checks the series: applied to a fresh copy of the PRISTINE tree it must give exactly the
# PATCHED tree, and upstream's tests (./pkg/proxy/... ./cmd/kube-proxy/...) must pass on that
# copy (UPSTREAM_PR_TESTS=0 skips the tests). UPSTREAM_PR_EACH=1 also compiles every commit on
# its own. Every patch and overlay file must belong to exactly
# one feature, so the series cannot silently drop work.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 2 ] || die "usage: $0 PRISTINE PATCHED"
pristine=$(realpath "$1") patched=$(realpath "$2")
[ -f "$pristine/.upstream-tag" ] && [ -f "$patched/.upstream-tag" ] || die "assemble the trees first (make tree)"
tag=$(cat "$pristine/.upstream-tag")
root=$(cd "$here/.." && pwd)
out=$root/_output/upstream
features=$here/upstream-pr/features.txt

: "${SOURCE_DATE_EPOCH:=$(tag_epoch "$root" "$tag")}"
export GIT_AUTHOR_NAME="kube-proxy overlay" GIT_AUTHOR_EMAIL="overlay@invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="@$SOURCE_DATE_EPOCH +0000" GIT_COMMITTER_DATE="@$SOURCE_DATE_EPOCH +0000"

"$here/check-features.sh"

# body PATCH prints the commit message body of a format-patch file.
body() {
	awk 'BEGIN{h=1} h && /^$/ {h=0; next} !h && /^---$/ {exit} !h {print}' "$1"
}

log "building the series in $out/work"
rm -rf "$out/work" "$out/series" "$out/carry" "$out/check"
mkdir -p "$out"
cp -r "$pristine" "$out/work"
cd "$out/work"
git init -q -b pristine
git add -A
git commit -q -m "k8s.io/kubernetes $tag (pristine, staging filled from modules)"
git tag "$tag"
git checkout -q -b upstream-pr
while IFS='|' read -r slug subject nums paths; do
	slug=$(echo "$slug" | xargs) subject=$(echo "$subject" | xargs)
	msg=$(mktemp)
	printf 'UPSTREAM: 139513: %s\n\n' "$subject" > "$msg"
	for n in $nums; do
		f=$(ls "$root/patches/$n"-*.patch)
		git apply --index "$f" || die "feature $slug: $(basename "$f") does not apply"
		body "$f" >> "$msg"
		echo >> "$msg"
	done
	for p in $paths; do
		(cd "$root/overlay" && find "$p" -type f) | while IFS= read -r f; do
			mkdir -p "$(dirname "$f")"
			cp "$root/overlay/$f" "$f"
			git add "$f"
		done
	done
	git commit -q -F "$msg"
	rm -f "$msg"
	log "  $slug: $(git diff --shortstat HEAD~1)"
done < <(grep -v '^\s*\(#\|$\)' "$features")
# The carry (this build's own, last in features.txt) is not part of the upstream series.
last=upstream-pr
if [ "$(grep -v '^\s*\(#\|$\)' "$features" | tail -1 | cut -d'|' -f1 | xargs)" = carry ]; then
	last=upstream-pr~1
	git format-patch -q --no-signature --zero-commit --full-index -o "$out/carry" "$last..upstream-pr"
fi
git format-patch -q --no-signature --zero-commit --full-index -o "$out/series" "$tag..$last"

# With UPSTREAM_PR_EACH=1, each commit must build on its own, tests included, so that the series
# bisects: compile (and vet) kube-proxy and the proxy packages' tests at every commit, running
# none of them. Off by default: the overlay holds each file's final state, so a commit can use a
# later feature's types (drift-only full sync hashes in the generation stage's recorder).
if [ "${UPSTREAM_PR_EACH:-0}" != 0 ]; then
	for c in $(git rev-list --reverse "$tag..upstream-pr"); do
		git checkout -q "$c"
		log "checking: commit $(git log -1 --format=%s "$c" | sed 's/^UPSTREAM: [0-9]*: //') builds with its tests"
		go build -o /dev/null ./cmd/kube-proxy >"$out/each.log" 2>&1 &&
			go test -count=1 -run '^$' ./pkg/proxy/... ./cmd/kube-proxy/... >>"$out/each.log" 2>&1 || {
			grep -vE '^(ok|\?) ' "$out/each.log" | head -30 >&2
			die "commit $c of the series does not build with its tests ($out/each.log)"
		}
	done
	git checkout -q upstream-pr
fi

log "checking: the series (and the carry) on a fresh pristine tree gives the patched tree"
cp -r "$pristine" "$out/check"
(cd "$out/check" && git init -q && for p in "$out"/series/*.patch "$out"/carry/*.patch; do
	[ -e "$p" ] || continue
	git apply "$p" || die "$(basename "$p") does not apply to the pristine tree"
done)
if ! diff -r -q -x .upstream-tag -x .git "$out/check" "$patched" >"$out/tree.diff"; then
	cat "$out/tree.diff" >&2
	die "the series does not rebuild the patched tree"
fi
series=$(cd "$out/series" && ls)

if [ "${UPSTREAM_PR_TESTS:-1}" != 0 ]; then
	log "checking: upstream's tests on the series' tree"
	(cd "$out/check" && go test ./pkg/proxy/... ./cmd/kube-proxy/...) >"$out/tests.log" 2>&1 || {
		grep -E '^(FAIL|---)' "$out/tests.log" >&2 || tail -20 "$out/tests.log" >&2
		die "upstream's tests fail on the series' tree ($out/tests.log)"
	}
	tests="upstream's \`go test ./pkg/proxy/... ./cmd/kube-proxy/...\` passes on the result"
else
	tests="tests skipped (UPSTREAM_PR_TESTS=0)"
fi

{
	sed -e "s|@TAG@|$tag|g" "$here/upstream-pr/PR.md"
	echo
	echo "## Commits"
	echo
	for p in $series; do
		echo "- \`$p\`: $(awk '/^Subject: / {s = $0; while ((getline l) > 0 && l ~ /^ /) s = s l; print s; exit}' "$out/series/$p" | sed 's/^Subject: \[PATCH[^]]*\] //')"
	done
	echo
	echo "Checked by \`make upstream-pr\`: the series applies to pristine $tag and rebuilds the patched tree exactly; $tests."
} >"$out/PR.md"
rm -rf "$out/work"
log "wrote $out/series ($(echo "$series" | wc -w) commits) and $out/PR.md"
