#!/bin/sh
# The /init of the conformance-kernel initramfs (build/kernel-initramfs.sh lays it out), run by
# busybox's sh under a Debian kernel (6.1 or 6.12) in qemu. It mounts the kernel's filesystems,
# loads nf_tables and veth (the rest loads on demand through kmod's modprobe), runs the real-kernel
# tests of the patched nftables proxier, prints the marker lines that build/kernellog reads,
# and powers the VM off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
# kmod's modprobe, by its path: busybox's sh prefers its own applets to what PATH finds.
echo /sbin/modprobe >/proc/sys/kernel/modprobe
for m in nf_tables nft_chain_nat nf_nat nf_conntrack nft_ct nft_nat nft_masq nft_reject_inet nft_reject_ipv4 nft_reject_ipv6 nft_fib_ipv4 nft_fib_ipv6 nft_numgen veth; do
	/sbin/modprobe "$m" || echo "init: modprobe $m failed"
done
/usr/sbin/ip link set lo up
echo "KERNEL-UNAME $(uname -r)"
cd /kpo || exit 1
KUBE_PROXY_OVERLAY_REAL_KERNEL=required ./nftables.test -test.run "$(cat /kpo/run-pattern)" -test.v -test.count 1 -test.timeout "$(cat /kpo/test-timeout)" 2>&1
rc=$?
echo "KERNEL-EXIT $rc"
sync
poweroff -f
