#!/usr/bin/env bash
# bench-sync.sh PRISTINE PATCHED: the Go rule-generation benchmark of the nftables proxier
# (make bench-sync). It lays bench/sync/_intree into pkg/proxy/nftables of a hard-linked copy of
# each tree (with that tree's adapter), builds one test binary per tree, and runs
# bench/sync (the orchestrator), which interleaves the two binaries' runs. nft --check of the
# generated rulesets runs in throwaway network namespaces when run as root; without root that
# column is skipped, with a note. Environment: SYNC_SIZES, SYNC_FAMILIES, SYNC_ROUNDS,
# SYNC_FULL, SYNC_PARTIAL, SYNC_BATCH, SYNC_CHECK_UPSTREAM_MAX (see bench/sync/main.go).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 2 ] || die "usage: $0 PRISTINE PATCHED"
pristine=$1 patched=$2
root=$(cd "$here/.." && pwd)
out=$root/_output/bench-sync
bin=$out/bin

# sync_tree SRC DST ADAPTER: DST becomes a copy of SRC (hard links; nothing in it is modified in
# place) with the benchmark driver and ADAPTER in pkg/proxy/nftables.
sync_tree() {
	local src=$1 dst=$2 adapter=$3 pkg=pkg/proxy/nftables
	[ -f "$src/.upstream-tag" ] || die "$src is not an assembled tree (make tree)"
	rm -rf "$dst.tmp"
	mkdir -p "$(dirname "$dst")"
	cp -al "$src" "$dst.tmp" 2>/dev/null || { rm -rf "$dst.tmp"; cp -r "$src" "$dst.tmp"; }
	cp "$root/bench/sync/_intree/zz_benchsync_test.go" "$dst.tmp/$pkg/"
	cp "$root/bench/sync/_intree/$adapter" "$dst.tmp/$pkg/zz_benchsync_adapter_test.go"
	rm -rf "$dst"
	mv "$dst.tmp" "$dst"
}

sync_tree "$pristine" "$out/pristine-src" adapter_upstream_test.go
sync_tree "$patched" "$out/patched-src" adapter_patched_test.go
mkdir -p "$bin"
for tree in pristine patched; do
	name=upstream
	[ $tree = patched ] && name=patched
	log "building $bin/benchsync-$name"
	(cd "$out/$tree-src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go test -c -trimpath -o "$bin/benchsync-$name" ./pkg/proxy/nftables)
done

check=()
if [ "$(id -u)" -eq 0 ]; then
	"$here/deps.sh" test
	check=(-nft "$(command -v nft)")
else
	log "not root: skipping nft --check of the rulesets (it needs a network namespace)"
fi
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out/run-$stamp"
(cd "$root" && go run ./bench/sync -upstream "$bin/benchsync-upstream" -patched "$bin/benchsync-patched" \
	-work "$out/run-$stamp" "${check[@]}") | tee "$out/results-$stamp.txt"
