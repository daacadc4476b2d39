#!/usr/bin/env bash
# bench-kernel.sh build|run|probe PRISTINE PATCHED
#
# The real-kernel benchmark of the nftables proxier (make bench-kernel, make bench-kernel-probe).
#   build  lays bench/kernel/*.go into a bench copy of each tree (test/benchkernel, with that
#          tree's adapter: adapter_upstream.go in the pristine copy, adapter_patched.go in the
#          patched one), builds _output/bench/bin/benchkernel-{upstream,patched} and the nft
#          shim _output/bench/bin/nftshim.
#   run    (root) installs nftables and iproute2 if missing, builds, and runs the benchmark;
#          the report goes to stdout and _output/bench/results-<time>.txt. Environment:
#          SHAPES, SIZES, UPSTREAM_MAX, PERIODIC_SLOT, IDLE_SECONDS, PHASE_TIMEOUT,
#          RTNL_INTERVAL, PATCHED_ONLY, UPSTREAM_ONLY (see bench/kernel/config.go).
#   probe  (root) the rule-shape and per-packet probe. Environment: PROBE_SIZES, PROBE_VARIANTS,
#          PROBE_FAMILY, PROBE_V0_MAX, PROBE_A0_MAX, PROBE_KS, PROBE_PKT_N, PROBE_PKT_ROUNDS, PROBE_SKIP_LOAD,
#          PROBE_SKIP_PKT, PROBE_ENDPOINTS.
# Every netns the run creates is named bk<pid>-...; they are deleted at the end, on failure and
# on interrupt (by the Go program, and again here by name).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 3 ] || die "usage: $0 build|run|probe PRISTINE PATCHED"
action=$1 pristine=$2 patched=$3
root=$(cd "$here/.." && pwd)
out=$root/_output/bench
bin=$out/bin

# bench_tree SRC DST ADAPTER: DST becomes a copy of SRC (hard links: nothing in it is ever
# modified in place) plus test/benchkernel with the benchmark and ADAPTER, and test/rtnlprobe
# with the RTNL probe it shares with bench/e2e (bench/_rtnlprobe).
bench_tree() {
	local src=$1 dst=$2 adapter=$3 f
	[ -f "$src/.upstream-tag" ] || die "$src is not an assembled tree (make tree)"
	rm -rf "$dst.tmp"
	mkdir -p "$(dirname "$dst")"
	cp -al "$src" "$dst.tmp" 2>/dev/null || { rm -rf "$dst.tmp"; cp -r "$src" "$dst.tmp"; }
	rm -rf "$dst.tmp/test/benchkernel"
	mkdir -p "$dst.tmp/test/benchkernel"
	for f in "$root"/bench/kernel/*.go; do
		case $(basename "$f") in adapter_*.go) continue ;; esac
		cp "$f" "$dst.tmp/test/benchkernel/"
	done
	cp "$root/bench/kernel/$adapter" "$dst.tmp/test/benchkernel/"
	lay_rtnlprobe "$dst.tmp"
	lay_netns "$dst.tmp"
	rm -rf "$dst"
	mv "$dst.tmp" "$dst"
}

build() {
	bench_tree "$pristine" "$out/pristine-src" adapter_upstream.go
	bench_tree "$patched" "$out/patched-src" adapter_patched.go
	mkdir -p "$bin"
	local tree name
	for tree in pristine patched; do
		name=upstream
		[ $tree = patched ] && name=patched
		log "building $bin/benchkernel-$name"
		(cd "$out/$tree-src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -tags benchkernel -o "$bin/benchkernel-$name" ./test/benchkernel)
	done
	log "building $bin/nftshim"
	(cd "$root" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o "$bin/nftshim" ./bench/kernel/nftshim)
}

# cleanup stops the benchmark program (it kills its proxier processes and deletes its netns
# on SIGTERM), then deletes the netns of this run by name, in case it could not.
id="bk$$"
pid=
cleanup() {
	local ns
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$id-" || true); do
		ip netns del "$ns" 2>/dev/null || true
	done
}

# run_bg runs its arguments in the background with stdout copied to file $1, and waits.
run_bg() {
	local file=$1
	shift
	"$@" > >(tee "$file") &
	pid=$!
	wait "$pid"
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "the kernel benchmark needs root (network namespaces, nftables)"
	"$here/deps.sh" test
	command -v nft >/dev/null && command -v ip >/dev/null || die "nft and ip are required"
}

case $action in
build) build ;;
run)
	need_root
	build
	trap cleanup EXIT
	trap 'cleanup; exit 130' INT TERM HUP
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	work=$out/run-$stamp
	mkdir -p "$work"
	log "running; logs in $work, report in $out/results-$stamp.txt"
	run_bg "$out/results-$stamp.txt" "$bin/benchkernel-patched" run -id "$id" -upstream-bin "$bin/benchkernel-upstream" \
		-patched-bin "$bin/benchkernel-patched" -shim "$bin/nftshim" -work "$work"
	;;
probe)
	need_root
	build
	trap cleanup EXIT
	trap 'cleanup; exit 130' INT TERM HUP
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	run_bg "$out/probe-$stamp.txt" "$bin/benchkernel-patched" probe -id "$id" -work "$out/probe-$stamp"
	rm -rf "$out/probe-$stamp"
	;;
*) die "usage: $0 build|run|probe PRISTINE PATCHED" ;;
esac
