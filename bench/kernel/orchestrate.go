//go:build benchkernel

package main

// The orchestrator: creates the throwaway netns, runs the upstream and patched proxier
// processes in them one after the other for each shape and size, runs the RTNL probe beside
// them, attributes nft invocations and probe samples to phases, and prints the report.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/kubernetes/test/netns"
)

type orchestrator struct {
	opts           Options
	bins           map[string]string // tree -> binary
	shimDir        string
	realNFT        string
	work           string
	id             string
	out            io.Writer
	mu             sync.Mutex
	netns          []string
	children       map[int]bool
	cleanupOnce    sync.Once
	nsSeq          int
	extraChildArgs []string
}

// newNetns creates a throwaway netns named after the run id, with lo up.
func (o *orchestrator) newNetns(tag string) (string, error) {
	o.mu.Lock()
	o.nsSeq++
	name := fmt.Sprintf("%s-%s%d", o.id, tag, o.nsSeq)
	o.netns = append(o.netns, name)
	o.mu.Unlock()
	if err := netns.Add(name); err != nil {
		return "", err
	}
	return name, nil
}

// delNetns kills the processes in netns name, deletes it and forgets it.
func (o *orchestrator) delNetns(name string) {
	_ = netns.Delete(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, n := range o.netns {
		if n == name {
			o.netns = append(o.netns[:i], o.netns[i+1:]...)
			break
		}
	}
}

// cleanup kills the children and deletes every netns this run created.
func (o *orchestrator) cleanup() {
	o.cleanupOnce.Do(func() {
		o.mu.Lock()
		pids := make([]int, 0, len(o.children))
		for pid := range o.children {
			pids = append(pids, pid)
		}
		names := append([]string(nil), o.netns...)
		o.mu.Unlock()
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		for _, n := range names {
			o.delNetns(n)
		}
	})
}

// childResult is what one proxier process did.
type childResult struct {
	events []childEvent
	nft    []Invocation
	err    error
}

// runChild runs `bin child ...` inside netns ns, with the nft shim first on PATH.
func (o *orchestrator) runChild(tree, ns string, sh Shape, size int, mode, label string, extra ...string) childResult {
	base := fmt.Sprintf("%s-%d-%s-%s", sh.Name, size, tree, label)
	logPath := filepath.Join(o.work, base+".nft.jsonl")
	_ = os.Remove(logPath)
	stderr, err := os.Create(filepath.Join(o.work, base+".log"))
	if err != nil {
		return childResult{err: err}
	}
	defer stderr.Close()
	args := []string{"netns", "exec", ns, o.bins[tree], "child", "-shape", sh.Name, "-size", fmt.Sprint(size), "-mode", mode,
		"-label", label, "-slot", o.opts.Slot.String(), "-timeout", o.opts.Timeout.String()}
	args = append(args, extra...)
	args = append(args, o.extraChildArgs...)
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(),
		"PATH="+o.shimDir+":"+os.Getenv("PATH"),
		"BENCHKERNEL_NFT_LOG="+logPath,
		"BENCHKERNEL_REAL_NFT="+o.realNFT,
	)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return childResult{err: err}
	}
	if err := cmd.Start(); err != nil {
		return childResult{err: err}
	}
	pid := cmd.Process.Pid
	o.mu.Lock()
	o.children[pid] = true
	o.mu.Unlock()
	// PHASE_TIMEOUT bounds each phase; a process runs up to two, and may wait for a slot.
	limit := 2*o.opts.Timeout + o.opts.Slot + time.Minute
	timer := time.AfterFunc(limit, func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	var res childResult
	events, _ := os.Create(filepath.Join(o.work, base+".events.jsonl"))
	if events != nil {
		defer events.Close()
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var ev childEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // not an event (a stray print)
		}
		res.events = append(res.events, ev)
		if events != nil {
			_, _ = events.Write(append(append([]byte(nil), sc.Bytes()...), '\n'))
		}
	}
	werr := cmd.Wait()
	timer.Stop()
	o.mu.Lock()
	delete(o.children, pid)
	o.mu.Unlock()
	if werr != nil {
		res.err = fmt.Errorf("%s child (%s, %s) failed: %v; see %s", tree, mode, label, werr, stderr.Name())
	}
	if f, err := os.Open(logPath); err == nil {
		res.nft, err = ParseNFTLog(f)
		f.Close()
		if err != nil && res.err == nil {
			res.err = err
		}
	}
	return res
}

