#!/usr/bin/env bash
# kernel-package.sh SUITE LINE CACHE [PACKAGE] downloads and unpacks a Debian kernel for
# build/conformance-kernel.sh, and prints the directory it is unpacked in, which holds
# boot/vmlinuz-KVER and lib/modules/KVER with a modules.dep. Nothing is installed on the host.
#
# SUITE is the Debian release (bookworm, trixie) and LINE the kernel line it must be (6.1,
# 6.12): the package is PACKAGE, or else the linux-image package that SUITE's linux-image-amd64
# depends on, and the script fails when its release is not of LINE. SUITE's package lists are
# kept in a private apt state under CACHE/apt/SUITE (the host's apt state is neither read for
# them nor changed), made from the host's Debian sources with the host's release name replaced by
# SUITE, and refreshed when they are missing or name a package the archive no longer has. The
# .deb and its unpacked tree stay under CACHE, and later runs reuse them without the network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 3 ] || [ $# -eq 4 ] || die "usage: $0 SUITE LINE CACHE [PACKAGE]"
suite=$1 line=$2 cache=$3 pkg=${4:-} override=${4:-}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# The private apt state: its own sources, lists and caches; the host's keyrings.
apt_dir="$cache/apt/$suite"
apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=$apt_dir/sources.list.d"
	-o "Dir::State::lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
	-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root)

# write_sources writes SUITE's sources.list: every Debian main archive the host's apt reads for
# its own release (the release, its -updates and -security suites), renamed to SUITE.
write_sources() {
	local host_suite uri release
	host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$host_suite" ] || die "cannot tell the host's Debian release (no VERSION_CODENAME in /etc/os-release)"
	mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
	: >"$apt_dir/sources.list.new"
	while read -r uri release; do
		case "$release" in
		"$host_suite" | "$host_suite"-*) echo "deb $uri $suite${release#"$host_suite"} main" >>"$apt_dir/sources.list.new" ;;
		esac
	done < <(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' 'Component: main' | LC_ALL=C sort -u)
	[ -s "$apt_dir/sources.list.new" ] || die "the host's apt has no Debian main archive for $host_suite to take $suite's packages from"
	mv "$apt_dir/sources.list.new" "$apt_dir/sources.list"
}

# refresh downloads SUITE's package lists.
refresh() {
	write_sources
	log "apt-get update for $suite (private lists under ${apt_dir#"$cache"/})"
	apt-get "${apt_opts[@]}" update -qq >&2 || die "apt-get update for $suite failed"
}

# resolve prints the linux-image package that SUITE's linux-image-amd64 depends on.
resolve() {
	apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'
}

# fetch_deb downloads package $1 into CACHE; it fails when the lists do not know the package or
# the archive no longer has it.
fetch_deb() {
	local tmp deb
	tmp=$(mktemp -d "$cache/download.XXXXXX")
	if (cd "$tmp" && apt-get "${apt_opts[@]}" download -q "$1" >&2) && deb=$(ls "$tmp/$1"_*.deb 2>/dev/null | tail -n1) && [ -n "$deb" ]; then
		mv "$deb" "$cache/" && rm -rf "$tmp"
		return 0
	fi
	rm -rf "$tmp"
	return 1
}

# deb_of prints the cached .deb of package $1, if any.
deb_of() { ls "$cache/$1"_*.deb 2>/dev/null | tail -n1 || true; }

# have prints whether package $1 is unpacked or downloaded already.
have() { [ -f "$cache/$1/.unpacked" ] || [ -n "$(deb_of "$1")" ]; }

[ -f "$apt_dir/sources.list" ] && [ -n "$(ls "$apt_dir/lists" 2>/dev/null | grep -v partial)" ] || refresh
fresh=false
if [ -z "$pkg" ]; then
	pkg=$(resolve)
	[ -n "$pkg" ] || { refresh && fresh=true && pkg=$(resolve); }
	[ -n "$pkg" ] || die "cannot tell which linux-image package $suite's linux-image-amd64 depends on"
fi
if ! have "$pkg"; then
	log "downloading $pkg ($suite)"
	if ! fetch_deb "$pkg"; then
		# Stale lists: the archive has moved on. Take the package the fresh lists name.
		$fresh && die "apt-get download $pkg ($suite) failed"
		refresh
		[ -n "$override" ] || pkg=$(resolve)
		have "$pkg" || { log "downloading $pkg ($suite)" && fetch_deb "$pkg"; } || die "apt-get download $pkg ($suite) failed"
	fi
fi
kdir="$cache/$pkg"
if [ ! -f "$kdir/.unpacked" ]; then
	deb=$(deb_of "$pkg")
	log "unpacking $(basename "$deb")"
	rm -rf "$kdir" && mkdir -p "$kdir"
	dpkg-deb -x "$deb" "$kdir"
	# Trixie's packages keep the modules under usr/lib (merged /usr); depmod -b looks in lib.
	[ -e "$kdir/lib" ] || [ ! -d "$kdir/usr/lib/modules" ] || ln -s usr/lib "$kdir/lib"
	touch "$kdir/.unpacked"
fi
[ -d "$kdir/lib/modules" ] || die "no lib/modules in $kdir"
kver=$(ls "$kdir/lib/modules" | head -n1)
case "$kver" in
"$line".*) ;;
*) die "$pkg ($suite) holds kernel $kver, not $line.x" ;;
esac
[ -f "$kdir/boot/vmlinuz-$kver" ] || die "no kernel image boot/vmlinuz-$kver in $kdir"
[ -f "$kdir/lib/modules/$kver/modules.dep" ] || depmod -b "$kdir" "$kver"
echo "$kdir"
