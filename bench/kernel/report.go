package main

// Results of the kernel benchmark and their side-by-side report. Pure.

import (
	"fmt"
	"strings"
	"time"
)

// Trees.
const (
	TreeUpstream = "upstream"
	TreePatched  = "patched"
)

// Phases in report order.
const (
	PhaseCold     = "cold"     // empty netns, new proxier process: the first (full) sync
	PhasePeriodic = "periodic" // the restart process, nothing changed: a periodic full sync
	PhasePartial  = "partial"  // the cold process: one endpoint added to one service
	PhaseRestart  = "restart"  // new process, same netns, rules present: the start-up full sync
	PhaseUpgrade  = "upgrade"  // patched process started on the table upstream wrote
)

// Phases lists the phases in report order.
var Phases = []string{PhaseCold, PhasePeriodic, PhasePartial, PhaseRestart, PhaseUpgrade}

// PhaseResult is one tree's measurement of one phase.
type PhaseResult struct {
	Tree, Shape, Phase string
	Size               int
	Ran                bool
	Err                string
	Note               string
	StartNS, EndNS     int64
	Wall               time.Duration // measured outside the proxier
	SyncKinds          string        // which syncs ran, from the proxier's latency histograms ("full", "partial", "full+full")
	Internal           time.Duration // the proxier's own sync latency (histogram sums)
	NetlinkRead        time.Duration // the drift checks' netlink reads (patched; not nft invocations)
	NFT                NFTStats
	RTNL               LatencySummary
	Extrapolated       bool
	Fit                string
}

// Floor is the per-invocation nft cost measured on a big table.
type Floor struct {
	Table                    string // whose table: upstream or patched
	List, ListTerse, Trivial time.Duration
	Err                      string
}

// SizeRun holds everything measured for one shape and size.
type SizeRun struct {
	Shape  string
	Size   int
	Idle   LatencySummary
	Phases map[string]map[string]*PhaseResult // tree -> phase -> result
	Floors []Floor
}

// Get returns the result of tree and phase, or nil.
func (r *SizeRun) Get(tree, phase string) *PhaseResult {
	if r == nil || r.Phases[tree] == nil {
		return nil
	}
	return r.Phases[tree][phase]
}

// Put stores a result.
func (r *SizeRun) Put(p *PhaseResult) {
	if r.Phases == nil {
		r.Phases = map[string]map[string]*PhaseResult{}
	}
	if r.Phases[p.Tree] == nil {
		r.Phases[p.Tree] = map[string]*PhaseResult{}
	}
	r.Phases[p.Tree][p.Phase] = p
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d", d.Round(time.Millisecond).Milliseconds())
}

// formatRTNL renders a probe summary: worst and p99 of all operations, then the worst of each.
func formatRTNL(l LatencySummary) string {
	var ops []string
	for _, op := range ProbeOps {
		if d, ok := l.MaxByOp[op]; ok {
			ops = append(ops, op+" "+ms(d))
		}
	}
	s := fmt.Sprintf("rtnl max %s p99 %s ms (n=%d", ms(l.Max), ms(l.P99), l.N)
	if len(ops) > 0 {
		s += "; worst " + strings.Join(ops, ", ")
	}
	if l.Errors > 0 {
		s += fmt.Sprintf("; %d probe errors", l.Errors)
	}
	return s + ")"
}

