package e2e

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Metric is one sample of the Prometheus text format.
type Metric struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is a parsed scrape.
type Metrics []Metric

// ParseMetrics parses the Prometheus text exposition format: comment lines are skipped, a
// sample line is `name{label="value",...} value [timestamp]`. Label values may hold escaped
// quotes, backslashes and newlines. A malformed line is an error that quotes it.
func ParseMetrics(text string) (Metrics, error) {
	var out Metrics
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		m, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", trunc(line), err)
		}
		out = append(out, m)
	}
	return out, nil
}

func parseSample(line string) (Metric, error) {
	m := Metric{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return m, fmt.Errorf("no value")
	}
	m.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " ,")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.Index(line, `="`)
			if eq <= 0 {
				return m, fmt.Errorf("bad label")
			}
			key := line[:eq]
			val, rest, err := unquote(line[eq+2:])
			if err != nil {
				return m, err
			}
			m.Labels[key], line = val, rest
		}
	}
	f := strings.Fields(line)
	if len(f) < 1 || len(f) > 2 {
		return m, fmt.Errorf("want a value and at most a timestamp")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return m, err
	}
	m.Value = v
	return m, nil
}

// unquote reads a label value up to its closing quote and returns it and the rest of the line.
func unquote(s string) (val, rest string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 == len(s) {
				return "", "", fmt.Errorf("unterminated label value")
			}
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated label value")
}

// matches reports whether m carries every label of match.
func (m Metric) matches(match map[string]string) bool {
	for k, v := range match {
		if m.Labels[k] != v {
			return false
		}
	}
	return true
}

// Sum returns the sum of the samples named name that carry every label of match, and whether
// there was any.
func (ms Metrics) Sum(name string, match map[string]string) (float64, bool) {
	var total float64
	found := false
	for _, m := range ms {
		if m.Name == name && m.matches(match) {
			total += m.Value
			found = true
		}
	}
	return total, found
}

// Bucket is one cumulative histogram bucket: Count observations at or below LE.
type Bucket struct {
	LE    float64
	Count float64
}

// Buckets returns histogram name's cumulative buckets (the samples of name_bucket that carry
// every label of match, summed per bound), by ascending bound; +Inf is the last.
func (ms Metrics) Buckets(name string, match map[string]string) ([]Bucket, error) {
	per := map[float64]float64{}
	for _, m := range ms {
		if m.Name != name+"_bucket" || !m.matches(match) {
			continue
		}
		le, err := strconv.ParseFloat(m.Labels["le"], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad le %q", name, m.Labels["le"])
		}
		per[le] += m.Value
	}
	out := make([]Bucket, 0, len(per))
	for le, c := range per {
		out = append(out, Bucket{le, c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LE < out[j].LE })
	return out, nil
}

// SubBuckets returns after minus before, bound by bound: the observations made between two
// scrapes. A bound missing from before counts as zero there.
func SubBuckets(after, before []Bucket) []Bucket {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.LE] = b.Count
	}
	out := make([]Bucket, len(after))
	for i, b := range after {
		out[i] = Bucket{b.LE, b.Count - prev[b.LE]}
	}
	return out
}

// HistogramQuantile estimates quantile q (0..1) of cumulative buckets the way Prometheus's
// histogram_quantile does: linear interpolation inside the bucket that holds the rank, from 0
// for the first bucket; a rank in the +Inf bucket returns the largest finite bound. It returns
// NaN with no observations.
func HistogramQuantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 || q < 0 || q > 1 {
		return math.NaN()
	}
	total := buckets[len(buckets)-1].Count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, prevCount := 0.0, 0.0
	for i, b := range buckets {
		if b.Count >= rank {
			if math.IsInf(b.LE, 1) {
				if i == 0 {
					return math.NaN()
				}
				return buckets[i-1].LE
			}
			if b.Count == prevCount {
				return b.LE
			}
			return lower + (b.LE-lower)*(rank-prevCount)/(b.Count-prevCount)
		}
		lower, prevCount = b.LE, b.Count
	}
	return buckets[len(buckets)-1].LE
}

// BeyondLargestBound reports whether quantile q of cumulative buckets lies in the +Inf bucket:
// HistogramQuantile then returns the largest finite bound, which is only a lower bound.
func BeyondLargestBound(q float64, buckets []Bucket) bool {
	n := len(buckets)
	if n < 2 || !math.IsInf(buckets[n-1].LE, 1) {
		return false
	}
	total := buckets[n-1].Count
	return total > 0 && q*total > buckets[n-2].Count
}
