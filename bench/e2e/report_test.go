package e2e

import (
	"strings"
	"testing"
	"time"
)

func sampleRuns() []Run {
	pa := Run{Binary: Patched, Size: 36000, FirstSync: 12 * time.Second, Healthz: 12100 * time.Millisecond,
		PeakRSS: 300 << 20, SteadyRSS: 250 << 20, HeapInuse: 100 << 20, CPUFirst: 9, CPUTotal: 40,
		FullSyncs: 2, FullSyncLong: 3 * time.Second, Changes: 400, Seen: 400, NftP50: 300 * time.Millisecond,
		NftP99: 900 * time.Millisecond, HistP50: 0.31, HistP99: 0.95, RTNLIdle: 2 * time.Millisecond,
		RTNLWorst: 42 * time.Millisecond, RTNLFullSync: []time.Duration{10 * time.Millisecond, 40 * time.Millisecond}}
	up := pa
	up.Binary, up.FirstSync, up.PeakRSS = Upstream, 240*time.Second, 250<<20
	return []Run{pa, up}
}

func TestClosingLines(t *testing.T) {
	got := strings.Join(ClosingLines(36000, sampleRuns()), "\n")
	want := strings.Join([]string{
		"e2e_first_sync_s_36k: 12.00",
		"e2e_first_sync_vs_upstream_36k: 0.050",
		"e2e_rss_mib_36k: 300.0",
		"e2e_rss_vs_upstream_36k: 1.20",
		"e2e_programming_p99_ms_36k: 900",
		"e2e_rtnl_excess_ms_36k: 40",
	}, "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestClosingLinesUpstreamSkippedOrMissing(t *testing.T) {
	runs := sampleRuns()
	runs[1] = Run{Binary: Upstream, Size: 36000, Skipped: "above UPSTREAM_MAX=24000"}
	runs[0].Seen, runs[0].NftBound, runs[0].NftP99 = 398, true, 90*time.Second
	lines := ClosingLines(36000, runs)
	if lines[1] != "e2e_first_sync_vs_upstream_36k: n/a (upstream skipped: above UPSTREAM_MAX=24000)" {
		t.Errorf("ratio line: %s", lines[1])
	}
	if lines[4] != "e2e_programming_p99_ms_36k: >= 90000 (2 of 400 changes not in the kernel when the wait ended)" {
		t.Errorf("p99 line: %s", lines[4])
	}
	none := ClosingLines(6000, runs)
	if none[0] != "e2e_first_sync_s_6k: n/a (patched not run)" || none[5] != "e2e_rtnl_excess_ms_6k: n/a (patched not run)" {
		t.Errorf("size not run: %v", none)
	}
	// A run that broke off keeps what it measured, and nothing else.
	runs[0].Err, runs[0].PeakRSS, runs[0].Changes, runs[0].RTNLWorst = "boom", 0, 0, 0
	broken := ClosingLines(36000, runs)
	if broken[0] != "e2e_first_sync_s_36k: 12.00" || broken[2] != "e2e_rss_mib_36k: n/a (patched failed)" ||
		broken[4] != "e2e_programming_p99_ms_36k: n/a (patched failed)" || broken[5] != "e2e_rtnl_excess_ms_36k: n/a (patched failed)" {
		t.Errorf("broken-off run: %v", broken)
	}
}

func TestTable(t *testing.T) {
	runs := sampleRuns()
	lines := Table(36000, runs)
	find := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, strings.Join(lines, "\n"))
		return ""
	}
	if lines[0] != "== 36000 service ports (6000 Services) ==" {
		t.Errorf("title %q", lines[0])
	}
	if f := strings.Fields(find("first complete sync (s)")); f[len(f)-3] != "12.00" || f[len(f)-2] != "240.00" || f[len(f)-1] != "0.05" {
		t.Errorf("first sync row %v", f)
	}
	if f := strings.Fields(find("RTNL worst in each full sync")); f[len(f)-3] != "10,40" {
		t.Errorf("full sync row %v", f)
	}
	runs[1] = Run{Binary: Upstream, Size: 36000, Skipped: "above UPSTREAM_MAX"}
	lines = Table(36000, runs)
	if f := strings.Fields(find("peak RSS (MiB)")); f[len(f)-2] != "300.0" || f[len(f)-1] != "-" {
		t.Errorf("skipped upstream: %v", f)
	}
	if lines[len(lines)-1] != "upstream: skipped: above UPSTREAM_MAX" {
		t.Errorf("last line %q", lines[len(lines)-1])
	}
	runs[0].NftBound, runs[0].Note, runs[0].HistBound = true, "1 of 2 full syncs", [2]bool{false, true}
	lines = Table(36000, runs)
	if f := strings.Fields(find("programming p99, nft (ms)")); f[len(f)-2] != ">=900" {
		t.Errorf("bound: %v", f)
	}
	if f := strings.Fields(find("programming p99, histogram (ms)")); f[len(f)-2] != ">=950" {
		t.Errorf("histogram bound: %v", f)
	}
	if f := strings.Fields(find("programming p50, histogram (ms)")); f[len(f)-2] != "310" {
		t.Errorf("histogram p50: %v", f)
	}
	if lines[len(lines)-2] != "patched: note: 1 of 2 full syncs" {
		t.Errorf("note line %q", lines[len(lines)-2:])
	}
}
