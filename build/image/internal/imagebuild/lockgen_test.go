package imagebuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/debian"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/lockfile"
)

// archive is a fake package index of one architecture: paragraphs as apt-cache show gives them.
func archive(t *testing.T, paras string) debian.Lookup {
	t.Helper()
	ps, err := debian.ParseParagraphs(strings.NewReader(paras))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]debian.Package{}
	for _, p := range ps {
		pkg, err := debian.PackageFromParagraph(p)
		if err != nil {
			t.Fatal(err)
		}
		byName[pkg.Name] = pkg
	}
	return func(names []string) (map[string]debian.Package, error) {
		out := map[string]debian.Package{}
		for _, n := range names {
			if p, ok := byName[n]; ok {
				out[n] = p
			}
		}
		return out, nil
	}
}

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func index(arch, sha, nftVersion, netbaseVersion string) string {
	return "Package: nftables\nVersion: " + nftVersion + "\nArchitecture: " + arch + "\nSHA256: " + sha + "\nDepends: libc6, netbase\n\n" +
		"Package: libc6\nVersion: 2.41-12\nArchitecture: " + arch + "\nSHA256: " + sha + "\n\n" +
		"Package: netbase\nVersion: " + netbaseVersion + "\nArchitecture: all\nSHA256: " + shaC + "\n"
}

func TestGenerateLockTwoArchitectures(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "packages.in")
	os.WriteFile(spec, []byte("suite trixie\narch amd64 arm64\nroot nftables # nft\n"), 0o644)
	lock, md := filepath.Join(dir, "packages.lock"), filepath.Join(dir, "PACKAGES.md")
	l, err := GenerateLock(spec, lock, md, map[string]debian.Lookup{
		"amd64": archive(t, index("amd64", shaA, "1.1.3-1", "6.5")),
		"arm64": archive(t, index("arm64", shaB, "1.1.3-1+b1", "6.5")),
	})
	if err != nil {
		t.Fatal(err)
	}
	// libc6 and nftables once per architecture, netbase (all) once: 5 lines.
	if len(l.Entries) != 5 || strings.Join(l.Arches, " ") != "amd64 arm64" {
		t.Fatalf("lock: %+v", l)
	}
	arm := l.ForArch("arm64")
	if len(arm) != 3 || l.Versions("arm64")["nftables"] != "1.1.3-1+b1" || l.Versions("amd64")["nftables"] != "1.1.3-1" {
		t.Errorf("arm64 entries %+v", arm)
	}
	for _, e := range arm {
		if e.Arch == "amd64" {
			t.Errorf("the arm64 image would get %+v", e)
		}
	}
	if _, _, err := CheckLock(spec, lock, md); err != nil {
		t.Errorf("the written lock does not check: %v", err)
	}
	b, _ := os.ReadFile(lock)
	if _, err := lockfile.Parse(strings.NewReader(string(b))); err != nil || !strings.Contains(string(b), "@arch amd64 arm64") {
		t.Errorf("the lock file: %v\n%s", err, b)
	}

	// An "all" package at two versions, or in one closure only, cannot be recorded once.
	_, err = GenerateLock(spec, lock, md, map[string]debian.Lookup{
		"amd64": archive(t, index("amd64", shaA, "1.1.3-1", "6.5")),
		"arm64": archive(t, index("arm64", shaB, "1.1.3-1", "6.6")),
	})
	if err == nil || !strings.Contains(err.Error(), "netbase") {
		t.Errorf("netbase at two versions: %v", err)
	}
	noNetbase := strings.Replace(index("arm64", shaB, "1.1.3-1", "6.5"), ", netbase", "", 1)
	_, err = GenerateLock(spec, lock, md, map[string]debian.Lookup{
		"amd64": archive(t, index("amd64", shaA, "1.1.3-1", "6.5")),
		"arm64": archive(t, noNetbase),
	})
	if err == nil || !strings.Contains(err.Error(), "closure of amd64 only") {
		t.Errorf("netbase in one closure: %v", err)
	}
	// A missing index for one architecture is an error, not a one-architecture lock.
	if _, err := GenerateLock(spec, lock, md, map[string]debian.Lookup{"amd64": archive(t, index("amd64", shaA, "1.1.3-1", "6.5"))}); err == nil ||
		!strings.Contains(err.Error(), "no package index for arm64") {
		t.Errorf("no arm64 index: %v", err)
	}
}
