#!/usr/bin/env bash
# deps.sh SET installs the Debian packages that SET (test; image for make verify-image; kernel for make conformance-kernel) needs, when a command is missing.
# It runs apt-get only when something is missing, so a prepared machine pays nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# command:package pairs per set.
case "${1:-}" in
test) need="nft:nftables ip:iproute2 gcc:gcc git:git promtool:prometheus" ;;
image) need="qemu-aarch64-static:qemu-user-static ip:iproute2 chroot:coreutils" ;;
kernel) need="nft:nftables ip:iproute2 qemu-system-x86_64:qemu-system-x86 depmod:kmod kmod:kmod cpio:cpio" ;;
*) die "usage: $0 test|image|kernel" ;;
esac

missing=()
for pair in $need; do
	command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" -eq 0 ] || die "missing Debian packages: ${missing[*]}; install them (as root: apt-get install ${missing[*]})"
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
