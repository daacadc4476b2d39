package debian

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0},
		{"1.0", "1.1", -1},
		{"1.10", "1.9", 1},
		{"1.0~rc1", "1.0", -1},     // tilde sorts before the end
		{"1.0~rc1", "1.0~rc2", -1}, //
		{"1.0~~", "1.0~", -1},      //
		{"1.0", "1.0+deb12u1", -1}, // a security update sorts after
		{"2.36-9+deb12u10", "2.36-9+deb12u9", 1},
		{"2.36-9+deb12u14", "2.36-9+deb12u14", 0},
		{"1:1.0", "2.0", 1},      // epoch wins
		{"0:1.0", "1.0", 0},      // epoch 0 is no epoch
		{"1.0a", "1.0", 1},       // letters sort after the end
		{"1.0a", "1.0+", -1},     // letters before other characters
		{"1.0-1", "1.0-1.1", -1}, //
		{"3.0.22-1~deb12u2", "3.0.22-1", -1},
		{"1.00", "1.0", 0},                                   // numbers, not strings
		{"12345678901234567890", "12345678901234567891", -1}, // no overflow
	}
	for _, c := range cases {
		got, err := CompareVersions(c.a, c.b)
		if err != nil {
			t.Fatalf("CompareVersions(%q, %q): %v", c.a, c.b, err)
		}
		if got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		back, _ := CompareVersions(c.b, c.a)
		if back != -c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, not the opposite of the reverse", c.b, c.a, back)
		}
	}
}

// TestCompareVersionsAgreesWithDpkg checks the same cases against dpkg itself, when it is there.
func TestCompareVersionsAgreesWithDpkg(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("dpkg is not installed")
	}
	vs := []string{"1.0", "1.0~rc1", "1.0+deb12u1", "1:0.9", "1.0a", "1.0-1", "1.0-1.1", "2.36-9+deb12u9", "2.36-9+deb12u10", "1.0~~", "1.0.0"}
	for _, a := range vs {
		for _, b := range vs {
			got, err := CompareVersions(a, b)
			if err != nil {
				t.Fatal(err)
			}
			for op, want := range map[string]bool{"lt": got < 0, "eq": got == 0, "gt": got > 0} {
				err := exec.Command("dpkg", "--compare-versions", a, op, b).Run()
				if (err == nil) != want {
					t.Errorf("dpkg --compare-versions %s %s %s = %v, ours says %d", a, op, b, err == nil, got)
				}
			}
		}
	}
}

func TestParseVersionRejects(t *testing.T) {
	for _, v := range []string{"", "a1.0", "x:1.0", "1.0-", "1.0 1", "1.0_1"} {
		if _, err := ParseVersion(v); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", v)
		}
	}
}

func TestParseDepends(t *testing.T) {
	g, err := ParseDepends("libc6 (>= 2.34), dpkg (>= 1.15.4) | install-info, python3:any,\n awk, foo (<< 2) [amd64]")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"libc6 (>= 2.34)", "dpkg (>= 1.15.4) | install-info", "python3", "awk", "foo (<< 2)"}
	if len(g) != len(want) {
		t.Fatalf("got %d groups: %v", len(g), g)
	}
	for i := range want {
		if g[i].String() != want[i] {
			t.Errorf("group %d = %q, want %q", i, g[i], want[i])
		}
	}
	if _, err := ParseDepends("libc6 (>= )"); err == nil {
		t.Error("a relation without a version parsed")
	}
}

