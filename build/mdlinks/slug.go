package main

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/yuin/goldmark/ast"
)

// githubSlug returns the anchor GitHub gives a heading whose rendered text is text: the text in
// lower case, with every character that is not a letter, a digit, a mark, '-' or '_' removed,
// and each space turned into '-' (spaces are not collapsed). Duplicates are handled by anchors.
func githubSlug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingText returns the text a heading renders to: its text and code-span contents, the text
// of its links and emphasis, without Markdown syntax and without raw HTML tags.
func headingText(h ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(h, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := n.(type) {
		case *ast.Text:
			b.Write(t.Segment.Value(src))
			if t.SoftLineBreak() || t.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(t.Value)
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// anchors returns the set of fragment names a document's headings get on GitHub: each heading's
// slug, and for the n-th repeat (n >= 1) of a slug already taken, slug-n.
func anchors(doc ast.Node, src []byte) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		h, ok := n.(*ast.Heading)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		base := githubSlug(headingText(h, src))
		slug := base
		if k := seen[base]; k > 0 {
			slug = base + "-" + strconv.Itoa(k)
		}
		seen[base]++
		out[slug] = true
		return ast.WalkSkipChildren, nil
	})
	return out
}
