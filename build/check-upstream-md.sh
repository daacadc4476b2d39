#!/usr/bin/env bash
# check-upstream-md.sh [--write] keeps UPSTREAM.md honest, for every upstream line:
#   - the default line's module-hash table must equal the h1: hashes in go.sum of the pinned
#     upstream modules (k8s.io/*, sigs.k8s.io/*), and each second line's table (between
#     "<!-- BEGIN MODULE HASHES TAG -->" and "<!-- END MODULE HASHES TAG -->") those in
#     patches/TAG/go.sum (--write regenerates them all);
#   - its patch table must name every file in patches/ and every per-line override in
#     patches/TAG/ (as `TAG/NAME.patch`), and nothing else.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cd "$here/.."
md=UPSTREAM.md

# The lines: "" for the default one (root go.sum), then each TAG with patches/TAG/go.mod.
lines=("")
for m in patches/v*/go.mod; do [ -f "$m" ] && lines+=("$(basename "$(dirname "$m")")"); done

markers() { # markers TAG: the begin and end lines of TAG's table ("" for the default line)
	local sfx=${1:+ $1}
	begin="<!-- BEGIN MODULE HASHES$sfx -->" end="<!-- END MODULE HASHES$sfx -->"
}
gosum() { if [ -z "$1" ]; then echo go.sum; else echo "patches/$1/go.sum"; fi; }

table() {
	echo '| module | version | h1 |'
	echo '|---|---|---|'
	grep -v '/go.mod ' "$(gosum "$1")" | grep -E '^(k8s\.io|sigs\.k8s\.io)/' | LC_ALL=C sort |
		awk '{printf "| %s | %s | `%s` |\n", $1, $2, $3}'
}

current() { markers "$1"; sed -n "/^$begin\$/,/^$end\$/p" "$md" | sed '1d;$d'; }

fail=0
for line in "${lines[@]}"; do
	markers "$line"
	if ! grep -qxF "$begin" "$md"; then
		echo "UPSTREAM.md: no module-hash table for line ${line:-default} (a line '$begin', a line '$end')" >&2
		fail=1
		continue
	fi
	if [ "${1:-}" = --write ]; then
		new=$(table "$line")
		awk -v b="$begin" -v e="$end" -v t="$new" '
			$0 == b { print; print t; skip = 1; next }
			$0 == e { skip = 0 }
			!skip { print }' "$md" > "$md.tmp"
		mv "$md.tmp" "$md"
	fi
	if [ "$(current "$line")" != "$(table "$line")" ]; then
		echo "UPSTREAM.md: the module-hash table of line ${line:-default} differs from $(gosum "$line") (run build/check-upstream-md.sh --write)" >&2
		diff <(current "$line") <(table "$line") >&2 || true
		fail=1
	fi
done
# Patch rows are table rows whose first cell is a patch file name in backquotes.
listed=$(grep -o '^| `[^`]*\.patch`' "$md" | sed 's/^| `//; s/`$//' | LC_ALL=C sort)
present=$( (cd patches && ls -1 -- *.patch v*/*.patch 2>/dev/null) | LC_ALL=C sort)
if [ "$listed" != "$present" ]; then
	echo "UPSTREAM.md: the patch table does not match patches/ and its per-line overrides" >&2
	diff <(echo "$listed") <(echo "$present") >&2 || true
	fail=1
fi
[ $fail -eq 0 ] && echo "UPSTREAM.md matches go.sum, $(( ${#lines[@]} - 1 )) second line(s) and patches/"
exit $fail
