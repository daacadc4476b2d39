package deploytest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestMain reads the manifests and the checker's source, which the tests hand to
// subprocesses, so that go test's cache sees them and reruns the tests when they change.
func TestMain(m *testing.M) {
	root, _ := filepath.Abs("../../..")
	for _, dir := range []string{"images/deploy", "build/image/_manifestcheck"} {
		filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				os.ReadFile(p)
			}
			return nil
		})
	}
	os.Exit(m.Run())
}
