package e2e

import (
	"math"
	"testing"
)

const scrapeText = `# HELP kubeproxy_network_programming_duration_seconds [ALPHA] In Cluster Network Programming Latency in seconds
# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="0.25"} 2
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="0.5"} 6
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="1"} 10
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 10
kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv6"} 4.2
kubeproxy_network_programming_duration_seconds_count{ip_family="IPv6"} 10
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="0.25"} 1
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="0.5"} 1
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="1"} 1
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 2
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7650e+09
go_memstats_heap_inuse_bytes 5.1232768e+07
weird{path="a\"b\\c",x="1"} 3 1700000000000
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(scrapeText)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m.Sum("go_memstats_heap_inuse_bytes", nil); !ok || v != 51232768 {
		t.Errorf("heap = %v, %v", v, ok)
	}
	if v, ok := m.Sum("kubeproxy_sync_proxy_rules_last_timestamp_seconds", map[string]string{"ip_family": "IPv6"}); !ok || v != 1.765e9 {
		t.Errorf("last timestamp = %v, %v", v, ok)
	}
	if _, ok := m.Sum("kubeproxy_sync_proxy_rules_last_timestamp_seconds", map[string]string{"ip_family": "IPv4"}); ok {
		t.Error("found an IPv4 sample that is not there")
	}
	if v, ok := m.Sum("weird", map[string]string{"path": `a"b\c`}); !ok || v != 3 {
		t.Errorf("escaped label: %v, %v", v, ok)
	}
	for _, bad := range []string{"novalue", `x{a="1"`, `x{a="1"} notanumber`, "x 1 2 3"} {
		if _, err := ParseMetrics(bad); err == nil {
			t.Errorf("ParseMetrics(%q) did not fail", bad)
		}
	}
}

func TestBucketsAndQuantile(t *testing.T) {
	m, err := ParseMetrics(scrapeText)
	if err != nil {
		t.Fatal(err)
	}
	v6, err := m.Buckets("kubeproxy_network_programming_duration_seconds", map[string]string{"ip_family": "IPv6"})
	if err != nil {
		t.Fatal(err)
	}
	if len(v6) != 4 || v6[0].LE != 0.25 || !math.IsInf(v6[3].LE, 1) || v6[3].Count != 10 {
		t.Fatalf("buckets %+v", v6)
	}
	// Rank 5 of 10 lies in (0.25, 0.5], 3 of its 4: 0.25 + 0.25*3/4.
	if q := HistogramQuantile(0.5, v6); math.Abs(q-0.4375) > 1e-9 {
		t.Errorf("p50 = %v, want 0.4375", q)
	}
	// Rank 9.9 in (0.5, 1]: 0.5 + 0.5*3.9/4.
	if q := HistogramQuantile(0.99, v6); math.Abs(q-0.9875) > 1e-9 {
		t.Errorf("p99 = %v, want 0.9875", q)
	}
	// Both families summed per bound; the IPv4 p99 lies in +Inf: the largest finite bound.
	all, _ := m.Buckets("kubeproxy_network_programming_duration_seconds", nil)
	if all[0].Count != 3 || all[3].Count != 12 {
		t.Errorf("summed buckets %+v", all)
	}
	v4, _ := m.Buckets("kubeproxy_network_programming_duration_seconds", map[string]string{"ip_family": "IPv4"})
	if q := HistogramQuantile(0.99, v4); q != 1 || !BeyondLargestBound(0.99, v4) {
		t.Errorf("p99 in +Inf = %v (beyond: %v), want 1 and beyond", q, BeyondLargestBound(0.99, v4))
	}
	if BeyondLargestBound(0.5, v4) || BeyondLargestBound(0.99, v6) {
		t.Error("a quantile inside the finite buckets reported as beyond them")
	}
	if q := HistogramQuantile(0.5, SubBuckets(v6, v6)); !math.IsNaN(q) {
		t.Errorf("no observations: %v, want NaN", q)
	}
	// Between two scrapes: only what was added since.
	later := []Bucket{{0.25, 2}, {0.5, 6}, {1, 20}, {math.Inf(1), 20}}
	d := SubBuckets(later, v6)
	if d[0].Count != 0 || d[2].Count != 10 || d[3].Count != 10 {
		t.Errorf("delta %+v", d)
	}
	if q := HistogramQuantile(0.5, d); math.Abs(q-0.75) > 1e-9 {
		t.Errorf("p50 of the delta = %v, want 0.75", q)
	}
}
