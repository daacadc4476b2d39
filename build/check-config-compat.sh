#!/usr/bin/env bash
# check-config-compat.sh PATCHED UPSTREAM checks the config file contract of the two kube-proxy
# binaries through their real option parsing (--config plus --write-config-to, which loads,
# completes and validates the file, writes it back and exits without touching the system):
#   - rollback: the pristine upstream binary accepts a file that holds the ruleSync section;
#   - the patched binary takes the section's values, and explicit flags override them;
#   - the patched binary rejects a misspelled field in the section and a bad value, non-zero.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 2 ] || die "usage: $0 PATCHED UPSTREAM"
patched=$(realpath "$1") upstream=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() { # check NAME CONDITION-COMMAND...
	local name=$1; shift
	if "$@" >"$work/out" 2>&1; then
		echo "ok   $name"; pass=$((pass + 1))
	else
		echo "FAIL $name"; sed 's/^/     /' "$work/out" | tail -5; fail=$((fail + 1))
	fi
}
base='apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: node-a'
printf '%s\nruleSync:\n  fullSyncPeriod: 20m\n  fullSyncJitterPercent: 25\n  syncSplay: 20m\nnftables:\n  maxSyncTransactionSize: 300\n  ruleShapes: PerRuleMaps\n' "$base" > "$work/good.yaml"
# The names of the previous release: read for one more release, written out under the new ones.
printf '%s\nruleSync:\n  fullSyncPeriod: 20m\n  fullSyncJitter: 0.25\n  nftablesRuleShapes: Upstream\n  maxSyncTransactionSize: 300\n  syncWorkers: 2\n' "$base" > "$work/old.yaml"
printf '%s\nruleSync:\n  fullSyncJitter: 0.25\n  fullSyncJitterPercent: 30\n' "$base" > "$work/both.yaml"
printf '%s\nruleSync:\n  fullSyncPeriode: 20m\n' "$base" > "$work/typo.yaml"
printf '%s\nruleSync:\n  fullSyncPeriod: 20m\n  syncSplay: 1h\n' "$base" > "$work/splay.yaml"

run() { "$@" >"$work/log" 2>&1; }
written() { grep -q -- "$1" "$work/written.yaml"; }

check "upstream binary starts with a config that holds ruleSync (rollback)" \
	run "$upstream" --config="$work/good.yaml" --write-config-to="$work/written.yaml"
check "patched binary loads ruleSync from the file" \
	bash -c "'$patched' --config='$work/good.yaml' --write-config-to='$work/written.yaml' >'$work/log' 2>&1 &&
		grep -q 'fullSyncPeriod: 20m0s' '$work/written.yaml' && grep -q 'fullSyncJitterPercent: 25' '$work/written.yaml' && grep -q 'syncSplay: 20m0s' '$work/written.yaml' &&
		grep -q 'maxSyncTransactionSize: 300' '$work/written.yaml' && grep -q 'ruleShapes: PerRuleMaps' '$work/written.yaml'"
check "the previous release's field names load, written out under the new names" \
	bash -c "'$patched' --config='$work/old.yaml' --write-config-to='$work/written.yaml' >'$work/log' 2>&1 &&
		grep -q 'Deprecated configuration field' '$work/log' &&
		grep -q 'fullSyncJitterPercent: 25' '$work/written.yaml' && grep -q 'ruleShapes: Upstream' '$work/written.yaml' &&
		grep -q 'maxSyncTransactionSize: 300' '$work/written.yaml' && grep -q 'syncWorkers: 2' '$work/written.yaml' &&
		! grep -q 'fullSyncJitter:\\|nftablesRuleShapes' '$work/written.yaml'"
check "an old field name and its new one with different values fail" \
	bash -c "! '$patched' --config='$work/both.yaml' --write-config-to='$work/written.yaml' >'$work/log' 2>&1 && grep -q 'both ruleSync.fullSyncJitter (deprecated)' '$work/log'"
check "an explicit flag overrides the file" \
	bash -c "'$patched' --config='$work/good.yaml' --full-sync-period=2h --write-config-to='$work/written.yaml' >'$work/log' 2>&1 &&
		grep -q 'fullSyncPeriod: 2h0m0s' '$work/written.yaml' && grep -q 'syncSplay: 20m0s' '$work/written.yaml'"
check "a misspelled ruleSync field fails, naming the field" \
	bash -c "! '$patched' --config='$work/typo.yaml' --write-config-to='$work/written.yaml' >'$work/log' 2>&1 && grep -q 'unknown field \\\\\"fullSyncPeriode\\\\\"' '$work/log'"
check "splay above the period fails, naming the flag and range" \
	bash -c "! '$patched' --config='$work/splay.yaml' --write-config-to='$work/written.yaml' >'$work/log' 2>&1 && grep -q -- '--sync-splay must be in the range' '$work/log'"
check "a bad flag value fails, naming the flag and range" \
	bash -c "! '$patched' --full-sync-jitter-percent=150 --write-config-to='$work/written.yaml' >'$work/log' 2>&1 && grep -q -- '--full-sync-jitter-percent must be in the range \[0, 100)' '$work/log'"
check "the deprecated fraction flag still works, as a percentage" \
	bash -c "'$patched' --full-sync-jitter=0.5 --write-config-to='$work/written.yaml' >'$work/log' 2>&1 && grep -q 'fullSyncJitterPercent: 50' '$work/written.yaml'"
echo "config-compat: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
