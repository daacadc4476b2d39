package kpconformance

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// loadSchedule are the patched build's flags during the load check (after patchedSchedule, so
// they win): a full sync every 3 seconds that re-writes every chain, in transactions of at most
// 10 operations.
var loadSchedule = []string{
	"--full-sync-period=3s",
	"--full-sync-rewrite-all=true",
	"--max-sync-transaction-size=10",
}

const (
	loadFillers   = 30 // Services besides the target, so that each full sync has many transactions
	loadFullSyncs = 4  // full syncs the load runs through
)

// loadCounts are the load check's connection counts.
type loadCounts struct{ attempted, failed, reset atomic.Int64 }

// count records one connection's outcome.
func (c *loadCounts) count(err error) {
	c.attempted.Add(1)
	switch {
	case err == nil:
	case isReset(err):
		c.reset.Add(1)
	default:
		c.failed.Add(1)
	}
}

// load keeps short and long TCP connections going to a ClusterIP of family f while the patched
// kube-proxy runs loadFullSyncs full syncs, each split into many transactions, and records the
// counts. Any failed or reset connection fails the check.
func (r *runner) load(ctx context.Context, f family) {
	start := time.Now()
	var counts loadCounts
	err := r.runLoad(ctx, f, &counts)
	a, fl, rs := counts.attempted.Load(), counts.failed.Load(), counts.reset.Load()
	if err == nil && (fl > 0 || rs > 0) {
		err = fmt.Errorf("%d of %d connections failed, %d reset", fl, a, rs)
	}
	r.rep.addLoad(a, fl, rs)
	r.rep.record(f.name, "load", fmt.Sprintf("load-%d-full-syncs", loadFullSyncs), r.p.name, err, time.Since(start))
	progress("load %s: attempted=%d failed=%d reset=%d", f.name, a, fl, rs)
	r.stop()
}

func (r *runner) runLoad(ctx context.Context, f family, counts *loadCounts) error {
	if err := r.start(ctx, []family{f}, loadSchedule...); err != nil {
		return err
	}
	for i := 0; i < loadFillers; i++ {
		s, err := r.w.service(ctx, "filler", []family{f}, []svcPort{tcp80, tcp81}, []endpoint{up(pods[0]), up(pods[1])})
		defer r.w.cleanup(s)
		if err != nil {
			return err
		}
	}
	s, err := r.w.service(ctx, "load", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[1]), up(pods[2])})
	defer r.w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	t := fromClient(f, "tcp", ip, 80)
	if err := expectPods(ctx, t, 10, 8080, pods, nil, nil); err != nil {
		return err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); shortConns(t, stop, counts) }()
		go func() { defer wg.Done(); longConns(t, stop, counts) }()
	}
	txBefore, err := metric("kubeproxy_sync_proxy_rules_nftables_transactions_sum", f)
	if err != nil {
		return err
	}
	syncsBefore, err := metric("kubeproxy_sync_proxy_rules_nftables_transactions_count", f)
	if err != nil {
		return err
	}
	err = waitFullSyncs(ctx, f, loadFullSyncs, 120*time.Second)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	// Show that the full syncs were split: transactions per sync during the load.
	txAfter, err := metric("kubeproxy_sync_proxy_rules_nftables_transactions_sum", f)
	if err != nil {
		return err
	}
	syncsAfter, err := metric("kubeproxy_sync_proxy_rules_nftables_transactions_count", f)
	if err != nil {
		return err
	}
	if syncs := syncsAfter - syncsBefore; syncs > 0 {
		progress("load %s: %d syncs ran %.0f nftables transactions (%.1f per sync)", f.name, int(syncs), txAfter-txBefore, (txAfter-txBefore)/syncs)
	}
	return nil
}

// shortConns opens one connection after another to t, each answered once, until stop.
func shortConns(t target, stop chan struct{}, counts *loadCounts) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		_, err := probe(t.from, t.proto, t.src, t.host, t.port)
		counts.count(err)
	}
}

// longConns keeps one connection to t open and exchanges a message every 20ms until stop; a
// connection that breaks is counted and replaced.
func longConns(t target, stop chan struct{}, counts *loadCounts) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		counts.count(longConn(t, stop))
	}
}

// longConn runs one long connection until stop (nil) or until it breaks (the error).
func longConn(t target, stop chan struct{}) error {
	c, err := dialFrom(t.from, t.proto, t.src, t.host, t.port)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 512)
	_ = c.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := c.Read(buf); err != nil { // the greeting
		return err
	}
	for {
		select {
		case <-stop:
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		_ = c.SetDeadline(time.Now().Add(probeTimeout))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		if err := readFull(c, buf[:5]); err != nil {
			return err
		}
	}
}

// readFull reads exactly len(b) bytes.
func readFull(c net.Conn, b []byte) error {
	for n := 0; n < len(b); {
		m, err := c.Read(b[n:])
		if err != nil {
			return err
		}
		n += m
	}
	return nil
}