// FormatCell renders one tree's result for the side-by-side line.
func FormatCell(p *PhaseResult) string {
	switch {
	case p == nil:
		return "not run"
	case p.Extrapolated:
		return fmt.Sprintf("wall ~%s ms (extrapolated: %s)", ms(p.Wall), p.Fit)
	case !p.Ran && p.Note != "":
		return p.Note
	case !p.Ran:
		return "not run"
	}
	n := p.NFT
	s := fmt.Sprintf("wall %s ms [%s], nft %d (w%d r%d c%d), max write %s ms, max read %s ms, nft total %s ms (user %s / sys %s ms), reads %s ms, %s",
		ms(p.Wall), p.SyncKinds, n.Count, n.Writes, n.Reads, n.Checks, ms(n.MaxWrite), ms(n.MaxRead), ms(n.Total), ms(n.User), ms(n.Sys), ms(n.ReadTotal),
		formatRTNL(p.RTNL))
	if p.NetlinkRead > 0 {
		s += fmt.Sprintf(", netlink reads %s ms", ms(p.NetlinkRead))
	}
	if n.FailedWrites > 0 {
		s += fmt.Sprintf(", %d nft writes FAILED", n.FailedWrites)
	}
	if n.FailedOther > 0 {
		s += fmt.Sprintf(", %d reads/checks exited non-zero", n.FailedOther)
	}
	if p.Err != "" {
		s += ", ERROR: " + p.Err
	}
	if p.Note != "" {
		s += ", note: " + p.Note
	}
	return s
}

// FormatSizeRun renders the side-by-side lines of one shape and size.
func FormatSizeRun(r *SizeRun) []string {
	var out []string
	out = append(out, fmt.Sprintf("shape: %s size: %d idle: %s", r.Shape, r.Size, formatRTNL(r.Idle)))
	for _, ph := range Phases {
		up, pa := r.Get(TreeUpstream, ph), r.Get(TreePatched, ph)
		if up == nil && pa == nil {
			continue
		}
		if ph == PhaseUpgrade && up == nil {
			up = &PhaseResult{Note: "n/a (the upgrade starts the patched proxier on upstream's table)"}
		}
		out = append(out, fmt.Sprintf("shape: %s size: %d phase: %-8s | upstream: %s | patched: %s", r.Shape, r.Size, ph, FormatCell(up), FormatCell(pa)))
	}
	for _, f := range r.Floors {
		if f.Err != "" {
			out = append(out, fmt.Sprintf("shape: %s size: %d nft-floor on %s table: ERROR %s", r.Shape, r.Size, f.Table, f.Err))
			continue
		}
		out = append(out, fmt.Sprintf("shape: %s size: %d nft-floor on %s table: list %s ms, --json --terse list %s ms, trivial -f write %s ms",
			r.Shape, r.Size, f.Table, ms(f.List), ms(f.ListTerse), ms(f.Trivial)))
	}
	return out
}

// Extrapolate fills in upstream's wall time for the phases of runs where upstream was not
// run, from a power law fitted on the sizes where it was (those >= 6000 when there are at
// least two, else all). It returns a line describing each fit used.
func Extrapolate(runs []*SizeRun) []string {
	var notes []string
	byShape := map[string][]*SizeRun{}
	var shapes []string
	for _, r := range runs {
		if byShape[r.Shape] == nil {
			shapes = append(shapes, r.Shape)
		}
		byShape[r.Shape] = append(byShape[r.Shape], r)
	}
	for _, shape := range shapes {
		rs := byShape[shape]
		for _, ph := range []string{PhaseCold, PhasePeriodic, PhasePartial, PhaseRestart} {
			var missing []*SizeRun
			var xs, ys []float64
			for _, r := range rs {
				p := r.Get(TreeUpstream, ph)
				if p != nil && p.Ran && p.Err == "" && p.Wall > 0 {
					xs = append(xs, float64(r.Size))
					ys = append(ys, p.Wall.Seconds())
				} else if p != nil && !p.Ran && !p.Extrapolated {
					missing = append(missing, r)
				}
			}
			if len(missing) == 0 {
				continue
			}
			fx, fy := xs, ys
			var bx, by []float64
			for i := range xs {
				if xs[i] >= 6000 {
					bx, by = append(bx, xs[i]), append(by, ys[i])
				}
			}
			if len(bx) >= 2 {
				fx, fy = bx, by
			}
			law, err := FitPowerLaw(fx, fy)
			if err != nil {
				notes = append(notes, fmt.Sprintf("extrapolation: shape %s phase %s: %v", shape, ph, err))
				continue
			}
			for _, r := range missing {
				w := law.At(float64(r.Size))
				r.Put(&PhaseResult{Tree: TreeUpstream, Shape: shape, Size: r.Size, Phase: ph, Extrapolated: true,
					Wall: time.Duration(w * float64(time.Second)), Fit: law.String()})
			}
			notes = append(notes, fmt.Sprintf("extrapolation: shape %s phase %s upstream: %s", shape, ph, law))
		}
	}
	return notes
}

