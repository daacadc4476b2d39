#!/usr/bin/env bash
# patch-workspace.sh PRISTINE WORK [PATCHES]: make WORK a git checkout of the PRISTINE tree with
# every patch in PATCHES (default: patches) applied as a commit, for editing the patch series.
#
#   git -C WORK commit ...                     edit, then commit with an "UPSTREAM: ..." subject
#   build/export-patches.sh WORK [PATCHES]     write the series back to PATCHES
#
# Commits use a fixed identity and date (the tag's), so the same series gives the same commits.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -ge 2 ] || die "usage: $0 PRISTINE WORK [PATCHES]"
pristine=$(realpath "$1") work=$2 patches=$(realpath "${3:-patches}")
[ -f "$pristine/.upstream-tag" ] || die "$pristine is not an assembled tree (run make tree)"
tag=$(cat "$pristine/.upstream-tag")
: "${SOURCE_DATE_EPOCH:=$(date -u -d "$(git -C "$here/.." log -1 --format=%cI 2>/dev/null || echo 2000-01-01)" +%s)}"
export GIT_AUTHOR_NAME="kube-proxy overlay" GIT_AUTHOR_EMAIL="overlay@invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="@$SOURCE_DATE_EPOCH +0000" GIT_COMMITTER_DATE="@$SOURCE_DATE_EPOCH +0000"

rm -rf "$work"
mkdir -p "$(dirname "$work")"
cp -r "$pristine" "$work"
cd "$work"
git init -q -b pristine
git add -A
git commit -q -m "k8s.io/kubernetes $tag (pristine, staging filled from modules)"
git tag "$tag"
git checkout -q -b patched
shopt -s nullglob
for p in "$patches"/*.patch; do
	git am -q --committer-date-is-author-date "$p" || { git am --abort; die "patch $(basename "$p") does not apply"; }
done
log "workspace ready: $work (branch patched, base tag $tag)"
