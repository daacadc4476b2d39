package kpconformance

// The end-to-end benchmark (make bench-e2e; bench/e2e/README.md). build/bench-e2e.sh lays these
// files into test/kpconformance beside the conformance harness, whose world (etcd, the
// kube-apiserver, the node namespace, kube-proxy's start and metrics) they reuse, and the pure
// parts into test/kpe2e.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kpe2e "k8s.io/kubernetes/test/kpe2e"
	"k8s.io/kubernetes/test/netns"
	"k8s.io/kubernetes/test/rtnlprobe"
)

// Environment set by build/bench-e2e.sh (besides the parameters of kpe2e.ParseParams).
const (
	envE2EPatched  = "KPE2E_PATCHED"  // the patched kube-proxy
	envE2EUpstream = "KPE2E_UPSTREAM" // the pristine upstream kube-proxy
	envE2EOut      = "KPE2E_OUT"      // the run's folder: logs, profiles
)

// nodePortRange leaves room for the node ports of every Service at the largest sizes.
const nodePortRange = "20000-62000"

// TestBenchE2E loads the API server with each size's Services in turn and runs the patched and
// upstream binaries one after the other on the same contents, each in a fresh node namespace,
// then prints one table per size and the closing lines.
func TestBenchE2E(t *testing.T) {
	env := harnessEnv(t, "build/bench-e2e.sh", envE2EPatched, envE2EUpstream, envE2EOut)
	patchedBin, upstreamBin, out := env[0], env[1], env[2]
	params, err := kpe2e.ParseParams(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	work := t.TempDir()
	api, kubeconfig, stopWorld := startWorld(t, work, out, "--service-node-port-range="+nodePortRange)
	defer stopWorld()
	// The loader's own client: client-go's default of 5 requests a second would make the
	// client, not the API server, set the pace.
	cfg := rest.CopyConfig(api.config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	probe, err := startProbe()
	if err != nil {
		t.Fatalf("RTNL probe: %v", err)
	}
	defer probe.stop()

	fams := familiesFor(params.Family)
	progress("bench-e2e: sizes %v, family %s, %d endpoints per Service, %d%% affinity, %d%% with node ports; churn %d/s for %ds; patched --full-sync-period=%v; upstream up to %d",
		params.Sizes, params.Family, params.Endpoints, params.AffinityPercent, params.NodePortPercent,
		params.ChurnRate, params.ChurnSeconds, params.FullSyncPeriod, params.UpstreamMax)
	proxies := []proxyUnderTest{
		{name: kpe2e.Patched, bin: patchedBin, patched: true, extra: []string{
			"--full-sync-period=" + params.FullSyncPeriod.String(), "--full-sync-jitter-percent=0", "--profiling=true"}},
		{name: kpe2e.Upstream, bin: upstreamBin, extra: []string{"--profiling=true"}},
	}
	var runs []kpe2e.Run
	loaded := 0
	for _, size := range params.Sizes {
		n := kpe2e.Services(size)
		if err := loadServices(ctx, c, params, loaded, n); err != nil {
			t.Fatalf("loading %d Services: %v", n, err)
		}
		loaded = n
		for _, p := range proxies {
			if p.name == kpe2e.Upstream && size > params.UpstreamMax {
				runs = append(runs, kpe2e.Run{Binary: p.name, Size: size,
					Skipped: fmt.Sprintf("above UPSTREAM_MAX=%d (its first sync there takes many minutes); nothing is extrapolated", params.UpstreamMax)})
				continue
			}
			b := &benchRun{c: c, p: p, params: params, size: size, fams: fams, kubeconfig: kubeconfig, out: out, probe: probe}
			r := b.run(ctx)
			if r.Err != "" {
				progress("%s at %d: FAILED: %s", p.name, size, r.Err)
			}
			runs = append(runs, r)
		}
		fmt.Println(strings.Join(kpe2e.Table(size, runs), "\n"))
	}
	fmt.Println()
	for _, size := range params.Sizes {
		fmt.Println(strings.Join(kpe2e.Table(size, runs), "\n"))
		fmt.Println()
	}
	for _, size := range params.Sizes {
		fmt.Println(strings.Join(kpe2e.ClosingLines(size, runs), "\n"))
	}
	for _, r := range runs {
		if r.Err != "" {
			t.Errorf("%s at %d: %s", r.Binary, r.Size, r.Err)
		}
	}
}

// familiesFor returns the harness families of a cluster family, the primary first.
func familiesFor(clusterFamily string) []family {
	switch clusterFamily {
	case kpe2e.FamilyIPv4:
		return []family{v4}
	case kpe2e.FamilyIPv6:
		return []family{v6}
	}
	return []family{v4, v6}
}

// freshNode deletes the world's namespaces and the root end of the node's link to the API server
// (explicitly: the probe may hold the old node namespace open), and builds them again, so that
// each binary starts in a new node namespace. The forwarder's listener stays bound to apiRootV4
// across it.
func freshNode() error {
	if _, err := run("ip", "link", "delete", prefix+"api"); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		return err
	}
	for _, n := range worldNamespaces() {
		if err := netns.Delete(n); err != nil {
			return err
		}
	}
	return buildTopology()
}

// timeout bounds a wait that grows with the size: base plus per per 1000 service ports.
func timeout(size int, base, per time.Duration) time.Duration {
	return base + time.Duration(size/1000)*per
}

// rtnlProbe is the RTNL probe (test/rtnlprobe) in a namespace of its own, with the operations it
// timed.
type rtnlProbe struct {
	own  *rtnlprobe.NS
	p    *rtnlprobe.Prober
	ops  opLog
	kept []*rtnlprobe.NS // targets, closed only once the probe has stopped
}

// keep holds target open until the probe stops.
func (r *rtnlProbe) keep(target *rtnlprobe.NS) { r.kept = append(r.kept, target) }

// startProbe creates the probe's namespace and starts the probe with no target.
func startProbe() (*rtnlProbe, error) {
	ns := prefix + "rtnl"
	if err := netns.Add(ns); err != nil {
		return nil, err
	}
	own, err := rtnlprobe.Open(ns)
	if err != nil {
		return nil, err
	}
	r := &rtnlProbe{own: own}
	r.p = rtnlprobe.New(own, 50*time.Millisecond, r.ops.add)
	r.p.Start()
	return r, nil
}

// stop ends the probe; its namespace goes with the harness's leftovers.
func (r *rtnlProbe) stop() {
	r.p.Stop()
	r.own.Close()
	for _, t := range r.kept {
		t.Close()
	}
}
