package main

// Latency samples of the RTNL probe and the order statistics reported for them. Pure.

import (
	"math"
	"slices"
	"time"
)

// Sample is one timed operation of the RTNL probe.
type Sample struct {
	Op      string // "move" (veth end into the kube-proxy netns), "del" (delete it there), "unrelated" (add+delete in another netns)
	StartNS int64
	EndNS   int64
	Err     string
}

// Latency is the sample's duration.
func (s Sample) Latency() time.Duration { return time.Duration(s.EndNS - s.StartNS) }

// Overlapping returns the samples whose interval overlaps [fromNS, toNS]. An operation that
// was waiting while the phase ran overlaps it even if it started before or ended after.
func Overlapping(samples []Sample, fromNS, toNS int64) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.StartNS <= toNS && s.EndNS >= fromNS {
			out = append(out, s)
		}
	}
	return out
}

// Within returns the samples that lie entirely within [fromNS, toNS].
func Within(samples []Sample, fromNS, toNS int64) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.StartNS >= fromNS && s.EndNS <= toNS {
			out = append(out, s)
		}
	}
	return out
}

// Percentile returns the p-th percentile (0 < p <= 100) of vals by the nearest-rank method:
// the smallest value such that at least p% of the values are at or below it. It returns NaN
// for no values. vals is not modified.
func Percentile(vals []float64, p float64) float64 {
	if len(vals) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Median is the 50th percentile by nearest rank (the lower middle for an even count).
func Median(vals []float64) float64 { return Percentile(vals, 50) }

// LatencySummary is the order statistics of a set of samples.
type LatencySummary struct {
	N        int
	Max, P99 time.Duration
	Errors   int
	// MaxByOp is the worst latency of each operation.
	MaxByOp map[string]time.Duration
}

// ProbeOps are the RTNL probe's operations in report order.
var ProbeOps = []string{"move", "del", "add", "unrelated"}

// Summarize returns the summary of samples (all operations together).
func Summarize(samples []Sample) LatencySummary {
	var ls LatencySummary
	vals := make([]float64, 0, len(samples))
	for _, s := range samples {
		if s.Err != "" {
			ls.Errors++
		}
		vals = append(vals, float64(s.Latency()))
		ls.Max = max(ls.Max, s.Latency())
		if ls.MaxByOp == nil {
			ls.MaxByOp = map[string]time.Duration{}
		}
		ls.MaxByOp[s.Op] = max(ls.MaxByOp[s.Op], s.Latency())
	}
	ls.N = len(samples)
	if ls.N > 0 {
		ls.P99 = time.Duration(Percentile(vals, 99))
	}
	return ls
}

// ByOp returns the samples of one operation.
func ByOp(samples []Sample, op string) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.Op == op {
			out = append(out, s)
		}
	}
	return out
}
