package main

import (
	"fmt"
	"sort"
	"strings"
)

// key groups measurements.
type key struct {
	family, tree string
	ports        int
	phase        string
	workers      int
}

// stats are the medians of a group of measurements.
type stats struct {
	n                              int
	ms, gcMs, allocMB, serializeMs float64
	allocs                         float64
	ops, txs                       float64
}

// median returns the median of v (the mean of the middle two for an even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report holds the medians of every group.
type report struct {
	workers int
	groups  map[key]stats
	keys    []key
}

// summarize groups results by shape, tree, phase and workers, and takes medians.
func summarize(results []result, workers int) report {
	type cols struct{ ms, gc, mb, ser, allocs, ops, txs []float64 }
	by := map[key]*cols{}
	var keys []key
	for _, r := range results {
		if r.Phase == "batch" {
			continue
		}
		k := key{r.Family, r.Tree, r.Ports, r.Phase, r.Workers}
		c := by[k]
		if c == nil {
			c = &cols{}
			by[k] = c
			keys = append(keys, k)
		}
		c.ms = append(c.ms, r.Ms)
		c.gc = append(c.gc, r.GCCPUMs)
		c.mb = append(c.mb, r.AllocMB)
		c.ser = append(c.ser, r.SerializeMs)
		c.allocs = append(c.allocs, float64(r.Allocs))
		c.ops = append(c.ops, float64(r.Ops))
		c.txs = append(c.txs, float64(r.Txs))
	}
	rep := report{workers: workers, groups: map[key]stats{}, keys: keys}
	for k, c := range by {
		rep.groups[k] = stats{n: len(c.ms), ms: median(c.ms), gcMs: median(c.gc), allocMB: median(c.mb),
			serializeMs: median(c.ser), allocs: median(c.allocs), ops: median(c.ops), txs: median(c.txs)}
	}
	phaseOrder := map[string]int{"initial": 0, "full": 1, "partial": 2}
	sort.SliceStable(rep.keys, func(i, j int) bool {
		a, b := rep.keys[i], rep.keys[j]
		if a.family != b.family {
			return a.family < b.family
		}
		if a.ports != b.ports {
			return a.ports < b.ports
		}
		if a.phase != b.phase {
			return phaseOrder[a.phase] < phaseOrder[b.phase]
		}
		if a.tree != b.tree {
			return a.tree == "upstream"
		}
		return a.workers < b.workers
	})
	return rep
}

// table prints one line per group.
func (rep report) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nmedians; ms is the sync's Go time until its first transaction is handed to nft (nft itself is not run)\n")
	fmt.Fprintf(&b, "%-5s %6s %-8s %-8s %7s %5s %10s %10s %9s %10s %8s %5s %12s\n",
		"shape", "ports", "phase", "tree", "workers", "n", "ms", "gc_cpu_ms", "alloc_MB", "allocs", "ops", "txs", "serialize_ms")
	for _, k := range rep.keys {
		s := rep.groups[k]
		fmt.Fprintf(&b, "%-5s %6d %-8s %-8s %7d %5d %10.2f %10.1f %9.1f %10.0f %8.0f %5.0f %12.1f\n",
			k.family, k.ports, k.phase, k.tree, k.workers, s.n, s.ms, s.gcMs, s.allocMB, s.allocs, s.ops, s.txs, s.serializeMs)
	}
	return b.String()
}

// ratios returns, for the shape family/ports: patched full 1 worker / all workers (speedup),
// upstream full / patched full all workers (vsUpstream), and the patched partial sync's ms.
// ok is false when a figure is missing.
func (rep report) ratios(family string, ports int) (speedup, vsUpstream, partialMs float64, ok bool) {
	one, okOne := rep.groups[key{family, "patched", ports, "full", 1}]
	all, okAll := rep.groups[key{family, "patched", ports, "full", rep.workers}]
	up, okUp := rep.groups[key{family, "upstream", ports, "full", 1}]
	part, okPart := rep.groups[key{family, "patched", ports, "partial", rep.workers}]
	if !okOne || !okAll || !okUp || !okPart || all.ms <= 0 {
		return 0, 0, 0, false
	}
	return one.ms / all.ms, up.ms / all.ms, part.ms, true
}

// closing returns the closing lines for the shape of about size service ports: the worst of
// the families (lowest ratios, highest partial time).
func (rep report) closing(size int) string {
	ports := servicesFor(size) * 6
	var b strings.Builder
	b.WriteString("\n")
	found := false
	var speedup, vs, partial float64
	families := map[string]bool{}
	for _, k := range rep.keys {
		families[k.family] = true
	}
	names := make([]string, 0, len(families))
	for f := range families {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		s, v, p, ok := rep.ratios(f, ports)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "%s %dk: speedup %.2f, vs upstream %.2f, partial %.2f ms\n", f, size/1000, s, v, p)
		if !found || s < speedup {
			speedup = s
		}
		if !found || v < vs {
			vs = v
		}
		if !found || p > partial {
			partial = p
		}
		found = true
	}
	if !found {
		fmt.Fprintf(&b, "no %d-port shape measured: no closing figures\n", ports)
		return b.String()
	}
	fmt.Fprintf(&b, "partial_ms_%dk: %.2f\n", size/1000, partial)
	fmt.Fprintf(&b, "speedup_%dk: %.2f\n", size/1000, speedup)
	fmt.Fprintf(&b, "vs_upstream_%dk: %.2f\n", size/1000, vs)
	return b.String()
}

// batchTable reports the partial syncs of k Services at once, serial against the pool, which
// place the pool's threshold.
func batchTable(results []result, workers int) string {
	type bk struct {
		family  string
		batch   int
		workers int
	}
	ms := map[bk][]float64{}
	var batches []int
	seen := map[int]bool{}
	var family string
	for _, r := range results {
		if r.Phase != "batch" {
			continue
		}
		family = r.Family
		k := bk{r.Family, r.Batch, r.Workers}
		ms[k] = append(ms[k], r.Ms)
		if !seen[r.Batch] {
			seen[r.Batch] = true
			batches = append(batches, r.Batch)
		}
	}
	if len(batches) == 0 {
		return ""
	}
	sort.Ints(batches)
	var b strings.Builder
	fmt.Fprintf(&b, "\npartial syncs of k changed Services (6 service ports each), patched, serial against %d workers (pool forced on):\n", workers)
	fams := map[string]bool{}
	for k := range ms {
		fams[k.family] = true
	}
	_ = family
	var fl []string
	for f := range fams {
		fl = append(fl, f)
	}
	sort.Strings(fl)
	for _, f := range fl {
		for _, n := range batches {
			s, p := median(ms[bk{f, n, 1}]), median(ms[bk{f, n, workers}])
			ratio := 0.0
			if p > 0 {
				ratio = s / p
			}
			fmt.Fprintf(&b, "  %-5s k=%-4d ports=%-5d serial=%.3fms pool=%.3fms serial/pool=%.2f\n", f, n, 6*n, s, p, ratio)
		}
	}
	return b.String()
}
