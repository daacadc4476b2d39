#!/usr/bin/env bash
# kernel-initramfs.sh KDIR KVER TESTBIN PATTERN TIMEOUT STAGE lays out, in the new directory STAGE, the
# root of the initramfs that build/conformance-kernel.sh boots: the kernel modules of the
# unpacked Debian kernel package KDIR (release KVER; modules as .ko, .ko.xz or .ko.zst, all of
# which the host's kmod reads) that nftables and veth need, busybox-static,
# kmod (for the kernel's module autoloading), the host's nft and ip with their shared libraries,
# TESTBIN (a static Go test binary) and an /init that runs it with -test.run PATTERN and
# -test.timeout TIMEOUT (a Go duration).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 6 ] || die "usage: $0 KDIR KVER TESTBIN PATTERN TIMEOUT STAGE"
kdir=$1 kver=$2 testbin=$3 pattern=$4 test_timeout=$5 stage=$6
[ ! -e "$stage" ] || die "$stage exists"
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,run,tmp,etc,kpo} "$stage/lib/modules/$kver"
mkdir -p "$stage/var" && ln -s ../run "$stage/var/run"

# Modules: everything netfilter (nf_tables, its expressions, conntrack, NAT, reject) and veth,
# with what they depend on (modules.dep lists every module's dependencies, transitively), and the
# crc32c implementations that libcrc32c (under nf_tables and conntrack) asks for by softdep.
mdir="$kdir/lib/modules/$kver"
want=$(cd "$mdir" && {
	find kernel/net/netfilter kernel/net/ipv4/netfilter kernel/net/ipv6/netfilter -name '*.ko*'
	find kernel/drivers/net kernel/crypto kernel/arch/x86/crypto -maxdepth 1 \( -name 'veth.ko*' -o -name 'crc32c*.ko*' \)
} | LC_ALL=C sort)
echo "$want" | grep -q '/nf_tables\.ko' || die "no nf_tables module in $mdir"
echo "$want" | grep -q '/veth\.ko' || die "no veth module in $mdir"
all=$( (echo "$want"; for m in $want; do
	awk -v m="$m:" '$1 == m { for (i = 2; i <= NF; i++) print $i }' "$mdir/modules.dep"
done) | LC_ALL=C sort -u)
for m in $all; do
	mkdir -p "$stage/lib/modules/$kver/$(dirname "$m")"
	cp "$mdir/$m" "$stage/lib/modules/$kver/$m"
done
cp "$mdir"/modules.builtin "$mdir"/modules.builtin.modinfo "$mdir"/modules.order "$stage/lib/modules/$kver/"
depmod -b "$stage" "$kver"

# Dynamic binaries with the shared libraries (and loader) that ldd lists, at the same paths.
copy_with_libs() {
	local bin=$1 dest=$2 lib
	cp "$bin" "$stage/$dest"
	for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
		mkdir -p "$stage/$(dirname "$lib")"
		cp -L "$lib" "$stage/$lib"
	done
}
copy_with_libs "$(command -v nft)" usr/sbin/nft
# nft lists protocols by name (meta l4proto tcp) only when it finds them in /etc/protocols.
cp /etc/protocols /etc/services "$stage/etc/"
copy_with_libs "$(command -v ip)" usr/sbin/ip
copy_with_libs "$(command -v kmod)" usr/bin/kmod
for tool in modprobe insmod rmmod lsmod modinfo depmod; do
	ln -s ../usr/bin/kmod "$stage/sbin/$tool"
done

# busybox for everything else (sh, mount, poweroff, ...), except what the real tools provide.
cp /bin/busybox "$stage/bin/busybox"
for applet in $(/bin/busybox --list-full); do
	case "$(basename "$applet")" in ip | nft | modprobe | insmod | rmmod | lsmod | modinfo | depmod | busybox | linuxrc) continue ;; esac
	[ -e "$stage/$applet" ] || [ -L "$stage/$applet" ] || { mkdir -p "$stage/$(dirname "$applet")" && ln -s /bin/busybox "$stage/$applet"; }
done

cp "$testbin" "$stage/kpo/nftables.test"
printf '%s\n' "$pattern" >"$stage/kpo/run-pattern"
printf '%s\n' "$test_timeout" >"$stage/kpo/test-timeout"
cp "$here/kernel-init.sh" "$stage/init"
chmod 0755 "$stage/init"
