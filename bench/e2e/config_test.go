package e2e

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseParamsDefaults(t *testing.T) {
	p, err := ParseParams(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sizes) != 2 || p.Sizes[0] != 6000 || p.Sizes[1] != 36000 || p.Family != FamilyIPv6 ||
		p.Endpoints != 4 || p.AffinityPercent != 10 || p.NodePortPercent != 10 || p.ChurnRate != 10 ||
		p.ChurnSeconds != 40 || p.FullSyncPeriod != 15*time.Second || p.UpstreamMax != 24000 {
		t.Errorf("defaults: %+v", p)
	}
}

func TestParseParamsSet(t *testing.T) {
	p, err := ParseParams(env(map[string]string{"SIZES": "600, 6000", "FAMILY": "dual", "ENDPOINTS": "250",
		"AFFINITY_PERCENT": "0", "NODEPORT_PERCENT": "100", "FULL_SYNC_PERIOD": "1m"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Sizes[0] != 600 || p.Sizes[1] != 6000 || p.Family != FamilyDual || p.Endpoints != 250 ||
		p.AffinityPercent != 0 || p.NodePortPercent != 100 || p.FullSyncPeriod != time.Minute {
		t.Errorf("got %+v", p)
	}
}

func TestParseParamsErrors(t *testing.T) {
	for _, c := range []struct{ k, v, want string }{
		{"SIZES", "6000,600", "ascend"},
		{"SIZES", "0", "SIZES"},
		{"SIZES", "abc", "SIZES"},
		{"FAMILY", "ipv5", "FAMILY"},
		{"ENDPOINTS", "0", "ENDPOINTS"},
		{"AFFINITY_PERCENT", "101", "AFFINITY_PERCENT"},
		{"NODEPORT_PERCENT", "-1", "NODEPORT_PERCENT"},
		{"CHURN_RATE", "x", "CHURN_RATE"},
		{"FULL_SYNC_PERIOD", "500ms", "FULL_SYNC_PERIOD"},
	} {
		_, err := ParseParams(env(map[string]string{c.k: c.v}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: error %v, want one with %q", c.k, c.v, err, c.want)
		}
	}
}

func TestServicesAndLabels(t *testing.T) {
	for n, want := range map[int]int{1: 1, 6: 1, 7: 2, 600: 100, 36000: 6000, 36001: 6001} {
		if got := Services(n); got != want {
			t.Errorf("Services(%d) = %d, want %d", n, got, want)
		}
	}
	for n, want := range map[int]string{36000: "36k", 6000: "6k", 600: "600", 1500: "1500"} {
		if got := SizeLabel(n); got != want {
			t.Errorf("SizeLabel(%d) = %q, want %q", n, got, want)
		}
	}
}
