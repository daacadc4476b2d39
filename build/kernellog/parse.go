package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// The guest's init (build/kernel-init.sh) frames the test binary's -test.v output with
// these two marker lines on the serial console.
const (
	unameMarker = "KERNEL-UNAME "
	exitMarker  = "KERNEL-EXIT "
)

// testLineRegexp matches go test -v's result line of one test or subtest.
var testLineRegexp = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+s)\)`)

// testResult is one test's result line.
type testResult struct {
	Name, Result, Elapsed string
}

// run is what the console of one VM run says.
type run struct {
	Uname   string
	Exit    int  // the test binary's exit code
	Exited  bool // whether the exit marker was seen (the VM finished the tests)
	Results []testResult
}

// parseConsole reads a serial console log. Carriage returns (the serial line's) are ignored, and
// so are lines that are none of the markers and test results (kernel messages, test logs).
func parseConsole(r io.Reader) (run, error) {
	var out run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if i := strings.Index(line, unameMarker); i >= 0 {
			out.Uname = strings.TrimSpace(line[i+len(unameMarker):])
			continue
		}
		if i := strings.Index(line, exitMarker); i >= 0 {
			code, err := strconv.Atoi(strings.TrimSpace(line[i+len(exitMarker):]))
			if err != nil {
				return out, fmt.Errorf("bad exit line %q", line)
			}
			out.Exit, out.Exited = code, true
			continue
		}
		if m := testLineRegexp.FindStringSubmatch(line); m != nil {
			out.Results = append(out.Results, testResult{Name: m[2], Result: m[1], Elapsed: m[3]})
		}
	}
	return out, sc.Err()
}

// cases returns the results of the test cases: tests without subtests, and subtests without
// subtests of their own (a parent's result only sums up its children's).
func (r run) cases() []testResult {
	var out []testResult
	for _, t := range r.Results {
		leaf := true
		for _, u := range r.Results {
			if strings.HasPrefix(u.Name, t.Name+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			out = append(out, t)
		}
	}
	return out
}

// report writes, each line prefixed with "name: ", the guest's kernel release, one line per test
// case and the closing line "name: N passed, N failed", and returns whether the run passed: the tests finished with exit code 0, at least one ran, and none
// failed or skipped (the real-kernel tests run with KUBE_PROXY_OVERLAY_REAL_KERNEL=required, so a
// skip means something is missing in the guest).
func (r run) report(w io.Writer, name string) bool {
	uname := r.Uname
	if uname == "" {
		uname = "(unknown: the guest never reported it)"
	}
	fmt.Fprintf(w, "%s: guest kernel %s\n", name, uname)
	passed, failed := 0, 0
	for _, c := range r.cases() {
		fmt.Fprintf(w, "%s: %s %s (%s)\n", name, c.Result, c.Name, c.Elapsed)
		if c.Result == "PASS" {
			passed++
		} else {
			failed++
		}
	}
	ok := failed == 0 && passed > 0
	switch {
	case !r.Exited:
		fmt.Fprintf(w, "%s: the tests did not finish (no exit line on the console: timeout or crash)\n", name)
		ok = false
	case r.Exit != 0:
		fmt.Fprintf(w, "%s: the test binary exited with code %d\n", name, r.Exit)
		ok = false
	case passed == 0:
		fmt.Fprintf(w, "%s: no test ran\n", name)
	}
	fmt.Fprintf(w, "%s: %d passed, %d failed\n", name, passed, failed)
	return ok
}
