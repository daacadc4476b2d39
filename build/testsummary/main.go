// Command testsummary reads `go test -json` events on standard input and prints a readable log
// and a plain summary of what ran.
//
// It prints each package's result line as go test does, the full output of every failed test,
// and then, per group of packages (-group NAME=PREFIX, repeatable; the first matching prefix
// wins, the rest fall into "other"), the number of packages and tests that passed, failed and
// were skipped. The last line is "N passed, N failed, N skipped" over all tests.
//
// It exits 1 when any test or package failed, or when no test ran at all, so that a wrong package
// pattern cannot pass silently.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is the subset of test2json's TestEvent that the summary needs.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type counts struct {
	pkgOK, pkgFail, pkgNoTests int
	passed, failed, skipped    int
	failedNames, skippedNames  []string
}

type groupFlag []string

func (g *groupFlag) String() string     { return strings.Join(*g, ",") }
func (g *groupFlag) Set(v string) error { *g = append(*g, v); return nil }

func main() {
	var groups groupFlag
	flag.Var(&groups, "group", "NAME=PREFIX: count packages starting with PREFIX under NAME (repeatable)")
	flag.Parse()
	failed, err := summarize(os.Stdin, os.Stdout, groups)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize consumes the event stream in r, writes the log and summary to w, and reports whether
// the run failed (a failed test or package, or no test at all).
func summarize(r io.Reader, w io.Writer, groups []string) (bool, error) {
	type gdef struct{ name, prefix string }
	var defs []gdef
	for _, g := range groups {
		name, prefix, ok := strings.Cut(g, "=")
		if !ok || name == "" {
			return false, fmt.Errorf("bad -group %q, want NAME=PREFIX", g)
		}
		defs = append(defs, gdef{name, prefix})
	}
	groupOf := func(pkg string) string {
		for _, d := range defs {
			if strings.HasPrefix(pkg, d.prefix) {
				return d.name
			}
		}
		return "other"
	}

	byGroup := map[string]*counts{}
	get := func(pkg string) *counts {
		g := groupOf(pkg)
		if byGroup[g] == nil {
			byGroup[g] = &counts{}
		}
		return byGroup[g]
	}
	// Output is buffered per test so that only failures are echoed in full.
	outputs := map[string]*strings.Builder{}
	pkgTests := map[string]int{}

	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// Build errors and other non-JSON lines go straight through.
			fmt.Fprintln(w, string(line))
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			b.WriteString(ev.Output)
		case "pass", "fail", "skip":
			c := get(ev.Package)
			if ev.Test == "" {
				if ev.Action == "fail" {
					c.pkgFail++
					fmt.Fprintf(w, "FAIL\t%s\n", ev.Package)
					if b := outputs[key]; b != nil {
						fmt.Fprint(w, indent(b.String()))
					}
				} else if pkgTests[ev.Package] == 0 {
					c.pkgNoTests++
				} else {
					c.pkgOK++
					fmt.Fprintf(w, "ok\t%s\n", ev.Package)
				}
				continue
			}
			pkgTests[ev.Package]++
			name := ev.Package + "." + ev.Test
			switch ev.Action {
			case "pass":
				c.passed++
			case "skip":
				c.skipped++
				c.skippedNames = append(c.skippedNames, name)
			case "fail":
				c.failed++
				c.failedNames = append(c.failedNames, name)
				fmt.Fprintf(w, "--- FAIL: %s\n", name)
				if b := outputs[key]; b != nil {
					fmt.Fprint(w, indent(b.String()))
				}
			}
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}

	names := make([]string, 0, len(byGroup))
	for g := range byGroup {
		names = append(names, g)
	}
	sort.Strings(names)
	var total counts
	fmt.Fprintln(w, "\n== test summary")
	for _, g := range names {
		c := byGroup[g]
		fmt.Fprintf(w, "%-10s packages: %d ok, %d failed, %d without tests; tests: %d passed, %d failed, %d skipped\n",
			g+":", c.pkgOK, c.pkgFail, c.pkgNoTests, c.passed, c.failed, c.skipped)
		total.pkgFail += c.pkgFail
		total.passed += c.passed
		total.failed += c.failed
		total.skipped += c.skipped
		for _, n := range c.failedNames {
			fmt.Fprintf(w, "  failed: %s\n", n)
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", total.passed, total.failed, total.skipped)
	return total.failed > 0 || total.pkgFail > 0 || total.passed == 0, nil
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("    " + l)
		}
	}
	return b.String()
}
