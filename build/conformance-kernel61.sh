#!/usr/bin/env bash
# conformance-kernel61.sh TREE runs the patched nftables proxier's real-kernel tests (every test
# of pkg/proxy/nftables whose name matches KERNEL61_RUN, default RealKernel: rule programming
# checked against the kernel's own listing, and real TCP packets through the rules) under Debian
# bookworm's Linux 6.1, the kernel line of AL2023 and Bottlerocket nodes, booted in qemu.
#
# The guest is the kernel of the linux-image package that Debian's linux-image-amd64 depends on
# (or KERNEL61_PACKAGE), never installed on the host: downloaded with apt-get download and
# unpacked under _output/conformance-kernel61/cache, which later runs reuse. Its initramfs is
# built here: busybox-static, the host's nft and ip (bookworm's) with the shared libraries that
# ldd lists, kmod for module autoloading, the netfilter and veth modules with their dependencies,
# and the test binary, compiled static in TREE. The guest's /init loads the modules, runs the
# tests, prints marker lines that build/kernel61log reads, and powers off.
#
# It prints the guest's kernel release, one line per test case, and last
# "kernel61: N passed, N failed", and exits non-zero when a case fails or the VM does not finish
# within KERNEL61_TIMEOUT seconds (default 1800). The serial console is kept in
# _output/conformance-kernel61/console.log. Uses /dev/kvm when it can, software emulation
# otherwise. Root is needed only to install missing Debian packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 1 ] || die "usage: $0 TREE"
root=$(cd "$here/.." && pwd)
tree=$(cd "$1" && pwd)
out="$root/_output/conformance-kernel61"
cache="$out/cache"
run_pattern=${KERNEL61_RUN:-RealKernel}
vm_timeout=${KERNEL61_TIMEOUT:-1800}
mkdir -p "$cache"

# Debian packages: a command each, and busybox must be the static build.
"$here/deps.sh" kernel61
if ! dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
	[ "$(id -u)" -eq 0 ] || die "missing Debian package busybox-static (as root: apt-get install busybox-static)"
	log "installing busybox-static"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static >/dev/null
fi

work=$(mktemp -d "$out/run.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The kernel package: the one linux-image-amd64 depends on, downloaded once.
pkg=${KERNEL61_PACKAGE:-}
if [ -z "$pkg" ]; then
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	if [ -z "$pkg" ]; then
		apt-get update -qq
		pkg=$(apt-cache depends linux-image-amd64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	fi
	[ -n "$pkg" ] || die "cannot tell which linux-image package linux-image-amd64 depends on"
fi
kdir="$cache/$pkg"
if [ ! -f "$kdir/.unpacked" ]; then
	deb=$(ls "$cache/${pkg}"_*.deb 2>/dev/null | tail -n1 || true)
	if [ -z "$deb" ]; then
		log "downloading $pkg"
		(cd "$work" && apt-get download -q "$pkg" 2>&1 | grep -v 'unsandboxed' >&2 || true)
		deb=$(ls "$work/${pkg}"_*.deb 2>/dev/null | tail -n1 || true)
		[ -n "$deb" ] || die "apt-get download $pkg failed"
		mv "$deb" "$cache/" && deb="$cache/$(basename "$deb")"
	fi
	log "unpacking $(basename "$deb")"
	rm -rf "$kdir" && mkdir -p "$kdir"
	dpkg-deb -x "$deb" "$kdir"
	touch "$kdir/.unpacked"
fi
kver=$(ls "$kdir/lib/modules" | head -n1)
vmlinuz="$kdir/boot/vmlinuz-$kver"
[ -f "$vmlinuz" ] || die "no kernel image in $kdir"
[ -f "$kdir/lib/modules/$kver/modules.dep" ] || depmod -b "$kdir" "$kver"

log "test binary (CGO_ENABLED=0, static) from $tree"
(cd "$tree" && CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o "$out/nftables.test" ./pkg/proxy/nftables)
(cd "$root" && go build -o "$root/_output/bin/kernel61log" ./build/kernel61log)

log "initramfs for $kver"
stage="$work/root"
"$here/kernel61-initramfs.sh" "$kdir" "$kver" "$out/nftables.test" "$run_pattern" "$stage"
(cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) | gzip -1 >"$work/initramfs.gz"

accel=(-accel tcg -cpu max)
[ -w /dev/kvm ] && accel=(-accel kvm -cpu host)
console="$out/console.log"
log "booting $kver in qemu (${accel[1]}), at most ${vm_timeout}s; console in ${console#"$root"/}"
start=$(date +%s)
set +e
timeout --foreground -k 10 "$vm_timeout" qemu-system-x86_64 "${accel[@]}" -m 2048 -smp 2 \
	-nographic -no-reboot -kernel "$vmlinuz" -initrd "$work/initramfs.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3" </dev/null | tee "$console"
qemu_rc=${PIPESTATUS[0]}
set -e
elapsed=$(($(date +%s) - start))
[ "$qemu_rc" -eq 124 ] && log "the VM did not finish within ${vm_timeout}s"
log "VM wall time: ${elapsed}s (qemu exit code $qemu_rc)"
"$root/_output/bin/kernel61log" "$console"
