package kpconformance

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	kpe2e "k8s.io/kubernetes/test/kpe2e"
)

// churnBase is the plan index of the first churn Service: far above every size's own.
const churnBase = 1_000_000

// programmingHistogram is upstream's network programming latency histogram, fed from the
// EndpointSlices' trigger-time annotation.
const programmingHistogram = "kubeproxy_network_programming_duration_seconds"

// change is one churn Service: when its creation started and its ClusterIP's key in the
// service-ips map, as nft prints it.
type change struct {
	start time.Time
	key   string
}

// churn creates params.ChurnRate new Services (each with its EndpointSlices, carrying the
// trigger-time annotation) per second for params.ChurnSeconds, and measures the time from each
// creation to its ClusterIP's element in the kernel (nft monitor in the node namespace) and
// kube-proxy's own programming histogram over the same time. At least two periodic full syncs
// run inside it: the patched binary's schedule, or for upstream a change of the node's zone
// label at a third and two thirds of the churn. The RTNL probe's worst during each is recorded.
func (b *benchRun) churn(ctx context.Context, r *kpe2e.Run) error {
	mon, err := startMonitor()
	if err != nil {
		return err
	}
	defer mon.stop()
	before, histBefore, err := programmingBuckets()
	if err != nil {
		return err
	}
	fs := newFullSyncWatch(before, b.fams)
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); fs.run(stopWatch) }()

	period := time.Duration(b.params.ChurnSeconds) * time.Second
	progress("%s at %d: churn, %d Services/s for %v", b.p.name, b.size, b.params.ChurnRate, period)
	var profErr error
	var profWG sync.WaitGroup
	if b.p.patched {
		profWG.Add(1)
		go func() {
			defer profWG.Done()
			profErr = b.saveProfile(fmt.Sprintf("profile?seconds=%d", b.params.ChurnSeconds), "cpu")
		}()
	}
	var (
		mu      sync.Mutex
		changes []change
		errs    []error
		wg      sync.WaitGroup
	)
	start := time.Now()
	every := time.Second / time.Duration(b.params.ChurnRate)
	flips := 0
	// Change k is due at start+k*every; a late one goes at once, so the rate holds on average.
	for k := 0; time.Duration(k)*every < period; k++ {
		time.Sleep(time.Until(start.Add(time.Duration(k) * every)))
		if !b.p.patched && flips < 2 && time.Since(start) >= period*time.Duration(flips+1)/3 {
			flips++
			if err := setZone(ctx, b.c, fmt.Sprintf("e2e-%d-%d", b.size, flips)); err != nil {
				return err
			}
		}
		s := kpe2e.Plan(b.params, churnBase+b.size+k)
		s.Name = fmt.Sprintf("churn-%s-%d-%d", b.p.name, b.size, k)
		for i := range s.Slices {
			s.Slices[i].Name = fmt.Sprintf("%s-%s-%d", s.Name, s.Slices[i].Family, i)
		}
		b.churned = append(b.churned, s.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ann := map[string]string{v1.EndpointsLastChangeTriggerTime: t0.UTC().Format(time.RFC3339Nano)}
			_, svc, err := createPlanned(ctx, b.c, s, ann)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ip, err := clusterIP(svc, b.fams[0])
			if err != nil {
				errs = append(errs, err)
				return
			}
			changes = append(changes, change{start: t0, key: fmt.Sprintf("%s . tcp . 80", ip)})
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d churn creations failed, the first: %w", len(errs), errs[0])
	}
	// Every change into the kernel, and at least two full syncs since the churn began; what is
	// missing when the waits end is recorded, not an error.
	limit := timeout(b.size, 30*time.Second, 10*time.Second)
	_ = poll(ctx, limit, func() error {
		if n := mon.count(changes); n < len(changes) {
			return fmt.Errorf("%d of %d changes in the kernel", n, len(changes))
		}
		return nil
	})
	waitEnd := time.Now()
	if err := mon.failure(); err != nil {
		progress("%s at %d: %v", b.p.name, b.size, err)
		r.Note = strings.TrimSpace(r.Note + " " + err.Error())
	}
	if err := poll(ctx, 3*b.params.FullSyncPeriod+limit, func() error {
		if err := b.kp.exited(); err != nil {
			return err
		}
		if n := fs.count(); n < 2 {
			return fmt.Errorf("%d of 2 periodic full syncs", n)
		}
		return nil
	}); err != nil {
		if b.kp.exited() != nil {
			return err
		}
		r.Note = strings.TrimSpace(r.Note + " " + fmt.Sprintf("only %d periodic full syncs completed in %v after the churn began", fs.count(), time.Since(start).Round(time.Second)))
	}
	close(stopWatch)
	<-watchDone
	profWG.Wait()
	if profErr != nil {
		return profErr
	}

	after, histAfter, err := programmingBuckets()
	if err != nil {
		return err
	}
	// The patched binary's drift checks that fell back to listing the table as text.
	textMatch := map[string]string{"source": "text"}
	n, _ := after.Sum("kubeproxy_sync_full_proxy_rules_nftables_drift_read_duration_seconds_count", textMatch)
	sec, _ := after.Sum("kubeproxy_sync_full_proxy_rules_nftables_drift_read_duration_seconds_sum", textMatch)
	r.TextListings, r.TextListLong = int(n), time.Duration(sec*float64(time.Second))
	h := kpe2e.SubBuckets(histAfter, histBefore)
	r.HistP50, r.HistP99 = kpe2e.HistogramQuantile(0.5, h), kpe2e.HistogramQuantile(0.99, h)
	r.HistBound = [2]bool{kpe2e.BeyondLargestBound(0.5, h), kpe2e.BeyondLargestBound(0.99, h)}
	var lat []time.Duration
	r.Changes = len(changes)
	for _, c := range changes {
		if t, ok := mon.seen(c.key); ok {
			lat = append(lat, t.Sub(c.start))
			r.Seen++
		} else {
			lat = append(lat, waitEnd.Sub(c.start))
			r.NftBound = true
		}
	}
	r.NftP50, r.NftP99 = kpe2e.Percentile(lat, 50), kpe2e.Percentile(lat, 99)
	ops := b.probe.ops.all()
	r.FullSyncs, r.FullSyncLong = fs.count(), fs.longest()
	for _, w := range fs.windows() {
		worst, _ := kpe2e.WorstIn(ops, w)
		r.RTNLFullSync = append(r.RTNLFullSync, worst)
	}
	progress("%s at %d: %d/%d changes in the kernel, p50 %v p99 %v (histogram p50 %.0fms p99 %.0fms), %d full syncs", b.p.name, b.size,
		r.Seen, r.Changes, r.NftP50.Round(time.Millisecond), r.NftP99.Round(time.Millisecond), r.HistP50*1000, r.HistP99*1000, r.FullSyncs)
	return nil
}

