#!/usr/bin/env bash
# soak.sh TREE STEPS [SEED] runs the model-based soak of the nftables proxier on the real kernel
# (TestRealKernelSoak) in the patched TREE for STEPS steps, from SEED (default: drawn from the
# time, and printed so that a run can be replayed). Each failed invariant is printed with the
# seed and the step; the last line is `soak: N steps, N commits checked, N violations`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -ge 2 ] || die "usage: $0 TREE STEPS [SEED]"
tree=$(cd "$1" && pwd)
steps=$2 seed=${3:-$(date +%s)}
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "STEPS=$steps: want a positive number"
[[ "$seed" =~ ^[0-9]+$ ]] || die "SEED=$seed: want a number"
[ "$(id -u)" -eq 0 ] || die "make soak needs root (it creates network namespaces)"
log "upstream's own nftables proxier, for the soak's hand-overs to it"
upstream=$(upstream_soak_path "$(dirname "$tree")/pristine")
upstream_soak_test "$(dirname "$tree")/pristine" "$upstream"
log "soak: $steps steps from seed $seed (replay: make soak STEPS=$steps SEED=$seed)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
(cd "$tree" && KUBE_PROXY_OVERLAY_REAL_KERNEL=required KUBE_PROXY_OVERLAY_SOAK_STEPS=$steps \
	KUBE_PROXY_OVERLAY_SOAK_UPSTREAM=$upstream \
	KUBE_PROXY_OVERLAY_SOAK_SEED=$seed KUBE_PROXY_OVERLAY_SOAK_TRACE=${KUBE_PROXY_OVERLAY_SOAK_TRACE:-} go test -count=1 -timeout 0 -v -run '^TestRealKernelSoak$' \
	./pkg/proxy/nftables/) >"$out" 2>&1 || rc=$?
grep -v '^soak: ' "$out" | grep -v '^=== RUN' || true
line=$(grep '^soak: ' "$out" | tail -1)
[ -n "$line" ] || die "the soak printed no summary (exit $rc)"
echo "$line"
exit "$rc"
