#!/usr/bin/env bash
# upstream-pr.sh PRISTINE PATCHED writes the upstream pull request (make upstream-pr) against
# PRISTINE's tag (a second line's into _output/upstream/TAG/):
#   _output/upstream/series/*.patch  a git format-patch series against the pinned tag, one commit
#                                    per feature of build/upstream-pr/features.txt, each combining
#                                    that feature's patches with its overlay files and tests;
#   _output/upstream/PR.md           the description: what it fixes, measured figures, API and
#                                    flag changes, release note (from build/upstream-pr/PR.md).
# It then checks the series:
#   - every commit on its own (UPSTREAM_PR_EACH=0 skips this): go build ./cmd/kube-proxy and
#     go vet of ./pkg/proxy/... ./cmd/kube-proxy/..., which type-checks each package with its
#     tests, so that the series bisects. Built as build/build.sh builds (CGO_ENABLED=0,
#     -trimpath), so the commits share one compilation of what they do not change, and the last
#     commit, the patched tree, comes from make build's cache;
#   - applied to a fresh copy of the PRISTINE tree it gives exactly the PATCHED tree;
#   - upstream's tests (./pkg/proxy/... ./cmd/kube-proxy/...) pass on the last commit
#     (UPSTREAM_PR_TESTS=0 skips them, UPSTREAM_PR_TESTS=each runs them on every commit).
# make test runs it with UPSTREAM_PR_TESTS=0: its own test run covers the patched tree, which is
# the last commit's tree. Every patch and overlay file must belong to exactly one feature
# (build/check-features.sh), so the series cannot silently drop work.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 2 ] || die "usage: $0 PRISTINE PATCHED"
pristine=$(realpath "$1") patched=$(realpath "$2")
[ -f "$pristine/.upstream-tag" ] && [ -f "$patched/.upstream-tag" ] || die "assemble the trees first (make tree)"
tag=$(cat "$pristine/.upstream-tag")
root=$(cd "$here/.." && pwd)
# The default line's series goes to _output/upstream, a second line's (make upstream-pr
# UPSTREAM=TAG) to _output/upstream/TAG, built with that line's overrides from patches/TAG/.
if [ "$tag" = "$(pinned_tag "$root")" ]; then out=$root/_output/upstream; else out=$root/_output/upstream/$tag; fi
features=$here/upstream-pr/features.txt

: "${SOURCE_DATE_EPOCH:=$(tag_epoch "$root" "$tag")}"
export GIT_AUTHOR_NAME="kube-proxy overlay" GIT_AUTHOR_EMAIL="overlay@invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="@$SOURCE_DATE_EPOCH +0000" GIT_COMMITTER_DATE="@$SOURCE_DATE_EPOCH +0000"

"$here/check-features.sh"

# body PATCH prints the commit message body of a format-patch file, without the sections that
# say when this repository drops the patch (from "Upstream PR, Issue, KEP, etc. links:" on).
body() {
	awk 'BEGIN{h=1} h && /^$/ {h=0; next} !h && (/^---$/ || /^Upstream PR, Issue, KEP, etc\. links:$/) {exit} !h {print}' "$1" |
		sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
}

log "building the series in $out/work"
rm -rf "$out/work" "$out/series" "$out/carry" "$out/check"
mkdir -p "$out"
cp -r "$pristine" "$out/work"
cd "$out/work"
git init -q -b pristine
git -c core.safecrlf=false add -A
git commit -q -m "k8s.io/kubernetes $tag (pristine, staging filled from modules)"
git tag "$tag"
git checkout -q -b upstream-pr
while IFS='|' read -r slug subject nums paths; do
	slug=$(echo "$slug" | xargs) subject=$(echo "$subject" | xargs)
	msg=$(mktemp)
	# The commit's fate ("UPSTREAM: <fate>:") is its patches', which must agree.
	fate=
	for n in $nums; do
		f=$(ls "$root/patches/$n"-*.patch)
		this=$(sed -n 's/^Subject: \[PATCH\] UPSTREAM: \([^:]*\):.*/\1/p' "$f")
		[ -n "$this" ] || die "feature $slug: $(basename "$f") has no \"UPSTREAM: <fate>:\" subject"
		[ -z "$fate" ] || [ "$fate" = "$this" ] || die "feature $slug: its patches' fates differ ($fate, $this)"
		fate=$this
	done
	printf 'UPSTREAM: %s: %s\n\n' "$fate" "$subject" > "$msg"
	for n in $nums; do
		f=$(ls "$root/patches/$n"-*.patch)
		[ ! -f "$root/patches/$tag/$(basename "$f")" ] || f=$root/patches/$tag/$(basename "$f")
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

tests_mode=${UPSTREAM_PR_TESTS:-1}
case $tests_mode in 0 | 1 | each) ;; *) die "UPSTREAM_PR_TESTS=$tests_mode: 0, 1 or each" ;; esac

# run_tests DIR runs upstream's tests of the proxy in DIR, logging to $out/tests.log.
run_tests() {
	(cd "$1" && go test ./pkg/proxy/... ./cmd/kube-proxy/...) >"$out/tests.log" 2>&1 || {
		grep -E '^(FAIL|---)' "$out/tests.log" >&2 || tail -20 "$out/tests.log" >&2
		die "upstream's tests fail on $2 ($out/tests.log)"
	}
}

if [ "${UPSTREAM_PR_EACH:-1}" != 0 ]; then
	n=0
	for c in $(git rev-list --reverse "$tag..upstream-pr"); do
		n=$((n + 1))
		git checkout -q "$c"
		name="commit $n ($(git log -1 --format=%s "$c" | sed 's/^UPSTREAM: [^:]*: //'))"
		log "checking: $name builds and vets with its tests"
		{
			CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o /dev/null ./cmd/kube-proxy &&
				CGO_ENABLED=0 GOFLAGS=-buildvcs=false go vet -trimpath ./pkg/proxy/... ./cmd/kube-proxy/...
		} >"$out/each.log" 2>&1 || {
			head -40 "$out/each.log" >&2
			die "$name of the series does not build or vet on its own ($out/each.log)"
		}
		[ "$tests_mode" != each ] || run_tests "$out/work" "$name"
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

case $tests_mode in
1)
	log "checking: upstream's tests on the series' tree"
	run_tests "$out/check" "the series' tree"
	tests="upstream's \`go test ./pkg/proxy/... ./cmd/kube-proxy/...\` passes on the result"
	;;
each) tests="upstream's \`go test ./pkg/proxy/... ./cmd/kube-proxy/...\` passes at every commit" ;;
0) tests="tests skipped (UPSTREAM_PR_TESTS=0)" ;;
esac
if [ "${UPSTREAM_PR_EACH:-1}" != 0 ]; then
	tests="every commit builds and passes \`go vet\` with its tests; $tests"
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