// results turns a child's events into phase results (RTNL is added later).
func (o *orchestrator) results(tree string, sh Shape, size int, cr childResult) []*PhaseResult {
	var out []*PhaseResult
	for _, ev := range cr.events {
		if ev.Phase == "init" {
			continue
		}
		p := &PhaseResult{Tree: tree, Shape: sh.Name, Size: size, Phase: ev.Phase, Ran: true, Err: ev.Err, Note: ev.Note,
			StartNS: ev.StartNS, EndNS: ev.EndNS, Wall: time.Duration(ev.EndNS - ev.StartNS), SyncKinds: ev.Kinds,
			Internal: time.Duration(ev.InternalNS), NetlinkRead: time.Duration(ev.NetlinkReadNS), NFT: SummarizeNFT(cr.nft, ev.StartNS, ev.EndNS)}
		out = append(out, p)
	}
	if cr.err != nil && len(out) > 0 && out[len(out)-1].Err == "" {
		out[len(out)-1].Err = cr.err.Error()
	}
	return out
}

// timedNFT runs nft in netns ns with input on stdin and returns its wall time.
func timedNFT(ns, realNFT string, input string, args ...string) (time.Duration, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, realNFT}, args...)...)
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	s := time.Now()
	err := cmd.Run()
	d := time.Since(s)
	if err != nil {
		return d, fmt.Errorf("nft %v: %v: %s", args, err, strings.TrimSpace(errb.String()))
	}
	return d, nil
}

// measureFloor times, on the table in ns, a full list, the terse JSON list that knftables'
// ListAll does, and a trivial write (add+delete of an empty chain), each the median of three
// (one run when the first takes over 5 s).
func (o *orchestrator) measureFloor(ns, whose, fam string) Floor {
	f := Floor{Table: whose}
	nf := nftFamily(fam)
	med := func(input string, args ...string) time.Duration {
		var v []float64
		for range 3 {
			d, err := timedNFT(ns, o.realNFT, input, args...)
			if err != nil {
				f.Err = err.Error()
				return 0
			}
			v = append(v, float64(d))
			if d > 5*time.Second {
				break
			}
		}
		return time.Duration(Median(v))
	}
	f.List = med("", "list", "table", nf, "kube-proxy")
	f.ListTerse = med("", "--json", "--terse", "list", "table", nf, "kube-proxy")
	f.Trivial = med(fmt.Sprintf("add chain %s kube-proxy bench-floor\ndelete chain %s kube-proxy bench-floor\n", nf, nf), "-f", "-")
	return f
}

