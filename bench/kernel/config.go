package main

// Shapes, sizes and run options of the kernel benchmark. Pure.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Shape is one synthetic cluster layout.
type Shape struct {
	Name         string
	Families     []string // one proxier per family, all in one process and netns
	Endpoints    int      // ready endpoints per service, all on other nodes
	Affinity     bool     // sessionAffinity: ClientIP
	DefaultSizes []int    // service-port counts run when SIZES is not set
}

// PortsPerService is fixed: 6 TCP ports per service, as in the baseline.
const PortsPerService = 6

var allSizes = []int{1000, 6000, 12000, 24000, 36000}

// Shapes lists every shape in run order. The extra shapes stop at smaller sizes by default
// because upstream's cost grows with the number of anonymous sets and affinity objects, and
// at 24k ports upstream alone would take hours; SIZES overrides this.
var Shapes = []Shape{
	{Name: "ipv4", Families: []string{FamIPv4}, Endpoints: 2, DefaultSizes: allSizes},
	{Name: "ipv6", Families: []string{FamIPv6}, Endpoints: 2, DefaultSizes: allSizes},
	{Name: "affinity", Families: []string{FamIPv4}, Endpoints: 2, Affinity: true, DefaultSizes: []int{1000, 6000, 12000}},
	{Name: "endpoints50", Families: []string{FamIPv4}, Endpoints: 50, DefaultSizes: []int{1000, 6000}},
	{Name: "dualstack", Families: []string{FamIPv4, FamIPv6}, Endpoints: 2, DefaultSizes: []int{1000, 6000, 12000}},
}

// ShapeByName returns the named shape.
func ShapeByName(name string) (Shape, bool) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, true
		}
	}
	return Shape{}, false
}

// Options of one benchmark run.
type Options struct {
	Shapes      []string      // SHAPES
	Sizes       []int         // SIZES; nil = each shape's defaults
	UpstreamMax int           // UPSTREAM_MAX: upstream is not run above this size (extrapolated instead)
	UpgradeMax  int           // UPGRADE_MAX: above UPSTREAM_MAX and up to this size, upstream runs its cold start only, to give the upgrade its table
	Slot        time.Duration // PERIODIC_SLOT: the patched schedule's period while measuring a periodic sync
	Idle        time.Duration // IDLE_SECONDS: RTNL idle window per shape and size
	Timeout     time.Duration // PHASE_TIMEOUT: limit for one proxier process
	ProbeEvery  time.Duration // RTNL_INTERVAL: pause between RTNL probe rounds
	SkipPatched bool          // PATCHED_ONLY / UPSTREAM_ONLY
	SkipUpst    bool
}

// DefaultOptions are used for unset variables.
func DefaultOptions() Options {
	return Options{
		UpstreamMax: 24000,
		UpgradeMax:  36000,
		Slot:        30 * time.Second,
		Idle:        3 * time.Second,
		Timeout:     45 * time.Minute,
		ProbeEvery:  100 * time.Millisecond,
	}
}

// ParseSizes parses "1000,6k,12000".
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		if f == "" {
			continue
		}
		mult := 1
		if strings.HasSuffix(f, "k") {
			mult, f = 1000, strings.TrimSuffix(f, "k")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// OptionsFromEnv reads the run options from environment variables (getenv is os.Getenv in
// production).
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := DefaultOptions()
	if v := getenv("SHAPES"); v != "" {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if _, ok := ShapeByName(s); !ok {
				return o, fmt.Errorf("SHAPES: unknown shape %q", s)
			}
			o.Shapes = append(o.Shapes, s)
		}
	} else {
		for _, s := range Shapes {
			o.Shapes = append(o.Shapes, s.Name)
		}
	}
	if v := getenv("SIZES"); v != "" {
		sz, err := ParseSizes(v)
		if err != nil {
			return o, fmt.Errorf("SIZES: %w", err)
		}
		o.Sizes = sz
	}
	if v := getenv("UPSTREAM_MAX"); v != "" {
		sz, err := ParseSizes(v)
		if err != nil || len(sz) != 1 {
			return o, fmt.Errorf("UPSTREAM_MAX: want one size, got %q", v)
		}
		o.UpstreamMax = sz[0]
	}
	if v := getenv("UPGRADE_MAX"); v != "" {
		sz, err := ParseSizes(v)
		if err != nil || len(sz) != 1 {
			return o, fmt.Errorf("UPGRADE_MAX: want one size, got %q", v)
		}
		o.UpgradeMax = sz[0]
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
		unit time.Duration
	}{{"PERIODIC_SLOT", &o.Slot, time.Second}, {"IDLE_SECONDS", &o.Idle, time.Second}, {"PHASE_TIMEOUT", &o.Timeout, time.Minute}, {"RTNL_INTERVAL", &o.ProbeEvery, time.Millisecond}} {
		v := getenv(d.name)
		if v == "" {
			continue
		}
		if dd, err := time.ParseDuration(v); err == nil {
			*d.dst = dd
		} else if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
			*d.dst = time.Duration(f * float64(d.unit))
		} else {
			return o, fmt.Errorf("%s: bad duration %q", d.name, v)
		}
	}
	o.SkipUpst = getenv("PATCHED_ONLY") == "1"
	o.SkipPatched = getenv("UPSTREAM_ONLY") == "1"
	if o.SkipUpst && o.SkipPatched {
		return o, fmt.Errorf("PATCHED_ONLY and UPSTREAM_ONLY exclude each other")
	}
	return o, nil
}

// SizesFor returns the sizes to run for shape s.
func (o Options) SizesFor(s Shape) []int {
	if o.Sizes != nil {
		out := slices.Clone(o.Sizes)
		slices.Sort(out)
		return slices.Compact(out)
	}
	return s.DefaultSizes
}
