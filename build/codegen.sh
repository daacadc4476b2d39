#!/usr/bin/env bash
# codegen.sh update|verify TREE runs upstream's own code generators (deepcopy-gen, conversion-gen
# and defaulter-gen from the tree's staging/src/k8s.io/code-generator, so at the pinned version)
# on kube-proxy's configuration API in TREE, with the arguments of upstream's
# hack/update-codegen.sh for those packages. The generated files of the patches are never edited
# by hand: `update` rewrites them in TREE (in a patch workspace, before exporting the patches),
# and `verify` (make test) fails when regenerating them would change TREE, leaving TREE as it was.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -eq 2 ] || die "usage: $0 update|verify TREE"
mode=$1
tree=$(cd "$2" && pwd)
case "$mode" in update | verify) ;; *) die "usage: $0 update|verify TREE" ;; esac

files=(
	pkg/proxy/apis/config/zz_generated.deepcopy.go
	staging/src/k8s.io/kube-proxy/config/v1alpha1/zz_generated.deepcopy.go
	pkg/proxy/apis/config/v1alpha1/zz_generated.conversion.go
	pkg/proxy/apis/config/v1alpha1/zz_generated.defaults.go
)
bin=$(mktemp -d)
saved=$(mktemp -d)
trap 'rm -rf "$bin" "$saved"' EXIT
for f in "${files[@]}"; do
	mkdir -p "$saved/$(dirname "$f")"
	cp "$tree/$f" "$saved/$f"
done

cd "$tree"
go build -o "$bin/" ./staging/src/k8s.io/code-generator/cmd/deepcopy-gen \
	./staging/src/k8s.io/code-generator/cmd/conversion-gen ./staging/src/k8s.io/code-generator/cmd/defaulter-gen
header=hack/boilerplate/boilerplate.generatego.txt
# A generator that fails leaves its files behind: put TREE back before dying.
restore() {
	for f in "${files[@]}"; do cp "$saved/$f" "$tree/$f"; done
}
{
	"$bin/deepcopy-gen" --go-header-file "$header" --output-file zz_generated.deepcopy.go \
		./pkg/proxy/apis/config ./staging/src/k8s.io/kube-proxy/config/v1alpha1 &&
		"$bin/conversion-gen" --go-header-file "$header" --output-file zz_generated.conversion.go \
			--extra-peer-dirs k8s.io/kubernetes/pkg/apis/core,k8s.io/kubernetes/pkg/apis/core/v1,k8s.io/api/core/v1,k8s.io/component-base/config/v1alpha1,k8s.io/component-base/config \
			./pkg/proxy/apis/config/v1alpha1 &&
		"$bin/defaulter-gen" --go-header-file "$header" --output-file zz_generated.defaults.go \
			./pkg/proxy/apis/config/v1alpha1
} >"$bin/log" 2>&1 || {
	cat "$bin/log" >&2
	restore
	die "a code generator failed on $tree"
}

changed=()
for f in "${files[@]}"; do
	cmp -s "$saved/$f" "$f" || changed+=("$f")
done
if [ "$mode" = verify ]; then
	if [ ${#changed[@]} -gt 0 ]; then
		for f in "${changed[@]}"; do diff -u "$saved/$f" "$f" | head -40 >&2 || true; done
		restore
		die "generated code is out of date in ${changed[*]}: regenerate it with build/codegen.sh update in a patch workspace (docs/testing.md)"
	fi
	log "generated code: up to date (${#files[@]} files, upstream's generators)"
else
	log "generated code: ${#changed[@]} of ${#files[@]} files rewritten"
fi
