#!/usr/bin/env bash
# build.sh TREE OUT VERSION compiles cmd/kube-proxy in the assembled TREE into OUT.
#
# The binary is reproducible: CGO_ENABLED=0, -trimpath, an empty build ID, no VCS stamping, and
# every stamped field (version, commit, tree state, build date) comes from the caller, never from
# the clock or the path. SOURCE_DATE_EPOCH must be set; it becomes the build date.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 3 ] || die "usage: $0 TREE OUT VERSION"
tree=$1 out=$(realpath -m "$2") version=$3
: "${SOURCE_DATE_EPOCH:?SOURCE_DATE_EPOCH must be set}"
commit=${KUBE_GIT_COMMIT:-}
state=${KUBE_GIT_TREE_STATE:-clean}

[[ $version =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]] ||
	die "version $version is not a semantic version"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

ldflags="-s -w -buildid="
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X '$pkg.gitVersion=$version' -X '$pkg.gitMajor=$major' -X '$pkg.gitMinor=$minor'"
	ldflags+=" -X '$pkg.gitCommit=$commit' -X '$pkg.gitTreeState=$state' -X '$pkg.buildDate=$date'"
done

mkdir -p "$(dirname "$out")"
log "building $out ($version)"
(cd "$tree" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$out.tmp" ./cmd/kube-proxy)
mv "$out.tmp" "$out"
