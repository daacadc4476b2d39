package debian

import (
	"fmt"
	"sort"
	"strings"
)

// Package is one binary package as an archive index (apt-cache show) describes it.
type Package struct {
	Name       string
	Version    string
	Arch       string
	SHA256     string // of the .deb, from the signed index
	Depends    []Group
	PreDepends []Group
}

// PackageFromParagraph reads the fields Resolve needs from an index paragraph.
func PackageFromParagraph(p Paragraph) (Package, error) {
	pkg := Package{
		Name:    p.Get("Package"),
		Version: p.Get("Version"),
		Arch:    p.Get("Architecture"),
		SHA256:  p.Get("SHA256"),
	}
	if pkg.Name == "" || pkg.Version == "" || pkg.Arch == "" {
		return pkg, fmt.Errorf("index paragraph without Package, Version or Architecture: %q", p.Format())
	}
	var err error
	if pkg.Depends, err = ParseDepends(p.Get("Depends")); err != nil {
		return pkg, fmt.Errorf("%s: Depends: %w", pkg.Name, err)
	}
	if pkg.PreDepends, err = ParseDepends(p.Get("Pre-Depends")); err != nil {
		return pkg, fmt.Errorf("%s: Pre-Depends: %w", pkg.Name, err)
	}
	return pkg, nil
}

// Lookup returns the candidate record of each named package that the archive has; names it
// does not know (including purely virtual packages) are left out of the map.
type Lookup func(names []string) (map[string]Package, error)

// Skip records a dependency that the closure left out because the excluded list names it.
type Skip struct {
	From  string // the package that declares it
	Group Group
}

// Closure is the result of Resolve.
type Closure struct {
	Packages []Package // sorted by name
	Skipped  []Skip    // sorted by From, then by the group's text
}

// Resolve computes the Pre-Depends and Depends closure of roots. For each dependency group,
// an alternative already in the set wins; otherwise a group that names an excluded package is
// skipped (and reported); otherwise the first alternative that the archive has is added.
// Recommends and Suggests are not followed. Every version relation is checked at the end
// against the versions chosen.
func Resolve(roots, excluded []string, lookup Lookup) (Closure, error) {
	excl := map[string]bool{}
	for _, e := range excluded {
		excl[e] = true
	}
	chosen := map[string]Package{}
	known := map[string]*Package{} // lookup cache; nil means the archive does not have it
	resolve := func(names []string) error {
		var ask []string
		for _, n := range names {
			if _, ok := known[n]; !ok {
				ask = append(ask, n)
			}
		}
		if len(ask) == 0 {
			return nil
		}
		sort.Strings(ask)
		got, err := lookup(ask)
		if err != nil {
			return err
		}
		for _, n := range ask {
			if p, ok := got[n]; ok {
				p := p
				known[n] = &p
			} else {
				known[n] = nil
			}
		}
		return nil
	}

	for _, r := range roots {
		if excl[r] {
			return Closure{}, fmt.Errorf("package %s is both a root and excluded", r)
		}
	}
	if err := resolve(roots); err != nil {
		return Closure{}, err
	}
	var queue []string
	for _, r := range roots {
		if known[r] == nil {
			return Closure{}, fmt.Errorf("the archive has no package %s", r)
		}
		if _, ok := chosen[r]; !ok {
			chosen[r] = *known[r]
			queue = append(queue, r)
		}
	}

	var skipped []Skip
	for len(queue) > 0 {
		// One breadth-first level: look up every alternative that the level could need at
		// once, then choose.
		var want []string
		for _, n := range queue {
			p := chosen[n]
			for _, g := range append(append([]Group{}, p.PreDepends...), p.Depends...) {
				for _, a := range g {
					want = append(want, a.Name)
				}
			}
		}
		if err := resolve(want); err != nil {
			return Closure{}, err
		}
		var next []string
		for _, n := range queue {
			p := chosen[n]
			for _, g := range append(append([]Group{}, p.PreDepends...), p.Depends...) {
				if groupHas(g, func(name string) bool { _, ok := chosen[name]; return ok }) {
					continue
				}
				if groupHas(g, func(name string) bool { return excl[name] }) {
					skipped = append(skipped, Skip{From: n, Group: g})
					continue
				}
				var pick *Package
				for _, a := range g {
					if known[a.Name] != nil {
						pick = known[a.Name]
						break
					}
				}
				if pick == nil {
					return Closure{}, fmt.Errorf("%s depends on %s, which the archive has no real package for (a virtual package? name its provider in the roots)", n, g)
				}
				chosen[pick.Name] = *pick
				next = append(next, pick.Name)
			}
		}
		queue = next
	}

	// Version relations, against the versions chosen.
	for _, p := range chosen {
		for _, g := range append(append([]Group{}, p.PreDepends...), p.Depends...) {
			for _, a := range g {
				c, ok := chosen[a.Name]
				if !ok {
					continue
				}
				if a.Op != "" {
					sat, err := Satisfies(c.Version, a.Op, a.Version)
					if err != nil {
						return Closure{}, fmt.Errorf("%s: %w", p.Name, err)
					}
					if !sat {
						return Closure{}, fmt.Errorf("%s needs %s, but the archive's candidate is %s %s", p.Name, a, c.Name, c.Version)
					}
				}
				break // the first alternative in the set is the one that satisfies the group
			}
		}
	}

	out := Closure{Skipped: skipped}
	for _, p := range chosen {
		out.Packages = append(out.Packages, p)
	}
	sort.Slice(out.Packages, func(i, j int) bool { return out.Packages[i].Name < out.Packages[j].Name })
	sort.SliceStable(out.Skipped, func(i, j int) bool {
		if out.Skipped[i].From != out.Skipped[j].From {
			return out.Skipped[i].From < out.Skipped[j].From
		}
		return out.Skipped[i].Group.String() < out.Skipped[j].Group.String()
	})
	return out, nil
}

func groupHas(g Group, f func(string) bool) bool {
	for _, a := range g {
		if f(a.Name) {
			return true
		}
	}
	return false
}

// FormatSkips renders skipped dependencies one per line, for the lock file's header.
func FormatSkips(s []Skip) []string {
	var out []string
	for _, k := range s {
		out = append(out, fmt.Sprintf("%s -> %s", k.From, strings.TrimSpace(k.Group.String())))
	}
	return out
}
