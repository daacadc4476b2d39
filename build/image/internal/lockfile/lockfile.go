// Package lockfile reads and writes the image's package files:
//
//   - images/packages.in, the spec: which Debian packages the image needs (roots), which
//     dependencies it leaves out (excludes, each with a reason), the suite and the architectures
//     (one image per architecture, in one multi-arch index);
//   - images/packages.lock, the recorded set: the dependency closure of the spec for every
//     architecture, one package per line with its exact version, architecture and the SHA-256
//     of its .deb. An "all" package is recorded once and belongs to every architecture's image.
package lockfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Root is a package the image needs for itself; Why is the comment after it in the spec.
type Root struct {
	Name string
	Why  string
}

// Exclude is a dependency left out of the closure, with the reason it is not needed.
type Exclude struct {
	Name   string
	Reason string
}

// Spec is images/packages.in.
type Spec struct {
	Suite    string
	Arches   []string // in spec order
	Roots    []Root
	Excludes []Exclude
}

// RootNames returns the roots' names in spec order.
func (s *Spec) RootNames() []string {
	out := make([]string, len(s.Roots))
	for i, r := range s.Roots {
		out[i] = r.Name
	}
	return out
}

// ExcludeNames returns the excluded names in spec order.
func (s *Spec) ExcludeNames() []string {
	out := make([]string, len(s.Excludes))
	for i, e := range s.Excludes {
		out[i] = e.Name
	}
	return out
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	versionRE = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
	archRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	shaRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ParseSpec reads a spec. Lines are "suite NAME", "arch NAME..." (one or more architectures),
// "root PACKAGE [# why]" and "exclude PACKAGE # reason"; "#" starts a comment.
func ParseSpec(r io.Reader) (*Spec, error) {
	s := &Spec{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line, comment, _ := strings.Cut(sc.Text(), "#")
		comment = strings.TrimSpace(comment)
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 && !(len(f) > 2 && f[0] == "arch") {
			return nil, fmt.Errorf("packages.in:%d: want \"KEYWORD VALUE\", got %q", n, strings.TrimSpace(line))
		}
		key, val := f[0], f[1]
		switch key {
		case "suite":
			s.Suite = val
		case "arch":
			if len(s.Arches) > 0 {
				return nil, fmt.Errorf("packages.in:%d: arch is given twice (list every architecture on one line)", n)
			}
			if err := checkArches(f[1:]); err != nil {
				return nil, fmt.Errorf("packages.in:%d: %v", n, err)
			}
			s.Arches = f[1:]
		case "root", "exclude":
			if !nameRE.MatchString(val) {
				return nil, fmt.Errorf("packages.in:%d: bad package name %q", n, val)
			}
			if seen[val] {
				return nil, fmt.Errorf("packages.in:%d: %s is listed twice", n, val)
			}
			seen[val] = true
			if key == "root" {
				s.Roots = append(s.Roots, Root{Name: val, Why: comment})
			} else {
				if comment == "" {
					return nil, fmt.Errorf("packages.in:%d: exclude %s needs a reason (a comment)", n, val)
				}
				s.Excludes = append(s.Excludes, Exclude{Name: val, Reason: comment})
			}
		default:
			return nil, fmt.Errorf("packages.in:%d: unknown keyword %q", n, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if s.Suite == "" || len(s.Arches) == 0 || len(s.Roots) == 0 {
		return nil, fmt.Errorf("packages.in: needs a suite, an arch and at least one root")
	}
	return s, nil
}

// checkArches accepts a list of distinct Debian architecture names other than "all".
func checkArches(as []string) error {
	seen := map[string]bool{}
	for _, a := range as {
		switch {
		case !archRE.MatchString(a) || a == "all":
			return fmt.Errorf("bad architecture %q", a)
		case seen[a]:
			return fmt.Errorf("architecture %s is listed twice", a)
		}
		seen[a] = true
	}
	return nil
}

// Entry is one recorded package.
type Entry struct {
	Name    string
	Version string
	Arch    string
	SHA256  string // of the .deb
}

// DebFileName is the file name apt gives the .deb: NAME_VERSION_ARCH.deb, with the epoch's
// colon written as %3a.
func (e Entry) DebFileName() string {
	return fmt.Sprintf("%s_%s_%s.deb", e.Name, strings.ReplaceAll(e.Version, ":", "%3a"), e.Arch)
}

// Lock is images/packages.lock.
type Lock struct {
	Input   string // sha256:HEX of the spec it was generated from
	Suite   string
	Arches  []string
	Entries []Entry // sorted by name, then architecture; unique
}

// ForArch returns the packages of arch's image: its own architecture's and the "all" ones, in
// lock order.
func (l *Lock) ForArch(arch string) []Entry {
	var out []Entry
	for _, e := range l.Entries {
		if e.Arch == arch || e.Arch == "all" {
			out = append(out, e)
		}
	}
	return out
}

// Versions maps each package name of arch's image to its version.
func (l *Lock) Versions(arch string) map[string]string {
	m := map[string]string{}
	for _, e := range l.ForArch(arch) {
		m[e.Name] = e.Version
	}
	return m
}

// entryLess orders entries by name, then architecture.
func entryLess(a, b Entry) bool {
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.Arch < b.Arch
}

// SpecDigest is the value a lock's @input line records for spec bytes b.
func SpecDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Parse reads a lock file: "@input", "@suite" and "@arch ARCH..." lines, then one
// "NAME VERSION ARCH SHA256" line per package and architecture, sorted by name and
// architecture; "#" starts a comment line. A package is either "all" or recorded per
// architecture, and every architecture's line is there.
func Parse(r io.Reader) (*Lock, error) {
	l := &Lock{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "@arch ") {
			if err := checkArches(strings.Fields(line)[1:]); err != nil {
				return nil, fmt.Errorf("packages.lock:%d: %v", n, err)
			}
			l.Arches = strings.Fields(line)[1:]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if strings.HasPrefix(line, "@") {
			if len(f) != 2 {
				return nil, fmt.Errorf("packages.lock:%d: want \"@KEY VALUE\", got %q", n, line)
			}
			switch f[0] {
			case "@input":
				if !strings.HasPrefix(f[1], "sha256:") || !shaRE.MatchString(strings.TrimPrefix(f[1], "sha256:")) {
					return nil, fmt.Errorf("packages.lock:%d: @input must be sha256:HEX", n)
				}
				l.Input = f[1]
			case "@suite":
				l.Suite = f[1]
			default:
				return nil, fmt.Errorf("packages.lock:%d: unknown key %s", n, f[0])
			}
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("packages.lock:%d: want \"NAME VERSION ARCH SHA256\", got %d fields", n, len(f))
		}
		e := Entry{Name: f[0], Version: f[1], Arch: f[2], SHA256: f[3]}
		switch {
		case !nameRE.MatchString(e.Name):
			return nil, fmt.Errorf("packages.lock:%d: bad package name %q", n, e.Name)
		case !versionRE.MatchString(e.Version):
			return nil, fmt.Errorf("packages.lock:%d: bad version %q for %s", n, e.Version, e.Name)
		case !archRE.MatchString(e.Arch):
			return nil, fmt.Errorf("packages.lock:%d: bad architecture %q for %s", n, e.Arch, e.Name)
		case !shaRE.MatchString(e.SHA256):
			return nil, fmt.Errorf("packages.lock:%d: %s: the sha256 must be 64 lowercase hex digits", n, e.Name)
		case seen[e.Name+":"+e.Arch]:
			return nil, fmt.Errorf("packages.lock:%d: %s (%s) is recorded twice", n, e.Name, e.Arch)
		case len(l.Entries) > 0 && !entryLess(l.Entries[len(l.Entries)-1], e):
			return nil, fmt.Errorf("packages.lock:%d: %s is out of order (the file is sorted by name, then architecture)", n, e.Name)
		}
		seen[e.Name+":"+e.Arch] = true
		l.Entries = append(l.Entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if l.Input == "" || l.Suite == "" || len(l.Arches) == 0 {
		return nil, fmt.Errorf("packages.lock: @input, @suite and @arch are required")
	}
	if len(l.Entries) == 0 {
		return nil, fmt.Errorf("packages.lock: no packages")
	}
	return l, l.checkArches()
}

// checkArches makes sure that every entry is "all" or one of the lock's architectures, that no
// package is both, and that an architecture-specific package is there for every architecture.
func (l *Lock) checkArches() error {
	known := map[string]bool{"all": true}
	for _, a := range l.Arches {
		known[a] = true
	}
	per := map[string][]string{}
	var names []string
	for _, e := range l.Entries {
		if !known[e.Arch] {
			return fmt.Errorf("packages.lock: %s is recorded for %s, not one of @arch %s", e.Name, e.Arch, strings.Join(l.Arches, " "))
		}
		if _, ok := per[e.Name]; !ok {
			names = append(names, e.Name)
		}
		per[e.Name] = append(per[e.Name], e.Arch)
	}
	for _, n := range names {
		as := per[n]
		if len(as) == 1 && as[0] == "all" {
			continue
		}
		if len(as) != len(l.Arches) || slices.Contains(as, "all") {
			return fmt.Errorf("packages.lock: %s is recorded for %s; an architecture-specific package needs one line per architecture (%s)", n, strings.Join(as, ", "), strings.Join(l.Arches, " "))
		}
	}
	return nil
}

// Format renders the lock file. Comments go in the header, one per line.
func (l *Lock) Format(comments []string) []byte {
	entries := append([]Entry(nil), l.Entries...)
	sort.Slice(entries, func(i, j int) bool { return entryLess(entries[i], entries[j]) })
	var b bytes.Buffer
	for _, c := range comments {
		if c == "" {
			b.WriteString("#\n")
		} else {
			b.WriteString("# " + c + "\n")
		}
	}
	fmt.Fprintf(&b, "@input %s\n@suite %s\n@arch %s\n\n", l.Input, l.Suite, strings.Join(l.Arches, " "))
	wn, wv := len("# name"), len("version")
	for _, e := range entries {
		wn = max(wn, len(e.Name))
		wv = max(wv, len(e.Version))
	}
	fmt.Fprintf(&b, "%-*s %-*s %-5s %s\n", wn, "# name", wv, "version", "arch", "sha256 of the .deb")
	for _, e := range entries {
		fmt.Fprintf(&b, "%-*s %-*s %-5s %s\n", wn, e.Name, wv, e.Version, e.Arch, e.SHA256)
	}
	return b.Bytes()
}

// Markdown renders the package table that images/PACKAGES.md holds.
func Markdown(l *Lock, s *Spec) []byte {
	why := map[string]string{}
	for _, r := range s.Roots {
		why[r.Name] = r.Why
		if why[r.Name] == "" {
			why[r.Name] = "requested"
		}
	}
	var b bytes.Buffer
	b.WriteString("<!-- Generated by `make image-lock` from images/packages.in and images/packages.lock; do not edit. -->\n")
	fmt.Fprintf(&b, "Debian packages in the images' base layers: Debian %s, %s (one image each); %d .deb files. ", l.Suite, strings.Join(l.Arches, " and "), len(l.Entries))
	fmt.Fprintf(&b, "Recorded set `%s` (SHA-256 of images/packages.in: `%s`).\n\n", "images/packages.lock", l.Input)
	b.WriteString("| package | version | arch | why | sha256 of the .deb |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, e := range l.Entries {
		w := why[e.Name]
		if w == "" {
			w = "dependency"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | `%s` |\n", e.Name, e.Version, e.Arch, strings.ReplaceAll(w, "|", "\\|"), e.SHA256)
	}
	if len(s.Excludes) > 0 {
		b.WriteString("\nLeft out of the dependency closure on purpose:\n\n")
		for _, x := range s.Excludes {
			fmt.Fprintf(&b, "- `%s`: %s\n", x.Name, x.Reason)
		}
	}
	return b.Bytes()
}
