package kpconformance

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment set by build/conformance.sh.
const (
	envPatched  = "KPCONF_PATCHED"  // the patched kube-proxy
	envUpstream = "KPCONF_UPSTREAM" // the pristine upstream kube-proxy
	envLogs     = "KPCONF_LOGS"     // the folder for every component's log; it survives failure
	envReport   = "KPCONF_REPORT"   // the file the side-by-side report is written to
	// envOnly, set to "handover", runs only the handover between the two binaries (for
	// developers; make test runs everything).
	envOnly = "KPCONF_ONLY"
	// envPrefix and envAPINet, for a second binary built from the harness: the prefix of every
	// name it creates, and the root namespace's /30 towards the node (see topology_test.go).
	envPrefix = "KPCONF_PREFIX"
	envAPINet = "KPCONF_API_NET"
)

// envOr returns environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var (
	runningMu sync.Mutex
	running   *kubeProxy // the kube-proxy that an interrupt must stop
)

// setRunning records the kube-proxy that is running now (nil for none).
func setRunning(kp *kubeProxy) {
	runningMu.Lock()
	running = kp
	runningMu.Unlock()
}

// TestMain removes leftovers of an interrupted run before and after the tests, and on SIGINT or
// SIGTERM stops kube-proxy and removes the world before exiting.
func TestMain(m *testing.M) {
	cleanLeftovers()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "kpconformance: %v: cleaning up\n", s)
		runningMu.Lock()
		running.stop()
		runningMu.Unlock()
		cleanLeftovers()
		os.Exit(130)
	}()
	code := m.Run()
	cleanLeftovers()
	os.Exit(code)
}

// TestConformance builds the world, runs every case under each proxy, family and phase, the
// repair, dual-stack and load checks, and writes the side-by-side report.
func TestConformance(t *testing.T) {
	env := harnessEnv(t, "build/conformance.sh", envPatched, envUpstream, envLogs)
	patchedBin, upstreamBin, logDir := env[0], env[1], env[2]
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	work := t.TempDir()

	api, kubeconfig, stopWorld := startWorld(t, work, logDir)
	defer stopWorld()
	for _, p := range pods {
		stop, err := startEchoServers(p)
		if err != nil {
			t.Fatalf("echo servers in %s: %v", p.name, err)
		}
		defer stop()
	}
	progress("world ready: etcd %s, kube-apiserver (forwarded) %s", api.etcdURL, api.url)

	rep := newReport()
	w := &world{c: api.client}
	proxies := []proxyUnderTest{
		{name: "patched", bin: patchedBin, patched: true, extra: patchedSchedule},
		{name: "upstream", bin: upstreamBin},
	}
	for _, p := range proxies {
		if os.Getenv(envOnly) == "handover" {
			break
		}
		r := &runner{w: w, p: p, kubeconfig: kubeconfig, logDir: logDir, rep: rep}
		for _, f := range []family{v4, v6} {
			r.variant(ctx, f)
		}
		r.dualStack(ctx)
		if p.patched {
			for _, f := range []family{v4, v6} {
				r.load(ctx, f)
			}
		}
	}

	// Upgrade and rollback between the two binaries, on one table.
	for _, f := range []family{v4, v6} {
		handover(ctx, w, proxies[1], proxies[0], kubeconfig, logDir, rep, f)
	}

	if err := rep.write(os.Getenv(envReport)); err != nil {
		t.Error(err)
	}
	if !rep.ok() {
		t.Fail()
	}
}

// harnessEnv returns the values of the environment variables names, and skips t when one is
// unset (the test runs only through script, which sets them); it fails t unless it runs as root.
func harnessEnv(t *testing.T, script string, names ...string) []string {
	vals := make([]string, len(names))
	for i, n := range names {
		if vals[i] = os.Getenv(n); vals[i] == "" {
			t.Skipf("run through %s (%s unset)", script, n)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it creates network namespaces")
	}
	return vals
}

// startWorld starts etcd (its data under work, its log in logDir), builds the topology, starts
// kube-apiserver (with apiFlags added) and writes kube-proxy's kubeconfig under work. It fails
// t on any error; stop tears down the API server and etcd.
func startWorld(t *testing.T, work, logDir string, apiFlags ...string) (api *apiServer, kubeconfig string, stop func()) {
	etcdURL, stopEtcd, err := startEtcd(filepath.Join(work, "etcd"), logDir)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	if err := buildTopology(); err != nil {
		stopEtcd()
		t.Fatalf("topology: %v", err)
	}
	api, err = startAPIServer(t, etcdURL, work, apiFlags...)
	if err != nil {
		stopEtcd()
		t.Fatalf("kube-apiserver: %v", err)
	}
	api.etcdURL = etcdURL
	stop = func() { api.teardown(); stopEtcd() }
	kubeconfig = filepath.Join(work, "kube-proxy.kubeconfig")
	if err := writeKubeconfig(kubeconfig, api.url); err != nil {
		stop()
		t.Fatal(err)
	}
	return api, kubeconfig, stop
}

// progress prints one line of progress, with the time, to stdout.
func progress(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}
