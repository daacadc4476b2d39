#!/usr/bin/env bash
# lock.sh KPIMAGE SPEC LOCK MD CACHE APTDIR refreshes the recorded package set: it resolves the
# dependency closure of SPEC (images/packages.in) for each of its architectures against Debian's
# current archive, through a private apt configuration per architecture, writes LOCK and MD, and fetches every recorded .deb into CACHE to
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
read -r -a arches <<<"$(awk '$1 == "arch" { $1 = ""; print }' "$spec")"
[ -n "$suite" ] && [ ${#arches[@]} -gt 0 ] || die "$spec names no suite or arch"

apt=()
for a in "${arches[@]}"; do
	(apt_setup "$aptdir/$a" "$suite" "$a" && apt_update)
	apt+=(-apt "$a=$aptdir/$a/apt.conf")
done
log "resolving the closure of $spec for ${arches[*]}"
"$kpimage" lock -spec "$spec" -lock "$lock" -md "$md" "${apt[@]}"
APT_LISTS_FRESH=1 "$here/debs.sh" "$kpimage" "$lock" "$cache" "$aptdir"
git -C "$(dirname "$lock")" diff --stat -- "$(basename "$lock")" "$(basename "$md")" 2>/dev/null || true
