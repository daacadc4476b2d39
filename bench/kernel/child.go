//go:build benchkernel

package main

// The child: one kube-proxy process (one proxier per family) inside the kube-proxy netns,
// driven through its public handlers. It prints one JSON event per phase on stdout; the
// orchestrator measures nft (through the shim's log) and RTNL around those windows.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	proxyconfigapi "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	"k8s.io/kubernetes/pkg/proxy/metaproxier"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
)

// proxierArgs are NewProxier's arguments that both trees share; the adapters add their own.
type proxierArgs struct {
	syncPeriod, minSyncPeriod time.Duration
	masqueradeAll             bool
	masqueradeBit             int
	localDetector             proxyutil.LocalTrafficDetector
	nodeName                  string
	nodeIP                    net.IP
	recorder                  events.EventRecorder
	healthz                   *healthcheck.ProxyHealthServer
	nodePortAddresses         []string
	slot                      time.Duration // > 0: periodic full syncs every slot, where the tree has a schedule
}

// childEvent is one phase as the child saw it.
type childEvent struct {
	Phase      string `json:"phase"`
	StartNS    int64  `json:"start_ns"`
	EndNS      int64  `json:"end_ns"`
	Kinds      string `json:"kinds,omitempty"`
	InternalNS int64  `json:"internal_ns,omitempty"`
	// NetlinkReadNS is the time the proxier's drift checks spent reading the table over
	// netlink (not an nft invocation, so not in the nft log).
	NetlinkReadNS int64  `json:"netlink_read_ns,omitempty"`
	Note          string `json:"note,omitempty"`
	Err           string `json:"err,omitempty"`
}

// syncCounts is the proxier's count of full and partial syncs, and their summed latency.
type syncCounts struct {
	full, partial uint64
	sum           float64
	netlinkRead   float64 // seconds
}

func readCounts(fams []string) map[string]syncCounts {
	m := map[string]syncCounts{}
	for _, f := range fams {
		l := string(ipFamilyOf(f))
		full, _ := testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesLatency.WithLabelValues(l))
		part, _ := testutil.GetHistogramMetricCount(metrics.SyncPartialProxyRulesLatency.WithLabelValues(l))
		sum, _ := testutil.GetHistogramMetricValue(metrics.SyncProxyRulesLatency.WithLabelValues(l))
		m[f] = syncCounts{full: full, partial: part, sum: sum, netlinkRead: netlinkReadSeconds(ipFamilyOf(f))}
	}
	return m
}

// netlinkReadNS returns the drift checks' netlink read time between two readings, summed over
// the families.
func netlinkReadNS(fams []string, before, after map[string]syncCounts) int64 {
	var s float64
	for _, f := range fams {
		s += after[f].netlinkRead - before[f].netlinkRead
	}
	return int64(s * 1e9)
}

// diffCounts describes the syncs between two readings: kinds like "full" or "full+partial"
// (one entry per family) and the proxier's own summed latency.
func diffCounts(fams []string, before, after map[string]syncCounts) (string, time.Duration, int, int) {
	var kinds []string
	var internal float64
	var nfull, npart int
	for _, f := range fams {
		b, a := before[f], after[f]
		df, dp := int(a.full-b.full), int(a.partial-b.partial)
		nfull += df
		npart += dp
		for range df {
			kinds = append(kinds, "full")
		}
		for range dp {
			kinds = append(kinds, "partial")
		}
		internal += a.sum - b.sum
	}
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	return strings.Join(kinds, "+"), time.Duration(internal * float64(time.Second)), nfull, npart
}

// waitSyncs polls until every family has completed at least one more sync than in before
// (a full one when wantFull) that started at or after since; it returns the time it noticed.
// A sync that was already running at since (the proxier cannot take a change in the middle
// of a sync; its runner queues another) does not count: it is recognised when even the
// latest possible start (now minus the sync's latency from the histogram) is before since;
// polling every 2 ms or less keeps the ambiguity to a sync that started within about 3 ms
// before since, and the partial phase first waits for the proxier to be quiet. A zero since
// takes any sync.
func waitSyncs(fams []string, before map[string]syncCounts, wantFull bool, since time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	poll := time.Millisecond
	last := before
	done := map[string]bool{}
	for {
		now := readCounts(fams)
		t := time.Now()
		all := true
		for _, f := range fams {
			if done[f] {
				continue
			}
			l, a := last[f], now[f]
			var grew bool
			if wantFull {
				grew = a.full > l.full
			} else {
				grew = a.full+a.partial > l.full+l.partial
			}
			if grew {
				n := (a.full + a.partial) - (l.full + l.partial)
				// The latest the sync can have started: its latency before now. (The
				// last-sync timestamp minus the latency would be earlier than the real
				// start by the work the proxier does after setting the timestamp.)
				started := t.Add(-time.Duration((a.sum - l.sum) * float64(time.Second)))
				if since.IsZero() || n > 1 || !started.Before(since.Add(-time.Millisecond)) {
					done[f] = true
				}
			}
			if !done[f] {
				all = false
			}
		}
		last = now
		if all {
			return t, nil
		}
		if t.After(deadline) {
			return t, fmt.Errorf("no sync after %v", timeout)
		}
		time.Sleep(poll)
		if poll < 2*time.Millisecond {
			poll += 100 * time.Microsecond
		}
	}
}

