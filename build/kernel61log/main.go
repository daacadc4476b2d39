// Command kernel61log reads the serial console log of a make conformance-kernel61 VM run and
// prints the guest's kernel release, one line per test case, and the closing line
// "kernel61: N passed, N failed". It exits 1 unless the tests finished with exit code 0 and every
// case passed.
//
//	kernel61log console.log
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kernel61log CONSOLE_LOG")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
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
	if !r.report(os.Stdout) {
		os.Exit(1)
	}
}
