#!/usr/bin/env bash
# rebase-check.sh TAG shows which patches apply cleanly to another upstream tag, and where the
# others fail. It pins k8s.io/kubernetes TAG and its staging modules (v0.<minor>.<patch>) in a
# scratch module under _output/lines/TAG (verified by the module proxy's checksums), assembles
# that pristine tree, then applies patches/ in order and lays overlay/ over it, reporting each
# step. A patch that fails is reported with its rejected hunks and the next patches are still
# tried on top of what did apply. It exits non-zero if anything failed. When the tag is a second
# line of this repo (patches/TAG/go.mod, see build/pin-line.sh), its pins are used, and the line's
# series (patches/TAG/*.patch overriding patches of the same name) is checked after the defaults.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 1 ] || die "usage: $0 TAG (for example v1.37.2)"
tag=$1
staging=$(staging_version "$tag")
root=$(cd "$here/.." && pwd)
line="$root/_output/lines/$tag"
mkdir -p "$line"

# The scratch go.mod: the line's own pins, or the root one with the k8s.io versions replaced
# (knftables and the image tooling's modules are left out: assemble.sh does not read them).
if [ -f "$root/patches/$tag/go.mod" ]; then
	cp "$root/patches/$tag/go.mod" "$line/go.mod"
else
	sed -e "s|k8s.io/kubernetes v[0-9.]*|k8s.io/kubernetes $tag|" \
		-e "s|^\(\tk8s\.io/[a-z0-9./-]*\) v0\.[0-9]*\.[0-9]*$|\1 $staging|" \
		-e "s|=> \(k8s.io/[a-z0-9-]*\) v0\.[0-9]*\.[0-9]*$|=> \1 $staging|" \
		-e '/^require github.com\/google\/go-containerregistry/d' \
		-e '/^\t[a-z].* \/\/ indirect$/d' -e '/^\tsigs.k8s.io\/knftables /d' -e '/^\tgithub.com\/stretchr\/testify /d' \
		"$root/go.mod" > "$line/go.mod"
fi
sed -i 's|^module .*|module rebase-check|' "$line/go.mod"
: > "$line/go.sum"
mods=$(staging_modules "$line" | cut -d' ' -f1)
log "downloading k8s.io/kubernetes@$tag and staging modules at $staging"
(cd "$line" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes $mods 2>&1 | sed 's/^/  /') || true
# Staging modules the proxy does not serve at this version are dropped from the pins.
for m in $mods; do
	if ! (cd "$line" && GOFLAGS=-mod=mod go mod download "$m" >/dev/null 2>&1); then
		log "not served at $staging: $m (dropped)"
		(cd "$line" && go mod edit -droprequire="$m" -dropreplace="$m")
	fi
done
"$here/assemble.sh" pristine "$line" "$root/_output/src/$tag/pristine"

work="$root/_output/src/$tag/rebase-check"
rm -rf "$work"
cp -r "$root/_output/src/$tag/pristine" "$work"
git -C "$work" init -q
ok=0 failed=0
shopt -s nullglob
for p in "$root"/patches/*.patch; do
	name=$(basename "$p")
	if (cd "$work" && git apply --check "$p") >/dev/null 2>&1; then
		(cd "$work" && git apply "$p")
		echo "ok     $name"
		ok=$((ok + 1))
	else
		echo "FAILS  $name"
		(cd "$work" && git apply --reject "$p" 2>&1 | grep -E '^(error|Rejected|Applying|Checking)' | sed 's/^/         /') || true
		while IFS= read -r rej; do
			echo "         --- ${rej#"$work"/}:"
			sed 's/^/           /' "$rej" | head -40
			rm -f "$rej"
		done < <(find "$work" -name '*.rej' | sort)
		failed=$((failed + 1))
	fi
done
while IFS= read -r f; do
	f=${f#./}
	if [ -e "$work/$f" ] && ! cmp -s "$root/overlay/$f" "$work/$f"; then
		echo "FAILS  overlay/$f: $tag already has a file there"
		failed=$((failed + 1))
	fi
done < <(cd "$root/overlay" && find . -type f | sort)
echo "rebase-check $tag: $ok patches apply, $failed failed"
if [ -d "$root/patches/$tag" ] && ls "$root/patches/$tag"/*.patch >/dev/null 2>&1; then
	# The line's own series: build/assemble.sh applies it, and stops at the first failure.
	if "$here/assemble.sh" patched "$root/_output/src/$tag/pristine" "$root/patches" "$root/overlay" "$work.line" >"$work.log" 2>&1; then
		echo "with the overrides in patches/$tag/: the line's series applies and overlay/ lays cleanly"
		rm -rf "$work.line" "$work.log"
		exit 0
	fi
	echo "with the overrides in patches/$tag/: FAILS"
	sed 's/^/  /' "$work.log"
	exit 1
fi
[ "$failed" -eq 0 ]
