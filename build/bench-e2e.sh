#!/usr/bin/env bash
# bench-e2e.sh PRISTINE PATCHED_BIN UPSTREAM_BIN: the end-to-end benchmark of the real binaries
# (make bench-e2e; root; not part of make test). It lays the conformance harness
# (conformance/_harness) and the benchmark's driver (bench/e2e/_intree) into test/kpconformance
# of a hard-linked copy of the assembled PRISTINE tree, the benchmark's pure parts (bench/e2e)
# into test/kpe2e and the RTNL probe (bench/_rtnlprobe) into test/rtnlprobe, builds one test
# binary, and runs its TestBenchE2E: etcd and kube-apiserver in-process, each kube-proxy binary
# in a fresh node network namespace. Its world's names start with kpe- and its link to the API
# server is 192.168.249.0/30, so that it meets nothing of make conformance's (kpc-,
# 192.168.251.0/30). The report goes to stdout and _output/bench-e2e/results-<time>.txt; logs
# and the patched binary's pprof profiles to _output/bench-e2e/run-<time>/.
# Environment: SIZES, FAMILY, ENDPOINTS, AFFINITY_PERCENT, NODEPORT_PERCENT, CHURN_RATE,
# CHURN_SECONDS, FULL_SYNC_PERIOD, UPSTREAM_MAX (see bench/e2e/config.go and README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
harness_args bench-e2e "$@"
root=$(cd "$here/.." && pwd)

out=$root/_output/bench-e2e
src=$out/src
test_bin=$out/bin/benche2e.test

# The build tree: a hard-linked copy of PRISTINE, refreshed when PRISTINE was re-assembled; the
# benchmark's directories are new in it, so nothing hard-linked is modified.
if [ ! -f "$src/.upstream-tag" ] || [ "$pristine/.upstream-tag" -nt "$src/.upstream-tag" ]; then
	mkdir -p "$out"
	rm -rf "$src.tmp" "$src"
	cp -al "$pristine" "$src.tmp" 2>/dev/null || { rm -rf "$src.tmp"; cp -r "$pristine" "$src.tmp"; }
	mv "$src.tmp" "$src"
fi
rm -rf "$src/test/kpconformance" "$src/test/kpe2e"
mkdir -p "$src/test/kpconformance" "$src/test/kpe2e" "$out/bin"
cp "$root"/conformance/_harness/*.go "$root"/bench/e2e/_intree/*.go "$src/test/kpconformance/"
for f in "$root"/bench/e2e/*.go; do
	case $f in *_test.go) continue ;; esac
	cp "$f" "$src/test/kpe2e/"
done
lay_rtnlprobe "$src"
lay_netns "$src"
log "building $test_bin"
# No -trimpath: cmd/kube-apiserver/app/testing finds its testdata by its source path.
(cd "$src" && CGO_ENABLED=0 go test -c -vet=off -o "$test_bin" ./test/kpconformance)

stamp=$(date -u +%Y%m%dT%H%M%SZ)
run=$out/run-$stamp
mkdir -p "$run"
log "running bench-e2e (logs and profiles: $run; report: $out/results-$stamp.txt)"
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM HUP
rc=0
KPE2E_PATCHED=$patched_bin KPE2E_UPSTREAM=$upstream_bin KPE2E_OUT=$run KPCONF_PREFIX=kpe- KPCONF_API_NET=192.168.249.0 \
	"$test_bin" -test.run '^TestBenchE2E$' -test.timeout 120m 2>"$run/harness.stderr.log" > >(grep --line-buffered -vx PASS | tee "$out/results-$stamp.txt") &
pid=$!
wait "$pid" || rc=$?
pid=
[ $rc -eq 0 ] || tail -n 20 "$run/harness.stderr.log" >&2
exit $rc