// FinalLines computes the four summary lines from the ipv4 runs at 36k and 24k.
func FinalLines(runs []*SizeRun) []string {
	find := func(shape string, size int) *SizeRun {
		for _, r := range runs {
			if r.Shape == shape && r.Size == size {
				return r
			}
		}
		return nil
	}
	na := func(why string) string { return "n/a (" + why + ")" }
	r36, r24 := find("ipv4", 36000), find("ipv4", 24000)

	partial := na("ipv4 36000 not run")
	maxNFT := partial
	maxRead, maxFloor := "", ""
	excess := partial
	if r36 != nil {
		if p := r36.Get(TreePatched, PhasePartial); p != nil && p.Ran && p.Err == "" {
			partial = ms(p.Wall)
		} else {
			partial = na("patched partial sync failed or not run")
		}
		var mw, mr, worst time.Duration
		mwPhase := ""
		ran := false
		for _, ph := range Phases {
			if p := r36.Get(TreePatched, ph); p != nil && p.Ran {
				ran = true
				if p.NFT.MaxWrite > mw {
					mw, mwPhase = p.NFT.MaxWrite, ph
				}
				mr = max(mr, p.NFT.MaxRead)
				worst = max(worst, p.RTNL.Max)
			}
		}
		if ran {
			maxNFT = ms(mw)
			maxRead = fmt.Sprintf("max_nft_read_ms_36k: %s", ms(mr))
			if f := floorOf(r36, mwPhase); f != nil {
				maxFloor = fmt.Sprintf("max_nft_floor_ms_36k: %s (phase %s, on %s's table: a trivial nft -f write there, which holds no lock while nft fills its cache)", ms(f.Trivial), mwPhase, f.Table)
			}
			excess = ms(worst - r36.Idle.Max)
		} else {
			maxNFT, excess = na("patched not run"), na("patched not run")
		}
	}
	speedup := na("ipv4 24000 not run")
	if r24 != nil {
		up, pa := r24.Get(TreeUpstream, PhasePeriodic), r24.Get(TreePatched, PhasePeriodic)
		switch {
		case up == nil || pa == nil || !pa.Ran || pa.Wall <= 0:
			speedup = na("periodic full sync missing at 24000")
		case up.Extrapolated:
			speedup = na(fmt.Sprintf("upstream was not measured at 24000; extrapolated ratio %.1f", up.Wall.Seconds()/pa.Wall.Seconds()))
		case !up.Ran || up.Err != "":
			speedup = na("upstream periodic full sync failed")
		default:
			speedup = fmt.Sprintf("%.1f", up.Wall.Seconds()/pa.Wall.Seconds())
		}
	}
	var out []string
	for _, l := range []string{maxRead, maxFloor} {
		if l != "" {
			out = append(out, l)
		}
	}
	out = append(out,
		"partial_sync_ms_36k: "+partial,
		"max_nft_ms_36k: "+maxNFT,
		"rtnl_excess_ms_36k: "+excess,
		"fullsync_speedup_24k: "+speedup,
	)
	return out
}

// floorOf returns the floor measured on the table that a patched phase of r runs on: the
// upgrade starts on upstream's table, every other phase on the patched one. It returns nil if
// that floor was not measured.
func floorOf(r *SizeRun, phase string) *Floor {
	table := TreePatched
	if phase == PhaseUpgrade {
		table = TreeUpstream
	}
	for i := range r.Floors {
		if f := &r.Floors[i]; f.Table == table && f.Err == "" && f.Trivial > 0 {
			return f
		}
	}
	return nil
}
