package main

import (
	"strings"
	"testing"
)

const consoleOK = "[    0.000000] Linux version 6.1.0-48-amd64\r\n" +
	"KERNEL-UNAME 6.1.0-48-amd64\r\n" +
	"=== RUN   TestRealKernelA\r\n" +
	"--- PASS: TestRealKernelA (1.50s)\r\n" +
	"=== RUN   TestRealKernelB\r\n" +
	"=== RUN   TestRealKernelB/IPv4\r\n" +
	"    x_test.go:1: a log line\r\n" +
	"--- PASS: TestRealKernelB (3.00s)\r\n" +
	"    --- PASS: TestRealKernelB/IPv4 (1.00s)\r\n" +
	"    --- PASS: TestRealKernelB/IPv6 (2.00s)\r\n" +
	"PASS\r\n" +
	"KERNEL-EXIT 0\r\n" +
	"[   90.1] reboot: Power down\r\n"

func reportOf(t *testing.T, console string) (string, bool) {
	t.Helper()
	return reportNamed(t, "kernel61", console)
}

// reportNamed parses console and returns report's output under name and whether the run passed.
func reportNamed(t *testing.T, name, console string) (string, bool) {
	t.Helper()
	r, err := parseConsole(strings.NewReader(console))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	ok := r.report(&b, name)
	return b.String(), ok
}

func TestReportPassingRun(t *testing.T) {
	got, ok := reportOf(t, consoleOK)
	want := "kernel61: guest kernel 6.1.0-48-amd64\n" +
		"kernel61: PASS TestRealKernelA (1.50s)\n" +
		"kernel61: PASS TestRealKernelB/IPv4 (1.00s)\n" +
		"kernel61: PASS TestRealKernelB/IPv6 (2.00s)\n" +
		"kernel61: 3 passed, 0 failed\n"
	if got != want || !ok {
		t.Errorf("report (ok=%v):\n%s\nwant (ok=true):\n%s", ok, got, want)
	}
}

func TestReportNamesTheKernelLine(t *testing.T) {
	console := strings.ReplaceAll(consoleOK, "6.1.0-48-amd64", "6.12.118+deb13-amd64")
	console = strings.Replace(console, "--- PASS: TestRealKernelA", "--- FAIL: TestRealKernelA", 1)
	got, ok := reportNamed(t, "kernel612", console)
	want := "kernel612: guest kernel 6.12.118+deb13-amd64\n" +
		"kernel612: FAIL TestRealKernelA (1.50s)\n" +
		"kernel612: PASS TestRealKernelB/IPv4 (1.00s)\n" +
		"kernel612: PASS TestRealKernelB/IPv6 (2.00s)\n" +
		"kernel612: 2 passed, 1 failed\n"
	if got != want || ok {
		t.Errorf("report (ok=%v):\n%s\nwant (ok=false):\n%s", ok, got, want)
	}
}

func TestReportFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		console, closing, note string
	}{
		"failed case": {
			console: strings.Replace(strings.Replace(consoleOK, "--- PASS: TestRealKernelB/IPv6", "--- FAIL: TestRealKernelB/IPv6", 1), "EXIT 0", "EXIT 1", 1),
			closing: "kernel61: 2 passed, 1 failed", note: "exited with code 1",
		},
		"no exit line (timeout)": {
			console: consoleOK[:strings.Index(consoleOK, "PASS\r\n")],
			closing: "kernel61: 3 passed, 0 failed", note: "did not finish",
		},
		"skipped case": {
			console: strings.Replace(consoleOK, "--- PASS: TestRealKernelA (1.50s)", "--- SKIP: TestRealKernelA (0.00s)", 1),
			closing: "kernel61: 2 passed, 1 failed", note: "SKIP TestRealKernelA",
		},
		"nothing ran": {
			console: "KERNEL-UNAME 6.1.0-48-amd64\nKERNEL-EXIT 0\n",
			closing: "kernel61: 0 passed, 0 failed", note: "no test ran",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := reportOf(t, tc.console)
			if ok {
				t.Errorf("the run passed:\n%s", got)
			}
			if !strings.HasSuffix(got, tc.closing+"\n") || !strings.Contains(got, tc.note) {
				t.Errorf("report:\n%s\nwant it to mention %q and end with %q", got, tc.note, tc.closing)
			}
		})
	}
}

func TestParseMarkersAmidKernelMessages(t *testing.T) {
	r, err := parseConsole(strings.NewReader("[ 1.0] random: crng init done\rKERNEL-UNAME 6.1.0-48-amd64\r\nKERNEL-EXIT 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Uname != "6.1.0-48-amd64" || !r.Exited || r.Exit != 3 {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parseConsole(strings.NewReader("KERNEL-EXIT x\n")); err == nil {
		t.Error("a bad exit line parsed")
	}
}
