package kpconformance

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	kpe2e "k8s.io/kubernetes/test/kpe2e"
	"k8s.io/kubernetes/test/netns"
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
// creation to its ClusterIP's element in the kernel (polled over netlink in the node namespace) and
// kube-proxy's own programming histogram over the same time. At least two periodic full syncs
// run inside it: the patched binary's schedule, or for upstream a change of the node's zone
// label at a third and two thirds of the churn. The RTNL probe's worst during each is recorded.
func (b *benchRun) churn(ctx context.Context, r *kpe2e.Run) error {
	mon, err := startPoller(b.fams[0])
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
			c := change{start: t0, key: fmt.Sprintf("%s . tcp . 80", ip)}
			if err := mon.add(c); err != nil {
				errs = append(errs, err)
				return
			}
			changes = append(changes, c)
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

// pollEvery is how often the poller asks the kernel for each change that it has not seen yet.
const pollEvery = 20 * time.Millisecond

// elementPoller asks the kernel of the node namespace, over netlink, every pollEvery, whether
// each pending change's element of kube-proxy's service-ips map is there yet
// (NFT_MSG_GETSETELEM for its key: what `nft get element` asks, answered by one lookup in the
// set), and records when it first was. Unlike `nft monitor`, which must keep up with every
// event of the namespace and lost them at 36,000 service ports, it asks only for the changes.
type elementPoller struct {
	fd     int
	family uint8
	seq    uint32
	buf    []byte
	mu     sync.Mutex
	keys   map[string][]byte // pending changes: the key as nft prints it, and as the kernel stores it
	at     map[string]time.Time
	// ended is why the poller stopped before stop: a netlink error other than "not there yet".
	ended       error
	stopC, done chan struct{}
}

// Constants of linux/netfilter/nfnetlink.h and linux/netfilter/nf_tables.h.
const (
	nfnlSubsysNFTables  = 10
	nftMsgNewSetElem    = 12
	nftMsgGetSetElem    = 13
	nftaSetElemListTbl  = 1
	nftaSetElemListSet  = 2
	nftaSetElemListElms = 3
	nftaListElem        = 1
	nftaSetElemKey      = 1
	nftaDataValue       = 1
	nlaFNested          = 0x8000
)

// startPoller opens a netfilter netlink socket in the node namespace and starts polling for
// the elements of the service-ips map of fam's table.
func startPoller(fam family) (*elementPoller, error) {
	p := &elementPoller{family: unix.AF_INET, buf: make([]byte, 64<<10), keys: map[string][]byte{},
		at: map[string]time.Time{}, stopC: make(chan struct{}), done: make(chan struct{})}
	if fam.v6 {
		p.family = unix.AF_INET6
	}
	err := netns.Do(nodeNS, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		p.fd = fd
		return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	})
	if err != nil {
		if p.fd > 0 {
			_ = unix.Close(p.fd)
		}
		return nil, fmt.Errorf("opening a netfilter socket in %s: %w", nodeNS, err)
	}
	go p.loop()
	return p, nil
}

// add makes c pending: the poller asks for its element from now on.
func (p *elementPoller) add(c change) error {
	ip, _, _ := strings.Cut(c.key, " ")
	key, err := kpe2e.ServiceIPsKey(ip, kpe2e.ProtoTCP, 80)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, seen := p.at[c.key]; !seen {
		p.keys[c.key] = key
	}
	return nil
}

// loop asks for every pending element each pollEvery until stop, or until the kernel answers
// with an error other than ENOENT.
func (p *elementPoller) loop() {
	defer close(p.done)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.stopC:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		pending := maps.Clone(p.keys)
		p.mu.Unlock()
		for name, key := range pending {
			found, err := p.present(key)
			now := time.Now()
			p.mu.Lock()
			if err != nil {
				p.ended = fmt.Errorf("polling the kernel for service-ips elements stopped at %s: %w", now.Format(time.TimeOnly), err)
				p.mu.Unlock()
				return
			}
			if found {
				p.at[name] = now
				delete(p.keys, name)
			}
			p.mu.Unlock()
		}
	}
}

// present asks the kernel whether service-ips holds the element of key.
func (p *elementPoller) present(key []byte) (bool, error) {
	attr := func(typ uint16, data []byte) []byte {
		b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(data)))
		b = binary.NativeEndian.AppendUint16(b, typ)
		b = append(b, data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	elem := attr(nftaListElem|nlaFNested, attr(nftaSetElemKey|nlaFNested, attr(nftaDataValue, key)))
	body := []byte{p.family, unix.NFNETLINK_V0, 0, 0}
	body = append(body, attr(nftaSetElemListTbl, []byte("kube-proxy\x00"))...)
	body = append(body, attr(nftaSetElemListSet, []byte("service-ips\x00"))...)
	body = append(body, attr(nftaSetElemListElms|nlaFNested, elem)...)
	p.seq++
	msg := binary.NativeEndian.AppendUint32(nil, uint32(unix.NLMSG_HDRLEN+len(body)))
	msg = binary.NativeEndian.AppendUint16(msg, nfnlSubsysNFTables<<8|nftMsgGetSetElem)
	msg = binary.NativeEndian.AppendUint16(msg, unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	msg = binary.NativeEndian.AppendUint32(msg, p.seq)
	msg = binary.NativeEndian.AppendUint32(msg, 0)
	msg = append(msg, body...)
	if err := unix.Sendto(p.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, err
	}
	found := false
	for {
		n, _, err := unix.Recvfrom(p.fd, p.buf, 0)
		if err != nil {
			return false, err
		}
		for b := p.buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			size := int(binary.NativeEndian.Uint32(b))
			if size < unix.NLMSG_HDRLEN || size > len(b) {
				return false, fmt.Errorf("malformed netlink message (length %d of %d)", size, len(b))
			}
			typ, seq := binary.NativeEndian.Uint16(b[4:]), binary.NativeEndian.Uint32(b[8:])
			data := b[unix.NLMSG_HDRLEN:size]
			b = b[min(len(b), (size+3)&^3):]
			if seq != p.seq {
				continue
			}
			switch {
			case typ == nfnlSubsysNFTables<<8|nftMsgNewSetElem:
				found = true
			case typ == unix.NLMSG_ERROR && len(data) >= 4:
				switch errno := -int32(binary.NativeEndian.Uint32(data)); errno {
				case 0:
					return found, nil
				case int32(unix.ENOENT):
					return false, nil
				default:
					return false, unix.Errno(errno)
				}
			}
		}
	}
}

// seen returns when the element of key was first found.
func (p *elementPoller) seen(key string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.at[key]
	return t, ok
}

// count returns how many of changes were found.
func (p *elementPoller) count(changes []change) int {
	n := 0
	for _, c := range changes {
		if _, ok := p.seen(c.key); ok {
			n++
		}
	}
	return n
}

// failure returns why the poller stopped before stop, or nil while it polls.
func (p *elementPoller) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// stop ends the poller and closes its socket.
func (p *elementPoller) stop() {
	close(p.stopC)
	<-p.done
	_ = unix.Close(p.fd)
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