// programmingBuckets scrapes kube-proxy's metrics and returns them with the programming
// histogram's buckets (every family).
func programmingBuckets() (kpe2e.Metrics, []kpe2e.Bucket, error) {
	m, err := scrape()
	if err != nil {
		return nil, nil, err
	}
	b, err := m.Buckets(programmingHistogram, nil)
	return m, b, err
}

// monitor runs `nft monitor new elements` in the node namespace and records when each element of
// a service-ips map was first reported.
type monitor struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr bytes.Buffer
	mu     sync.Mutex
	at     map[string]time.Time
	// ended is why the monitor stopped reading before stop: nft exited, or a line was too
	// long to scan. After that no change is seen, so the run reports it.
	ended error
}

// startMonitor starts the monitor; it listens before it returns.
func startMonitor() (*monitor, error) {
	cmd := exec.Command("ip", "netns", "exec", nodeNS, "nft", "monitor", "new", "elements")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	m := &monitor{cmd: cmd, done: make(chan struct{}), at: map[string]time.Time{}}
	cmd.Stderr = &m.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			now := time.Now()
			for _, e := range kpe2e.ParseMonitorLine(sc.Text()) {
				if e.Set != "service-ips" {
					continue
				}
				m.mu.Lock()
				if _, ok := m.at[e.Key]; !ok {
					m.at[e.Key] = now
				}
				m.mu.Unlock()
			}
		}
		m.mu.Lock()
		m.ended = fmt.Errorf("nft monitor stopped reading at %s: %v", time.Now().Format(time.TimeOnly), cmp.Or(sc.Err(), io.EOF))
		m.mu.Unlock()
	}()
	// nft subscribes to the netlink group before it reads; give it a moment to get there.
	time.Sleep(300 * time.Millisecond)
	return m, nil
}

