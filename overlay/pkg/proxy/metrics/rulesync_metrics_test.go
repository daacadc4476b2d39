/*
Copyright 2026 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package metrics

import (
	"slices"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// TestRenamedMetricsServedForOneRelease checks that a metric under its old name is served
// beside the new one, with the same observations, by a v1.36 binary and hidden by a v1.37 one.
func TestRenamedMetricsServedForOneRelease(t *testing.T) {
	for _, tc := range []struct {
		ver     string
		wantOld bool
	}{{"1.36.3", true}, {"1.37.2", false}} {
		t.Run(tc.ver, func(t *testing.T) {
			hist := metrics.NewHistogramVec(&metrics.HistogramOpts{
				Subsystem: kubeProxySubsystem, Name: "test_new_duration_seconds", Help: "h",
				Buckets: []float64{1, 2}, StabilityLevel: metrics.ALPHA,
			}, []string{"ip_family"})
			oldHist := renamedHistogram(hist, "test_old_seconds", "ip_family")
			counter := metrics.NewCounterVec(&metrics.CounterOpts{
				Subsystem: kubeProxySubsystem, Name: "test_nftables_total", Help: "h", StabilityLevel: metrics.ALPHA,
			}, []string{"ip_family"})
			oldCounter := renamedCounter(counter, "test_total", "ip_family")
			reg := testutil.NewFakeKubeRegistry(tc.ver)
			reg.MustRegister(hist, oldHist, counter, oldCounter)
			for _, h := range []*metrics.HistogramVec{hist, oldHist} {
				h.WithLabelValues("IPv4").Observe(1.5)
			}
			for _, c := range []*metrics.CounterVec{counter, oldCounter} {
				c.WithLabelValues("IPv4").Add(3)
			}
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range fams {
				names = append(names, f.GetName())
			}
			for _, n := range []string{"kubeproxy_test_new_duration_seconds", "kubeproxy_test_nftables_total"} {
				if !slices.Contains(names, n) {
					t.Errorf("served %v, want the new name %s", names, n)
				}
			}
			for _, n := range []string{"kubeproxy_test_old_seconds", "kubeproxy_test_total"} {
				if slices.Contains(names, n) != tc.wantOld {
					t.Errorf("served %v: old name %s served = %v, want %v", names, n, !tc.wantOld, tc.wantOld)
				}
			}
			if !tc.wantOld {
				return
			}
			for _, h := range []*metrics.HistogramVec{hist, oldHist} {
				if n, err := testutil.GetHistogramMetricCount(h.WithLabelValues("IPv4")); err != nil || n != 1 {
					t.Errorf("%s: count %d (%v), want 1", h.Name, n, err)
				}
			}
			if got, _ := testutil.GetCounterMetricValue(oldCounter.WithLabelValues("IPv4")); got != 3 {
				t.Errorf("old counter = %v, want 3", got)
			}
		})
	}
}

// TestExtendedFullSyncBucketsReachHalfAnHour checks that the full-sync duration histogram can
// tell a sync of 20 minutes from one of 30, which upstream's (top bucket 16.4 s) cannot.
func TestExtendedFullSyncBucketsReachHalfAnHour(t *testing.T) {
	b := SyncFullProxyRulesExtendedDuration.HistogramOpts.Buckets
	if !slices.IsSorted(b) || b[len(b)-1] < 1800 || !slices.Contains(b, 1200) {
		t.Errorf("buckets %v: want sorted, with 1200 and a top bucket of at least 1800 s", b)
	}
}
