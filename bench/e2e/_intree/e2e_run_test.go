package kpconformance

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kpe2e "k8s.io/kubernetes/test/kpe2e"
	"k8s.io/kubernetes/test/rtnlprobe"
)

const (
	userHZ   = 100             // the clock tick of /proc/<pid>/stat's CPU times on Linux
	idleTime = 5 * time.Second // the RTNL probe alone in the fresh node namespace, before kube-proxy
)

// benchRun is one binary's run at one size.
type benchRun struct {
	c          kubernetes.Interface
	p          proxyUnderTest
	params     kpe2e.Params
	size       int
	fams       []family
	kubeconfig string
	out        string
	probe      *rtnlProbe

	kp      *kubeProxy
	churned []string // the churn's Services, deleted after the run
}

// run measures one binary: a fresh node namespace, the RTNL probe idle, kube-proxy's start and
// first complete sync, its memory once settled, the churn with its periodic full syncs, and its
// peak memory and CPU. A failure is recorded in the Run's Err with the figures measured so far.
func (b *benchRun) run(ctx context.Context) (r kpe2e.Run) {
	r = kpe2e.Run{Binary: b.p.name, Size: b.size}
	progress("%s at %d service ports: fresh node namespace", b.p.name, b.size)
	defer b.deleteChurned(ctx)
	if err := b.measure(ctx, &r); err != nil {
		r.Err = err.Error()
	}
	return r
}

func (b *benchRun) measure(ctx context.Context, r *kpe2e.Run) error {
	b.probe.p.SetTarget(nil)
	if err := freshNode(); err != nil {
		return err
	}
	target, err := rtnlprobe.Open(nodeNS)
	if err != nil {
		return err
	}
	b.probe.keep(target) // the probe may still be in a round with it
	b.probe.p.SetTarget(target)
	if err := ensureNode(ctx, b.c, b.fams); err != nil {
		return err
	}
	idle := kpe2e.Window{Name: "idle", From: time.Now()}
	time.Sleep(idleTime)
	idle.To = time.Now()
	r.RTNLIdle, _ = kpe2e.WorstIn(b.probe.ops.all(), idle)

	kp, err := launchKubeProxy(b.p, b.fams, b.kubeconfig, b.out)
	if err != nil {
		return err
	}
	b.kp = kp
	setRunning(kp)
	defer func() {
		setRunning(nil)
		kp.stop()
		whole := kpe2e.Window{Name: "run", From: kp.started, To: time.Now()}
		ops := b.probe.ops.all()
		r.RTNLWorst, _ = kpe2e.WorstIn(ops, whole)
		r.RTNLFailed = kpe2e.Failures(kpe2e.In(ops, whole))
	}()
	// `ip netns exec` execs kube-proxy in place: the process's figures are kube-proxy's once it has.
	if err := poll(ctx, 10*time.Second, func() error {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", kp.cmd.Process.Pid))
		if err != nil || strings.TrimSpace(string(comm)) != "kube-proxy" {
			return fmt.Errorf("process %d is %q (%v), not kube-proxy", kp.cmd.Process.Pid, strings.TrimSpace(string(comm)), err)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := b.firstSync(ctx, r); err != nil {
		return err
	}
	progress("%s at %d: first complete sync %.2fs, healthz %.2fs, %.2f CPU s (nft %.2f)", b.p.name, b.size, r.FirstSync.Seconds(), r.Healthz.Seconds(), r.CPUFirst, r.NftFirst)

	time.Sleep(5 * time.Second)
	st, err := b.status("VmRSS")
	if err != nil {
		return err
	}
	r.SteadyRSS = st
	m, err := scrape()
	if err != nil {
		return err
	}
	r.HeapInuse, _ = m.Sum("go_memstats_heap_inuse_bytes", nil)

	churnErr := b.churn(ctx, r)
	if b.kp.exited() != nil {
		return churnErr
	}
	// The run's memory, CPU and heap profile, also when the churn broke off.
	if r.PeakRSS, err = b.status("VmHWM"); err != nil {
		return err
	}
	if b.p.patched {
		if err := b.saveProfile("heap?gc=1", "heap"); err != nil {
			return err
		}
	}
	ps, err := b.stat()
	if err != nil {
		return err
	}
	r.CPUTotal, r.NftTotal = ps.CPUSeconds(userHZ), ps.ChildCPUSeconds(userHZ)
	progress("%s at %d: peak RSS %.1f MiB, steady %.1f MiB, heap in use %.1f MiB, %.1f CPU s (nft %.1f)", b.p.name, b.size,
		float64(r.PeakRSS)/(1<<20), float64(r.SteadyRSS)/(1<<20), r.HeapInuse/(1<<20), r.CPUTotal, r.NftTotal)
	return churnErr
}

// firstSync polls healthz every 100ms and the metrics every 250ms until kube-proxy has answered
// healthz 200 and finished a sync of every family; the sync's end is the
// kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge (kube-proxy syncs only once its
// informers have listed everything, so its first sync is complete).
func (b *benchRun) firstSync(ctx context.Context, r *kpe2e.Run) error {
	limit := timeout(b.size, 2*time.Minute, time.Minute)
	lastScrape := time.Time{}
	return poll(ctx, limit, func() error {
		if err := b.kp.exited(); err != nil {
			return err
		}
		if r.Healthz == 0 {
			if resp, err := http.Get(healthzURL); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					r.Healthz = time.Since(b.kp.started)
				}
			}
		}
		if r.FirstSync == 0 && time.Since(lastScrape) >= 250*time.Millisecond {
			lastScrape = time.Now()
			if end, ok := b.lastSync(); ok {
				r.FirstSync = end.Sub(b.kp.started)
				ps, err := b.stat()
				if err != nil {
					return err
				}
				r.CPUFirst, r.NftFirst = ps.CPUSeconds(userHZ), ps.ChildCPUSeconds(userHZ)
			}
		}
		if r.Healthz == 0 || r.FirstSync == 0 {
			return fmt.Errorf("first sync not done (healthz %v, sync %v)", r.Healthz, r.FirstSync)
		}
		return nil
	})
}

// lastSync returns the end of the latest sync that every family has finished, and false while a
// family has not finished one.
func (b *benchRun) lastSync() (time.Time, bool) {
	m, err := scrape()
	if err != nil {
		return time.Time{}, false
	}
	var end float64
	for _, f := range b.fams {
		v, ok := m.Sum("kubeproxy_sync_proxy_rules_last_timestamp_seconds", famLabel(f))
		if !ok || v <= 0 {
			return time.Time{}, false
		}
		end = max(end, v)
	}
	return time.Unix(0, int64(end*1e9)), true
}

// famLabel is the ip_family label of f's metrics.
func famLabel(f family) map[string]string {
	if f.v6 {
		return map[string]string{"ip_family": "IPv6"}
	}
	return map[string]string{"ip_family": "IPv4"}
}

// scrape reads and parses kube-proxy's metrics.
func scrape() (kpe2e.Metrics, error) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return kpe2e.ParseMetrics(string(body))
}

