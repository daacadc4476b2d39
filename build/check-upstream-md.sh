#!/usr/bin/env bash
# check-upstream-md.sh [--write] keeps UPSTREAM.md honest:
#   - its module-hash table must equal the h1: hashes in go.sum of the pinned upstream modules
#     (k8s.io/*, sigs.k8s.io/*) (--write regenerates it);
#   - its patch table must name every file in patches/, and nothing else.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cd "$here/.."
md=UPSTREAM.md
begin='<!-- BEGIN MODULE HASHES -->' end='<!-- END MODULE HASHES -->'

table() {
	echo '| module | version | h1 |'
	echo '|---|---|---|'
	grep -v '/go.mod ' go.sum | grep -E '^(k8s\.io|sigs\.k8s\.io)/' | LC_ALL=C sort |
		awk '{printf "| %s | %s | `%s` |\n", $1, $2, $3}'
}

current() { sed -n "/^$begin\$/,/^$end\$/p" "$md" | sed '1d;$d'; }

if [ "${1:-}" = --write ]; then
	new=$(table)
	awk -v b="$begin" -v e="$end" -v t="$new" '
		$0 == b { print; print t; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$md" > "$md.tmp"
	mv "$md.tmp" "$md"
fi

fail=0
if [ "$(current)" != "$(table)" ]; then
	echo "UPSTREAM.md: the module-hash table differs from go.sum (run build/check-upstream-md.sh --write)" >&2
	diff <(current) <(table) >&2 || true
	fail=1
fi
# Patch rows are table rows whose first cell is a patch file name in backquotes.
listed=$(grep -o '^| `[^`]*\.patch`' "$md" | sed 's/^| `//; s/`$//' | LC_ALL=C sort)
present=$(cd patches && ls -1 -- *.patch 2>/dev/null | LC_ALL=C sort)
if [ "$listed" != "$present" ]; then
	echo "UPSTREAM.md: the patch table does not match patches/" >&2
	diff <(echo "$listed") <(echo "$present") >&2 || true
	fail=1
fi
[ $fail -eq 0 ] && echo "UPSTREAM.md matches go.sum and patches/"
exit $fail
