package lockfile

import (
	"bytes"
	"strings"
	"testing"
)

const sha1 = "1111111111111111111111111111111111111111111111111111111111111111"
const sha2 = "2222222222222222222222222222222222222222222222222222222222222222"

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec(strings.NewReader(`# header
suite bookworm
arch  amd64
root nftables   # nft, for nftables mode
root iptables
exclude dpkg    # maintainer scripts only
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Suite != "bookworm" || strings.Join(s.Arches, " ") != "amd64" || strings.Join(s.RootNames(), ",") != "nftables,iptables" ||
		strings.Join(s.ExcludeNames(), ",") != "dpkg" || s.Roots[0].Why != "nft, for nftables mode" || s.Excludes[0].Reason != "maintainer scripts only" {
		t.Errorf("parsed %+v", s)
	}
	for name, bad := range map[string]string{
		"exclude without a reason": "suite b\narch amd64\nroot a1\nexclude dpkg\n",
		"listed twice":             "suite b\narch amd64\nroot a1\nroot a1\n",
		"unknown keyword":          "suite b\narch amd64\nroot a1\ninstall b1\n",
		"no roots":                 "suite b\narch amd64\n",
		"bad name":                 "suite b\narch amd64\nroot Foo\n",
		"extra field":              "suite b\narch amd64\nroot a1 b1\n",
		"arch twice":               "suite b\narch amd64\narch arm64\nroot a1\n",
		"arch all":                 "suite b\narch amd64 all\nroot a1\n",
		"arch repeated":            "suite b\narch amd64 amd64\nroot a1\n",
	} {
		if _, err := ParseSpec(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestLockRoundTrip(t *testing.T) {
	l := &Lock{Input: "sha256:" + sha1, Suite: "bookworm", Arches: []string{"amd64", "arm64"}, Entries: []Entry{
		{"libc6", "2.36-9+deb12u14", "arm64", sha2},
		{"libc6", "2.36-9+deb12u14", "amd64", sha1},
		{"conntrack", "1:1.4.7-1+b2", "amd64", sha2},
		{"conntrack", "1:1.4.7-1+b3", "arm64", sha1},
		{"netbase", "6.4", "all", sha1},
	}}
	text := l.Format([]string{"generated", "", "by a test"})
	if !bytes.HasPrefix(text, []byte("# generated\n#\n# by a test\n@input sha256:")) {
		t.Errorf("header:\n%s", text)
	}
	back, err := Parse(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if back.Input != l.Input || back.Suite != "bookworm" || strings.Join(back.Arches, " ") != "amd64 arm64" || len(back.Entries) != 5 {
		t.Fatalf("parsed back %+v", back)
	}
	// Format sorts by name, then architecture.
	if back.Entries[0].Name != "conntrack" || back.Entries[2].Name != "libc6" || back.Entries[2].Arch != "amd64" || back.Entries[4].Name != "netbase" {
		t.Errorf("order: %+v", back.Entries)
	}
	if got := back.ForArch("arm64"); len(got) != 3 || got[0].Version != "1:1.4.7-1+b3" || got[1].SHA256 != sha2 || got[2].Arch != "all" {
		t.Errorf("ForArch(arm64) = %+v", got)
	}
	if got := back.Entries[0].DebFileName(); got != "conntrack_1%3a1.4.7-1+b2_amd64.deb" {
		t.Errorf("DebFileName = %s", got)
	}
	if v := back.Versions("arm64")["conntrack"]; v != "1:1.4.7-1+b3" {
		t.Errorf("Versions: %s", v)
	}
	if !bytes.Equal(back.Format([]string{"generated", "", "by a test"}), text) {
		t.Error("format(parse(format(l))) differs")
	}
}

func TestLockParseRejects(t *testing.T) {
	head := "@input sha256:" + sha1 + "\n@suite bookworm\n@arch amd64\n"
	for name, body := range map[string]string{
		"short hash":     "a 1.0 amd64 abcd\n",
		"upper-case hex": "a1 1.0 amd64 " + strings.Repeat("AB", 32) + "\n",
		"three fields":   "a1 1.0 amd64\n",
		"bad version":    "a1 v1.0 amd64 " + sha1 + "\n",
		"duplicate":      "a1 1.0 amd64 " + sha1 + "\na1 1.1 amd64 " + sha2 + "\n",
		"unsorted":       "b1 1.0 amd64 " + sha1 + "\na1 1.0 amd64 " + sha2 + "\n",
		"empty":          "",
		"unknown key":    "@mirror x\na1 1.0 amd64 " + sha1 + "\n",
		"foreign arch":   "a1 1.0 arm64 " + sha1 + "\n",
	} {
		if _, err := Parse(strings.NewReader(head + body)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := Parse(strings.NewReader("@suite bookworm\n@arch amd64\na1 1.0 amd64 " + sha1 + "\n")); err == nil {
		t.Error("a lock without @input parsed")
	}
	two := "@input sha256:" + sha1 + "\n@suite trixie\n@arch amd64 arm64\n"
	for name, body := range map[string]string{
		"one architecture missing": "a1 1.0 amd64 " + sha1 + "\n",
		"all and per-arch":         "a1 1.0 all " + sha1 + "\na1 1.0 amd64 " + sha1 + "\n",
	} {
		if _, err := Parse(strings.NewReader(two + body)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestSpecDigestAndMarkdown(t *testing.T) {
	if SpecDigest([]byte("x")) == SpecDigest([]byte("y")) || !strings.HasPrefix(SpecDigest(nil), "sha256:") {
		t.Error("SpecDigest")
	}
	s := &Spec{Suite: "bookworm", Arches: []string{"amd64"}, Roots: []Root{{"nftables", "nft | for nftables mode"}, {"kmod", ""}},
		Excludes: []Exclude{{"dpkg", "scripts only"}}}
	l := &Lock{Input: "sha256:" + sha1, Suite: "bookworm", Arches: []string{"amd64"}, Entries: []Entry{
		{"kmod", "30", "amd64", sha1}, {"libc6", "2.36", "amd64", sha2}, {"nftables", "1.0.6", "amd64", sha1},
	}}
	md := string(Markdown(l, s))
	for _, want := range []string{
		"| package | version | arch | why | sha256 of the .deb |",
		"| `nftables` | `1.0.6` | amd64 | nft \\| for nftables mode | `" + sha1 + "` |",
		"| `kmod` | `30` | amd64 | requested |",
		"| `libc6` | `2.36` | amd64 | dependency |",
		"- `dpkg`: scripts only",
		"3 .deb files",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}