// runSize measures one shape and size: upstream, then patched, then the upgrade.
func (o *orchestrator) runSize(sh Shape, size int) *SizeRun {
	sr := &SizeRun{Shape: sh.Name, Size: size}
	fail := func(err error) *SizeRun {
		sr.Put(&PhaseResult{Tree: TreePatched, Shape: sh.Name, Size: size, Phase: PhaseCold, Ran: true, Err: err.Error()})
		return sr
	}
	nsU, err := o.newNetns("u")
	if err != nil {
		return fail(err)
	}
	defer o.delNetns(nsU)
	nsP, err := o.newNetns("p")
	if err != nil {
		return fail(err)
	}
	defer o.delNetns(nsP)
	nsR, err := o.newNetns("r")
	if err != nil {
		return fail(err)
	}
	defer o.delNetns(nsR)
	hU, err := openNS(nsU)
	if err != nil {
		return fail(err)
	}
	defer hU.Close()
	hP, err := openNS(nsP)
	if err != nil {
		return fail(err)
	}
	defer hP.Close()
	hR, err := openNS(nsR)
	if err != nil {
		return fail(err)
	}
	defer hR.Close()

	pr := newProber(hR, o.opts.ProbeEvery)
	pr.setTarget(hU)
	pr.start()
	idleFrom := time.Now().UnixNano()
	time.Sleep(o.opts.Idle)
	idleTo := time.Now().UnixNano()

	var all []*PhaseResult
	runUp := !o.opts.SkipUpst && size <= o.opts.UpstreamMax
	// Above UPSTREAM_MAX, upstream still writes its table cold (up to UPGRADE_MAX), so that the
	// upgrade phase has the table to start on.
	upgradeBase := !runUp && !o.opts.SkipUpst && !o.opts.SkipPatched && size <= o.opts.UpgradeMax
	fam := sh.Families[0]
	switch {
	case runUp:
		all = append(all, o.results(TreeUpstream, sh, size, o.runChild(TreeUpstream, nsU, sh, size, "first", PhaseCold, "-partial"))...)
		all = append(all, o.results(TreeUpstream, sh, size, o.runChild(TreeUpstream, nsU, sh, size, "restart", PhaseRestart, "-periodic"))...)
		sr.Floors = append(sr.Floors, o.measureFloor(nsU, TreeUpstream, fam))
	case !o.opts.SkipUpst:
		skipped := []string{PhaseCold, PhasePeriodic, PhasePartial, PhaseRestart}
		if upgradeBase {
			all = append(all, o.results(TreeUpstream, sh, size, o.runChild(TreeUpstream, nsU, sh, size, "first", PhaseCold))...)
			sr.Floors = append(sr.Floors, o.measureFloor(nsU, TreeUpstream, fam))
			skipped = skipped[1:]
		}
		for _, ph := range skipped {
			sr.Put(&PhaseResult{Tree: TreeUpstream, Shape: sh.Name, Size: size, Phase: ph, Note: fmt.Sprintf("not run (size > UPSTREAM_MAX=%d)", o.opts.UpstreamMax)})
		}
	}
	if !o.opts.SkipPatched {
		pr.setTarget(hP)
		all = append(all, o.results(TreePatched, sh, size, o.runChild(TreePatched, nsP, sh, size, "first", PhaseCold, "-partial"))...)
		all = append(all, o.results(TreePatched, sh, size, o.runChild(TreePatched, nsP, sh, size, "restart", PhaseRestart, "-periodic"))...)
		sr.Floors = append(sr.Floors, o.measureFloor(nsP, TreePatched, fam))
		if runUp || upgradeBase {
			pr.setTarget(hU)
			all = append(all, o.results(TreePatched, sh, size, o.runChild(TreePatched, nsU, sh, size, "restart", PhaseUpgrade))...)
		} else {
			sr.Put(&PhaseResult{Tree: TreePatched, Shape: sh.Name, Size: size, Phase: PhaseUpgrade, Note: fmt.Sprintf("not run (needs upstream's table at this size; UPGRADE_MAX=%d)", o.opts.UpgradeMax)})
		}
	}
	samples := pr.finish()
	sr.Idle = Summarize(Within(samples, idleFrom, idleTo))
	for _, p := range all {
		p.RTNL = Summarize(Overlapping(samples, p.StartNS, p.EndNS))
		sr.Put(p)
	}
	o.writeSamples(sh, size, samples)
	return sr
}