// seen returns when key was first reported.
func (m *monitor) seen(key string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.at[key]
	return t, ok
}

// count returns how many of changes were reported.
func (m *monitor) count(changes []change) int {
	n := 0
	for _, c := range changes {
		if _, ok := m.seen(c.key); ok {
			n++
		}
	}
	return n
}

// failure returns why the monitor stopped reading before stop, with the end of nft's
// standard error, or nil while it reads.
func (m *monitor) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended == nil {
		return nil
	}
	tail := m.stderr.String()
	if len(tail) > 300 {
		tail = tail[len(tail)-300:]
	}
	return fmt.Errorf("%w; nft said: %q", m.ended, tail)
}

// stop ends the monitor.
func (m *monitor) stop() {
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
	<-m.done
}

// fullSyncWatch polls kube-proxy's full-sync histogram every 500ms and keeps a window for each
// full sync it saw complete: from the poll before less the sync's duration, to the poll that saw
// it (wide rather than narrow). Only the cluster's families count: kube-proxy runs a proxier for
// each family the node supports, and on a single-stack cluster the other one has no Services.
type fullSyncWatch struct {
	fams       []family
	mu         sync.Mutex
	lastCount  float64
	lastSum    float64
	lastPoll   time.Time
	ws         []kpe2e.Window
	longestDur time.Duration
	n          int
}

func newFullSyncWatch(m kpe2e.Metrics, fams []family) *fullSyncWatch {
	w := &fullSyncWatch{fams: fams, lastPoll: time.Now()}
	w.lastCount, w.lastSum = w.totals(m)
	return w
}

// totals sums the full-sync histogram's count and sum over the cluster's families.
func (w *fullSyncWatch) totals(m kpe2e.Metrics) (count, sum float64) {
	for _, f := range w.fams {
		c, _ := m.Sum("kubeproxy_sync_full_proxy_rules_duration_seconds_count", famLabel(f))
		s, _ := m.Sum("kubeproxy_sync_full_proxy_rules_duration_seconds_sum", famLabel(f))
		count, sum = count+c, sum+s
	}
	return count, sum
}

func (w *fullSyncWatch) run(stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
		m, err := scrape()
		if err != nil {
			continue
		}
		count, sum := w.totals(m)
		now := time.Now()
		w.mu.Lock()
		if d := count - w.lastCount; d > 0 {
			dur := time.Duration((sum - w.lastSum) * float64(time.Second))
			w.ws = append(w.ws, kpe2e.Window{Name: "full sync", From: w.lastPoll.Add(-dur), To: now})
			w.longestDur = max(w.longestDur, time.Duration(float64(dur)/d))
			w.n += int(d)
		}
		w.lastCount, w.lastSum, w.lastPoll = count, sum, now
		w.mu.Unlock()
	}
}

// count is how many full syncs completed (of every family: a dual-stack round counts once).
func (w *fullSyncWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n / len(w.fams)
}

func (w *fullSyncWatch) longest() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longestDur
}

func (w *fullSyncWatch) windows() []kpe2e.Window {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]kpe2e.Window(nil), w.ws...)
}
