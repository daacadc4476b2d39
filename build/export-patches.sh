#!/usr/bin/env bash
# export-patches.sh WORK [PATCHES] writes the commits on WORK's patched branch since the base tag
# as numbered patch files into PATCHES (default: patches), replacing the ones there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -ge 1 ] || die "usage: $0 WORK [PATCHES]"
work=$1 patches=$(realpath "${2:-patches}")
tag=$(cat "$work/.upstream-tag")
rm -f "$patches"/*.patch
git -C "$work" format-patch -q --no-signature --zero-commit --no-numbered --full-index \
	-o "$patches" "$tag..patched"
ls "$patches"
