package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// Problem is one link that does not resolve: the Markdown file (relative to the root), the
// 1-based line the link starts on, the destination as written, and why it fails.
type Problem struct {
	File   string
	Line   int
	Dest   string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", p.File, p.Line, p.Dest, p.Reason)
}

// Result is what Check found: the problems (sorted by file and line), and how many Markdown
// files and local links it checked.
type Result struct {
	Problems []Problem
	Files    int
	Links    int
}

// skipDir reports whether a directory is left out of the walk: version control, build output,
// dependencies, and Go test fixtures (testdata), which may hold deliberately broken links.
func skipDir(name string) bool {
	switch name {
	case ".git", "_output", "node_modules", "testdata":
		return true
	}
	return false
}

// markdownFiles returns every *.md file under root (slash-separated, relative to root), sorted,
// leaving out the directories skipDir names.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// doc is one parsed Markdown file.
type doc struct {
	src     []byte
	root    ast.Node
	anchors map[string]bool
}

// checker parses each Markdown file once and remembers it, so that anchors of a file that many
// links point to are computed once.
type checker struct {
	root string // absolute, symlinks resolved
	md   goldmark.Markdown
	docs map[string]*doc // by absolute path
}

// load parses the Markdown file at abs path (GitHub-flavoured: tables, strikethrough, task lists
// and autolinks) and computes its heading anchors.
func (c *checker) load(abs string) (*doc, error) {
	if d, ok := c.docs[abs]; ok {
		return d, nil
	}
	src, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	root := c.md.Parser().Parse(text.NewReader(src))
	d := &doc{src: src, root: root, anchors: anchors(root, src)}
	c.docs[abs] = d
	return d, nil
}

// Check parses every Markdown file under root and checks each link and image destination that
// is not a URL with a scheme (http:, mailto:, ...) or host: the path must stay inside root
// (after following symlinks), must not be absolute, and must name an existing file or
// directory; a #fragment on a Markdown file (or on the same file) must be one of its heading
// anchors. It returns an error only when root cannot be read or a file cannot be parsed.
func Check(root string) (Result, error) {
	var res Result
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return res, err
	}
	if absRoot, err = filepath.EvalSymlinks(absRoot); err != nil {
		return res, err
	}
	files, err := markdownFiles(absRoot)
	if err != nil {
		return res, err
	}
	c := &checker{
		root: absRoot,
		md:   goldmark.New(goldmark.WithExtensions(extension.GFM)),
		docs: map[string]*doc{},
	}
	for _, f := range files {
		abs := filepath.Join(absRoot, filepath.FromSlash(f))
		d, err := c.load(abs)
		if err != nil {
			return res, fmt.Errorf("%s: %w", f, err)
		}
		res.Files++
		err = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if !entering {
				return ast.WalkContinue, nil
			}
			var dest string
			switch l := n.(type) {
			case *ast.Link:
				dest = string(l.Destination)
			case *ast.Image:
				dest = string(l.Destination)
			default:
				return ast.WalkContinue, nil
			}
			reason, local := c.checkDest(abs, d, dest)
			if local {
				res.Links++
			}
			if reason != "" {
				res.Problems = append(res.Problems, Problem{File: f, Line: lineOf(d.src, n.Pos()), Dest: dest, Reason: reason})
			}
			return ast.WalkContinue, nil
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// checkDest checks one destination written in the file at from (parsed as d). It returns why
// the link is broken ("" if it is not), and whether it is a local link (one that was checked).
func (c *checker) checkDest(from string, d *doc, dest string) (reason string, local bool) {
	if dest == "" {
		return "empty destination", true
	}
	u, err := url.Parse(dest)
	if err != nil {
		return fmt.Sprintf("not a valid URL or path: %v", err), true
	}
	if u.Scheme != "" || u.Host != "" {
		return "", false // a URL: not checked (no network)
	}
	if strings.HasPrefix(u.Path, "/") {
		return "absolute path: write a path relative to this file", true
	}
	target, targetDoc := from, d
	if u.Path != "" {
		target = filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
		rel, err := filepath.Rel(c.root, target)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "path leaves the repository", true
		}
		info, err := os.Stat(target)
		if err != nil {
			return "no such file or directory: " + filepath.ToSlash(rel), true
		}
		real, err := filepath.EvalSymlinks(target)
		if err != nil {
			return "cannot resolve: " + err.Error(), true
		}
		if rr, err := filepath.Rel(c.root, real); err != nil || rr == ".." || strings.HasPrefix(rr, ".."+string(filepath.Separator)) {
			return "path leaves the repository (through a symlink)", true
		}
		targetDoc = nil
		if !info.IsDir() && strings.HasSuffix(target, ".md") {
			if targetDoc, err = c.load(target); err != nil {
				return "cannot read: " + err.Error(), true
			}
		}
	}
	if u.Fragment != "" && targetDoc != nil && !targetDoc.anchors[u.Fragment] {
		where := "this file"
		if u.Path != "" {
			where = u.Path
		}
		return fmt.Sprintf("no heading with anchor #%s in %s", u.Fragment, where), true
	}
	return "", true
}

// lineOf returns the 1-based line of byte offset pos in src (1 when pos is unknown).
func lineOf(src []byte, pos int) int {
	if pos < 0 || pos > len(src) {
		return 1
	}
	return bytes.Count(src[:pos], []byte("\n")) + 1
}
