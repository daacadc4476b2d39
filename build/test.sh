#!/usr/bin/env bash
# test.sh TREE BIN UPSTREAM_BIN runs the project's tests and prints a plain summary of what ran:
#   0. UPSTREAM.md's hash and patch tables against go.sum and patches/, the alert rules
#      (build/check-monitoring.sh: promtool check and unit tests), gofmt, and the links of every
#      Markdown file (build/mdlinks);
#   1. the build tooling's own tests (this repo's Go module);
#   2. the patch pipeline's failure modes, and the config-file contract of the patched BIN and
#      the pristine UPSTREAM_BIN;
#   2b. for every second upstream line (patches/<tag>/go.mod) other than TREE's, the fast
#      check of build/check-line.sh: pins, assembled trees, go build and vet (no tests run);
#   2c. on the default line, the upstream series (build/upstream-pr.sh): every commit builds and
#      vets on its own; no tests, because its last commit is TREE, which step 3 tests;
#   3. with -race, in the patched TREE: every package that holds overlay files, plus upstream's
#      ./pkg/proxy/... and ./cmd/kube-proxy/....
# Tests listed in conformance/known-broken.txt are skipped by name, and listed with their reason.
# Any failure fails the run; nothing is filtered silently.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 3 ] || die "usage: $0 TREE BIN UPSTREAM_BIN"
root=$(cd "$here/.." && pwd)
tree=$(cd "$1" && pwd)
bin=$2 upstream_bin=$3
pristine="$(dirname "$tree")/pristine"

summary="$root/_output/bin/testsummary"
(cd "$root" && go build -o "$summary" ./build/testsummary)

log "UPSTREAM.md against go.sum and patches/"
"$here/check-upstream-md.sh"

log "every patch and overlay file belongs to one feature of the upstream series"
"$here/check-features.sh"

log "alert rules (images/deploy/monitoring): PrometheusRule in step, promtool check and unit tests"
"$here/check-monitoring.sh"

log "gofmt of this repo's Go files"
unformatted=$(cd "$root" && gofmt -l overlay conformance bench build)
[ -z "$unformatted" ] || die "not gofmt-formatted (run gofmt -w): $unformatted"

log "Markdown links: relative paths exist, anchors exist, nothing outside the repository"
(cd "$root" && go build -o "$root/_output/bin/mdlinks" ./build/mdlinks)
"$root/_output/bin/mdlinks" "$root"

log "build tooling tests"
(cd "$root" && go test -json ./build/... ./bench/...) | "$summary" -group tooling=github.com/

# Overlay packages: directories under overlay/ that hold Go files. A package that does not exist
# upstream is counted as "overlay"; one that upstream has is counted with upstream.
overlay_pkgs=()
groups=()
while IFS= read -r d; do
	overlay_pkgs+=("./$d/...")
	[ -d "$pristine/$d" ] || groups+=("-group" "overlay=k8s.io/kubernetes/$d")
done < <(cd "$root/overlay" && find . -name '*.go' -printf '%h\n' | sed 's|^\./||' | LC_ALL=C sort -u)
groups+=("-group" "upstream=k8s.io/")

skip=()
known="$root/conformance/known-broken.txt"
if grep -qv '^\s*\(#\|$\)' "$known" 2>/dev/null; then
	echo "Known-broken upstream tests, skipped (conformance/known-broken.txt):"
	grep -v '^\s*\(#\|$\)' "$known" | sed 's/^/  /'
	skip=(-skip "^($(grep -v '^\s*\(#\|$\)' "$known" | awk '{print $1}' | paste -sd'|'))\$")
fi

log "patch pipeline: broken patches and overlay conflicts fail loudly"
"$here/check-pipeline.sh" "$pristine"

log "generated code of the patched configuration API: upstream's generators reproduce it"
"$here/codegen.sh" verify "$tree"

log "config file contract of the built binaries (patched and pristine upstream)"
"$here/check-config-compat.sh" "$bin" "$upstream_bin"

for m in "$root"/patches/v*/go.mod; do
	[ -f "$m" ] || continue
	line=$(basename "$(dirname "$m")")
	[ "$line" = "$(cat "$tree/.upstream-tag")" ] && continue
	log "second upstream line $line (fast check): pins, patched tree assembles, go build/vet"
	"$here/check-line.sh" "$line"
done

# The upstream series (make upstream-pr) of the default line: every commit builds and vets on its
# own. Its last commit's tree is the patched tree (upstream-pr.sh checks that), whose tests step 3
# runs, so it runs no tests itself; it builds as build/build.sh does, so the commits reuse
# make build's compilation.
if [ "$(cat "$tree/.upstream-tag")" = "$(pinned_tag "$root")" ]; then
	log "upstream series (make upstream-pr): every commit builds and vets on its own"
	UPSTREAM_PR_TESTS=0 "$here/upstream-pr.sh" "$pristine" "$tree"
fi

log "upstream's own nftables proxier, for the soak's hand-overs to it"
KUBE_PROXY_OVERLAY_SOAK_UPSTREAM=$(upstream_soak_path "$pristine")
upstream_soak_test "$pristine" "$KUBE_PROXY_OVERLAY_SOAK_UPSTREAM"
export KUBE_PROXY_OVERLAY_SOAK_UPSTREAM

log "overlay and upstream tests on the patched tree (-race)"
cd "$tree"
# The real-kernel tests (pkg/proxy/nftables/realkernel_test.go) must run here, not skip.
KUBE_PROXY_OVERLAY_REAL_KERNEL=required CGO_ENABLED=1 go test -race -json -timeout 30m "${skip[@]}" \
	"${overlay_pkgs[@]}" ./pkg/proxy/... ./cmd/kube-proxy/... | "$summary" "${groups[@]}"
