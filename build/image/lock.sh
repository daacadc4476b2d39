#!/usr/bin/env bash
# lock.sh KPIMAGE SPEC LOCK MD CACHE APTDIR refreshes the recorded package set: it resolves the
# dependency closure of SPEC (images/packages.in) against Debian's current archive, through the
# private apt configuration, writes LOCK and MD, and fetches every recorded .deb into CACHE to
# check it against the hash the signed index gave.
#
# Run it (make image-lock) when the spec changes, or when the build says that a recorded
# version is no longer in the archive. Review the diff, then commit LOCK and MD together.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/apt.sh"
[ $# -eq 6 ] || die "usage: $0 KPIMAGE SPEC LOCK MD CACHE APTDIR"
kpimage=$1 spec=$2 lock=$3 md=$4 cache=$5 aptdir=$6

suite=$(awk '$1 == "suite" { print $2 }' "$spec")
arch=$(awk '$1 == "arch" { print $2 }' "$spec")
[ -n "$suite" ] && [ -n "$arch" ] || die "$spec names no suite or arch"

apt_setup "$aptdir" "$suite" "$arch"
apt_update
log "resolving the closure of $spec"
"$kpimage" lock -spec "$spec" -lock "$lock" -md "$md"
APT_LISTS_FRESH=1 "$here/debs.sh" "$kpimage" "$lock" "$cache" "$aptdir"
git -C "$(dirname "$lock")" diff --stat -- "$(basename "$lock")" "$(basename "$md")" 2>/dev/null || true
