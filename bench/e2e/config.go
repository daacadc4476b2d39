// Package e2e holds the pure parts of the end-to-end benchmark (make bench-e2e): its
// parameters, the plan of the API objects it creates, the parsers of /proc/<pid>/stat and of
// kube-proxy's metrics, the order statistics, and the report. It uses the standard library
// only, so that `go test ./bench/...` tests it from the repository root; build/bench-e2e.sh lays
// it into test/kpe2e of the assembled tree, where the driver (bench/e2e/_intree) imports it.
package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Families of the cluster under test.
const (
	FamilyIPv4 = "ipv4"
	FamilyIPv6 = "ipv6"
	FamilyDual = "dual"
)

// PortsPerService is how many ports every generated Service has: a size of N service ports is
// ceil(N/6) Services.
const PortsPerService = 6

// Params are the benchmark's parameters, each read from the environment variable of the same
// name (the make variables of make bench-e2e).
type Params struct {
	Sizes           []int         // SIZES: service ports, ascending (default 6000,36000)
	Family          string        // FAMILY: ipv4, ipv6 or dual (default ipv6)
	Endpoints       int           // ENDPOINTS: endpoints per Service (default 4)
	AffinityPercent int           // AFFINITY_PERCENT: Services with ClientIP affinity (default 10)
	NodePortPercent int           // NODEPORT_PERCENT: Services with node ports, half NodePort, half LoadBalancer (default 10)
	ChurnRate       int           // CHURN_RATE: Service changes per second during the churn (default 10)
	ChurnSeconds    int           // CHURN_SECONDS: how long the churn lasts (default 40)
	FullSyncPeriod  time.Duration // FULL_SYNC_PERIOD: the patched binary's --full-sync-period (default 15s)
	UpstreamMax     int           // UPSTREAM_MAX: the largest size upstream's binary runs at (default 24000)
}

// ParseParams reads the parameters through getenv (os.Getenv), with the defaults above for
// unset ones. A malformed or out-of-range value is an error that names the variable.
func ParseParams(getenv func(string) string) (Params, error) {
	p := Params{Family: FamilyIPv6}
	var err error
	if p.Sizes, err = ParseSizes(or(getenv("SIZES"), "6000,36000")); err != nil {
		return p, fmt.Errorf("SIZES: %w", err)
	}
	if f := getenv("FAMILY"); f != "" {
		p.Family = f
	}
	switch p.Family {
	case FamilyIPv4, FamilyIPv6, FamilyDual:
	default:
		return p, fmt.Errorf("FAMILY: %q is not ipv4, ipv6 or dual", p.Family)
	}
	ints := []struct {
		name     string
		def      string
		min, max int
		dst      *int
	}{
		{"ENDPOINTS", "4", 1, 10000, &p.Endpoints},
		{"AFFINITY_PERCENT", "10", 0, 100, &p.AffinityPercent},
		{"NODEPORT_PERCENT", "10", 0, 100, &p.NodePortPercent},
		{"CHURN_RATE", "10", 1, 1000, &p.ChurnRate},
		{"CHURN_SECONDS", "40", 1, 3600, &p.ChurnSeconds},
		{"UPSTREAM_MAX", "24000", 0, 1 << 30, &p.UpstreamMax},
	}
	for _, v := range ints {
		n, err := strconv.Atoi(or(getenv(v.name), v.def))
		if err != nil || n < v.min || n > v.max {
			return p, fmt.Errorf("%s: %q is not a whole number from %d to %d", v.name, getenv(v.name), v.min, v.max)
		}
		*v.dst = n
	}
	if p.FullSyncPeriod, err = time.ParseDuration(or(getenv("FULL_SYNC_PERIOD"), "15s")); err != nil || p.FullSyncPeriod < time.Second {
		return p, fmt.Errorf("FULL_SYNC_PERIOD: %q is not a duration of at least 1s", getenv("FULL_SYNC_PERIOD"))
	}
	return p, nil
}

// ParseSizes parses a comma-separated list of service-port counts: each a positive whole number
// of at most 200000, strictly ascending (the API contents only grow from one size to the next).
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 200000 {
			return nil, fmt.Errorf("%q is not a size from 1 to 200000", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("sizes must ascend: %d after %d", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

// Services returns how many Services a size of n service ports takes.
func Services(n int) int { return (n + PortsPerService - 1) / PortsPerService }

// SizeLabel is the suffix of the closing lines for size n: "36k" for 36000, "600" for 600.
func SizeLabel(n int) string {
	if n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
