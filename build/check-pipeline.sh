#!/usr/bin/env bash
# check-pipeline.sh PRISTINE checks that the patch pipeline fails loudly, against the assembled
# PRISTINE tree, in scratch directories:
#   - a patch that does not apply stops the assembly, naming the patch and showing its hunk;
#   - an overlay file that would replace an upstream file stops it too;
#   - neither leaves a half-patched tree at the output path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 1 ] || die "usage: $0 PRISTINE"
pristine=$(realpath "$1")
root=$(cd "$here/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
result() { if [ "$1" = ok ]; then echo "ok   $2"; pass=$((pass + 1)); else echo "FAIL $2"; fail=$((fail + 1)); fi; }

# The series of PRISTINE's line: patches/*.patch and the line's overrides in patches/TAG/.
tag=$(cat "$pristine/.upstream-tag")
copy_series() {
	mkdir -p "$work/patches"
	cp "$root"/patches/*.patch "$work/patches/"
	if [ -d "$root/patches/$tag" ]; then
		mkdir -p "$work/patches/$tag"
		cp "$root/patches/$tag"/*.patch "$work/patches/$tag/"
	fi
}

# A broken copy of the first patch: one context line of its first hunk no longer matches.
mkdir -p "$work/overlay"
copy_series
first=$(ls "$root"/patches/*.patch | head -1)
broken="$work/patches/$(basename "$first")"
if [ -f "$root/patches/$tag/$(basename "$first")" ]; then
	first="$root/patches/$tag/$(basename "$first")"
	broken="$work/patches/$tag/$(basename "$first")"
fi
awk 'BEGIN { done = 0 } /^@@ / { inhunk = 1 } inhunk && !done && /^ [^ ]/ { print " this line is not upstream"; done = 1; next } { print }' "$first" > "$broken"
if "$here/assemble.sh" patched "$pristine" "$work/patches" "$work/overlay" "$work/out" >"$work/log" 2>&1; then
	result fail "a broken patch stops the build"
else
	grep -q "error: patch $(basename "$first") does not apply" "$work/log" &&
		grep -q 'this line is not upstream' "$work/log" && result ok "a broken patch stops the build, naming the patch and showing its hunk" ||
		{ result fail "the failure names the patch and shows the hunk"; sed 's/^/     /' "$work/log" | tail -10; }
fi
[ ! -e "$work/out" ] && result ok "no half-patched tree is left at the output path" || result fail "no half-patched tree is left at the output path"

# An overlay file over an upstream file.
copy_series
mkdir -p "$work/overlay/pkg/proxy/nftables"
echo "package nftables" > "$work/overlay/pkg/proxy/nftables/proxier.go"
if "$here/assemble.sh" patched "$pristine" "$work/patches" "$work/overlay" "$work/out" >"$work/log" 2>&1; then
	result fail "an overlay file over an upstream file stops the build"
else
	grep -q 'overlay/pkg/proxy/nftables/proxier.go would replace an upstream file' "$work/log" &&
		result ok "an overlay file over an upstream file stops the build" ||
		{ result fail "the overlay error names the file"; tail -5 "$work/log"; }
fi
# A per-line override must replace a default patch of the same name.
rm -rf "$work/overlay/pkg"
mkdir -p "$work/patches/$tag"
cp "$first" "$work/patches/$tag/9999-not-in-the-series.patch"
if "$here/assemble.sh" patched "$pristine" "$work/patches" "$work/overlay" "$work/out" >"$work/log" 2>&1; then
	result fail "an override without a default patch of its name stops the build"
else
	grep -q "$tag/9999-not-in-the-series.patch overrides no patch" "$work/log" &&
		result ok "an override without a default patch of its name stops the build" ||
		{ result fail "the override error names the file"; tail -5 "$work/log"; }
fi
echo "pipeline: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
