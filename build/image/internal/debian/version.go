// Package debian reads the parts of Debian's package metadata that the image build needs:
// control paragraphs (deb822), dependency fields, and version ordering.
package debian

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed Debian version, [epoch:]upstream[-revision].
type Version struct {
	Epoch    int
	Upstream string
	Revision string
}

// ParseVersion splits s into epoch, upstream version and Debian revision, following
// deb-version(7): the epoch is everything before the first colon, the revision everything after
// the last hyphen.
func ParseVersion(s string) (Version, error) {
	var v Version
	if s == "" {
		return v, fmt.Errorf("empty version")
	}
	rest := s
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		e, err := strconv.Atoi(rest[:i])
		if err != nil || e < 0 {
			return v, fmt.Errorf("version %q: bad epoch", s)
		}
		v.Epoch = e
		rest = rest[i+1:]
	}
	if i := strings.LastIndexByte(rest, '-'); i >= 0 {
		v.Revision = rest[i+1:]
		rest = rest[:i]
		if v.Revision == "" {
			return v, fmt.Errorf("version %q: empty revision", s)
		}
	}
	if rest == "" || rest[0] < '0' || rest[0] > '9' {
		return v, fmt.Errorf("version %q: the upstream part must start with a digit", s)
	}
	v.Upstream = rest
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.ContainsRune(".+~-:", c)) {
			return v, fmt.Errorf("version %q: character %q is not allowed", s, c)
		}
	}
	return v, nil
}

// CompareVersions orders two Debian versions as dpkg does: it returns -1, 0 or 1.
func CompareVersions(a, b string) (int, error) {
	va, err := ParseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := ParseVersion(b)
	if err != nil {
		return 0, err
	}
	if va.Epoch != vb.Epoch {
		if va.Epoch < vb.Epoch {
			return -1, nil
		}
		return 1, nil
	}
	if c := comparePart(va.Upstream, vb.Upstream); c != 0 {
		return c, nil
	}
	return comparePart(va.Revision, vb.Revision), nil
}

// order gives a character's weight in the non-digit runs: a tilde sorts before anything, even
// the end of the string; letters sort before other characters.
func order(c byte) int {
	switch {
	case c == '~':
		return -1
	case c >= '0' && c <= '9':
		return 0
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return int(c)
	default:
		return int(c) + 256
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// comparePart compares upstream versions or revisions: alternating non-digit runs (compared
// character by character with order) and digit runs (compared as numbers).
func comparePart(a, b string) int {
	for a != "" || b != "" {
		// Non-digit prefix.
		for (a != "" && !isDigit(a[0])) || (b != "" && !isDigit(b[0])) {
			var ca, cb int
			if a != "" && !isDigit(a[0]) {
				ca = order(a[0])
			}
			if b != "" && !isDigit(b[0]) {
				cb = order(b[0])
			}
			if ca != cb {
				if ca < cb {
					return -1
				}
				return 1
			}
			if a != "" && !isDigit(a[0]) {
				a = a[1:]
			}
			if b != "" && !isDigit(b[0]) {
				b = b[1:]
			}
		}
		// Digit run, compared as a number without overflow: strip leading zeros, then the longer
		// run is larger, then lexical order.
		var da, db string
		da, a = digitRun(a)
		db, b = digitRun(b)
		da = strings.TrimLeft(da, "0")
		db = strings.TrimLeft(db, "0")
		if len(da) != len(db) {
			if len(da) < len(db) {
				return -1
			}
			return 1
		}
		if da != db {
			if da < db {
				return -1
			}
			return 1
		}
	}
	return 0
}

func digitRun(s string) (run, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// Satisfies reports whether version v meets the relation op (<<, <=, =, >=, >>) against ref.
func Satisfies(v, op, ref string) (bool, error) {
	c, err := CompareVersions(v, ref)
	if err != nil {
		return false, err
	}
	switch op {
	case "<<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case "=":
		return c == 0, nil
	case ">=":
		return c >= 0, nil
	case ">>":
		return c > 0, nil
	}
	return false, fmt.Errorf("unknown version relation %q", op)
}
