package main

import (
	"strings"
	"testing"
)

func ev(action, pkg, test, out string) string {
	s := `{"Action":"` + action + `","Package":"` + pkg + `"`
	if test != "" {
		s += `,"Test":"` + test + `"`
	}
	if out != "" {
		s += `,"Output":` + quote(out)
	}
	return s + "}\n"
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `"`, `\"`), "\n", `\n`) + `"`
}

func TestSummarizeCountsAndFailures(t *testing.T) {
	in := ev("run", "k8s.io/kubernetes/pkg/proxy/fullsync", "TestA", "") +
		ev("output", "k8s.io/kubernetes/pkg/proxy/fullsync", "TestA", "fine\n") +
		ev("pass", "k8s.io/kubernetes/pkg/proxy/fullsync", "TestA", "") +
		ev("skip", "k8s.io/kubernetes/pkg/proxy/fullsync", "TestB", "") +
		ev("pass", "k8s.io/kubernetes/pkg/proxy/fullsync", "", "") +
		ev("output", "k8s.io/kubernetes/pkg/proxy/nftables", "TestC", "boom: want 1 got 2\n") +
		ev("fail", "k8s.io/kubernetes/pkg/proxy/nftables", "TestC", "") +
		ev("fail", "k8s.io/kubernetes/pkg/proxy/nftables", "", "") +
		ev("pass", "k8s.io/kubernetes/pkg/proxy/empty", "", "") +
		"# some build error line\n"
	var out strings.Builder
	failed, err := summarize(strings.NewReader(in), &out, []string{"overlay=k8s.io/kubernetes/pkg/proxy/fullsync", "upstream=k8s.io/kubernetes/"})
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Errorf("a failed test must fail the run")
	}
	got := out.String()
	for _, want := range []string{
		"--- FAIL: k8s.io/kubernetes/pkg/proxy/nftables.TestC\n    boom: want 1 got 2\n",
		"# some build error line\n",
		"overlay:   packages: 1 ok, 0 failed, 0 without tests; tests: 1 passed, 0 failed, 1 skipped\n",
		"upstream:  packages: 0 ok, 1 failed, 1 without tests; tests: 0 passed, 1 failed, 0 skipped\n",
		"  failed: k8s.io/kubernetes/pkg/proxy/nftables.TestC\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "\n1 passed, 1 failed, 1 skipped\n") {
		t.Errorf("last line is not the plain summary:\n%s", got)
	}
	if strings.Contains(got, "fine") {
		t.Errorf("output of passing tests must not be echoed:\n%s", got)
	}
}

func TestSummarizeNoTestsIsAFailure(t *testing.T) {
	in := ev("pass", "k8s.io/kubernetes/pkg/proxy/empty", "", "")
	var out strings.Builder
	failed, err := summarize(strings.NewReader(in), &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Errorf("a run in which no test ran must fail")
	}
}

func TestSummarizeRejectsBadGroup(t *testing.T) {
	if _, err := summarize(strings.NewReader(""), &strings.Builder{}, []string{"nogroup"}); err == nil {
		t.Errorf("want an error for a -group without '='")
	}
}