func TestParseParagraphs(t *testing.T) {
	in := "Package: a\nVersion: 1\nDescription: short\n long line\n .\n more\n\n\nPackage: b\nVersion: 2\n"
	ps, err := ParseParagraphs(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Get("package") != "a" || ps[1].Get("Version") != "2" {
		t.Fatalf("got %+v", ps)
	}
	if got := ps[0].Get("Description"); got != "short\nlong line\n.\nmore" {
		t.Errorf("continuation lines: %q", got)
	}
	if got := ps[0].Format(); got != "Package: a\nVersion: 1\nDescription: short\n long line\n .\n more\n" {
		t.Errorf("Format: %q", got)
	}
	if _, err := ParseParagraphs(strings.NewReader(" orphan\n")); err == nil {
		t.Error("a continuation without a field parsed")
	}
	if _, err := ParseParagraphs(strings.NewReader("A: 1\nA: 2\n")); err == nil {
		t.Error("a duplicate field parsed")
	}
}

// archive is a fake apt-cache: name -> record.
func archive(t *testing.T, recs ...string) Lookup {
	m := map[string]Package{}
	for _, r := range recs {
		ps, err := ParseParagraphs(strings.NewReader(r))
		if err != nil || len(ps) != 1 {
			t.Fatalf("bad fixture %q: %v", r, err)
		}
		p, err := PackageFromParagraph(ps[0])
		if err != nil {
			t.Fatal(err)
		}
		m[p.Name] = p
	}
	return func(names []string) (map[string]Package, error) {
		out := map[string]Package{}
		for _, n := range names {
			if p, ok := m[n]; ok {
				out[n] = p
			}
		}
		return out, nil
	}
}

func names(c Closure) string {
	var s []string
	for _, p := range c.Packages {
		s = append(s, p.Name+"="+p.Version)
	}
	return strings.Join(s, " ")
}

func TestResolve(t *testing.T) {
	arc := archive(t,
		"Package: tool\nVersion: 1\nArchitecture: amd64\nSHA256: aa\nPre-Depends: libc6 (>= 2.34)\nDepends: libfoo | libbar, awk, dpkg (>= 1.19)",
		"Package: libc6\nVersion: 2.36-9\nArchitecture: amd64\nDepends: libgcc-s1",
		"Package: libgcc-s1\nVersion: 12\nArchitecture: amd64\nDepends: libc6 (>= 2.35)", // a cycle
		"Package: libbar\nVersion: 3\nArchitecture: amd64",
		"Package: dpkg\nVersion: 1.21\nArchitecture: amd64\nDepends: tar",
		"Package: tar\nVersion: 1.34\nArchitecture: amd64",
		"Package: other\nVersion: 1\nArchitecture: all\nDepends: libbar",
	)
	// libfoo is not in the archive: the next alternative is taken. awk is virtual but excluded;
	// dpkg is excluded, so tar never enters.
	c, err := Resolve([]string{"tool", "other"}, []string{"dpkg", "awk"}, arc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(c), "libbar=3 libc6=2.36-9 libgcc-s1=12 other=1 tool=1"; got != want {
		t.Errorf("closure = %s, want %s", got, want)
	}
	if got := strings.Join(FormatSkips(c.Skipped), "; "); got != "tool -> awk; tool -> dpkg (>= 1.19)" {
		t.Errorf("skipped = %s", got)
	}

	// Without the exclusion, awk (virtual) is an error that says what to do.
	if _, err := Resolve([]string{"tool"}, []string{"dpkg"}, arc); err == nil || !strings.Contains(err.Error(), "awk") {
		t.Errorf("a virtual dependency: err = %v", err)
	}
	// A version relation the archive cannot meet.
	bad := archive(t,
		"Package: tool\nVersion: 1\nArchitecture: amd64\nDepends: libc6 (>= 2.40)",
		"Package: libc6\nVersion: 2.36-9\nArchitecture: amd64",
	)
	if _, err := Resolve([]string{"tool"}, nil, bad); err == nil || !strings.Contains(err.Error(), "libc6 (>= 2.40)") {
		t.Errorf("an unmet version: err = %v", err)
	}
	if _, err := Resolve([]string{"missing"}, nil, bad); err == nil {
		t.Error("a missing root resolved")
	}
	if _, err := Resolve([]string{"tool"}, []string{"tool"}, bad); err == nil {
		t.Error("an excluded root resolved")
	}
}
