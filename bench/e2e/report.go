package e2e

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Binaries, in the report's order.
const (
	Patched  = "patched"
	Upstream = "upstream"
)

// Run is one binary's figures at one size.
type Run struct {
	Binary  string
	Size    int
	Skipped string // why the binary did not run at this size ("" when it ran)
	Err     string // the first failure, when the run broke off
	Note    string // what did not go as planned without breaking the run off

	FirstSync time.Duration // process start to the end of the first complete sync
	Healthz   time.Duration // process start to the first /healthz 200 (polled every 100ms)

	PeakRSS   int64   // bytes, VmHWM at the end of the run
	SteadyRSS int64   // bytes, VmRSS after the first sync and a quiet spell
	HeapInuse float64 // bytes, go_memstats_heap_inuse_bytes at the same time
	CPUFirst  float64 // CPU seconds (user+system) of kube-proxy until the first sync
	CPUTotal  float64 // the same over the whole run
	NftFirst  float64 // CPU seconds of its nft runs (waited-for children) until the first sync
	NftTotal  float64 // the same over the whole run

	FullSyncs    int             // periodic full syncs completed during the churn
	FullSyncLong time.Duration   // the longest of them (from the full-sync histogram's sum)
	Changes      int             // Services created during the churn
	Seen         int             // of them, seen in the kernel before the deadline
	NftP50       time.Duration   // creation to the element in the kernel (polled); a change
	NftP99       time.Duration   // never seen counts as the wait's end, and makes the figure a bound
	NftBound     bool            // some change was never seen: NftP50/NftP99 are lower bounds
	TextListings int             // drift checks that listed the table as text (patched only)
	TextListLong time.Duration   // the time those listings took in all
	HistP50      float64         // seconds, kubeproxy_network_programming_duration_seconds over the churn
	HistP99      float64         //
	HistBound    [2]bool         // p50, p99 lie beyond the largest finite bucket: lower bounds
	RTNLIdle     time.Duration   // worst probe operation while nothing ran (before kube-proxy)
	RTNLWorst    time.Duration   // worst over the binary's whole run
	RTNLFullSync []time.Duration // worst during each periodic full sync
	RTNLFailed   int             // probe operations that failed
}

// RTNLExcess is the worst probe operation over the run, less the idle worst.
func (r Run) RTNLExcess() time.Duration { return r.RTNLWorst - r.RTNLIdle }

// ran reports whether r has figures: a run that broke off keeps those it measured (the others
// are zero), and says why in its Err.
func (r *Run) ran() bool { return r != nil && r.Skipped == "" }

// Table returns the report of one size: one row per figure, patched beside upstream, with the
// ratio patched/upstream where both ran.
func Table(size int, runs []Run) []string {
	var pa, up *Run
	for i := range runs {
		if runs[i].Size != size {
			continue
		}
		switch runs[i].Binary {
		case Patched:
			pa = &runs[i]
		case Upstream:
			up = &runs[i]
		}
	}
	out := []string{fmt.Sprintf("== %d service ports (%d Services) ==", size, Services(size)),
		fmt.Sprintf("%-42s %14s %14s %8s", "", Patched, Upstream, "ratio")}
	row := func(name string, f func(r *Run) (float64, string)) {
		pv, ps := cell(pa, f)
		uv, us := cell(up, f)
		ratio := ""
		if pa.ran() && up.ran() && pa.Err == "" && up.Err == "" && uv > 0 && !math.IsNaN(pv) && !math.IsNaN(uv) {
			ratio = fmt.Sprintf("%.2f", pv/uv)
		}
		out = append(out, fmt.Sprintf("%-42s %14s %14s %8s", name, ps, us, ratio))
	}
	secs := func(d time.Duration) (float64, string) { return d.Seconds(), fmt.Sprintf("%.2f", d.Seconds()) }
	msec := func(d time.Duration) (float64, string) { return ms(d), fmt.Sprintf("%.0f", ms(d)) }
	mib := func(b float64) (float64, string) { return b / (1 << 20), fmt.Sprintf("%.1f", b/(1<<20)) }
	num := func(v float64, format string) (float64, string) { return v, fmt.Sprintf(format, v) }
	row("first complete sync (s)", func(r *Run) (float64, string) { return secs(r.FirstSync) })
	row("/healthz 200 (s)", func(r *Run) (float64, string) { return secs(r.Healthz) })
	row("peak RSS (MiB)", func(r *Run) (float64, string) { return mib(float64(r.PeakRSS)) })
	row("steady RSS (MiB)", func(r *Run) (float64, string) { return mib(float64(r.SteadyRSS)) })
	row("Go heap in use (MiB)", func(r *Run) (float64, string) { return mib(r.HeapInuse) })
	row("CPU to first sync, kube-proxy (s)", func(r *Run) (float64, string) { return num(r.CPUFirst, "%.2f") })
	row("CPU to first sync, its nft runs (s)", func(r *Run) (float64, string) { return num(r.NftFirst, "%.2f") })
	row("CPU whole run, kube-proxy (s)", func(r *Run) (float64, string) { return num(r.CPUTotal, "%.2f") })
	row("CPU whole run, its nft runs (s)", func(r *Run) (float64, string) { return num(r.NftTotal, "%.2f") })
	row("periodic full syncs in churn", func(r *Run) (float64, string) { return num(float64(r.FullSyncs), "%.0f") })
	row("longest full sync (s)", func(r *Run) (float64, string) { return secs(r.FullSyncLong) })
	row("changes seen in kernel", func(r *Run) (float64, string) {
		return float64(r.Seen), fmt.Sprintf("%d/%d", r.Seen, r.Changes)
	})
	bound := func(r *Run, d time.Duration) (float64, string) {
		v, s := msec(d)
		if r.NftBound {
			s = ">=" + s
		}
		return v, s
	}
	row("programming p50, nft (ms)", func(r *Run) (float64, string) { return bound(r, r.NftP50) })
	row("programming p99, nft (ms)", func(r *Run) (float64, string) { return bound(r, r.NftP99) })
	hist := func(v float64, beyond bool) (float64, string) {
		if beyond {
			return num(v*1000, ">=%.0f")
		}
		return num(v*1000, "%.0f")
	}
	row("programming p50, histogram (ms)", func(r *Run) (float64, string) { return hist(r.HistP50, r.HistBound[0]) })
	row("programming p99, histogram (ms)", func(r *Run) (float64, string) { return hist(r.HistP99, r.HistBound[1]) })
	row("drift checks listing the table as text", func(r *Run) (float64, string) {
		return float64(r.TextListings), fmt.Sprintf("%d (%.1fs)", r.TextListings, r.TextListLong.Seconds())
	})
	row("RTNL probe idle worst (ms)", func(r *Run) (float64, string) { return msec(r.RTNLIdle) })
	row("RTNL probe worst, whole run (ms)", func(r *Run) (float64, string) { return msec(r.RTNLWorst) })
	row("RTNL excess over idle (ms)", func(r *Run) (float64, string) { return msec(r.RTNLExcess()) })
	row("RTNL worst in each full sync (ms)", func(r *Run) (float64, string) {
		parts := make([]string, len(r.RTNLFullSync))
		worst := 0.0
		for i, d := range r.RTNLFullSync {
			parts[i] = fmt.Sprintf("%.0f", ms(d))
			worst = max(worst, ms(d))
		}
		return worst, strings.Join(parts, ",")
	})
	row("RTNL probe failures", func(r *Run) (float64, string) { return num(float64(r.RTNLFailed), "%.0f") })
	for _, r := range []*Run{pa, up} {
		switch {
		case r == nil:
		case r.Skipped != "":
			out = append(out, fmt.Sprintf("%s: skipped: %s", r.Binary, r.Skipped))
		case r.Err != "":
			out = append(out, fmt.Sprintf("%s: FAILED (figures so far above, zero where not measured): %s", r.Binary, r.Err))
		}
		if r != nil && r.Note != "" {
			out = append(out, fmt.Sprintf("%s: note: %s", r.Binary, r.Note))
		}
	}
	return out
}

