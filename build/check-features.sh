#!/usr/bin/env bash
# check-features.sh checks build/upstream-pr/features.txt, from which make upstream-pr builds one
# commit per feature: every patch in patches/ and every file under overlay/ must belong to exactly
# one feature, and every patch number and overlay path it names must exist. make test runs it, so
# a new file cannot drop out of the upstream series silently.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=$(cd "$here/.." && pwd)
features=$here/upstream-pr/features.txt

# Every patch and overlay file belongs to exactly one feature.
declare -A patch_of=() file_of=()
while IFS='|' read -r slug _ nums paths; do
	slug=$(echo "$slug" | xargs)
	for n in $nums; do
		f=$(cd "$root/patches" && ls "$n"-*.patch 2>/dev/null) || die "feature $slug: no patch $n"
		[ -z "${patch_of[$f]:-}" ] || die "patch $f is in features ${patch_of[$f]} and $slug"
		patch_of[$f]=$slug
	done
	for p in $paths; do
		[ -e "$root/overlay/$p" ] || die "feature $slug: overlay/$p does not exist"
		while IFS= read -r f; do
			[ -z "${file_of[$f]:-}" ] || die "overlay/$f is in features ${file_of[$f]} and $slug"
			file_of[$f]=$slug
		done < <(cd "$root/overlay" && find "$p" -type f)
	done
done < <(grep -v '^\s*\(#\|$\)' "$features")
for f in $(cd "$root/patches" && ls ./*.patch | sed 's|^\./||'); do
	[ -n "${patch_of[$f]:-}" ] || die "patches/$f belongs to no feature in $features"
done
while IFS= read -r f; do
	[ -n "${file_of[$f]:-}" ] || die "overlay/$f belongs to no feature in $features"
done < <(cd "$root/overlay" && find . -type f | sed 's|^\./||')

echo "features.txt: every patch and overlay file belongs to one feature"
