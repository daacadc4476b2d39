# Shared helpers for the build scripts. Source it; do not run it.
# shellcheck shell=bash

# die prints its arguments to stderr and exits non-zero.
die() { echo "error: $*" >&2; exit 1; }

# log prints a progress line to stderr.
log() { echo "==> $*" >&2; }

# pinned_tag prints the k8s.io/kubernetes version that the go.mod in directory $1 requires.
pinned_tag() {
	local v
	v=$(cd "$1" && go list -m -f '{{.Version}}' k8s.io/kubernetes) || die "cannot read the pinned k8s.io/kubernetes from $1/go.mod"
	[ -n "$v" ] || die "$1/go.mod does not require k8s.io/kubernetes"
	echo "$v"
}

# staging_modules prints "path version" for every staging module that the go.mod in directory
# $1 pins with a replace directive (upstream's own go.mod replaces them with local paths). It
# reads go.mod only, so it works before anything is downloaded.
staging_modules() {
	(cd "$1" && go mod edit -print) |
		awk '$2 == "=>" && $1 ~ /^k8s\.io\// && NF == 4 { print $3, $4 } $1 == "replace" && $3 == "=>" && $2 ~ /^k8s\.io\// && NF == 5 { print $4, $5 }'
}

# module_dir downloads module $2@$3 through the go.mod in directory $1 (so go.sum verifies it)
# and prints its directory in the module cache.
module_dir() {
	local dir
	dir=$(cd "$1" && GOFLAGS=-mod=readonly go mod download -json "$2@$3" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] && [ -d "$dir" ] || die "go mod download $2@$3 failed (is it in go.sum?)"
	echo "$dir"
}

# tag_epoch prints the commit time of the pinned tag as Unix seconds, from the module proxy's
# .info record (verified alongside the module), for SOURCE_DATE_EPOCH.
tag_epoch() {
	local info t
	info=$(cd "$1" && go mod download -json "k8s.io/kubernetes@$2" | sed -n 's/^[[:space:]]*"Info": "\(.*\)",$/\1/p')
	t=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")
	[ -n "$t" ] || die "no commit time recorded for k8s.io/kubernetes@$2"
	date -u -d "$t" +%s
}

# staging_version prints the staging modules' version that goes with upstream tag $1
# (v1.37.2 -> v0.37.2), and fails for anything that is not a v1.x.y tag.
staging_version() {
	[[ $1 =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "$1 is not a v1.x.y tag"
	echo "v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
}

# upstream_soak_test PRISTINE OUT compiles upstream's pristine pkg/proxy/nftables test package,
# with build/soak/upstream_sync_test.go added through a Go overlay (the tree stays pristine),
# into the test binary OUT. The soak hands its table to it (KUBE_PROXY_OVERLAY_SOAK_UPSTREAM).
# With the build cache of make build-upstream, it takes about a minute on a cold 2-core machine.
# upstream_soak_path PRISTINE prints where upstream_soak_test puts the binary for that tree's tag:
# beside upstream's binary of the same line, so that two lines never share one.
upstream_soak_path() {
	echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/_output/upstream/$(cat "$1/.upstream-tag")/upstream-nftables-soak.test"
}

upstream_soak_test() {
	local pristine out=$2 src ov
	pristine=$(cd "$1" && pwd) # the overlay's paths are absolute
	src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/soak/upstream_sync_test.go"
	ov=$(mktemp)
	printf '{"Replace":{"%s":"%s"}}\n' "$pristine/pkg/proxy/nftables/zz_soak_upstream_sync_test.go" "$src" >"$ov"
	# The flags of build/build.sh, so that the packages that upstream's binary needs come from
	# the build cache: only the test's own dependencies compile anew.
	(cd "$pristine" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go test -c -trimpath -tags soakupstream -overlay "$ov" -o "$out" ./pkg/proxy/nftables/) || { rm -f "$ov"; die "compiling upstream's nftables tests for the soak failed"; }
	rm -f "$ov"
	# An overlay whose path matched nothing compiles silently without the test.
	"$out" -test.list '^TestSoakUpstreamSync$' | grep -qx TestSoakUpstreamSync ||
		die "$out lacks TestSoakUpstreamSync: the Go overlay of build/soak/upstream_sync_test.go did not apply"
}

# lay_rtnlprobe TREE lays the RTNL probe the benchmarks share (bench/_rtnlprobe) into
# TREE/test/rtnlprobe, importable there as k8s.io/kubernetes/test/rtnlprobe. TREE is a bench
# copy of an assembled tree; the directory is new in it, so nothing hard-linked is modified.
lay_rtnlprobe() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	rm -rf "$1/test/rtnlprobe"
	mkdir -p "$1/test/rtnlprobe"
	cp "$root"/bench/_rtnlprobe/*.go "$1/test/rtnlprobe/"
}

# lay_netns TREE lays the network-namespace helpers of the real-kernel tests
# (overlay/test/netns, which the patched tree has already) into TREE/test/netns, importable as
# k8s.io/kubernetes/test/netns, for the harness and benchmarks built in a copy of the pristine
# tree. As for lay_rtnlprobe, the directory is replaced, not modified in place.
lay_netns() {
	local root f
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	rm -rf "$1/test/netns"
	mkdir -p "$1/test/netns"
	for f in "$root"/overlay/test/netns/*.go; do
		case "$f" in *_test.go) continue ;; esac
		cp "$f" "$1/test/netns/"
	done
}

# harness_args TARGET PRISTINE PATCHED_BIN UPSTREAM_BIN: the checks that the harness runners
# (build/conformance.sh, build/bench-e2e.sh) share. It sets pristine (absolute), patched_bin and
# upstream_bin (real paths), requires root, and installs what the tests need.
harness_args() {
	[ $# -eq 4 ] || die "usage: $0 PRISTINE PATCHED_BIN UPSTREAM_BIN"
	pristine=$(cd "$2" && pwd)
	patched_bin=$(realpath "$3") upstream_bin=$(realpath "$4")
	[ -f "$pristine/.upstream-tag" ] || die "$pristine is not an assembled tree (make tree)"
	[ "$(id -u)" -eq 0 ] || die "make $1 needs root (it creates network namespaces)"
	"$(dirname "${BASH_SOURCE[0]}")/deps.sh" test
}
