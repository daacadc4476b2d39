package kpconformance

import (
	"fmt"
	"os/exec"
	"strings"

	"k8s.io/kubernetes/test/netns"
)

// prefix starts the name of every network namespace, link and table the harness creates, so that
// leftovers of an interrupted run can be found and removed. KPCONF_PREFIX replaces it, so that
// another binary built from the harness (make bench-e2e) neither meets nor removes this one's.
var prefix = envOr(envPrefix, "kpc-")

// run runs a command and returns its combined output; the error names the command and holds the
// output.
func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// sh runs each command line (split on spaces) in order and stops at the first error.
func sh(lines ...string) error {
	for _, l := range lines {
		f := strings.Fields(l)
		if _, err := run(f[0], f[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// nsExec runs a command in network namespace ns.
func nsExec(ns string, args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// cleanLeftovers kills every process in, and deletes, each network namespace whose name starts
// with prefix, and deletes root-namespace links with the prefix. It is safe to call at any time
// and reports nothing when there is nothing to remove.
func cleanLeftovers() {
	_, _ = netns.Sweep(func(name string) bool { return strings.HasPrefix(name, prefix) })
	out, _ := run("ip", "-o", "link", "show")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		if strings.HasPrefix(name, prefix) {
			_, _ = run("ip", "link", "delete", name)
		}
	}
}
