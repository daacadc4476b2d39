#!/usr/bin/env bash
# conformance-kernel.sh LINE TREE runs the patched nftables proxier's real-kernel tests (every
# test of pkg/proxy/nftables whose name matches KERNEL_RUN, default RealKernel: rule programming
# checked against the kernel's own listing, and real TCP packets through the rules) under a
# Debian kernel of line LINE booted in qemu: 6.1 (bookworm's, the kernel of AL2023 AMIs for
# Kubernetes 1.32 and older) or 6.12 (trixie's, AL2023 for 1.33 and later).
#
# The guest kernel comes from build/kernel-package.sh: the linux-image package that the suite's
# linux-image-amd64 depends on (or KERNEL_PACKAGE), downloaded with apt-get download and unpacked
# under _output/conformance-kernel/cache, never installed on the host. Its initramfs is built by
# build/kernel-initramfs.sh: busybox-static, the host's nft and ip with the shared libraries that
# ldd lists, kmod for module autoloading, the netfilter and veth modules with their
# dependencies, and the test binary, compiled static in TREE. The guest's /init
# (build/kernel-init.sh) loads the modules, runs the tests, prints marker lines that
# build/kernellog reads, and powers off.
#
# It prints the guest's kernel release, one line per test case, and last
# "kernelNN: N passed, N failed" (kernel61 for 6.1, kernel612 for 6.12), and exits non-zero when a
# case fails or the VM does not finish within KERNEL_TIMEOUT seconds (default 5400). The serial
# console is kept in _output/conformance-kernel/LINE/console.log. Uses KVM where the host has
# hardware virtualisation, software emulation (TCG) otherwise; KERNEL_ACCEL=kvm|tcg chooses.
# Root is needed only to install missing Debian packages. KERNEL61_RUN and KERNEL61_TIMEOUT are
# read when KERNEL_RUN and KERNEL_TIMEOUT are unset, and KERNEL61_PACKAGE for line 6.1 when
# KERNEL_PACKAGE is unset (the names of the 6.1-only script this one replaces).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 2 ] || die "usage: $0 6.1|6.12 TREE"
line=$1
case "$line" in
6.1) suite=bookworm name=kernel61 pkg=${KERNEL_PACKAGE:-${KERNEL61_PACKAGE:-}} ;;
6.12) suite=trixie name=kernel612 pkg=${KERNEL_PACKAGE:-} ;;
*) die "kernel line $line: want 6.1 (Debian bookworm) or 6.12 (Debian trixie)" ;;
esac
root=$(cd "$here/.." && pwd)
tree=$(cd "$2" && pwd)
out="$root/_output/conformance-kernel"
run_pattern=${KERNEL_RUN:-${KERNEL61_RUN:-RealKernel}}
vm_timeout=${KERNEL_TIMEOUT:-${KERNEL61_TIMEOUT:-5400}}
[[ $vm_timeout =~ ^[1-9][0-9]*$ ]] || die "KERNEL_TIMEOUT=$vm_timeout: want a number of seconds"
mkdir -p "$out/$line"

# KVM only where the host has hardware virtualisation (kvm_intel or kvm_amd): a /dev/kvm served
# by another module, such as kvm_pvm on nested cloud machines, does not run a stock kernel (qemu
# aborts on an MSR, or the guest stops in an emulation failure or hangs silently).
accel=${KERNEL_ACCEL:-}
if [ -z "$accel" ]; then
	accel=tcg
	if [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
		accel=kvm
	elif [ -e /dev/kvm ]; then
		log "/dev/kvm is there, but neither kvm_intel nor kvm_amd is loaded: software emulation (KERNEL_ACCEL=kvm to try it anyway)"
	fi
fi
case "$accel" in kvm | tcg) ;; *) die "KERNEL_ACCEL=$accel: want kvm or tcg" ;; esac

# Debian packages: a command each, and busybox must be the static build.
"$here/deps.sh" kernel
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

kdir=$("$here/kernel-package.sh" "$suite" "$line" "$out/cache" ${pkg:+"$pkg"})
kver=$(ls "$kdir/lib/modules" | head -n1)

log "test binary (CGO_ENABLED=0, static) from $tree"
(cd "$tree" && CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o "$out/$line/nftables.test" ./pkg/proxy/nftables)
(cd "$root" && go build -o "$root/_output/bin/kernellog" ./build/kernellog)

log "initramfs for $kver"
stage="$work/root"
# The tests' own timeout ends them a minute before the VM's, so that a hung test still prints
# which one it was and the exit line.
"$here/kernel-initramfs.sh" "$kdir" "$kver" "$out/$line/nftables.test" "$run_pattern" "$((vm_timeout > 120 ? vm_timeout - 60 : vm_timeout / 2))s" "$stage"
(cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) | gzip -1 >"$work/initramfs.gz"

console="$out/$line/console.log"

# boot runs the VM once under accelerator $1 (kvm or tcg), its serial console into $console, and
# returns qemu's exit code (124 when timeout stopped it).
boot() {
	local opts rc
	opts=(-accel tcg -cpu max)
	[ "$1" = kvm ] && opts=(-accel kvm -cpu host)
	log "booting $kver in qemu ($1), at most ${vm_timeout}s; console in ${console#"$root"/}"
	set +e
	timeout --foreground -k 10 "$vm_timeout" qemu-system-x86_64 "${opts[@]}" -m 2048 -smp 2 \
		-nographic -no-reboot -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$work/initramfs.gz" \
		-append "console=ttyS0 panic=-1 quiet loglevel=3" </dev/null | tee "$console"
	rc=${PIPESTATUS[0]}
	set -e
	[ "$rc" -ne 124 ] || log "the VM did not finish within ${vm_timeout}s"
	return "$rc"
}

start=$(date +%s)
qemu_rc=0
boot "$accel" || qemu_rc=$?
if [ "$accel" = kvm ] && [ -z "${KERNEL_ACCEL:-}" ] && ! grep -q 'KERNEL-UNAME ' "$console"; then
	log "the guest never started its tests under KVM (qemu exit code $qemu_rc): again under software emulation"
	accel=tcg qemu_rc=0
	boot tcg || qemu_rc=$?
fi
elapsed=$(($(date +%s) - start))
log "VM wall time: ${elapsed}s ($accel, qemu exit code $qemu_rc)"
"$root/_output/bin/kernellog" "$name" "$console"