// cell is one binary's value and text for a row; "-" when it has no figures.
func cell(r *Run, f func(r *Run) (float64, string)) (float64, string) {
	if !r.ran() {
		return math.NaN(), "-"
	}
	return f(r)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ClosingLines returns the benchmark's closing lines for size: the patched binary's first
// complete sync and peak RSS, each with its ratio to upstream's (patched/upstream), its
// network programming p99 (as nft saw it) and its RTNL excess over idle. A figure that could
// not be measured is "n/a (why)"; nothing is extrapolated.
func ClosingLines(size int, runs []Run) []string {
	var pa, up *Run
	for i := range runs {
		if runs[i].Size == size && runs[i].Binary == Patched {
			pa = &runs[i]
		}
		if runs[i].Size == size && runs[i].Binary == Upstream {
			up = &runs[i]
		}
	}
	l := SizeLabel(size)
	why := func(r *Run, name string) string {
		switch {
		case r == nil:
			return "n/a (" + name + " not run)"
		case r.Skipped != "":
			return "n/a (" + name + " skipped: " + r.Skipped + ")"
		default:
			return "n/a (" + name + " failed)"
		}
	}
	first, rss, prog, rtnl := why(pa, Patched), why(pa, Patched), why(pa, Patched), why(pa, Patched)
	firstR, rssR := first, rss
	if pa.ran() {
		upOK := up.ran() && up.Err == ""
		firstR, rssR = why(up, Upstream), why(up, Upstream)
		if up != nil && up.Skipped == "" && up.Err != "" {
			firstR, rssR = "n/a (upstream failed)", "n/a (upstream failed)"
		}
		if pa.FirstSync > 0 {
			first = fmt.Sprintf("%.2f", pa.FirstSync.Seconds())
			if upOK {
				firstR = fmt.Sprintf("%.3f", pa.FirstSync.Seconds()/up.FirstSync.Seconds())
			}
		}
		if pa.PeakRSS > 0 {
			rss = fmt.Sprintf("%.1f", float64(pa.PeakRSS)/(1<<20))
			if upOK {
				rssR = fmt.Sprintf("%.2f", float64(pa.PeakRSS)/float64(up.PeakRSS))
			}
		}
		if pa.Changes > 0 {
			prog = fmt.Sprintf("%.0f", ms(pa.NftP99))
			if pa.NftBound {
				prog = fmt.Sprintf(">= %.0f (%d of %d changes not in the kernel when the wait ended)", ms(pa.NftP99), pa.Changes-pa.Seen, pa.Changes)
			}
		}
		if pa.RTNLWorst > 0 {
			rtnl = fmt.Sprintf("%.0f", ms(pa.RTNLExcess()))
		}
	}
	return []string{
		"e2e_first_sync_s_" + l + ": " + first,
		"e2e_first_sync_vs_upstream_" + l + ": " + firstR,
		"e2e_rss_mib_" + l + ": " + rss,
		"e2e_rss_vs_upstream_" + l + ": " + rssR,
		"e2e_programming_p99_ms_" + l + ": " + prog,
		"e2e_rtnl_excess_ms_" + l + ": " + rtnl,
	}
}
