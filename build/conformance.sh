#!/usr/bin/env bash
# conformance.sh PRISTINE PATCHED_BIN UPSTREAM_BIN: node-level conformance on the real kernel
# (make conformance; part of make test; root). It lays conformance/_harness into
# test/kpconformance (and overlay/test/netns into test/netns) of a hard-linked copy of the
# assembled PRISTINE tree, builds it there as a
# test binary (embedded etcd and an in-process kube-apiserver, from upstream's own go.mod), and
# runs it against both kube-proxy binaries. Progress goes to stdout as it happens; the side-by-side
# report comes last, ending with `patched: N passed, N failed`. Every component's log is kept in
# _output/conformance/logs, which survives a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
harness_args conformance "$@"
root=$(cd "$here/.." && pwd)

out=$root/_output/conformance
src=$out/src
pkg=test/kpconformance
test_bin=$out/bin/kpconformance.test

# The build tree: a hard-linked copy of PRISTINE (nothing in it is modified in place), refreshed
# when PRISTINE was re-assembled, with the harness laid in.
if [ ! -f "$src/.upstream-tag" ] || [ "$pristine/.upstream-tag" -nt "$src/.upstream-tag" ]; then
	mkdir -p "$(dirname "$src")"
	rm -rf "$src.tmp" "$src"
	cp -al "$pristine" "$src.tmp" 2>/dev/null || { rm -rf "$src.tmp"; cp -r "$pristine" "$src.tmp"; }
	mv "$src.tmp" "$src"
fi
rm -rf "${src:?}/$pkg"
mkdir -p "$src/$pkg" "$out/bin"
cp "$root"/conformance/_harness/*.go "$src/$pkg/"
lay_netns "$src"
log "building $test_bin"
# No -trimpath: cmd/kube-apiserver/app/testing finds its testdata by its source path. No vet: it
# would analyse all of kube-apiserver's dependencies.
(cd "$src" && CGO_ENABLED=0 go test -c -vet=off -o "$test_bin" "./$pkg")

logs=$out/logs
rm -rf "$logs"
mkdir -p "$logs"
report=$logs/report.txt
log "running conformance (logs: $logs)"
rc=0
KPCONF_PATCHED=$patched_bin KPCONF_UPSTREAM=$upstream_bin KPCONF_LOGS=$logs KPCONF_REPORT=$report \
	"$test_bin" -test.run '^TestConformance$' -test.timeout 45m -test.v \
	2>"$logs/harness.stderr.log" | tee "$logs/harness.log" | grep --line-buffered -E '^[0-9]{2}:[0-9]{2}:[0-9]{2} ' || rc=$?
[ -f "$report" ] || { tail -n 40 "$logs/harness.stderr.log" "$logs/harness.log" >&2; die "conformance: no report (logs: $logs)"; }
grep -q -- '--- PASS: TestConformance' "$logs/harness.log" || rc=1
echo
cat "$report"
exit $rc
