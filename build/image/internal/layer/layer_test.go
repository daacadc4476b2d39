package layer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

var epoch = time.Unix(1784743658, 0)

// makeTree writes a small tree: a file, an executable, a symlink, a hard link, a sticky
// directory, with the given umask and file times.
func makeTree(t *testing.T, umask int, mtime time.Time) string {
	t.Helper()
	old := syscall.Umask(umask)
	defer syscall.Umask(old)
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/bin/tool"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/bin/data"), []byte("data"), 0o644))
	must(os.Link(filepath.Join(dir, "usr/bin/tool"), filepath.Join(dir, "usr/bin/tool2")))
	must(os.Symlink("tool", filepath.Join(dir, "usr/bin/alias")))
	must(os.Mkdir(filepath.Join(dir, "tmp"), 0o777))
	// Modes as packages ship them, whatever the umask.
	for p, m := range map[string]fs.FileMode{"usr": 0o755, "usr/bin": 0o755, "usr/bin/tool": 0o755, "usr/bin/data": 0o644, "tmp": 0o777 | fs.ModeSticky} {
		must(os.Chmod(filepath.Join(dir, p), m))
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
		os.Chtimes(p, mtime, mtime)
		return nil
	})
	return dir
}

func tarOf(t *testing.T, l *Layer) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := l.WriteTar(&b, epoch); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDeterministicWhateverTheDisk(t *testing.T) {
	a, b := New(), New()
	if err := a.AddTree(makeTree(t, 0o022, time.Unix(1, 0)), "", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTree(makeTree(t, 0o077, time.Now()), "", nil); err != nil {
		t.Fatal(err)
	}
	ta, tb := tarOf(t, a), tarOf(t, b)
	if !bytes.Equal(ta, tb) {
		t.Fatal("two trees with the same content but other times, paths and umask give different tars")
	}
	ba, err := a.Build(epoch)
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := b.Build(epoch)
	if ba.DiffID != bb.DiffID || !bytes.Equal(ba.Compressed, bb.Compressed) {
		t.Error("compressed layers differ")
	}
	// The gzip header carries no name and no time.
	zr, err := gzip.NewReader(bytes.NewReader(ba.Compressed))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() || zr.OS != 255 {
		t.Errorf("gzip header: name %q, time %v, os %d", zr.Name, zr.ModTime, zr.OS)
	}
	raw, _ := io.ReadAll(zr)
	if !bytes.Equal(raw, ta) {
		t.Error("the compressed stream is not the tar")
	}
}

func TestTarHeaders(t *testing.T) {
	l := New()
	if err := l.AddTree(makeTree(t, 0o022, time.Now()), "", nil); err != nil {
		t.Fatal(err)
	}
	if err := l.AddFile("etc/passwd", []byte("root:x:0:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.AddDir("run/lock", 0o1777); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(tarOf(t, l)))
	var names []string
	got := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		got[h.Name] = h
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d %q:%q", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if !h.ModTime.Equal(epoch) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: times %v %v %v", h.Name, h.ModTime, h.AccessTime, h.ChangeTime)
		}
		if len(h.PAXRecords) != 0 || len(h.Xattrs) != 0 {
			t.Errorf("%s: extra records %v", h.Name, h.PAXRecords)
		}
	}
	want := []string{"etc/", "etc/passwd", "run/", "run/lock/", "tmp/", "usr/", "usr/bin/",
		"usr/bin/alias", "usr/bin/data", "usr/bin/tool", "usr/bin/tool2"}
	if len(names) != len(want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("entries %v, want %v", names, want)
		}
	}
	checks := []struct {
		name string
		typ  byte
		mode int64
		link string
	}{
		{"tmp/", tar.TypeDir, 0o1777, ""},
		{"run/lock/", tar.TypeDir, 0o1777, ""},
		{"run/", tar.TypeDir, 0o755, ""},
		{"usr/bin/tool", tar.TypeReg, 0o755, ""},
		{"usr/bin/tool2", tar.TypeLink, 0o755, "usr/bin/tool"},
		{"usr/bin/data", tar.TypeReg, 0o644, ""},
		{"usr/bin/alias", tar.TypeSymlink, 0o777, "tool"},
		{"etc/passwd", tar.TypeReg, 0o644, ""},
	}
	for _, c := range checks {
		h := got[c.name]
		if h.Typeflag != c.typ || h.Mode != c.mode || h.Linkname != c.link {
			t.Errorf("%s: type %c mode %o link %q, want %c %o %q", c.name, h.Typeflag, h.Mode, h.Linkname, c.typ, c.mode, c.link)
		}
	}
}

func TestFilterRemoveAndModes(t *testing.T) {
	l := New()
	keep := func(rel string, d fs.DirEntry) bool { return rel != "base/usr/bin/data" && rel != "base/tmp" }
	if err := l.AddTree(makeTree(t, 0o022, time.Now()), "base", keep); err != nil {
		t.Fatal(err)
	}
	if l.Has("base/usr/bin/data") || l.Has("base/tmp") || !l.Has("base/usr/bin/tool") {
		t.Errorf("filter: %v", l.Paths())
	}
	l.SetModes("base/usr", 0o700, 0o600)
	if e := l.Get("base/usr/bin/tool"); e.Mode != 0o600 {
		t.Errorf("SetModes file: %v", e.Mode)
	}
	if e := l.Get("base/usr/bin"); e.Mode != 0o700 {
		t.Errorf("SetModes dir: %v", e.Mode)
	}
	if e := l.Get("base/usr/bin/alias"); e.Mode != 0o777 {
		t.Errorf("SetModes symlink: %v", e.Mode)
	}
	l.Remove("base/usr")
	if got := l.Paths(); len(got) != 1 || got[0] != "base" {
		t.Errorf("after Remove: %v", got)
	}
	if err := l.AddFile("base", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.AddFile("base/x", nil, 0o644); err == nil {
		t.Error("a file under a file was accepted")
	}
	if _, err := Clean("../.."); err == nil {
		t.Error("the root was accepted as an entry")
	}
	if c, _ := Clean("../etc/./passwd"); c != "etc/passwd" {
		t.Errorf("Clean escaped the root: %s", c)
	}
}