// stat reads kube-proxy's /proc/<pid>/stat.
func (b *benchRun) stat() (kpe2e.ProcStat, error) {
	text, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.kp.cmd.Process.Pid))
	if err != nil {
		return kpe2e.ProcStat{}, err
	}
	return kpe2e.ParseProcStat(string(text))
}

// status returns a /proc/<pid>/status memory figure of kube-proxy, in bytes.
func (b *benchRun) status(key string) (int64, error) {
	text, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.kp.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	kib, err := kpe2e.StatusKiB(string(text), key)
	return kib << 10, err
}

// saveProfile saves kube-proxy's /debug/pprof/<query> as <out>/<binary>-<size>-<name>.pb.gz.
func (b *benchRun) saveProfile(query, name string) error {
	url := strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/" + query
	resp, err := http.Get(url)
	if err != nil {
		return fmt.Errorf("pprof %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("pprof %s: HTTP %d (is --profiling on?)", name, resp.StatusCode)
	}
	path := filepath.Join(b.out, fmt.Sprintf("%s-%d-%s.pb.gz", b.p.name, b.size, name))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	progress("%s at %d: %s profile in %s", b.p.name, b.size, name, path)
	return f.Close()
}

// setZone sets the node's topology.kubernetes.io/zone label: a change of it makes upstream's
// proxier run a full sync (OnTopologyChange), as its hourly timer would.
func setZone(ctx context.Context, c kubernetes.Interface, zone string) error {
	return retryAPI(ctx, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[v1.LabelTopologyZone] = zone
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// deleteChurned deletes the churn's Services and their slices, loadWorkers at a time, so that
// the next binary sees the same API contents.
func (b *benchRun) deleteChurned(ctx context.Context) {
	_ = inParallel(0, len(b.churned), func(i int) error {
		if err := retryAPI(ctx, func() error { return deleteService(ctx, b.c, b.churned[i]) }); err != nil {
			progress("deleting churn Service %s: %v", b.churned[i], err)
		}
		return nil
	})
	b.churned = nil
}

// opLog collects the RTNL probe's operations.
type opLog struct {
	mu  sync.Mutex
	ops []kpe2e.Op
}

// add is the probe's rtnlprobe.Recorder.
func (l *opLog) add(op string, start, end time.Time, err error) {
	l.mu.Lock()
	l.ops = append(l.ops, kpe2e.Op{Name: op, Start: start, End: end, Failed: err != nil})
	l.mu.Unlock()
}

// all returns a copy of the operations so far.
func (l *opLog) all() []kpe2e.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]kpe2e.Op(nil), l.ops...)
}
