package kpconformance

import (
	"context"
	"fmt"
	"regexp"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// handover hands the node's table between the two binaries, both ways, for family f, while
// Services stand: upstream's binary writes it; the patched build takes it over (an upgrade) as
// one Service's external traffic policy moves from Local to Cluster; upstream's binary takes it
// back (a rollback). After each start the standing Services answer as they should, the patched
// build's syncs have not failed, and after the rollback the table holds nothing that only the
// patched build writes. The results are recorded as the patched build's.
func handover(ctx context.Context, w *world, upstream, patched proxyUnderTest, kubeconfig, logDir string, rep *report, f family) {
	resetTables()
	steps := []string{"upgrade", "rollback"}
	errs := map[string]error{}
	start := time.Now()
	defer func() {
		for _, step := range steps {
			rep.record(f.name, "handover", step, patched.name, errs[step], time.Since(start))
		}
	}()
	fail := func(err error) {
		for _, step := range steps {
			if errs[step] == nil {
				errs[step] = err
			}
		}
	}
	fams := []family{f}
	if err := ensureNode(ctx, w.c, fams); err != nil {
		fail(err)
		return
	}
	affinity := func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }
	sticky, err := w.service(ctx, "ho-sticky", fams, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[1]), up(pods[2])}, affinity)
	defer w.cleanup(sticky)
	if err != nil {
		fail(err)
		return
	}
	local, err := w.service(ctx, "ho-local", fams, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[2])}, affinity,
		func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		})
	defer w.cleanup(local)
	if err != nil {
		fail(err)
		return
	}
	stickyIP, err := clusterIP(sticky, f)
	if err != nil {
		fail(err)
		return
	}
	// standing checks the standing Services' traffic: the sticky one sticks; the node port
	// (sticky too) reaches only the node's own endpoint with the client's address preserved
	// (policy Local), or either endpoint with the client's address masqueraded (Cluster).
	standing := func(step string, localPolicy bool) error {
		if err := expectSticky(ctx, fromClient(f, "tcp", stickyIP, 80), 10); err != nil {
			return fmt.Errorf("%s: %s: %w", step, sticky.Name, err)
		}
		np := fromClient(f, "tcp", f.nodeIP, local.Spec.Ports[0].NodePort)
		var err error
		if localPolicy {
			err = expectPods(ctx, np, 20, 8080, pods[:1], pods[:1], func(r reply) error {
				if r.peer != f.clientIP {
					return fmt.Errorf("peer %s: want the client's own %s (policy Local)", r.peer, f.clientIP)
				}
				return nil
			})
		} else {
			err = expectPods(ctx, np, 20, 8080, []pod{pods[0], pods[2]}, nil, func(r reply) error {
				if r.peer == f.clientIP {
					return fmt.Errorf("peer %s: client address not masqueraded (policy Cluster)", r.peer)
				}
				return nil
			})
			if err == nil {
				err = expectSticky(ctx, np, 10)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %s: %w", step, local.Name, err)
		}
		return nil
	}
	// run starts p's kube-proxy and waits for its first successful sync: healthz can answer
	// before it, and until then the table is still the other binary's.
	run := func(p proxyUnderTest) (*kubeProxy, error) {
		kp, err := startKubeProxy(ctx, p, fams, kubeconfig, logDir)
		if err != nil {
			return nil, err
		}
		if err := waitSynced(ctx, f); err != nil {
			return kp, fmt.Errorf("%s kube-proxy: %w", p.name, err)
		}
		return kp, nil
	}

	// Upstream writes the table.
	kp, err := run(upstream)
	if err == nil {
		err = standing("upstream before the upgrade", true)
	}
	if kp != nil {
		kp.stop()
	}
	if err != nil {
		fail(err)
		return
	}

	// The upgrade, as the Service's policy becomes Cluster.
	local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	local.Spec.HealthCheckNodePort = 0
	if local, err = w.c.CoreV1().Services(ns).Update(ctx, local, metav1.UpdateOptions{}); err != nil {
		fail(err)
		return
	}
	kp, err = run(patched)
	if err == nil {
		err = standing("patched after the upgrade", false)
	}
	if err == nil {
		err = noSyncFailures(f)
	}
	if kp != nil {
		kp.stop()
	}
	errs["upgrade"] = err

	// The rollback.
	kp, err = run(upstream)
	if err == nil {
		err = standing("upstream after the rollback", false)
	}
	if err == nil {
		err = nothingOfPatched(f)
	}
	if kp != nil {
		kp.stop()
	}
	errs["rollback"] = err
}

// waitSynced waits until the running kube-proxy has completed a sync of family f
// successfully (a sync that fails sets no last-sync timestamp).
func waitSynced(ctx context.Context, f family) error {
	return poll(ctx, 60*time.Second, func() error {
		ts, found, err := metricSum("kubeproxy_sync_proxy_rules_last_timestamp_seconds", f)
		if err != nil {
			return err
		}
		if !found || ts == 0 {
			return fmt.Errorf("no successful %s sync yet", f.name)
		}
		return nil
	})
}

// noSyncFailures checks that the running kube-proxy counted no failed nftables sync.
func noSyncFailures(f family) error {
	n, _, err := metricSum("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", f)
	if err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("%v failed nftables syncs", n)
	}
	return nil
}

// patchedOnly matches what only the patched build writes in kube-proxy's table: its shared
// affinity set (under either name), and the constant "numgen random mod 1" terms of the rules
// that use it.
var patchedOnly = regexp.MustCompile(`affinity-clients|client-affinity|numgen random mod 1 (offset|\.|@)`)

// nothingOfPatched checks that kube-proxy's table for f holds nothing that only the patched
// build writes.
func nothingOfPatched(f family) error {
	out, err := nsExec(nodeNS, "nft", "list", "table", nftFamily(f), "kube-proxy")
	if err != nil {
		return err
	}
	if m := patchedOnly.FindString(out); m != "" {
		return fmt.Errorf("after the rollback, the table still holds %q:\n%s", m, out)
	}
	return nil
}
