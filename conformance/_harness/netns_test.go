package kpconformance

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
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
	out, _ := run("ip", "netns", "list")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		killNetnsPids(f[0])
		_, _ = run("ip", "netns", "delete", f[0])
	}
	out, _ = run("ip", "-o", "link", "show")
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

// killNetnsPids sends SIGKILL to every process that runs in network namespace ns.
func killNetnsPids(ns string) {
	out, _ := run("ip", "netns", "pids", ns)
	for _, p := range strings.Fields(out) {
		var pid int
		if _, err := fmt.Sscanf(p, "%d", &pid); err == nil && pid > 1 && pid != os.Getpid() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// inNetns runs fn on a locked OS thread that has joined network namespace ns; sockets that fn
// creates stay in ns after it returns. The thread returns to the original namespace before it is
// unlocked; if it cannot, the thread is left locked so that the runtime discards it.
func inNetns(ns string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns back from %s: %w (thread discarded)", ns, err)
	}
	runtime.UnlockOSThread()
	return ferr
}
