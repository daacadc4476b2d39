package debian

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Paragraph is one deb822 stanza: its fields in the order they appeared, with their values
// (continuation lines joined with "\n", as dpkg keeps them).
type Paragraph struct {
	Keys   []string
	Values map[string]string
}

// Get returns a field's value, matching the name case-insensitively as deb822 does.
func (p Paragraph) Get(name string) string {
	for _, k := range p.Keys {
		if strings.EqualFold(k, name) {
			return p.Values[k]
		}
	}
	return ""
}

// Format writes the paragraph back in deb822 form, fields in their original order.
func (p Paragraph) Format() string {
	var b strings.Builder
	for _, k := range p.Keys {
		v := p.Values[k]
		b.WriteString(k)
		b.WriteString(":")
		for i, line := range strings.Split(v, "\n") {
			if i > 0 {
				b.WriteString("\n")
			}
			if line != "" || i == 0 {
				b.WriteString(" ")
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ParseParagraphs reads deb822 stanzas separated by blank lines, as apt-cache show and
// dpkg-deb -f print them.
func ParseParagraphs(r io.Reader) ([]Paragraph, error) {
	var out []Paragraph
	cur := Paragraph{Values: map[string]string{}}
	last := ""
	flush := func() {
		if len(cur.Keys) > 0 {
			out = append(out, cur)
		}
		cur = Paragraph{Values: map[string]string{}}
		last = ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return nil, fmt.Errorf("line %d: continuation line before any field", n)
			}
			cur.Values[last] += "\n" + strings.TrimSpace(line)
		default:
			i := strings.IndexByte(line, ':')
			if i <= 0 {
				return nil, fmt.Errorf("line %d: %q is not a field", n, line)
			}
			k := line[:i]
			if _, dup := cur.Values[k]; dup {
				return nil, fmt.Errorf("line %d: field %s given twice", n, k)
			}
			cur.Keys = append(cur.Keys, k)
			cur.Values[k] = strings.TrimSpace(line[i+1:])
			last = k
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// Alternative is one package named in a dependency field, with an optional version relation.
type Alternative struct {
	Name    string
	Op      string // "", "<<", "<=", "=", ">=", ">>"
	Version string
}

func (a Alternative) String() string {
	if a.Op == "" {
		return a.Name
	}
	return fmt.Sprintf("%s (%s %s)", a.Name, a.Op, a.Version)
}

// Group is a list of alternatives ("a | b"), any one of which satisfies it.
type Group []Alternative

func (g Group) String() string {
	s := make([]string, len(g))
	for i, a := range g {
		s[i] = a.String()
	}
	return strings.Join(s, " | ")
}

var altRE = regexp.MustCompile(`^([a-z0-9][a-z0-9+.-]+)(?::[a-z0-9-]+)?\s*(?:\(\s*(<<|<=|=|>=|>>|<|>)\s*([0-9][^)\s]*)\s*\))?\s*(?:\[[^]]*\])?\s*(?:<[^>]*>)?$`)

// ParseDepends parses a Depends or Pre-Depends value into groups of alternatives. A
// multi-arch qualifier (":any") is dropped; architecture and build-profile restrictions are
// ignored since binary packages' fields carry none.
func ParseDepends(s string) ([]Group, error) {
	var out []Group
	s = strings.ReplaceAll(s, "\n", " ")
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var g Group
		for _, alt := range strings.Split(part, "|") {
			alt = strings.TrimSpace(alt)
			m := altRE.FindStringSubmatch(alt)
			if m == nil {
				return nil, fmt.Errorf("cannot parse dependency %q", alt)
			}
			op := m[2]
			switch op { // obsolete spellings
			case "<":
				op = "<="
			case ">":
				op = ">="
			}
			g = append(g, Alternative{Name: m[1], Op: op, Version: m[3]})
		}
		out = append(out, g)
	}
	return out, nil
}
