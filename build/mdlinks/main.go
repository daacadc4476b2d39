// Command mdlinks checks the links of every Markdown file in a repository, without the network.
//
// Usage: mdlinks [ROOT] (default: the current directory). It parses each *.md file under ROOT
// with goldmark (GitHub-flavoured Markdown), leaving out .git, _output, node_modules and
// testdata directories, and checks every link and image whose destination is not a URL: the
// path must be relative, stay inside ROOT and name an existing file or directory, and a
// #fragment on a Markdown file must match one of its headings by GitHub's anchor rules.
//
// Each broken link is printed as "FILE:LINE: link "DEST": REASON". The last line is
// "mdlinks: N local links in M Markdown files, K broken"; the exit status is 1 when K > 0, and
// 2 when ROOT cannot be read or the usage is wrong.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := "."
	switch len(os.Args) {
	case 1:
	case 2:
		root = os.Args[1]
	default:
		fmt.Fprintln(os.Stderr, "usage: mdlinks [ROOT]")
		os.Exit(2)
	}
	res, err := Check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdlinks:", err)
		os.Exit(2)
	}
	for _, p := range res.Problems {
		fmt.Fprintln(os.Stderr, p)
	}
	fmt.Printf("mdlinks: %d local links in %d Markdown files, %d broken\n", res.Links, res.Files, len(res.Problems))
	if len(res.Problems) > 0 {
		os.Exit(1)
	}
}
