// Command kernellog reads the serial console log of a make conformance-kernel VM run and prints,
// each line prefixed with NAME (kernel61 for the 6.1 run, kernel612 for the 6.12 run), the
// guest's kernel release, one line per test case, and the closing line
// "NAME: N passed, N failed". It exits 1 unless the tests finished with exit code 0 and every
// case passed.
//
//	kernellog kernel612 console.log
package main

import (
	"fmt"
	"os"
	"regexp"
)

// nameRegexp is what NAME may be: one word, so that the closing line reads as a test summary.
var nameRegexp = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func main() {
	if len(os.Args) != 3 || !nameRegexp.MatchString(os.Args[1]) {
		fmt.Fprintln(os.Stderr, "usage: kernellog NAME CONSOLE_LOG (NAME one word, such as kernel612)")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer func() { _ = f.Close() }()
	r, err := parseConsole(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !r.report(os.Stdout, os.Args[1]) {
		os.Exit(1)
	}
}