func (o *orchestrator) writeSamples(sh Shape, size int, samples []Sample) {
	f, err := os.Create(filepath.Join(o.work, fmt.Sprintf("%s-%d.rtnl.jsonl", sh.Name, size)))
	if err != nil {
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, s := range samples {
		_ = enc.Encode(s)
	}
}

func (o *orchestrator) printf(format string, args ...any) {
	fmt.Fprintf(o.out, format, args...)
	if f, ok := o.out.(*os.File); ok {
		_ = f.Sync()
	}
}

func runMain(argv []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	up := fs.String("upstream-bin", "", "benchkernel binary built in the pristine tree")
	pa := fs.String("patched-bin", "", "benchkernel binary built in the patched tree")
	shim := fs.String("shim", "", "nftshim binary")
	realNFT := fs.String("real-nft", "", "the real nft (default: nft on PATH)")
	work := fs.String("work", "_output/bench/run", "directory for logs")
	v := fs.String("v", "0", "klog verbosity of the proxier processes")
	id := fs.String("id", fmt.Sprintf("bk%d", os.Getpid()), "prefix of the netns names")
	fs.Parse(argv)
	opts, err := OptionsFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *up == "" || *pa == "" || *shim == "" {
		fmt.Fprintln(os.Stderr, "run: -upstream-bin, -patched-bin and -shim are required")
		return 2
	}
	if *realNFT == "" {
		p, err := exec.LookPath("nft")
		if err != nil {
			fmt.Fprintln(os.Stderr, "run: nft not found")
			return 2
		}
		*realNFT = p
	}
	o := &orchestrator{opts: opts, realNFT: *realNFT, out: os.Stdout, children: map[int]bool{},
		bins: map[string]string{}, id: *id, extraChildArgs: []string{"-v", *v}}
	for tree, b := range map[string]string{TreeUpstream: *up, TreePatched: *pa} {
		abs, err := filepath.Abs(b)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		o.bins[tree] = abs
	}
	if o.work, err = filepath.Abs(*work); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o.shimDir = filepath.Join(o.work, "shim")
	if err := os.MkdirAll(o.shimDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	shimAbs, _ := filepath.Abs(*shim)
	_ = os.Remove(filepath.Join(o.shimDir, "nft"))
	if err := os.Symlink(shimAbs, filepath.Join(o.shimDir, "nft")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "benchkernel: %v: killing the proxier processes and deleting the netns\n", s)
		o.cleanup()
		os.Exit(130)
	}()
	defer o.cleanup()

	o.printf("benchkernel: kernel %s, %s, %d CPUs, load %s\n", kernelRelease(), nftVersion(*realNFT), numCPU(), loadavg())
	o.printf("benchkernel: shapes %v, sizes %v, upstream up to %d (beyond: extrapolated; its cold start still runs up to %d, for the upgrade), patched periodic slot %v, idle window %v, RTNL probe every %v, logs in %s\n",
		opts.Shapes, sizesLabel(opts), opts.UpstreamMax, opts.UpgradeMax, opts.Slot, opts.Idle, opts.ProbeEvery, o.work)
	o.printf("benchkernel: periodic phase: upstream is forced with OnTopologyChange (the same code path as its hourly full sync); patched waits for its scheduled full sync\n")
	var runs []*SizeRun
	for _, name := range opts.Shapes {
		sh, _ := ShapeByName(name)
		for _, size := range opts.SizesFor(sh) {
			sr := o.runSize(sh, size)
			runs = append(runs, sr)
			for _, l := range FormatSizeRun(sr) {
				o.printf("%s\n", l)
			}
		}
	}
	notes := Extrapolate(runs)
	if len(notes) > 0 {
		o.printf("== extrapolated upstream figures ==\n")
		for _, n := range notes {
			o.printf("%s\n", n)
		}
		for _, r := range runs {
			for _, ph := range Phases {
				if p := r.Get(TreeUpstream, ph); p != nil && p.Extrapolated {
					o.printf("shape: %s size: %d phase: %-8s | upstream: %s | patched: %s\n", r.Shape, r.Size, ph, FormatCell(p), FormatCell(r.Get(TreePatched, ph)))
				}
			}
		}
	}
	for _, l := range FinalLines(runs) {
		o.printf("%s\n", l)
	}
	return 0
}

func sizesLabel(o Options) string {
	if o.Sizes == nil {
		return "per-shape defaults"
	}
	return fmt.Sprint(o.Sizes)
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func nftVersion(nft string) string {
	b, _ := exec.Command(nft, "--version").Output()
	return strings.TrimSpace(string(b))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
