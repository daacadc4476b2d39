#!/usr/bin/env bash
# check-upstream-md.sh [--write] keeps UPSTREAM.md honest, for every upstream line:
#   - the default line's module-hash table must equal the h1: hashes in go.sum of the pinned
#     upstream modules (k8s.io/*, sigs.k8s.io/*), and each second line's table (between
#     "<!-- BEGIN MODULE HASHES TAG -->" and "<!-- END MODULE HASHES TAG -->") those in
#     patches/TAG/go.sum (--write regenerates them all);
#   - its patch table must name every file in patches/ and every per-line override in
#     patches/TAG/ (as `TAG/NAME.patch`), and nothing else;
#   - each patch's header says its fate and agrees with its row: the subject starts
#     "UPSTREAM: <carry>:" or "UPSTREAM: N:" (N an upstream issue or PR that the row's links
#     name as #N), and the message carries the EKS-D style sections
#     "Upstream PR, Issue, KEP, etc. links:" and "Kubernetes version this patch can be dropped:",
#     each one "* " item equal to the row's "upstream issue / PR" and "drop when" cells.
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
# section PATCH TITLE prints the item under the line TITLE in PATCH's message, on one line.
section() {
	awk -v t="$2" 'BEGIN { h = 1 } h && /^$/ { h = 0; next } h { next } /^---$/ { exit }
		$0 == t { s = 1; next } s && /^$/ { exit } s { print }' "$1" |
		sed 's/^\* //' | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}
# cell NAME K prints cell K (counted from the end: 1 is the last) of NAME's row in the table.
cell() {
	grep -F "| \`$1\` |" "$md" | awk -F' [|] ' -v k="$2" '{ c = $(NF - k + 1); sub(/ ?[|]$/, "", c); print c }'
}
for f in $present; do
	p=patches/$f
	subject=$(awk '/^Subject: / { s = $0; while ((getline l) > 0 && l ~ /^ /) s = s l; print s; exit }' "$p" |
		sed 's/^Subject: \[PATCH[^]]*\] //')
	if [[ ! $subject =~ ^UPSTREAM:\ (\<carry\>|[0-9]+):\  ]]; then
		echo "patches/$f: the subject does not say its fate (UPSTREAM: <carry>: or UPSTREAM: N:): $subject" >&2
		fail=1
		continue
	fi
	fate=${BASH_REMATCH[1]}
	links=$(section "$p" "Upstream PR, Issue, KEP, etc. links:")
	drop=$(section "$p" "Kubernetes version this patch can be dropped:")
	for s in "links|$links|2|Upstream PR, Issue, KEP, etc. links|upstream issue / PR" "drop|$drop|1|Kubernetes version this patch can be dropped|drop when"; do
		IFS='|' read -r _ got k title col <<<"$s"
		want=$(cell "$f" "$k")
		if [ -z "$got" ]; then
			echo "patches/$f: no \"$title:\" section in its header" >&2
			fail=1
		elif [ "$got" != "$want" ]; then
			echo "patches/$f: \"$title:\" says \"$got\", UPSTREAM.md's $col cell \"$want\"" >&2
			fail=1
		fi
	done
	if [ "$fate" != "<carry>" ] && ! grep -qE "#$fate([^0-9]|\$)" <<<"$links"; then
		echo "patches/$f: the subject names $fate, its links do not (#$fate): $links" >&2
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "UPSTREAM.md matches go.sum, $(( ${#lines[@]} - 1 )) second line(s), patches/ and the patch headers"
exit $fail
