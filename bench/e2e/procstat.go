package e2e

import (
	"fmt"
	"strconv"
	"strings"
)

// ProcStat is what the benchmark reads from /proc/<pid>/stat.
type ProcStat struct {
	Comm           string
	UTime, STime   uint64 // clock ticks in user and kernel mode (fields 14 and 15)
	CUTime, CSTime uint64 // the same of its waited-for children (16 and 17): kube-proxy's nft runs
	RSSPages       int64  // resident set size in pages (field 24)
}

// ParseProcStat parses the text of /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so the fields after it are counted
// from the last ')'.
func ParseProcStat(s string) (ProcStat, error) {
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return ProcStat{}, fmt.Errorf("not a /proc/<pid>/stat line: %q", trunc(s))
	}
	rest := strings.Fields(s[close+1:])
	// rest[0] is field 3 (state): field n is rest[n-3].
	if len(rest) < 24-2 {
		return ProcStat{}, fmt.Errorf("/proc/<pid>/stat has %d fields, want at least 24: %q", len(rest)+2, trunc(s))
	}
	var st ProcStat
	st.Comm = s[open+1 : close]
	var err error
	if st.UTime, err = strconv.ParseUint(rest[14-3], 10, 64); err != nil {
		return ProcStat{}, fmt.Errorf("utime: %w", err)
	}
	if st.STime, err = strconv.ParseUint(rest[15-3], 10, 64); err != nil {
		return ProcStat{}, fmt.Errorf("stime: %w", err)
	}
	if st.CUTime, err = strconv.ParseUint(rest[16-3], 10, 64); err != nil {
		return ProcStat{}, fmt.Errorf("cutime: %w", err)
	}
	if st.CSTime, err = strconv.ParseUint(rest[17-3], 10, 64); err != nil {
		return ProcStat{}, fmt.Errorf("cstime: %w", err)
	}
	if st.RSSPages, err = strconv.ParseInt(rest[24-3], 10, 64); err != nil {
		return ProcStat{}, fmt.Errorf("rss: %w", err)
	}
	return st, nil
}

// CPUSeconds is the process's user plus kernel time at ticksPerSecond clock ticks (USER_HZ,
// 100 on Linux).
func (s ProcStat) CPUSeconds(ticksPerSecond int) float64 {
	return float64(s.UTime+s.STime) / float64(ticksPerSecond)
}

// ChildCPUSeconds is the user plus kernel time of the children it has waited for (for
// kube-proxy: every nft run), at ticksPerSecond clock ticks.
func (s ProcStat) ChildCPUSeconds(ticksPerSecond int) float64 {
	return float64(s.CUTime+s.CSTime) / float64(ticksPerSecond)
}

// StatusKiB returns the value in KiB of key (for example "VmRSS" or "VmHWM", the peak) from the
// text of /proc/<pid>/status.
func StatusKiB(status, key string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: unexpected value %q", key, strings.TrimSpace(v))
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/<pid>/status", key)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
