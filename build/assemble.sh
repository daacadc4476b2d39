#!/usr/bin/env bash
# assemble.sh builds an upstream source tree from the verified module cache.
#
#   build/assemble.sh pristine MODDIR OUT         upstream as released, with staging filled in
#   build/assemble.sh patched  PRISTINE PATCHES OVERLAY OUT
#                                                 a copy of PRISTINE with PATCHES applied in
#                                                 order and OVERLAY laid over it
#
# Both write OUT atomically: the tree is built beside it and renamed into place only when every
# step succeeded, so a failed patch never leaves a half-patched tree behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
export LC_ALL=C TZ=UTC

# assemble_pristine copies k8s.io/kubernetes@TAG out of the module cache, fills
# staging/src/k8s.io/* from the matching staging modules, and drops from go.work the staging
# modules that the proxy does not serve.
assemble_pristine() {
	local moddir=$1 out=$2 tag src tmp path ver name dir
	tag=$(pinned_tag "$moddir")
	log "assembling pristine k8s.io/kubernetes@$tag"
	src=$(module_dir "$moddir" k8s.io/kubernetes "$tag")
	tmp="$out.tmp"
	rm -rf "$tmp"
	mkdir -p "$(dirname "$out")"
	cp -r "$src" "$tmp"
	chmod -R u+w "$tmp"
	while read -r path ver; do
		name=${path#k8s.io/}
		dir=$(module_dir "$moddir" "$path" "$ver")
		[ -e "$tmp/staging/src/k8s.io/$name" ] && die "module zip already holds staging/src/k8s.io/$name"
		mkdir -p "$tmp/staging/src/k8s.io"
		cp -r "$dir" "$tmp/staging/src/k8s.io/$name"
		chmod -R u+w "$tmp/staging/src/k8s.io/$name"
	done < <(staging_modules "$moddir")
	# Every staging module that go.work uses must now be present; the ones that are not pinned
	# (because the proxy does not serve them) are dropped, by name, and reported.
	local use
	for use in $(cd "$tmp" && go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p'); do
		[ "$use" = . ] && continue
		if [ ! -d "$tmp/$use" ]; then
			log "go.work: dropping $use (not pinned in $moddir/go.mod)"
			(cd "$tmp" && go work edit -dropuse="$use")
		fi
	done
	echo "$tag" > "$tmp/.upstream-tag"
	rm -rf "$out"
	mv "$tmp" "$out"
}

# line_patches PATCHES TAG prints the patch series for upstream TAG, in name order: every
# PATCHES/*.patch, except that PATCHES/TAG/NAME.patch, when it exists, replaces PATCHES/NAME.patch
# (a per-line override of a patch that does not apply to TAG as it is). An override without a
# default patch of the same name is an error: a line carries the same series.
line_patches() {
	local patches=$1 tag=$2 p name
	shopt -s nullglob
	for p in "$patches/$tag"/*.patch; do
		[ -f "$patches/$(basename "$p")" ] || die "${p#"$(dirname "$patches")"/} overrides no patch in $(basename "$patches")/ (same names only)"
	done
	for p in "$patches"/*.patch; do
		name=$(basename "$p")
		if [ -f "$patches/$tag/$name" ]; then echo "$patches/$tag/$name"; else echo "$p"; fi
	done
}

# apply_patches applies the series of PATCHES for TREE's tag (see line_patches), in name order,
# to TREE with git apply. A patch that does not apply stops everything with the patch's name and
# the rejected hunks.
apply_patches() {
	local tree=$1 patches=$2 p rej list
	list=$(line_patches "$patches" "$(cat "$tree/.upstream-tag")")
	for p in $list; do
		log "applying ${p#"$(dirname "$patches")"/}"
		if ! (cd "$tree" && git apply --whitespace=nowarn --reject "$p") >"$tree/.apply.log" 2>&1; then
			echo "error: patch $(basename "$p") does not apply to $(cat "$tree/.upstream-tag")" >&2
			sed 's/^/  /' "$tree/.apply.log" >&2
			while IFS= read -r rej; do
				echo "--- rejected hunk(s) in ${rej#"$tree"/}:" >&2
				cat "$rej" >&2
			done < <(find "$tree" -name '*.rej' | sort)
			exit 1
		fi
		rm -f "$tree/.apply.log"
	done
}

# lay_overlay copies every file under OVERLAY to the same path in TREE. Overlay files are new
# files only: one that would replace an upstream file is an error (edits belong in patches/).
lay_overlay() {
	local tree=$1 overlay=$2 f
	[ -d "$overlay" ] || return 0
	while IFS= read -r f; do
		f=${f#./}
		[ -e "$tree/$f" ] && die "overlay/$f would replace an upstream file; change it with a patch instead"
		mkdir -p "$tree/$(dirname "$f")"
		cp "$overlay/$f" "$tree/$f"
	done < <(cd "$overlay" && find . -type f | sort)
}

assemble_patched() {
	local pristine=$1 patches overlay=$3 out=$4 tmp
	patches=$(realpath "$2")
	[ -f "$pristine/.upstream-tag" ] || die "$pristine is not an assembled tree"
	# Check the line's series (override names) before the slow copy.
	line_patches "$patches" "$(cat "$pristine/.upstream-tag")" >/dev/null
	tmp="$out.tmp"
	rm -rf "$tmp"
	cp -r "$pristine" "$tmp"
	# git apply needs a repository of its own here, or it would apply relative to an enclosing one.
	git -C "$tmp" init -q
	apply_patches "$tmp" "$patches"
	lay_overlay "$tmp" "$overlay"
	rm -rf "$tmp/.git"
	rm -rf "$out"
	mv "$tmp" "$out"
	log "patched tree ready at $out"
}

case "${1:-}" in
pristine) [ $# -eq 3 ] || die "usage: $0 pristine MODDIR OUT"; assemble_pristine "$2" "$3" ;;
patched) [ $# -eq 5 ] || die "usage: $0 patched PRISTINE PATCHES OVERLAY OUT"; assemble_patched "$2" "$3" "$4" "$5" ;;
*) die "usage: $0 pristine|patched ..." ;;
esac
