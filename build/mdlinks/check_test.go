package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestGithubSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Node-level conformance (make conformance)":     "node-level-conformance-make-conformance",
		"Linux 6.1 in qemu (make conformance-kernel61)": "linux-61-in-qemu-make-conformance-kernel61",
		"Émigré & ß":               "émigré--ß",
		"snake_case and  two":      "snake_case-and--two",
		"  What: it is, and why? ": "what-it-is-and-why",
	} {
		if got := githubSlug(in); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGoodFixtureHasNoProblems(t *testing.T) {
	res, err := Check("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 0 {
		t.Fatalf("problems in the good fixture: %v", res.Problems)
	}
	// README: guide, setup, notes-1, local anchor, directory, query, image, table, reference;
	// guide.md: the link back. URLs are not counted.
	if res.Files != 2 || res.Links != 10 {
		t.Errorf("checked %d files and %d links, want 2 and 10", res.Files, res.Links)
	}
}

func TestBrokenFixtureNamesFileLinkAndReason(t *testing.T) {
	res, err := Check("testdata/broken")
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{
		{"README.md", 3, "docs/missing.md", "no such file or directory: docs/missing.md"},
		{"README.md", 4, "docs/guide.md#no-such-heading", "no heading with anchor #no-such-heading in docs/guide.md"},
		{"README.md", 5, "#nowhere", "no heading with anchor #nowhere in this file"},
		{"README.md", 6, "../../outside.md", "path leaves the repository"},
		{"README.md", 7, "/etc/passwd", "absolute path: write a path relative to this file"},
		{"docs/guide.md", 3, "#Guide", "no heading with anchor #Guide in this file"},
	}
	if !reflect.DeepEqual(res.Problems, want) {
		t.Errorf("problems:\n got %v\nwant %v", res.Problems, want)
	}
	if res.Links != 7 {
		t.Errorf("checked %d links, want 7", res.Links)
	}
}

func TestSymlinkOutOfTheRepositoryIsBroken(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.md"), []byte("# Secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(repo, "shared")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("# R\n\n[s](shared/secret.md)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Check(repo)
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{{"README.md", 3, "shared/secret.md", "path leaves the repository (through a symlink)"}}
	if !reflect.DeepEqual(res.Problems, want) {
		t.Errorf("problems:\n got %v\nwant %v", res.Problems, want)
	}
}

func TestTestdataAndOutputAreNotWalked(t *testing.T) {
	files, err := markdownFiles("testdata")
	if err != nil {
		t.Fatal(err)
	}
	// The root passed in is walked even when it is named testdata; nested ones would not be.
	want := []string{"broken/README.md", "broken/docs/guide.md", "good/README.md", "good/docs/guide.md"}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("files = %v, want %v", files, want)
	}
	repo := t.TempDir()
	for _, d := range []string{"_output", "x/testdata", ".git"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, d, "a.md"), []byte("[x](nope)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Check(repo)
	if err != nil || res.Files != 0 || len(res.Problems) != 0 {
		t.Errorf("Check = %+v, %v; want nothing walked", res, err)
	}
}
