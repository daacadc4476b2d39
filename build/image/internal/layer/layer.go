// Package layer builds image layers as byte-for-byte reproducible tar archives.
//
// A layer is a set of entries keyed by path. Entries come from a directory tree on disk (its
// content, file types and permission bits) or are added directly. When written, entries are
// sorted by path (a parent always sorts before its children), every timestamp is the same fixed
// time, owner and group are 0 with no names, and no other metadata (access times, extended
// attributes, device numbers of the build host) is recorded. Files that share an inode on disk
// become hard links to the first of them in path order.
package layer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Kind is an entry's file type.
type Kind int

const (
	Dir Kind = iota
	File
	Symlink
)

// Entry is one path in a layer.
type Entry struct {
	Path   string      // relative, slash-separated, no leading "./" or "/"
	Kind   Kind        //
	Mode   fs.FileMode // permission bits plus setuid, setgid and sticky
	Target string      // symlink target
	Data   []byte      // file content, when not read from Source
	Source string      // file content is read from this path when writing
	inode  uint64      // for hard-link detection of files read from disk
	dev    uint64
}

// Layer is a set of entries.
type Layer struct {
	entries map[string]*Entry
}

// New returns an empty layer.
func New() *Layer { return &Layer{entries: map[string]*Entry{}} }

// Clean normalizes p to the form entries use, and rejects paths that escape the root.
func Clean(p string) (string, error) {
	c := path.Clean("/" + filepath.ToSlash(p))
	if c == "/" {
		return "", fmt.Errorf("the root itself is not an entry")
	}
	c = strings.TrimPrefix(c, "/")
	return c, nil
}

func (l *Layer) put(e *Entry) error {
	p, err := Clean(e.Path)
	if err != nil {
		return err
	}
	e.Path = p
	e.Mode = normMode(e.Mode)
	l.entries[p] = e
	return nil
}

// AddDir adds (or replaces) a directory with mode perm, and any missing parents with 0755.
func (l *Layer) AddDir(p string, perm fs.FileMode) error {
	if err := l.addParents(p); err != nil {
		return err
	}
	return l.put(&Entry{Path: p, Kind: Dir, Mode: perm})
}

// AddFile adds (or replaces) a regular file with the given content and mode, and any missing
// parents with 0755.
func (l *Layer) AddFile(p string, data []byte, perm fs.FileMode) error {
	if err := l.addParents(p); err != nil {
		return err
	}
	return l.put(&Entry{Path: p, Kind: File, Mode: perm, Data: append([]byte(nil), data...)})
}

// AddFileFrom adds (or replaces) a regular file whose content is read from src when the layer
// is written.
func (l *Layer) AddFileFrom(p, src string, perm fs.FileMode) error {
	if err := l.addParents(p); err != nil {
		return err
	}
	return l.put(&Entry{Path: p, Kind: File, Mode: perm, Source: src})
}

// AddSymlink adds (or replaces) a symbolic link.
func (l *Layer) AddSymlink(p, target string) error {
	if err := l.addParents(p); err != nil {
		return err
	}
	return l.put(&Entry{Path: p, Kind: Symlink, Mode: 0o777, Target: target})
}

// Remove drops an entry and, for a directory, everything under it.
func (l *Layer) Remove(p string) {
	c, err := Clean(p)
	if err != nil {
		return
	}
	for k := range l.entries {
		if k == c || strings.HasPrefix(k, c+"/") {
			delete(l.entries, k)
		}
	}
}

// Has reports whether the layer holds path p.
func (l *Layer) Has(p string) bool {
	c, err := Clean(p)
	if err != nil {
		return false
	}
	_, ok := l.entries[c]
	return ok
}

// Get returns the entry at p, or nil.
func (l *Layer) Get(p string) *Entry {
	c, err := Clean(p)
	if err != nil {
		return nil
	}
	return l.entries[c]
}

