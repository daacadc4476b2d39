package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func phase(tree, shape string, size int, ph string, wall time.Duration) *PhaseResult {
	return &PhaseResult{Tree: tree, Shape: shape, Size: size, Phase: ph, Ran: true, Wall: wall, SyncKinds: "full"}
}

func TestFinalLines(t *testing.T) {
	r24 := &SizeRun{Shape: "ipv4", Size: 24000}
	r24.Put(phase(TreeUpstream, "ipv4", 24000, PhasePeriodic, 400*time.Second))
	r24.Put(phase(TreePatched, "ipv4", 24000, PhasePeriodic, 2*time.Second))
	r36 := &SizeRun{Shape: "ipv4", Size: 36000, Idle: LatencySummary{Max: 100 * time.Millisecond}}
	p := phase(TreePatched, "ipv4", 36000, PhasePartial, 420*time.Millisecond)
	p.NFT = NFTStats{MaxWrite: 30 * time.Millisecond, MaxRead: 900 * time.Millisecond}
	p.RTNL = LatencySummary{Max: 150 * time.Millisecond}
	r36.Put(p)
	c := phase(TreePatched, "ipv4", 36000, PhaseCold, 5*time.Second)
	c.NFT = NFTStats{MaxWrite: 480 * time.Millisecond, MaxRead: 10 * time.Millisecond}
	c.RTNL = LatencySummary{Max: 600 * time.Millisecond}
	r36.Put(c)
	// An upstream phase at 36k must not count.
	u := phase(TreeUpstream, "ipv4", 36000, PhaseCold, 900*time.Second)
	u.NFT = NFTStats{MaxWrite: 800 * time.Second}
	r36.Put(u)
	// Another shape at 36k must not count either.
	o := &SizeRun{Shape: "ipv6", Size: 36000}
	o.Put(phase(TreePatched, "ipv6", 36000, PhasePartial, time.Hour))

	r36.Floors = []Floor{{Table: TreeUpstream, Trivial: 800 * time.Millisecond}, {Table: TreePatched, Trivial: 200 * time.Millisecond}}

	got := FinalLines([]*SizeRun{r24, o, r36})
	want := []string{
		"max_nft_read_ms_36k: 900",
		"max_nft_floor_ms_36k: 200 (phase cold, on patched's table: a trivial nft -f write there, which holds no lock while nft fills its cache)",
		"partial_sync_ms_36k: 420",
		"max_nft_ms_36k: 480",
		"rtnl_excess_ms_36k: 500",
		"fullsync_speedup_24k: 200.0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("FinalLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The upgrade's longest write ran on upstream's table: its floor is that table's.
	g := phase(TreePatched, "ipv4", 36000, PhaseUpgrade, 30*time.Second)
	g.NFT = NFTStats{MaxWrite: 700 * time.Millisecond}
	r36.Put(g)
	got = FinalLines([]*SizeRun{r24, o, r36})
	if !slices.Contains(got, "max_nft_ms_36k: 700") || !strings.HasPrefix(got[1], "max_nft_floor_ms_36k: 800 (phase upgrade, on upstream's table") {
		t.Errorf("with the upgrade's write the longest: %q", got)
	}
}

func TestFinalLinesMissing(t *testing.T) {
	got := FinalLines(nil)
	if len(got) != 4 || !strings.HasPrefix(got[0], "partial_sync_ms_36k: n/a") || !strings.HasPrefix(got[3], "fullsync_speedup_24k: n/a") {
		t.Errorf("FinalLines(nil) = %q", got)
	}
	// An extrapolated upstream figure never becomes the speedup.
	r24 := &SizeRun{Shape: "ipv4", Size: 24000}
	r24.Put(&PhaseResult{Tree: TreeUpstream, Phase: PhasePeriodic, Extrapolated: true, Wall: 400 * time.Second})
	r24.Put(phase(TreePatched, "ipv4", 24000, PhasePeriodic, 2*time.Second))
	got = FinalLines([]*SizeRun{r24})
	if !strings.HasPrefix(got[3], "fullsync_speedup_24k: n/a (upstream was not measured") {
		t.Errorf("speedup from an extrapolation: %q", got[3])
	}
}

func TestExtrapolate(t *testing.T) {
	var runs []*SizeRun
	for _, n := range []int{1000, 6000, 12000, 24000} {
		r := &SizeRun{Shape: "ipv4", Size: n}
		// t = 1e-12 * N^3 s; 1000 is off the law and must be ignored by the fit.
		w := 1e-12 * math.Pow(float64(n), 3)
		if n == 1000 {
			w = 5
		}
		r.Put(phase(TreeUpstream, "ipv4", n, PhasePeriodic, time.Duration(w*float64(time.Second))))
		runs = append(runs, r)
	}
	r36 := &SizeRun{Shape: "ipv4", Size: 36000}
	r36.Put(&PhaseResult{Tree: TreeUpstream, Phase: PhasePeriodic, Note: "not run (size > UPSTREAM_MAX=24000)"})
	runs = append(runs, r36)
	notes := Extrapolate(runs)
	p := r36.Get(TreeUpstream, PhasePeriodic)
	if p == nil || !p.Extrapolated {
		t.Fatalf("36k not extrapolated: %+v (notes %q)", p, notes)
	}
	want := 1e-12 * math.Pow(36000, 3)
	if math.Abs(p.Wall.Seconds()/want-1) > 1e-3 {
		t.Errorf("extrapolated %v s, want %v s", p.Wall.Seconds(), want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "N^3.00") || !strings.Contains(notes[0], "[6000 12000 24000]") {
		t.Errorf("notes = %q", notes)
	}
	if cell := FormatCell(p); !strings.HasPrefix(cell, "wall ~46656 ms (extrapolated") {
		t.Errorf("cell = %q", cell)
	}
}

func TestFormatSizeRun(t *testing.T) {
	r := &SizeRun{Shape: "ipv6", Size: 1000, Idle: LatencySummary{N: 30, Max: 20 * time.Millisecond, P99: 20 * time.Millisecond}}
	r.Put(phase(TreeUpstream, "ipv6", 1000, PhaseCold, 150*time.Millisecond))
	pc := phase(TreePatched, "ipv6", 1000, PhaseCold, 90*time.Millisecond)
	pc.NFT = NFTStats{Count: 9, Writes: 1, Reads: 8, FailedOther: 8}
	r.Put(pc)
	r.Put(phase(TreePatched, "ipv6", 1000, PhaseUpgrade, 80*time.Millisecond))
	r.Floors = []Floor{{Table: TreePatched, List: 90 * time.Millisecond, ListTerse: 80 * time.Millisecond, Trivial: 15 * time.Millisecond}}
	lines := FormatSizeRun(r)
	if len(lines) != 4 {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "shape: ipv6 size: 1000 ") {
			t.Errorf("line does not start with the shape: %q", l)
		}
	}
	if !strings.Contains(lines[1], "phase: cold") || !strings.Contains(lines[1], "| upstream: wall 150 ms [full]") || !strings.Contains(lines[1], "| patched: wall 90 ms [full], nft 9 (w1 r8 c0)") || !strings.Contains(lines[1], "8 reads/checks exited non-zero") {
		t.Errorf("cold line: %q", lines[1])
	}
	if !strings.Contains(lines[2], "upstream: n/a") {
		t.Errorf("upgrade line: %q", lines[2])
	}
	if !strings.Contains(lines[3], "nft-floor on patched table: list 90 ms, --json --terse list 80 ms, trivial -f write 15 ms") {
		t.Errorf("floor line: %q", lines[3])
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{"SIZES": "6k, 1000,1000", "SHAPES": "ipv6,dualstack", "UPSTREAM_MAX": "12k", "UPGRADE_MAX": "24k", "PERIODIC_SLOT": "45", "RTNL_INTERVAL": "50", "PHASE_TIMEOUT": "90s"}
	o, err := OptionsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Shapes, ",") != "ipv6,dualstack" || o.UpstreamMax != 12000 || o.UpgradeMax != 24000 || o.Slot != 45*time.Second || o.ProbeEvery != 50*time.Millisecond || o.Timeout != 90*time.Second {
		t.Errorf("options %+v", o)
	}
	sh, _ := ShapeByName("ipv6")
	if got := o.SizesFor(sh); len(got) != 2 || got[0] != 1000 || got[1] != 6000 {
		t.Errorf("SizesFor = %v", got)
	}
	d, _ := OptionsFromEnv(func(string) string { return "" })
	if len(d.Shapes) != len(Shapes) || d.Sizes != nil || d.UpstreamMax != 24000 || d.UpgradeMax != 36000 {
		t.Errorf("defaults %+v", d)
	}
	if got := d.SizesFor(sh); len(got) != 5 || got[4] != 36000 {
		t.Errorf("default sizes %v", got)
	}
	for _, bad := range []map[string]string{{"SHAPES": "ipv5"}, {"SIZES": "1k,x"}, {"UPSTREAM_MAX": "1,2"}, {"UPGRADE_MAX": "big"}, {"PERIODIC_SLOT": "soon"}, {"PATCHED_ONLY": "1", "UPSTREAM_ONLY": "1"}} {
		if _, err := OptionsFromEnv(func(k string) string { return bad[k] }); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
