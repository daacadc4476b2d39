package kpconformance

import (
	"context"
	"fmt"
	"time"
)

// patchedSchedule are the patched build's flags in every run: a periodic full sync every few
// seconds, at fixed times (no jitter), and transactions small enough that every full sync is
// split into many.
var patchedSchedule = []string{
	"--full-sync-period=8s",
	"--full-sync-jitter-percent=0",
	"--max-sync-transaction-size=20",
}

// fullSyncTimeout bounds the wait for the next periodic full sync of the patched build.
const fullSyncTimeout = 60 * time.Second

// runner runs the cases against one kube-proxy binary.
type runner struct {
	w          *world
	p          proxyUnderTest
	kubeconfig string
	logDir     string
	rep        *report
	kp         *kubeProxy
}

// start (re)starts kube-proxy for families fams, stopping the running one first.
func (r *runner) start(ctx context.Context, fams []family, extra ...string) error {
	r.stop()
	if err := ensureNode(ctx, r.w.c, fams); err != nil {
		return err
	}
	kp, err := startKubeProxy(ctx, r.p, fams, r.kubeconfig, r.logDir, extra...)
	if err != nil {
		return err
	}
	r.kp = kp
	setRunning(kp)
	return nil
}

// stop stops the running kube-proxy, if any.
func (r *runner) stop() {
	if r.kp != nil {
		setRunning(nil)
		r.kp.stop()
		r.kp = nil
	}
}

// resetTables deletes kube-proxy's tables in the node namespace, so that each variant starts
// from an empty ruleset.
func resetTables() {
	for _, fam := range []string{"ip", "ip6"} {
		_, _ = nsExec(nodeNS, "nft", "delete", "table", fam, "kube-proxy")
	}
}

// fullSync makes the rules go through a full sync: for the patched build the next periodic one,
// for upstream (whose period is an hour) a restart stands in.
func (r *runner) fullSync(ctx context.Context, fams []family) error {
	if r.p.patched {
		return waitFullSyncs(ctx, fams[0], 1, fullSyncTimeout)
	}
	return r.start(ctx, fams)
}

// runCases runs every case under family f, recording each under phase.
func (r *runner) runCases(ctx context.Context, f family, phase string) {
	for _, c := range cases {
		start := time.Now()
		err := c.run(ctx, r.w, f)
		r.rep.record(f.name, phase, c.name, r.p.name, err, time.Since(start))
	}
}

// variant runs the cases for single-stack family f: on a fresh start, after a restart over the
// existing rules, and after a full sync; then the repair check.
func (r *runner) variant(ctx context.Context, f family) {
	fams := []family{f}
	resetTables()
	phases := []struct {
		name string
		prep func() error
	}{
		{"fresh", func() error { return r.start(ctx, fams) }},
		{"restart", func() error { return r.start(ctx, fams) }},
		{"fullsync", func() error { return r.fullSync(ctx, fams) }},
	}
	for _, ph := range phases {
		if err := ph.prep(); err != nil {
			for _, c := range cases {
				r.rep.record(f.name, ph.name, c.name, r.p.name, fmt.Errorf("%s: %w", ph.name, err), 0)
			}
			continue
		}
		r.runCases(ctx, f, ph.name)
	}
	start := time.Now()
	err := r.repair(ctx, f)
	r.rep.record(f.name, "repair", "rule-and-map-element", r.p.name, err, time.Since(start))
	r.stop()
}

// dualStack runs kube-proxy dual-stack and checks one Service with IPv4 and IPv6 ClusterIPs,
// reached over both families.
func (r *runner) dualStack(ctx context.Context) {
	resetTables()
	start := time.Now()
	err := r.start(ctx, []family{v4, v6})
	if err == nil {
		err = caseDualStack(ctx, r.w)
	}
	r.rep.record("dual", "fresh", "dual-stack-service", r.p.name, err, time.Since(start))
	r.stop()
}

// caseDualStack checks a RequireDualStack Service over both of its ClusterIPs.
func caseDualStack(ctx context.Context, w *world) error {
	s, err := w.service(ctx, "dual", []family{v4, v6}, []svcPort{tcp80, udp53}, []endpoint{up(pods[0]), up(pods[1])})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	for _, f := range []family{v4, v6} {
		ip, err := clusterIP(s, f)
		if err != nil {
			return err
		}
		if err := expectPods(ctx, fromClient(f, "tcp", ip, 80), 20, 8080, pods[:2], pods[:2], nil); err != nil {
			return err
		}
		if err := expectPods(ctx, fromClient(f, "udp", ip, 53), 20, 8080, pods[:2], pods[:2], nil); err != nil {
			return err
		}
	}
	return nil
}
