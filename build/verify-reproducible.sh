#!/usr/bin/env bash
# verify-reproducible.sh BIN rebuilds BIN from a fresh copy of this repo and fails unless the two
# binaries have the same sha256.
#
# The second build runs at a different path, with its own empty GOCACHE, its own TMPDIR and a
# different umask, so neither a shared build cache nor the path can make the comparison pass.
# Only the module cache is shared: its content is verified against go.sum.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 1 ] || die "usage: $0 BIN"
root=$(cd "$here/.." && pwd)
bin=$(realpath "$1")
rel=${bin#"$root"/}

work=$(mktemp -d /tmp/kp-repro.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
copy="$work/elsewhere/copy-of-repo"
mkdir -p "$copy" "$work/gocache" "$work/tmp"
# The repo as it is: tracked files and untracked ones that are not ignored, plus its history
# (the version stamp counts commits).
(cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$copy")
cp -r "$root/.git" "$copy/.git"

log "second build in $copy (empty GOCACHE, umask 0027)"
(
	umask 0027
	cd "$copy"
	env GOCACHE="$work/gocache" TMPDIR="$work/tmp" make --no-print-directory build >"$work/build.log" 2>&1
) || { tail -50 "$work/build.log" >&2; die "the second build failed"; }

a=$(sha256sum "$bin" | cut -d' ' -f1)
b=$(sha256sum "$copy/$rel" | cut -d' ' -f1)
echo "first:  $a  $bin"
echo "second: $b  $copy/$rel"
[ "$a" = "$b" ] || die "the two builds differ"
echo "reproducible: sha256:$a"