// Paths returns every entry's path in the order they are written.
func (l *Layer) Paths() []string {
	ps := make([]string, 0, len(l.entries))
	for p := range l.entries {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

func (l *Layer) addParents(p string) error {
	c, err := Clean(p)
	if err != nil {
		return err
	}
	for d := path.Dir(c); d != "." && d != "/"; d = path.Dir(d) {
		if e, ok := l.entries[d]; ok {
			if e.Kind != Dir {
				return fmt.Errorf("%s: parent %s is not a directory", c, d)
			}
			continue
		}
		l.entries[d] = &Entry{Path: d, Kind: Dir, Mode: 0o755}
	}
	return nil
}

// AddTree adds everything under dir on disk at prefix (relative; "" for the root), keeping file
// types and permission bits. Keep, when non-nil, is asked about each relative path (as the
// entry would be named) and may leave it and, for directories, everything below it out.
// Anything other than directories, regular files and symlinks is an error.
func (l *Layer) AddTree(dir, prefix string, keep func(rel string, d fs.DirEntry) bool) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		if keep != nil && !keep(name, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := &Entry{Path: name, Mode: info.Mode()}
		// fs.FileMode keeps setuid/setgid/sticky outside ModePerm.
		switch {
		case info.Mode().IsDir():
			e.Kind = Dir
		case info.Mode().IsRegular():
			e.Kind = File
			e.Source = p
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				e.inode, e.dev = st.Ino, uint64(st.Dev)
			}
		case info.Mode()&fs.ModeSymlink != 0:
			e.Kind = Symlink
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
			e.Mode = 0o777
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, info.Mode().Type())
		}
		if err := l.addParents(name); err != nil {
			return err
		}
		return l.put(e)
	})
}

// WriteTar writes the layer as an uncompressed tar stream with every time set to mtime.
func (l *Layer) WriteTar(w io.Writer, mtime time.Time) error {
	mtime = mtime.UTC().Truncate(time.Second)
	tw := tar.NewWriter(w)
	firstOfInode := map[[2]uint64]string{}
	for _, p := range l.Paths() {
		e := l.entries[p]
		h := &tar.Header{
			Name:    p,
			Mode:    int64(tarMode(e.Mode)),
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		var body io.Reader
		switch e.Kind {
		case Dir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case Symlink:
			h.Typeflag = tar.TypeSymlink
			h.Linkname = e.Target
		case File:
			if e.inode != 0 {
				key := [2]uint64{e.dev, e.inode}
				if first, ok := firstOfInode[key]; ok {
					h.Typeflag = tar.TypeLink
					h.Linkname = first
					break
				}
				firstOfInode[key] = p
			}
			h.Typeflag = tar.TypeReg
			if e.Source != "" {
				st, err := os.Stat(e.Source)
				if err != nil {
					return err
				}
				h.Size = st.Size()
				body = lazyFile(e.Source)
			} else {
				h.Size = int64(len(e.Data))
				body = bytes.NewReader(e.Data)
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if body != nil {
			if err := copyBody(tw, body, h.Size); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	return tw.Close()
}

// lazyFile names a file to copy; it is opened only when copied, so that a large tree does not
// hold every file open at once.
type lazyFile string

func (lazyFile) Read([]byte) (int, error) { return 0, fmt.Errorf("lazyFile is not read directly") }

func copyBody(w io.Writer, body io.Reader, size int64) error {
	if lf, ok := body.(lazyFile); ok {
		f, err := os.Open(string(lf))
		if err != nil {
			return err
		}
		defer f.Close()
		body = f
	}
	n, err := io.Copy(w, body)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("changed size while being written")
	}
	return nil
}

// normMode keeps permission bits plus setuid, setgid and sticky. Those three may be given as Go's
// fs.Mode* flags (as os.Lstat reports them) or as Unix octal bits (0o4000, 0o2000, 0o1000,
// as in AddDir("tmp", 0o1777)).
func normMode(m fs.FileMode) fs.FileMode {
	out := m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

// tarMode converts permission and special bits to the tar header's mode word.
func tarMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// Blob is a written layer: its uncompressed tar's digest (the diff ID) and the gzip stream that
// goes into the image.
type Blob struct {
	DiffID     string // sha256:HEX of the tar
	Compressed []byte // gzip, no name, no time, no OS byte that depends on the host
}

// Build writes the tar and compresses it with a fixed gzip header and level.
func (l *Layer) Build(mtime time.Time) (*Blob, error) {
	var tarBuf bytes.Buffer
	if err := l.WriteTar(&tarBuf, mtime); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(tarBuf.Bytes())
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	// The zero header: no file name, no modification time; compress/gzip writes OS=255
	// (unknown) whatever the host.
	zw.Header = gzip.Header{OS: 255}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return &Blob{DiffID: "sha256:" + hex.EncodeToString(sum[:]), Compressed: gz.Bytes()}, nil
}

// SetModes sets the mode of every entry at or under prefix: dirMode for directories,
// fileMode for regular files (symlinks keep 0777). It makes a tree copied from disk independent
// of the permissions it happened to have there.
func (l *Layer) SetModes(prefix string, dirMode, fileMode fs.FileMode) {
	c, err := Clean(prefix)
	if err != nil {
		return
	}
	for k, e := range l.entries {
		if k != c && !strings.HasPrefix(k, c+"/") {
			continue
		}
		switch e.Kind {
		case Dir:
			e.Mode = normMode(dirMode)
		case File:
			e.Mode = normMode(fileMode)
		}
	}
}
