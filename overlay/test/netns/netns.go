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

// Package netns creates, enters and removes the named network namespaces (those `ip netns`
// keeps under /run/netns) of the tests and benchmarks that program the real kernel:
// kube-proxy's real-kernel tests in pkg/proxy/nftables, and the conformance harness and
// benchmarks that lay this package into their copies of the tree. It runs `ip` (iproute2) to
// create and remove a namespace, and setns(2) to run Go code inside one. It needs root.
package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where `ip netns` keeps the named network namespaces.
const Dir = "/run/netns"

// Add creates the network namespace name, with its loopback link up. It fails if a namespace
// of that name exists, and then changes nothing.
func Add(name string) error {
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	if err := ip("-n", name, "link", "set", "lo", "up"); err != nil {
		return errors.Join(err, Delete(name))
	}
	return nil
}

// Delete kills every process that runs in the network namespace name (other than this one)
// and removes the namespace. A namespace that does not exist is not an error.
func Delete(name string) error {
	if _, err := os.Stat(filepath.Join(Dir, name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
		for _, field := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(field); err == nil && pid > 1 && pid != os.Getpid() {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	return ip("netns", "delete", name)
}

// Sweep deletes, as Delete does, every network namespace for whose name leftOver is true,
// and returns the names it deleted and the errors of those it could not.
func Sweep(leftOver func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no namespace yet
	}
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, e := range entries {
		if !leftOver(e.Name()) {
			continue
		}
		if err := Delete(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, e.Name())
	}
	return deleted, errors.Join(errs...)
}

// ProcessGone reports whether no process has the ID pid: a namespace named after the process
// that made it is left over once that process is gone (killed by a timeout, or panicked, it
// ran no clean-up).
func ProcessGone(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return errors.Is(err, fs.ErrNotExist)
}

// Do runs fn on an OS thread that has entered the network namespace name, and returns fn's
// error, or why it could not enter. The sockets fn opens belong to that namespace and keep it
// after fn returns. The thread then returns to its own namespace; if it cannot, no goroutine
// runs on it again (its goroutine ends locked to it, and Go discards the thread).
func Do(name string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer func() { _ = own.Close() }()
		target, err := os.Open(filepath.Join(Dir, name))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace %s: %w", name, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(fnErr, fmt.Errorf("leaving network namespace %s: %w", name, err))
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// ip runs ip with args; its error names the command and holds ip's output.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
