#!/usr/bin/env bash
# check-line.sh TAG is the fast check of a second upstream line, for CI (build/test.sh runs it
# for every patches/TAG/go.mod that is not the line under test):
#   1. pins: patches/TAG/go.mod pins k8s.io/kubernetes TAG, and every pinned module downloads
#      and matches patches/TAG/go.sum (GOFLAGS=-mod=readonly);
#   2. the pristine tree assembles from those modules, and the patched tree from it: every patch
#      of the line's series applies (patches/TAG/ overrides included) and overlay/ lays cleanly;
#   3. the patched tree compiles: go build ./cmd/kube-proxy (CGO_ENABLED=0, as build/build.sh),
#      and go vet plus the test binary of pkg/proxy/nftables (go test -run '^$', no test runs).
# The trees are those of make UPSTREAM=TAG, _output/src/TAG/{pristine,patched}; nothing runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 1 ] || die "usage: $0 TAG"
tag=$1
root=$(cd "$here/.." && pwd)
moddir="$root/patches/$tag"
[ -f "$moddir/go.mod" ] || die "no line $tag: patches/$tag/go.mod is missing (build/pin-line.sh $tag)"
src="$root/_output/src/$tag"
mkdir -p "$src"
pass=0
step() { echo "ok   $tag: $1"; pass=$((pass + 1)); }
t0=$SECONDS

[ "$(pinned_tag "$moddir")" = "$tag" ] || die "patches/$tag/go.mod does not pin k8s.io/kubernetes $tag"
n=0
while read -r path ver; do
	module_dir "$moddir" "$path" "$ver" >/dev/null
	n=$((n + 1))
done < <(cd "$moddir" && go mod edit -print | awk '/^require \(/ { r = 1; next } r && /^\)/ { r = 0 } r && NF == 2 { print $1, $2 }')
step "pins: $n modules match patches/$tag/go.sum"

"$here/assemble.sh" pristine "$moddir" "$src/pristine" 2>"$src.log" || { cat "$src.log" >&2; exit 1; }
step "pristine tree assembled"
"$here/assemble.sh" patched "$src/pristine" "$root/patches" "$root/overlay" "$src/patched" 2>"$src.log" ||
	{ cat "$src.log" >&2; exit 1; }
overrides=$(grep -c "^==> applying .*/$tag/" "$src.log" || true)
step "patched tree assembled: $(grep -c '^==> applying' "$src.log") patches apply ($overrides overrides from patches/$tag/), overlay laid"
rm -f "$src.log"

# All with CGO_ENABLED=0 and -trimpath, as build/build.sh builds, so that the three share one
# compilation of the dependencies.
cd "$src/patched"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
go build -trimpath -o /dev/null ./cmd/kube-proxy
step "go build ./cmd/kube-proxy"
go vet -trimpath ./pkg/proxy/nftables/
go test -trimpath -count=1 -run '^$' ./pkg/proxy/nftables/ >/dev/null
step "go vet and test build of ./pkg/proxy/nftables"
"$here/codegen.sh" verify "$src/patched" >/dev/null
step "generated code of the configuration API matches upstream's generators"
echo "line $tag: $pass checks passed in $((SECONDS - t0))s"
