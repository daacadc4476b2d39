package main

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	in := []float64{3, 1, 2}
	median(in)
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("median reordered its input: %v", in)
	}
}

func TestServicesFor(t *testing.T) {
	for size, want := range map[int]int{1000: 167, 6000: 1000, 36000: 6000, 1: 1} {
		if got := servicesFor(size); got != want {
			t.Errorf("servicesFor(%d) = %d, want %d", size, got, want)
		}
	}
}

func sample(family, tree, phase string, ports, workers int, ms float64) result {
	return result{Family: family, Tree: tree, Phase: phase, Ports: ports, Workers: workers, Ms: ms}
}

func TestClosingTakesMediansAndTheWorstFamily(t *testing.T) {
	var rs []result
	add := func(family, tree, phase string, workers int, ms ...float64) {
		for _, m := range ms {
			rs = append(rs, sample(family, tree, phase, 36000, workers, m))
		}
	}
	add("ipv4", "upstream", "full", 1, 500, 520, 9000) // the outlier must not move the median
	add("ipv4", "patched", "full", 1, 400, 410, 420)
	add("ipv4", "patched", "full", 2, 200, 205, 210)
	add("ipv4", "patched", "partial", 2, 0.3, 0.4, 0.2)
	add("ipv6", "upstream", "full", 1, 600, 600, 600)
	add("ipv6", "patched", "full", 1, 450, 450, 450)
	add("ipv6", "patched", "full", 2, 300, 300, 300)
	add("ipv6", "patched", "partial", 2, 0.9, 0.9, 0.9)
	add("ipv6", "patched", "initial", 2, 99999) // never part of the ratios
	rep := summarize(rs, 2)
	out := rep.closing(36000)
	for _, want := range []string{
		"partial_ms_36k: 0.90\n",  // ipv6 is the worse
		"speedup_36k: 1.50\n",     // ipv6: 450/300; ipv4: 410/205 = 2
		"vs_upstream_36k: 2.00\n", // ipv6: 600/300; ipv4: 520/205 = 2.54
	} {
		if !strings.Contains(out, want) {
			t.Errorf("closing lines lack %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "vs_upstream_36k: 2.00\n") {
		t.Errorf("vs_upstream_36k must be the last line:\n%s", out)
	}
}

func TestClosingWithoutTheShape(t *testing.T) {
	rep := summarize([]result{sample("ipv4", "patched", "full", 6000, 1, 10)}, 2)
	if out := rep.closing(36000); strings.Contains(out, "speedup_36k") || !strings.Contains(out, "no 36000-port shape measured") {
		t.Errorf("closing lines for a missing shape:\n%s", out)
	}
}

func TestTableOrder(t *testing.T) {
	rs := []result{
		sample("ipv6", "patched", "partial", 6000, 2, 1),
		sample("ipv4", "patched", "full", 6000, 2, 1),
		sample("ipv4", "upstream", "full", 6000, 1, 1),
		sample("ipv4", "patched", "full", 1002, 1, 1),
		sample("ipv4", "patched", "initial", 6000, 1, 1),
	}
	table := summarize(rs, 2).table()
	var order []string
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[0] == "ipv4" || f[0] == "ipv6") {
			order = append(order, strings.Join(f[:5], " "))
		}
	}
	want := []string{
		"ipv4 1002 full patched 1",
		"ipv4 6000 initial patched 1",
		"ipv4 6000 full upstream 1",
		"ipv4 6000 full patched 2",
		"ipv6 6000 partial patched 2",
	}
	if strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("table order:\n%s\nwant:\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
}

func TestBatchTable(t *testing.T) {
	rs := []result{
		{Family: "ipv4", Phase: "batch", Batch: 4, Workers: 1, Ms: 2},
		{Family: "ipv4", Phase: "batch", Batch: 4, Workers: 2, Ms: 1},
		{Family: "ipv4", Phase: "batch", Batch: 1, Workers: 1, Ms: 0.1},
		{Family: "ipv4", Phase: "batch", Batch: 1, Workers: 2, Ms: 0.2},
	}
	out := batchTable(rs, 2)
	i1, i4 := strings.Index(out, "k=1 "), strings.Index(out, "k=4 ")
	if i1 < 0 || i4 < 0 || i1 > i4 {
		t.Fatalf("batch table rows missing or out of order:\n%s", out)
	}
	if !strings.Contains(out, "serial/pool=0.50") || !strings.Contains(out, "serial/pool=2.00") {
		t.Errorf("batch ratios wrong:\n%s", out)
	}
	if batchTable(nil, 2) != "" {
		t.Error("batch table without batch results is not empty")
	}
}

func TestSplitKeepsTheTotal(t *testing.T) {
	for _, c := range []struct{ total, parts int }{{10, 3}, {150_000_000, 2}, {7, 7}, {5, 8}} {
		sum, parts := 0, split(c.total, c.parts)
		for i, p := range parts {
			sum += p
			if i > 0 && p > parts[i-1] {
				t.Errorf("split(%d, %d) = %v: not largest first", c.total, c.parts, parts)
			}
		}
		if sum != c.total || len(parts) != c.parts || parts[0]-parts[len(parts)-1] > 1 {
			t.Errorf("split(%d, %d) = %v", c.total, c.parts, parts)
		}
	}
}
