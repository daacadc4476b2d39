/*
Copyright 2026 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package nftables

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// outsideLayers names the entry of layers.go for files outside the layers.
const outsideLayers = "outside"

var (
	layerItem = regexp.MustCompile(`^//   - ([a-z]+): (.*)$`)
	layerFile = regexp.MustCompile(`^[a-z0-9_]+\.go$`)
)

// parseLayers reads the layer list of layers.go: its "//   - name: files" items, each with
// more files on the lines after it that hold only file names (a line with other words is the
// item's description). It returns each file's layer, numbered from the bottom, and the layer
// names in order. Files of the outsideLayers entry get -1.
func parseLayers(text string) (map[string]int, []string, error) {
	files := map[string]int{}
	var names []string
	current := -1
	for _, line := range strings.Split(text, "\n") {
		if m := layerItem.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
			current = len(names) - 1
			if m[1] == outsideLayers {
				current = -1
			}
			line = m[2]
		} else if !strings.HasPrefix(line, "//     ") || len(names) == 0 {
			continue
		}
		words := strings.Fields(strings.TrimPrefix(line, "//"))
		if !slices.ContainsFunc(words, layerFile.MatchString) || slices.ContainsFunc(words, func(w string) bool { return !layerFile.MatchString(w) }) {
			continue // a description line, or the item's text after its files
		}
		for _, word := range words {
			if _, dup := files[word]; dup {
				return nil, nil, fmt.Errorf("%s is in two layers", word)
			}
			files[word] = current
		}
	}
	if len(names) < 2 {
		return nil, nil, fmt.Errorf("found %d layers, want the list of layers.go", len(names))
	}
	return files, names, nil
}

// layerViolation is a reference from a file to a declaration of a file in a higher layer.
type layerViolation struct {
	from, to string // file:function, file:name
}

// upwardReferences returns, for the loaded package pkg, every reference from a top-level
// declaration of a file to a package-level object, method or field declared in a file of a
// higher layer (layer), sorted. A file missing from layer is reported as unlayered.
func upwardReferences(pkg *packages.Package, layer map[string]int) (violations []layerViolation, unlayered []string) {
	fileOf := func(pos token.Pos) string { return filepath.Base(pkg.Fset.Position(pos).Filename) }
	seen := map[layerViolation]bool{}
	for _, f := range pkg.Syntax {
		from := fileOf(f.Pos())
		fromLayer, ok := layer[from]
		if !ok {
			unlayered = append(unlayered, from)
			continue
		}
		if fromLayer < 0 {
			continue
		}
		for _, decl := range f.Decls {
			where := from
			if fd, ok := decl.(*ast.FuncDecl); ok {
				where += ":" + fd.Name.Name
			}
			note := func(obj types.Object) {
				to := fileOf(obj.Pos())
				if toLayer, ok := layer[to]; ok && toLayer > fromLayer {
					v := layerViolation{from: where, to: to + ":" + obj.Name()}
					if !seen[v] {
						seen[v] = true
						violations = append(violations, v)
					}
				}
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				// A value of a higher layer's type, reached through upstream's fields
				// (p.known), is a use of that layer even when nothing of it is named.
				if expr, ok := n.(ast.Expr); ok {
					if named := namedType(pkg.TypesInfo.TypeOf(expr)); named != nil && named.Obj().Pkg() == pkg.Types {
						note(named.Obj())
					}
				}
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				obj := pkg.TypesInfo.Uses[id]
				if obj == nil || obj.Pkg() != pkg.Types || !declaredAtPackageLevel(pkg.Types, obj) {
					return true
				}
				note(obj)
				return true
			})
		}
	}
	slices.SortFunc(violations, func(a, b layerViolation) int {
		return strings.Compare(a.from+" "+a.to, b.from+" "+b.to)
	})
	return violations, unlayered
}

// namedType returns the named type of t, or of what t points to, or nil.
func namedType(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, _ := t.(*types.Named)
	return named
}

// declaredAtPackageLevel reports whether obj is one of pkg's package-level objects, a method,
// or a field of a struct: what a file can use of another file.
func declaredAtPackageLevel(pkg *types.Package, obj types.Object) bool {
	if obj.Parent() == pkg.Scope() {
		return true
	}
	switch o := obj.(type) {
	case *types.Func:
		return o.Type().(*types.Signature).Recv() != nil
	case *types.Var:
		return o.IsField()
	}
	return false
}

// TestOverlayLayers checks the layering that layers.go states against the package's
// production code: no reference goes to a higher layer, and every file is in a layer.
func TestOverlayLayers(t *testing.T) {
	text, err := os.ReadFile("layers.go")
	if err != nil {
		t.Fatal(err)
	}
	layer, names, err := parseLayers(string(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("loading the package gave %d packages, want 1", len(pkgs))
	}
	if len(pkgs[0].Errors) > 0 {
		t.Fatalf("loading the package: %v", pkgs[0].Errors)
	}
	loaded := map[string]bool{}
	for _, f := range pkgs[0].Syntax {
		name := filepath.Base(pkgs[0].Fset.Position(f.Pos()).Filename)
		loaded[name] = true
		if name == "layers.go" && len(f.Decls) > 0 {
			t.Errorf("layers.go declares %d things; it is outside the layers and must declare nothing", len(f.Decls))
		}
	}
	for file := range layer {
		if !loaded[file] {
			t.Errorf("layers.go names %s, which is not a production file of the package", file)
		}
	}
	violations, unlayered := upwardReferences(pkgs[0], layer)
	for _, file := range unlayered {
		t.Errorf("%s is in no layer of layers.go", file)
	}
	for _, v := range violations {
		t.Errorf("%s uses %s, of a higher layer", v.from, v.to)
	}
	t.Logf("%d layers (%s), %d files checked", len(names), strings.Join(names, ", "), len(pkgs[0].Syntax))

	// The check finds a reference that goes up: with the text layer put above the reader, the
	// reader's hashing of rules (hashRule, in rule_text.go) is one.
	inverted := maps.Clone(layer)
	inverted["rule_text.go"] = layer["table_reader.go"] + 1
	violations, _ = upwardReferences(pkgs[0], inverted)
	want := layerViolation{from: "table_reader.go:parseListing", to: "rule_text.go:hashRule"}
	if !slices.Contains(violations, want) {
		t.Errorf("with rule_text.go above table_reader.go: violations %v, want among them %v", violations, want)
	}
	// And a method reached through a promoted field: the splitter's run calls its
	// committer's runAll.
	inverted = maps.Clone(layer)
	inverted["committer.go"] = layer["transactions.go"] + 1
	violations, _ = upwardReferences(pkgs[0], inverted)
	want = layerViolation{from: "transactions.go:run", to: "committer.go:runAll"}
	if !slices.Contains(violations, want) {
		t.Errorf("with committer.go above transactions.go: violations %v, want among them %v", violations, want)
	}
	// And a file that no layer names.
	unnamed := maps.Clone(layer)
	delete(unnamed, "drift.go")
	if _, unlayered := upwardReferences(pkgs[0], unnamed); !slices.Equal(unlayered, []string{"drift.go"}) {
		t.Errorf("with drift.go in no layer: unlayered %v, want [drift.go]", unlayered)
	}
}

// TestParseLayers checks the reading of the layer list.
func TestParseLayers(t *testing.T) {
	files, names, err := parseLayers(`// intro a.go
//   - low: a.go b.go
//     c.go
//     what it holds, with f.go named in passing
//   - high: d.go
//   - outside: e.go
//     more
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"a.go": 0, "b.go": 0, "c.go": 0, "d.go": 1, "e.go": -1}
	if !maps.Equal(files, want) || !slices.Equal(names, []string{"low", "high", "outside"}) {
		t.Errorf("got %v %v, want %v and the three names", files, names, want)
	}
	for _, bad := range []string{"//   - low: a.go\n//   - high: a.go", "no list"} {
		if _, _, err := parseLayers(bad); err == nil {
			t.Errorf("parseLayers(%q) succeeded, want an error", bad)
		}
	}
}
