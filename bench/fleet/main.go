//go:build benchfleet

/*
Copyright 2026 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command fleetsim simulates the periodic full syncs of a fleet of kube-proxy
// nodes that joined within one minute, and reports how many nodes run a
// periodic full sync at the same moment. A last section runs kube-proxy's
// defaults (taken from the real defaulting code of the ruleSync config section)
// beside the upstream model for two fleets: one that joined within one minute
// and one whose nodes joined evenly over a day.
//
// For each seed it generates EKS-style node names and join times, then, for
// each configuration and sync duration D, runs every node through the real
// k8s.io/kubernetes/pkg/proxy/fullsync Tracker the way the proxier does: a
// start-up full sync at join, then each periodic full sync starts at the
// tracker's planned time (where Due turns true), lasts D, and Synced is called
// when it finishes. The simulation is event driven: each node's clock jumps
// from one sync boundary to the next.
//
// The "upstream-model" configuration is not the package; it models upstream
// kube-proxy: a periodic full sync every period after the previous one's
// start, anchored at join time, with neither jitter nor splay.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	proxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigv1alpha1 "k8s.io/kubernetes/pkg/proxy/apis/config/v1alpha1"
	"k8s.io/kubernetes/pkg/proxy/fullsync"
	testingclock "k8s.io/utils/clock/testing"
)

var regions = []string{"us-east-1", "us-west-2", "eu-west-1", "ap-southeast-2"}

// fleet is the random input of one seed, shared by all configurations.
type fleet struct {
	start     time.Time // the first node joins at or after start
	names     []string
	joins     []time.Time
	nodeSeeds []uint64 // the jitter seed of each node's kube-proxy process
}

// newFleet draws n distinct node names in one random region, join times
// uniform within window (one minute for the main tables) from a random
// wall-clock instant in 2026, and a jitter seed per node.
func newFleet(rng *rand.Rand, n int, window time.Duration) fleet {
	year := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	f := fleet{start: year.Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour))))}
	region := regions[rng.IntN(len(regions))]
	seen := make(map[string]bool, n)
	for len(f.names) < n {
		name := fmt.Sprintf("ip-10-%d-%d-%d.%s.compute.internal", rng.IntN(256), rng.IntN(256), rng.IntN(256), region)
		if seen[name] {
			continue
		}
		seen[name] = true
		f.names = append(f.names, name)
		f.joins = append(f.joins, f.start.Add(time.Duration(rng.Int64N(int64(window)))))
		f.nodeSeeds = append(f.nodeSeeds, rng.Uint64())
	}
	return f
}

// simConfig is one way of scheduling periodic full syncs.
type simConfig struct {
	label    string
	upstream bool // model upstream instead of using the fullsync package
	cfg      fullsync.Config
}

// periodicStarts returns the start times (Unix nanoseconds) of the periodic
// full syncs of all nodes of f that start before end, for syncs lasting d,
// appended to starts. It also returns the smallest and largest gap between
// consecutive periodic full-sync starts of a node, and the smallest time from
// the end of the start-up sync to the first periodic one.
func periodicStarts(sc simConfig, f fleet, d time.Duration, end time.Time, starts []int64) ([]int64, gapStats) {
	gaps := newGapStats()
	for i, join := range f.joins {
		prev := time.Time{}
		record := func(start time.Time) {
			starts = append(starts, start.UnixNano())
			if prev.IsZero() {
				gaps.firstAfterStartup = min(gaps.firstAfterStartup, start.Sub(join.Add(d)))
			} else {
				gaps.min, gaps.max = min(gaps.min, start.Sub(prev)), max(gaps.max, start.Sub(prev))
			}
			prev = start
		}
		if sc.upstream {
			for s := join.Add(sc.cfg.Period); s.Before(end); s = s.Add(sc.cfg.Period) {
				record(s)
			}
			continue
		}
		cfg := sc.cfg
		cfg.NodeName = f.names[i]
		clk := testingclock.NewFakeClock(join)
		tracker, err := fullsync.NewTracker(cfg, f.nodeSeeds[i], clk, 0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleetsim: %s: %v\n", sc.label, err)
			os.Exit(2)
		}
		// The proxier forces the start-up full sync; it completes after d.
		clk.SetTime(join.Add(d))
		tracker.Synced(clk.Now())
		for {
			next := tracker.NextTime()
			if next.IsZero() || !next.Before(end) {
				break
			}
			clk.SetTime(next)
			if !tracker.Due() {
				panic(fmt.Sprintf("%s: periodic full sync not due at its planned time %v", sc.label, next))
			}
			record(next)
			clk.SetTime(next.Add(d))
			tracker.Synced(clk.Now())
		}
	}
	return starts, gaps
}

type gapStats struct {
	min, max, firstAfterStartup time.Duration
}

func newGapStats() gapStats {
	const inf = time.Duration(1<<63 - 1)
	return gapStats{min: inf, max: 0, firstAfterStartup: inf}
}

func (g *gapStats) merge(o gapStats) {
	g.min, g.max = min(g.min, o.min), max(g.max, o.max)
	g.firstAfterStartup = min(g.firstAfterStartup, o.firstAfterStartup)
}

// peak returns the largest number of intervals [s, s+d) that contain a common
// instant, for the start times s in starts, which it sorts. The maximum is
// reached at some start time, where the running intervals are those that
// started in (s-d, s].
func peak(starts []int64, d time.Duration) int {
	slices.Sort(starts)
	best, j := 0, 0
	for i, s := range starts {
		for starts[j] <= s-int64(d) {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// seedResult holds the outcome for one fleet: peaks[c][d] and gaps[c][d] per
// configuration c and duration index d, startupPeaks[d] per duration.
type seedResult struct {
	peaks        [][]int
	gaps         [][]gapStats
	startupPeaks []int
}

// simulateFleet runs fleet f through every configuration and duration for the
// given time after f.start.
func simulateFleet(f fleet, configs []simConfig, durations []time.Duration, length time.Duration) seedResult {
	end := f.start.Add(length)
	r := seedResult{peaks: make([][]int, len(configs)), gaps: make([][]gapStats, len(configs))}
	joins := make([]int64, len(f.joins))
	var starts []int64
	for _, d := range durations {
		for i, j := range f.joins {
			joins[i] = j.UnixNano()
		}
		r.startupPeaks = append(r.startupPeaks, peak(joins, d))
	}
	for c, sc := range configs {
		for _, d := range durations {
			var g gapStats
			starts, g = periodicStarts(sc, f, d, end, starts[:0])
			r.peaks[c] = append(r.peaks[c], peak(starts, d))
			r.gaps[c] = append(r.gaps[c], g)
		}
	}
	return r
}

// runFleets simulates seeds fleets of nodes nodes that joined within window,
// each for window+length after its first possible join, on workers goroutines.
// Fleet s is drawn from the PCG stream (baseSeed, s), so a run is reproducible.
func runFleets(seeds, workers, nodes int, baseSeed uint64, window time.Duration, configs []simConfig, durations []time.Duration, length time.Duration) []seedResult {
	results := make([]seedResult, seeds)
	seedIdx := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, seeds) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range seedIdx {
				f := newFleet(rand.New(rand.NewPCG(baseSeed, uint64(s))), nodes, window)
				results[s] = simulateFleet(f, configs, durations, window+length)
			}
		}()
	}
	for s := range seeds {
		seedIdx <- s
	}
	close(seedIdx)
	wg.Wait()
	return results
}

// defaultSchedule returns the full-sync schedule that kube-proxy runs when the
// ruleSync section and its flags are left unset: the versioned defaults, converted
// to the internal config, with the splay resolved as the proxier resolves it.
func defaultSchedule() (fullsync.Config, error) {
	var versioned kubeproxyconfigv1alpha1.KubeProxyConfiguration
	proxyconfigv1alpha1.SetDefaults_KubeProxyConfiguration(&versioned)
	var internal proxyconfig.KubeProxyRuleSyncConfiguration
	if err := proxyconfigv1alpha1.Convert_v1alpha1_KubeProxyRuleSyncConfiguration_To_config_KubeProxyRuleSyncConfiguration(&versioned.RuleSync, &internal, nil); err != nil {
		return fullsync.Config{}, err
	}
	return fullsync.Config{
		Period: internal.FullSyncPeriod.Duration,
		Jitter: float64(internal.FullSyncJitterPercent) / 100,
		Splay:  internal.EffectiveSyncSplay(),
	}, nil
}

// percentile returns the nearest-rank p-th percentile of vs, which it sorts.
func percentile(vs []int, p float64) int {
	slices.Sort(vs)
	rank := int(p/100*float64(len(vs)) + 0.999999999)
	return vs[max(rank, 1)-1]
}

// durLabel formats whole minutes as "16m", anything else as time.Duration does.
func durLabel(d time.Duration) string {
	if d > 0 && d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

func parseDurations(s string) ([]time.Duration, error) {
	var ds []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("invalid duration %q in -durations", f)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

func parseFloats(s string) ([]float64, error) {
	var fs []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("invalid number %q in -sweep", f)
		}
		fs = append(fs, v)
	}
	return fs, nil
}

func main() {
	nodes := flag.Int("nodes", 1000, "nodes per fleet")
	seeds := flag.Int("seeds", 100, "fleets (random seeds) to simulate")
	hours := flag.Int("hours", 12, "simulated hours after the fleet joins")
	period := flag.Duration("period", time.Hour, "full-sync period")
	splay := flag.Duration("splay", time.Hour, "splay of the \"splay\" and \"both\" configurations")
	jitter := flag.Float64("jitter", 0.5, "jitter of the \"jitter\" and \"both\" configurations")
	durationsFlag := flag.String("durations", "1m,16m", "comma-separated full-sync durations D")
	sweepFlag := flag.String("sweep", "0.1,0.5,0.9", "comma-separated jitter values for the jitter-only sweep (splay 0)")
	baseSeed := flag.Uint64("seed", 1, "base of the random seeds, for reproducible runs")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "fleets simulated in parallel")
	flag.Parse()

	durations, err := parseDurations(*durationsFlag)
	if err == nil && (*nodes < 1 || *seeds < 1 || *hours < 1 || *period <= 0 || *workers < 1) {
		err = fmt.Errorf("-nodes, -seeds, -hours, -period and -workers must be positive")
	}
	var sweep []float64
	if err == nil {
		sweep, err = parseFloats(*sweepFlag)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(2)
	}

	configs := []simConfig{
		{label: "upstream-model", upstream: true, cfg: fullsync.Config{Period: *period}},
		{label: "jitter", cfg: fullsync.Config{Period: *period, Jitter: *jitter}},
		{label: "splay", cfg: fullsync.Config{Period: *period, Splay: *splay}},
		{label: "both", cfg: fullsync.Config{Period: *period, Jitter: *jitter, Splay: *splay}},
	}
	const bothIdx = 3
	mainConfigs := len(configs)
	for _, j := range sweep {
		configs = append(configs, simConfig{label: fmt.Sprintf("sweep-jitter-%.2f", j), cfg: fullsync.Config{Period: *period, Jitter: j}})
	}
	for _, sc := range configs {
		if err := sc.cfg.Validate(); err != nil {
			fmt.Fprintf(os.Stderr, "fleetsim: configuration %s: %v\n", sc.label, err)
			os.Exit(2)
		}
	}

	defCfg, err := defaultSchedule()
	if err == nil {
		err = defCfg.Validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim: the default schedule:", err)
		os.Exit(2)
	}
	// The upstream model runs at the default period, which is upstream's fixed hour.
	defaultConfigs := []simConfig{
		{label: "upstream-model", upstream: true, cfg: fullsync.Config{Period: defCfg.Period}},
		{label: "default", cfg: defCfg},
	}
	windows := []struct {
		label  string
		window time.Duration
	}{{"joined-in-1m", time.Minute}, {"joined-over-24h", 24 * time.Hour}}

	began := time.Now()
	length := time.Duration(*hours) * time.Hour
	results := runFleets(*seeds, *workers, *nodes, *baseSeed, time.Minute, configs, durations, length)
	defaultResults := make([][]seedResult, len(windows))
	for w, win := range windows {
		defaultResults[w] = runFleets(*seeds, *workers, *nodes, *baseSeed, win.window, defaultConfigs, durations, length)
	}
	elapsed := time.Since(began)

	// peaks[c][d] and gaps[c][d] are per configuration c and duration index d,
	// over all seeds; startupPeaks[d] is per duration.
	peaks := make([][][]int, len(configs))
	gaps := make([][]gapStats, len(configs))
	for c := range configs {
		peaks[c] = make([][]int, len(durations))
		gaps[c] = make([]gapStats, len(durations))
		for di := range durations {
			gaps[c][di] = newGapStats()
			for _, r := range results {
				peaks[c][di] = append(peaks[c][di], r.peaks[c][di])
				gaps[c][di].merge(r.gaps[c][di])
			}
		}
	}
	startupPeaks := make([][]int, len(durations))
	for di := range durations {
		for _, r := range results {
			startupPeaks[di] = append(startupPeaks[di], r.startupPeaks[di])
		}
	}

	fmt.Printf("fleetsim: nodes=%d seeds=%d hours=%d period=%v splay=%v jitter=%v durations=%s seed=%d\n",
		*nodes, *seeds, *hours, *period, *splay, *jitter, *durationsFlag, *baseSeed)
	fmt.Println("peak  = most nodes running a periodic full sync [start, start+D) at one instant within the simulated hours")
	fmt.Println("        (start-up syncs excluded; they are reported separately below)")
	fmt.Println("ideal = nodes*D/period, the concurrency of perfectly even spreading; p50/p95/max are over seeds")
	fmt.Println("gaps  = smallest/largest time between a node's consecutive periodic full-sync starts;")
	fmt.Println("        first = smallest time from the end of the start-up sync to the first periodic one")
	fmt.Println()
	header := fmt.Sprintf("%-22s %-4s %6s %6s %6s %8s %6s %6s %6s %9s %9s %9s",
		"config", "D", "p50", "p95", "max", "ideal", "p50/i", "p95/i", "max/i", "gap-min", "gap-max", "first")
	row := func(c, di int) {
		d := durations[di]
		ideal := float64(*nodes) * float64(d) / float64(*period)
		vs := peaks[c][di]
		p50, p95, pmax := percentile(vs, 50), percentile(vs, 95), percentile(vs, 100)
		g := gaps[c][di]
		gapMin, gapMax, first := "-", "-", "-"
		if g.max > 0 {
			gapMin, gapMax = g.min.Round(time.Second).String(), g.max.Round(time.Second).String()
		}
		if g.firstAfterStartup != newGapStats().firstAfterStartup {
			first = g.firstAfterStartup.Round(time.Second).String()
		}
		fmt.Printf("%-22s %-4s %6d %6d %6d %8.2f %6.2f %6.2f %6.2f %9s %9s %9s\n",
			configs[c].label, durLabel(d), p50, p95, pmax, ideal,
			float64(p50)/ideal, float64(p95)/ideal, float64(pmax)/ideal, gapMin, gapMax, first)
	}
	fmt.Println("Configurations (upstream-model = model of upstream: next = previous start + period, anchored at join):")
	fmt.Printf("  upstream-model: period %v, no jitter, no splay\n", *period)
	fmt.Printf("  jitter: period %v, jitter %v, splay 0 | splay: period %v, jitter 0, splay %v | both: period %v, jitter %v, splay %v\n",
		*period, *jitter, *period, *splay, *period, *jitter, *splay)
	fmt.Println(header)
	for c := range mainConfigs {
		for di := range durations {
			row(c, di)
		}
	}
	fmt.Println()
	fmt.Printf("Jitter sweep (fullsync package, period %v, splay 0: every node on the same wall-clock slot):\n", *period)
	fmt.Println(header)
	for c := mainConfigs; c < len(configs); c++ {
		for di := range durations {
			row(c, di)
		}
	}
	fmt.Println()
	fmt.Println("Start-up full syncs (at join, identical for every configuration):")
	for di, d := range durations {
		vs := startupPeaks[di]
		fmt.Printf("startup-peak D=%-4s p50=%d p95=%d max=%d (of %d nodes)\n",
			durLabel(d), percentile(vs, 50), percentile(vs, 95), percentile(vs, 100), *nodes)
	}
	fmt.Println()
	fmt.Printf("Defaults beside upstream (default = the ruleSync section left unset: period %v, jitter %v, splay %v;\n",
		defCfg.Period, defCfg.Jitter, defCfg.Splay)
	fmt.Println("  upstream-model at the same period; each fleet simulated for its join window plus the simulated hours;")
	fmt.Println("  default/upstream = ratio of the p95 peaks, at most 1.00 where the default is no worse):")
	fmt.Printf("%-16s %-15s %-4s %6s %6s %6s %8s %16s\n", "fleet", "config", "D", "p50", "p95", "max", "ideal", "default/upstream")
	for w, win := range windows {
		for di, d := range durations {
			ideal := float64(*nodes) * float64(d) / float64(defCfg.Period)
			var p95s [2]int
			for c := range defaultConfigs {
				vs := make([]int, 0, len(defaultResults[w]))
				for _, r := range defaultResults[w] {
					vs = append(vs, r.peaks[c][di])
				}
				p50, p95, pmax := percentile(vs, 50), percentile(vs, 95), percentile(vs, 100)
				p95s[c] = p95
				ratio := ""
				if c == 1 {
					ratio = fmt.Sprintf("%.2f", float64(p95s[1])/float64(p95s[0]))
				}
				fmt.Printf("%-16s %-15s %-4s %6d %6d %6d %8.2f %16s\n", win.label, defaultConfigs[c].label, durLabel(d), p50, p95, pmax, ideal, ratio)
			}
		}
	}
	fmt.Println()
	fmt.Printf("simulated %d fleets x %d nodes x %d configurations x %d durations in %v (%d workers), and %d fleets x 2 configurations per join window for the defaults\n",
		*seeds, *nodes, len(configs), len(durations), elapsed.Round(time.Millisecond), min(*workers, *seeds), *seeds)
	// Last: the p95 over seeds of peak/ideal of "both", one line per duration.
	for di, d := range durations {
		ideal := float64(*nodes) * float64(d) / float64(*period)
		fmt.Printf("peak_vs_ideal_%s: %.2f\n", durLabel(d), float64(percentile(peaks[bothIdx][di], 95))/ideal)
	}
}
