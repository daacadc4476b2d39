/*
Copyright 2026 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package netns

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// needRoot skips the test without root and ip, unless KUBE_PROXY_OVERLAY_REAL_KERNEL=required
// (as in make test), which makes them a failure instead.
func needRoot(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "needs ip (iproute2)"
	}
	if why == "" {
		return
	}
	if os.Getenv("KUBE_PROXY_OVERLAY_REAL_KERNEL") == "required" {
		t.Fatalf("cannot run: %s", why)
	}
	t.Skip(why)
}

// ownNetns returns the identity of the calling thread's network namespace.
func ownNetns(t *testing.T) string {
	t.Helper()
	id, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestAddDoDelete(t *testing.T) {
	needRoot(t)
	name := fmt.Sprintf("kpo-netns-%d", os.Getpid())
	if err := Add(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(name) })
	if err := Add(name); err == nil {
		t.Error("adding a namespace that exists succeeded")
	}

	outside := ownNetns(t)
	var inside string
	var links []net.Interface
	err := Do(name, func() error {
		inside = ownNetns(t)
		var err error
		links, err = net.Interfaces()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside == outside {
		t.Errorf("Do ran in the caller's namespace %s", outside)
	}
	if len(links) != 1 || links[0].Name != "lo" || links[0].Flags&net.FlagUp == 0 {
		t.Errorf("links of a new namespace %+v, want lo alone, up", links)
	}
	if got := ownNetns(t); got != outside {
		t.Errorf("after Do the caller is in %s, want %s", got, outside)
	}
	if err := Do(name, func() error { return fmt.Errorf("failed inside") }); err == nil || !strings.Contains(err.Error(), "failed inside") {
		t.Errorf("Do returned %v, want fn's error", err)
	}

	// A process in the namespace is killed with it.
	sleeper := exec.Command("ip", "netns", "exec", name, "sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Wait(); err == nil {
		t.Error("the process in the deleted namespace ended by itself")
	}
	if _, err := os.Stat(filepath.Join(Dir, name)); err == nil {
		t.Errorf("namespace %s is still there", name)
	}
	if err := Delete(name); err != nil {
		t.Errorf("deleting a namespace that is gone: %v", err)
	}
	if err := Do(name, func() error { return nil }); err == nil {
		t.Error("Do entered a namespace that is gone")
	}
}

func TestSweep(t *testing.T) {
	needRoot(t)
	stale := fmt.Sprintf("kpo-netns-sweep-%d-stale", os.Getpid())
	kept := fmt.Sprintf("kpo-netns-sweep-%d-kept", os.Getpid())
	for _, name := range []string{stale, kept} {
		if err := Add(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = Delete(name) })
	}
	deleted, err := Sweep(func(name string) bool { return name == stale })
	if err != nil || !slices.Equal(deleted, []string{stale}) {
		t.Errorf("Sweep deleted %v (err %v), want [%s]", deleted, err, stale)
	}
	for name, want := range map[string]bool{stale: false, kept: true} {
		if _, err := os.Stat(filepath.Join(Dir, name)); (err == nil) != want {
			t.Errorf("namespace %s present after the sweep: %v, want %v", name, err == nil, want)
		}
	}
}

func TestProcessGone(t *testing.T) {
	if ProcessGone(os.Getpid()) {
		t.Error("this process is gone")
	}
	// Past the kernel's largest pid_max.
	if !ProcessGone(1<<22 + 1) {
		t.Error("a pid past pid_max is running")
	}
}
