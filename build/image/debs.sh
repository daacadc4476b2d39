#!/usr/bin/env bash
# debs.sh KPIMAGE LOCK CACHE APTDIR makes sure that CACHE holds every .deb that LOCK records,
# for every architecture, each verified against the SHA-256 in LOCK.
#
# A .deb already in CACHE with the right hash costs nothing: apt is not called at all, so a warm
# cache builds offline. Missing ones are fetched with `apt-get download NAME=VERSION` through the
# private apt configuration of their architecture (build/image/apt.sh, under APTDIR/ARCH; an
# "all" package through the first architecture's), which checks each file against Debian's
# signed indexes, and then against LOCK. A file whose hash differs from LOCK is never used.
#
# Debian's archive keeps only the current version of each package in a suite, so a recorded
# version can disappear (a security or point-release update replaced it). Then this script names
# the packages and prints the command that refreshes the recorded set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/apt.sh"
[ $# -eq 4 ] || die "usage: $0 KPIMAGE LOCK CACHE APTDIR"
kpimage=$1 lock=$2 cache=$3 aptdir=$4
refresh_cmd=${IMAGE_LOCK_CMD:-make image-lock}

mkdir -p "$cache"
entries=$("$kpimage" lock-entries --lock "$lock")
suite=$("$kpimage" lock-entries --lock "$lock" --field suite)
read -r -a arches <<<"$("$kpimage" lock-entries --lock "$lock" --field arch)"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

missing=()
while read -r name version arch sha file; do
	f="$cache/$file"
	if [ -f "$f" ] && [ "$(sha_of "$f")" = "$sha" ]; then
		continue
	fi
	[ -f "$f" ] && { log "$file in the cache does not match $lock; fetching it again"; rm -f "$f"; }
	missing+=("$arch:$name=$version")
done <<<"$entries"

[ ${#missing[@]} -eq 0 ] && exit 0

# fetch ARCH NAME=VERSION... downloads into $dl with the current APT_CONFIG, then checks each
# file against LOCK and moves it into the cache.
fetch() {
	local a=$1 nv gone cur name version arch sha file got
	shift
	rm -rf "$dl"
	mkdir -p "$dl"
	if ! (cd "$dl" && apt-get -q download "$@" >"$dl/log" 2>&1); then
		# Find out which versions the archive no longer has, one by one, to name them all.
		gone=()
		for nv in "$@"; do
			(cd "$dl" && apt-get -q download "$nv" >/dev/null 2>&1) || gone+=("$nv")
		done
		if [ ${#gone[@]} -eq 0 ]; then
			cat "$dl/log" >&2
			die "apt-get download failed (see above)"
		fi
		{
			echo "error: the Debian archive no longer has these recorded versions ($lock, $a):"
			for nv in "${gone[@]}"; do
				cur=$(apt-cache policy "${nv%%=*}" 2>/dev/null | awk '/Candidate:/ {print $2}')
				echo "  ${nv%%=*} ${nv#*=}    (the archive now has: ${cur:-nothing})"
			done
			echo "Debian keeps only the current version of each package in $suite, $suite-updates and"
			echo "$suite-security; a newer one has replaced these. Refresh the recorded package set with:"
			echo
			echo "    $refresh_cmd"
			echo
			echo "then review and commit images/packages.lock and images/PACKAGES.md (the image digest changes)."
		} >&2
		exit 1
	fi
	while read -r name version arch sha file; do
		for nv in "$@"; do
			[ "$nv" = "$name=$version" ] || continue
			[ "$arch" = "$a" ] || [ "$arch" = all ] || continue
			got=$(cd "$dl" && ls -1 -- "${name}_"*"_${arch}.deb" 2>/dev/null | head -1)
			[ -n "$got" ] || die "apt-get download $nv ($a) left no file"
			[ "$(sha_of "$dl/$got")" = "$sha" ] ||
				die "$got: sha256 $(sha_of "$dl/$got") differs from the recorded $sha ($lock); the archive's file is not the recorded one"
			mv -f "$dl/$got" "$cache/$file"
		done
	done <<<"$entries"
}

log "fetching ${#missing[@]} package(s) into $cache"
dl="$cache/.partial.$$"
trap 'rm -rf "$dl"' EXIT
for a in "${arches[@]}"; do
	want=()
	for m in "${missing[@]}"; do
		ma=${m%%:*}
		if [ "$ma" = "$a" ] || { [ "$ma" = all ] && [ "$a" = "${arches[0]}" ]; }; then
			want+=("${m#*:}")
		fi
	done
	[ ${#want[@]} -gt 0 ] || continue
	# A subshell per architecture: apt_setup exports that architecture's APT_CONFIG.
	(
		apt_setup "$aptdir/$a" "$suite" "$a"
		[ -n "${APT_LISTS_FRESH:-}" ] || apt_update
		fetch "$a" "${want[@]}"
	)
done
log "cache complete: $(wc -l <<<"$entries") packages verified"
