package scripttest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestMain reads every file these tests run through a subprocess (the scripts, and the kpimage
// sources that the debs test builds), so that go test's cache sees them: a change to any of
// them reruns the tests instead of reporting a cached pass.
func TestMain(m *testing.M) {
	root, _ := filepath.Abs("../../..")
	for _, dir := range []string{"build/image", "images"} {
		filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				os.ReadFile(p)
			}
			return nil
		})
	}
	os.ReadFile(filepath.Join(root, "build/lib.sh"))
	os.Exit(m.Run())
}
