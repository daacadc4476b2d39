// Package featurestest checks build/check-features.sh, which make test runs so that no patch or
// overlay file can drop out of the upstream series (build/upstream-pr/features.txt) silently.
package featurestest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory; go test runs in this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// copyTree copies the regular files under src to dst, keeping their relative paths.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// repoCopy returns a copy of the repository's patches/, overlay/, features.txt and the two
// scripts check-features.sh needs, laid out as in the repository.
func repoCopy(t *testing.T) string {
	t.Helper()
	root, dir := repoRoot(t), t.TempDir()
	copyTree(t, filepath.Join(root, "patches"), filepath.Join(dir, "patches"))
	copyTree(t, filepath.Join(root, "overlay"), filepath.Join(dir, "overlay"))
	for _, f := range []string{"build/check-features.sh", "build/lib.sh", "build/upstream-pr/features.txt"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkFeatures runs check-features.sh in the copy dir and returns its output and error.
func checkFeatures(t *testing.T, dir string) (string, error) {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(dir, "build/check-features.sh")).CombinedOutput()
	return string(out), err
}

// addFeatures appends lines to the copy's features.txt.
func addFeatures(t *testing.T, dir, lines string) {
	t.Helper()
	f := filepath.Join(dir, "build/upstream-pr/features.txt")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "build/upstream-pr/features.txt", string(b)+lines)
}

// write creates file rel under dir with text.
func write(t *testing.T, dir, rel, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rel), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRepositoryFeaturesHold(t *testing.T) {
	if out, err := checkFeatures(t, repoCopy(t)); err != nil {
		t.Fatalf("check-features.sh fails on the repository: %v\n%s", err, out)
	}
}

func TestCheckFeaturesFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		want   string
	}{{
		name: "overlay file in no feature",
		change: func(t *testing.T, dir string) {
			write(t, dir, "overlay/pkg/proxy/nftables/unlisted.go", "package nftables\n")
		},
		want: "overlay/pkg/proxy/nftables/unlisted.go belongs to no feature",
	}, {
		name: "patch in no feature",
		change: func(t *testing.T, dir string) {
			write(t, dir, "patches/0099-UPSTREAM-carry-unlisted.patch", "")
		},
		want: "patches/0099-UPSTREAM-carry-unlisted.patch belongs to no feature",
	}, {
		name: "feature names a missing overlay path",
		change: func(t *testing.T, dir string) {
			addFeatures(t, dir, "extra | kube-proxy: extra | | pkg/gone.go\n")
		},
		want: "feature extra: overlay/pkg/gone.go does not exist",
	}, {
		name: "feature names a missing patch",
		change: func(t *testing.T, dir string) {
			addFeatures(t, dir, "extra | kube-proxy: extra | 0098 |\n")
		},
		want: "feature extra: no patch 0098",
	}, {
		name: "overlay file in two features",
		change: func(t *testing.T, dir string) {
			write(t, dir, "overlay/pkg/proxy/twice/twice.go", "package twice\n")
			addFeatures(t, dir, "one | kube-proxy: one | | pkg/proxy/twice\ntwo | kube-proxy: two | | pkg/proxy/twice/twice.go\n")
		},
		want: "overlay/pkg/proxy/twice/twice.go is in features one and two",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := repoCopy(t)
			tc.change(t, dir)
			out, err := checkFeatures(t, dir)
			if err == nil {
				t.Fatalf("check-features.sh passed; want a failure naming %q\n%s", tc.want, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("check-features.sh failed without naming %q:\n%s", tc.want, out)
			}
		})
	}
}
