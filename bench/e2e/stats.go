package e2e

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of ds by nearest rank: the smallest
// value with at least p% of the values at or below it; 0 for no values. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 || p <= 0 || p > 100 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(int(math.Ceil(p/100*float64(len(s)))), 1)-1]
}

// Op is one timed operation of the RTNL probe.
type Op struct {
	Name       string
	Start, End time.Time
	Failed     bool
}

// Latency is the operation's duration.
func (o Op) Latency() time.Duration { return o.End.Sub(o.Start) }

// Window is a time interval of a run (a phase, a full sync).
type Window struct {
	Name     string
	From, To time.Time
}

// Overlaps reports whether o overlaps w: an operation that was waiting while w ran overlaps it
// even if it started before or ended after.
func (w Window) Overlaps(o Op) bool { return !o.Start.After(w.To) && !o.End.Before(w.From) }

// In returns the operations that overlap w.
func In(ops []Op, w Window) []Op {
	var out []Op
	for _, o := range ops {
		if w.Overlaps(o) {
			out = append(out, o)
		}
	}
	return out
}

// WorstIn returns the longest operation that overlaps w, and how many overlap it.
func WorstIn(ops []Op, w Window) (worst time.Duration, n int) {
	for _, o := range In(ops, w) {
		worst = max(worst, o.Latency())
		n++
	}
	return worst, n
}

// Failures counts the operations that failed.
func Failures(ops []Op) int {
	n := 0
	for _, o := range ops {
		if o.Failed {
			n++
		}
	}
	return n
}
