#!/usr/bin/env bash
# pin-line.sh TAG writes the pins of a second upstream line, patches/TAG/go.mod and go.sum, as
# the root go.mod pins the default line: k8s.io/kubernetes TAG, each staging module at the
# matching v0.<minor>.<patch> (require and replace, as upstream replaces them with local paths),
# and sigs.k8s.io/knftables at the version upstream's own go.mod requires. go.sum is filled by
# the Go module proxy and checked against the checksum database (GONOSUMDB/GOFLAGS as usual).
# Staging modules that the proxy does not serve at that version are left out, and said so.
#
#   build/pin-line.sh v1.37.2     then: build/check-upstream-md.sh --write; commit patches/v1.37.2
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 1 ] || die "usage: $0 TAG (for example v1.37.2)"
tag=$1
staging=$(staging_version "$tag")
root=$(cd "$here/.." && pwd)
[ "$tag" != "$(pinned_tag "$root")" ] || die "$tag is the default line, pinned by the root go.mod"
line="$root/patches/$tag"
mkdir -p "$line"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The staging modules are the ones the root go.mod pins, by name.
mapfile -t mods < <(staging_modules "$root" | cut -d' ' -f1)
log "k8s.io/kubernetes@$tag"
kdir=$(cd "$tmp" && go mod download -json "k8s.io/kubernetes@$tag" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$kdir" ] || die "the module proxy does not serve k8s.io/kubernetes@$tag"
knft=$(sed -n 's/^[[:space:]]*sigs.k8s.io\/knftables \(v[^ ]*\).*/\1/p' "$kdir/go.mod")
[ -n "$knft" ] || die "k8s.io/kubernetes@$tag does not require sigs.k8s.io/knftables"

served=()
for m in "${mods[@]}"; do
	if ! (cd "$tmp" && go mod download -json "$m@$staging" >/dev/null 2>&1); then
		log "not served at $staging: $m (left out; assemble.sh drops it from go.work)"
	else
		served+=("$m")
	fi
done

{
	echo "module github.com/kube-proxy-overlay/kube-proxy-overlay/line-$tag"
	echo
	echo "go $(cd "$root" && go mod edit -json | sed -n 's/^[[:space:]]*"Go": "\(.*\)",$/\1/p')"
	echo
	echo "// The pins of the upstream line $tag (written by build/pin-line.sh $tag); nothing here is"
	echo "// compiled. build/assemble.sh reads this file and go.sum, as it reads the root ones."
	echo "require ("
	echo "	k8s.io/kubernetes $tag"
	for m in "${served[@]}"; do echo "	$m $staging"; done
	echo "	sigs.k8s.io/knftables $knft"
	echo ")"
	echo
	echo "replace ("
	for m in "${served[@]}"; do echo "	$m => $m $staging"; done
	echo ")"
} > "$line/go.mod"
: > "$line/go.sum"
(cd "$line" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes "${served[@]}" sigs.k8s.io/knftables)
# go mod download records the h1: hashes of what it downloaded; keep go.sum sorted.
LC_ALL=C sort -o "$line/go.sum" "$line/go.sum"
[ "$(grep -c "^k8s.io/kubernetes $tag h1:" "$line/go.sum")" -eq 1 ] || die "go.sum has no hash for k8s.io/kubernetes@$tag"
log "wrote patches/$tag/go.mod and go.sum (${#served[@]} staging modules at $staging, knftables $knft)"