// settle waits until no sync has completed for quiet, or for at most limit.
func settle(fams []string, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	prev := readCounts(fams)
	for time.Now().Before(deadline) {
		time.Sleep(quiet)
		cur := readCounts(fams)
		same := true
		for _, f := range fams {
			if cur[f].full != prev[f].full || cur[f].partial != prev[f].partial {
				same = false
			}
		}
		if same {
			return
		}
		prev = cur
	}
}

func childMain(argv []string) int {
	fs := flag.NewFlagSet("child", flag.ExitOnError)
	shapeName := fs.String("shape", "ipv4", "shape")
	size := fs.Int("size", 1000, "service ports")
	mode := fs.String("mode", "first", "first: the start-up sync is cold; restart: it is a restart")
	doPartial := fs.Bool("partial", false, "after the start-up sync, measure a partial sync")
	doPeriodic := fs.Bool("periodic", false, "after the start-up sync (and partial), measure a periodic full sync, then exit")
	label := fs.String("label", "", "phase name of the start-up sync (default cold or restart)")
	slot := fs.Duration("slot", 30*time.Second, "periodic full-sync slot where the tree has a schedule")
	timeout := fs.Duration("timeout", 45*time.Minute, "limit for one asynchronous sync")
	verbosity := fs.String("v", "0", "klog verbosity")
	fs.Parse(argv)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("v", *verbosity)

	sh, ok := ShapeByName(*shapeName)
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown shape %q\n", *shapeName)
		return 2
	}
	enc := json.NewEncoder(os.Stdout)
	emit := func(ev childEvent) { _ = enc.Encode(ev) }
	fail := func(phase string, err error) int {
		emit(childEvent{Phase: phase, StartNS: time.Now().UnixNano(), EndNS: time.Now().UnixNano(), Err: err.Error()})
		fmt.Fprintf(os.Stderr, "child: %s: %v\n", phase, err)
		return 1
	}

	metrics.RegisterMetrics(proxyconfigapi.ProxyModeNFTables)
	objs := buildObjects(sh, *size)
	ctx := context.Background()

	startLabel := *label
	if startLabel == "" {
		startLabel = PhaseCold
		if *mode == "restart" {
			startLabel = PhaseRestart
		}
	}
	// Only a process that measures the periodic sync gets a schedule (every slot, no jitter,
	// no splay); the others have periodic full syncs disabled, so none can land inside
	// another phase. The process exits after its first periodic sync, so the schedule never
	// runs syncs back to back even when one outlasts the slot.
	s := time.Duration(0)
	if *doPeriodic {
		s = *slot
	}

	t0 := time.Now()
	var provs []proxy.Provider
	for _, fam := range sh.Families {
		a := proxierArgs{
			syncPeriod:    30 * time.Second,
			minSyncPeriod: 0, // a triggered sync runs at once, so that the wall time is the sync's
			masqueradeBit: 14,
			nodeName:      "bench-node",
			recorder:      &events.FakeRecorder{},
			slot:          s,
		}
		if fam == FamIPv6 {
			a.localDetector = proxyutil.NewDetectLocalByCIDR(PodCIDRv6)
			a.nodeIP = net.ParseIP(NodeIPv6)
		} else {
			a.localDetector = proxyutil.NewDetectLocalByCIDR(PodCIDRv4)
			a.nodeIP = net.ParseIP(NodeIPv4)
		}
		fmt.Fprintf(os.Stderr, "benchkernel child: %s tree, %s, options %s\n", adapterTree, fam, describeOptions(a))
		p, err := newSingleStack(ctx, ipFamilyOf(fam), a)
		if err != nil {
			return fail("init", err)
		}
		provs = append(provs, p)
	}
	prov := provs[0]
	if len(provs) == 2 {
		prov = metaproxier.NewMetaProxier(provs[0], provs[1])
	}
	emit(childEvent{Phase: "init", StartNS: t0.UnixNano(), EndNS: time.Now().UnixNano()})

	var cidrs []string
	for _, fam := range sh.Families {
		if fam == FamIPv6 {
			cidrs = append(cidrs, ServiceCIDRv6)
		} else {
			cidrs = append(cidrs, ServiceCIDRv4)
		}
	}
	prov.OnServiceCIDRsChanged(cidrs)
	go prov.SyncLoop()

	// Start-up: the informers' initial lists, then the synced calls; the last one syncs
	// synchronously, so the phase is exactly that call.
	for _, svc := range objs.services {
		prov.OnServiceAdd(svc)
	}
	for _, fam := range sh.Families {
		for _, sl := range objs.slices[fam] {
			prov.OnEndpointSliceAdd(sl)
		}
	}
	prov.OnServiceSynced()
	before := readCounts(sh.Families)
	start := time.Now()
	prov.OnEndpointSlicesSynced()
	end := time.Now()
	after := readCounts(sh.Families)
	kinds, internal, nfull, _ := diffCounts(sh.Families, before, after)
	ev := childEvent{Phase: startLabel, StartNS: start.UnixNano(), EndNS: end.UnixNano(), Kinds: kinds, InternalNS: int64(internal), NetlinkReadNS: netlinkReadNS(sh.Families, before, after)}
	if nfull != len(sh.Families) {
		ev.Err = "the start-up sync was not one full sync per family (did it fail? see the child log)"
	}
	emit(ev)
	if *doPartial {
		// Partial sync: one endpoint added to one service (per family). If a scheduled full
		// sync got in the way, try again with another service.
		// Let any sync still queued run first.
		settle(sh.Families, 300*time.Millisecond, 2*time.Minute)
		var last childEvent
		var notes []string
		for attempt := 0; attempt < 3; attempt++ {
			svc := attempt * 7 % len(objs.services)
			before = readCounts(sh.Families)
			start := time.Now()
			for _, fam := range sh.Families {
				old := objs.slices[fam][svc]
				nw := withExtraEndpoint(old, fam, attempt)
				objs.slices[fam][svc] = nw
				prov.OnEndpointSliceUpdate(old, nw)
			}
			done, err := waitSyncs(sh.Families, before, false, start, *timeout)
			// A second sync may follow if the runner coalesced badly; give it no time.
			after := readCounts(sh.Families)
			kinds, internal, nfull, _ := diffCounts(sh.Families, before, after)
			last = childEvent{Phase: PhasePartial, StartNS: start.UnixNano(), EndNS: done.UnixNano(), Kinds: kinds, InternalNS: int64(internal), NetlinkReadNS: netlinkReadNS(sh.Families, before, after)}
			if err != nil {
				last.Err = err.Error()
				break
			}
			if nfull == 0 {
				break
			}
			notes = append(notes, fmt.Sprintf("attempt %d ran a full sync (%s)", attempt+1, kinds))
			time.Sleep(100 * time.Millisecond)
		}
		last.Note = strings.Join(notes, "; ")
		emit(last)
		if last.Err != "" {
			return 1
		}
	}
	if *doPeriodic {
		// Periodic full sync with nothing changed.
		before = readCounts(sh.Families)
		var pev childEvent
		if periodicBySchedule && s > 0 {
			var planned time.Time
			for _, fam := range sh.Families {
				if t, ok := plannedFullSync(ipFamilyOf(fam)); ok && t.After(planned) {
					planned = t
				}
			}
			wait := s + *timeout
			if !planned.IsZero() {
				wait = time.Until(planned) + *timeout
			}
			done, err := waitSyncs(sh.Families, before, true, time.Time{}, wait)
			startT := planned
			note := "scheduled (slot " + s.String() + ")"
			if planned.IsZero() {
				startT = time.Now()
				note = "scheduled, but the plan is not exposed: wall time is not measured"
			}
			pev = childEvent{Phase: PhasePeriodic, StartNS: startT.UnixNano(), EndNS: done.UnixNano(), Note: note}
			if err != nil {
				pev.Err = err.Error()
			}
		} else {
			start := time.Now()
			prov.OnTopologyChange(map[string]string{})
			done, err := waitSyncs(sh.Families, before, true, start, *timeout)
			pev = childEvent{Phase: PhasePeriodic, StartNS: start.UnixNano(), EndNS: done.UnixNano(), Note: "forced (OnTopologyChange)"}
			if err != nil {
				pev.Err = err.Error()
			}
		}
		after := readCounts(sh.Families)
		pev.Kinds, internal, _, _ = diffCounts(sh.Families, before, after)
		pev.InternalNS = int64(internal)
		pev.NetlinkReadNS = netlinkReadNS(sh.Families, before, after)
		emit(pev)

	}
	return 0
}
