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

package fullsync

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// t0 is an arbitrary wall-clock instant used as "now" by the tests.
var t0 = time.Date(2026, time.March, 14, 9, 26, 53, 589793238, time.UTC)

func mustSchedule(t *testing.T, cfg Config, seed uint64) *Schedule {
	t.Helper()
	s, err := NewSchedule(cfg, seed)
	if err != nil {
		t.Fatalf("NewSchedule(%+v): %v", cfg, err)
	}
	return s
}

func TestValidate(t *testing.T) {
	testCases := []struct {
		name string
		cfg  Config
		// want lists substrings of the error, one per expected problem; nil
		// means valid.
		want []string
	}{
		{name: "zero value disables", cfg: Config{}},
		{name: "upstream-like", cfg: Config{Period: time.Hour}},
		{name: "all set", cfg: Config{Period: time.Hour, Jitter: 0.5, Splay: 30 * time.Minute, NodeName: "n"}},
		{name: "splay equal to period", cfg: Config{Period: time.Hour, Splay: time.Hour}},
		{name: "largest jitter below 1", cfg: Config{Period: time.Hour, Jitter: math.Nextafter(1, 0)}},
		{name: "disabled with jitter", cfg: Config{Jitter: 0.5}},
		{
			name: "negative period",
			cfg:  Config{Period: -time.Minute},
			want: []string{"--full-sync-period must not be negative (0 disables periodic full syncs), got -1m0s"},
		},
		{
			name: "jitter 1.5",
			cfg:  Config{Period: time.Hour, Jitter: 1.5},
			want: []string{"--full-sync-jitter must be in [0, 1), got 1.5"},
		},
		{
			name: "jitter exactly 1",
			cfg:  Config{Period: time.Hour, Jitter: 1},
			want: []string{"--full-sync-jitter must be in [0, 1), got 1"},
		},
		{
			name: "negative jitter",
			cfg:  Config{Period: time.Hour, Jitter: -0.1},
			want: []string{"--full-sync-jitter must be in [0, 1), got -0.1"},
		},
		{
			name: "NaN jitter",
			cfg:  Config{Period: time.Hour, Jitter: math.NaN()},
			want: []string{"--full-sync-jitter must be in [0, 1), got NaN"},
		},
		{
			name: "infinite jitter",
			cfg:  Config{Period: time.Hour, Jitter: math.Inf(1)},
			want: []string{"--full-sync-jitter must be in [0, 1), got +Inf"},
		},
		{
			name: "splay above period",
			cfg:  Config{Period: time.Hour, Splay: 2 * time.Hour},
			want: []string{"--sync-splay must be between 0 and --full-sync-period (1h0m0s), got 2h0m0s"},
		},
		{
			name: "negative splay",
			cfg:  Config{Period: time.Hour, Splay: -time.Second},
			want: []string{"--sync-splay must be between 0 and --full-sync-period (1h0m0s), got -1s"},
		},
		{
			name: "splay with period 0",
			cfg:  Config{Splay: time.Minute},
			want: []string{"--sync-splay must be 0 when --full-sync-period is 0 (periodic full syncs disabled), got 1m0s"},
		},
		{
			name: "negative period and splay",
			cfg:  Config{Period: -time.Hour, Splay: -time.Minute},
			want: []string{"--full-sync-period must not be negative", "--sync-splay must not be negative, got -1m0s"},
		},
		{
			name: "everything wrong",
			cfg:  Config{Period: time.Minute, Jitter: 2, Splay: time.Hour},
			want: []string{"--full-sync-jitter must be in [0, 1), got 2", "--sync-splay must be between 0 and --full-sync-period (1m0s), got 1h0m0s"},
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := NewSchedule(tc.cfg, 1); err != nil {
					t.Fatalf("NewSchedule() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("Validate() reported %d problems (%q), want %d", len(lines), err, len(tc.want))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if _, serr := NewSchedule(tc.cfg, 1); serr == nil || serr.Error() != err.Error() {
				t.Errorf("NewSchedule() error = %v, want %v", serr, err)
			}
		})
	}
}

func TestNodeOffsetIsStable(t *testing.T) {
	// Pinned values: the offset must not change between releases or
	// processes, or an upgrade would reshuffle the whole fleet. They equal
	// floor(first 8 bytes of SHA-256(name), big endian / 2^64 * splay).
	golden := []struct {
		name  string
		splay time.Duration
		want  time.Duration
	}{
		{"ip-10-0-1-23.us-west-2.compute.internal", time.Hour, 1772464176768},
		{"node-1", time.Hour, 753613164854},
		{"", time.Hour, 3201897581608},
	}
	for _, g := range golden {
		if got := NodeOffset(g.name, g.splay); got != g.want {
			t.Errorf("NodeOffset(%q, %v) = %d, want %d", g.name, g.splay, got, g.want)
		}
	}

	// Same name: same offset from every call and every schedule, regardless
	// of seed or period.
	name := "ip-10-20-30-40.eu-west-1.compute.internal"
	first := NodeOffset(name, 45*time.Minute)
	for i := range 5 {
		if got := NodeOffset(name, 45*time.Minute); got != first {
			t.Fatalf("call %d: NodeOffset = %v, want %v", i, got, first)
		}
		s := mustSchedule(t, Config{Period: time.Hour + time.Duration(i)*time.Minute, Jitter: 0.3, Splay: 45 * time.Minute, NodeName: name}, uint64(i))
		if got := s.Offset(); got != first {
			t.Fatalf("schedule %d: Offset = %v, want %v", i, got, first)
		}
	}

	// No splay: no offset.
	if got := NodeOffset(name, 0); got != 0 {
		t.Errorf("NodeOffset(splay 0) = %v, want 0", got)
	}
	if got := mustSchedule(t, Config{Period: time.Hour, NodeName: name}, 1).Offset(); got != 0 {
		t.Errorf("Offset with splay 0 = %v, want 0", got)
	}
	// A tiny splay still yields offsets inside [0, splay).
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		o := NodeOffset(fmt.Sprintf("node-%d", i), 3)
		if o < 0 || o >= 3 {
			t.Fatalf("NodeOffset(splay 3ns) = %v, outside [0, 3ns)", o)
		}
		seen[o] = true
	}
	if len(seen) != 3 {
		t.Errorf("NodeOffset(splay 3ns) over 1000 names took %d distinct values, want 3", len(seen))
	}
}

// TestNodeOffsetSpread checks that the offsets of 10000 synthetic names of
// several common naming patterns fill [0, splay) uniformly.
func TestNodeOffsetSpread(t *testing.T) {
	const (
		n       = 10000
		buckets = 20
		splay   = time.Hour
		// The 99.99th percentile of the chi-square distribution with
		// buckets-1 = 19 degrees of freedom is about 50.
		maxChi2 = 50.0
	)
	patterns := map[string]func(i int) string{
		"sequential": func(i int) string { return fmt.Sprintf("node-%d", i) },
		"eks":        func(i int) string { return fmt.Sprintf("ip-10-0-%d-%d.us-west-2.compute.internal", i/256, i%256) },
		"gke":        func(i int) string { return fmt.Sprintf("gke-prod-default-pool-%08x-%04d", i/100, i%100) },
		"fqdn":       func(i int) string { return fmt.Sprintf("worker%05d.example.com", i) },
	}
	for pname, gen := range patterns {
		t.Run(pname, func(t *testing.T) {
			var counts [buckets]int
			var sum float64
			for i := range n {
				o := NodeOffset(gen(i), splay)
				if o < 0 || o >= splay {
					t.Fatalf("NodeOffset(%q) = %v, outside [0, %v)", gen(i), o, splay)
				}
				counts[int(int64(o)*buckets/int64(splay))]++
				sum += float64(o)
			}
			expected := float64(n) / buckets
			chi2 := 0.0
			for _, c := range counts {
				chi2 += (float64(c) - expected) * (float64(c) - expected) / expected
			}
			t.Logf("chi-square of offsets over %d buckets: %.1f", buckets, chi2)
			if chi2 > maxChi2 {
				t.Errorf("chi-square of offsets over %d buckets = %.1f > %.1f; counts %v", buckets, chi2, maxChi2, counts)
			}
			// The mean of n uniform values has a standard deviation of
			// splay/sqrt(12n), about 0.003*splay here.
			if mean := sum / n / float64(splay); math.Abs(mean-0.5) > 0.015 {
				t.Errorf("mean offset = %.4f*splay, want about 0.5*splay", mean)
			}
		})
	}
}

// TestPeriodWithoutJitter checks that with no jitter the periodic full syncs
// are exactly one period apart, on the node's slots.
func TestPeriodWithoutJitter(t *testing.T) {
	for _, tc := range []struct {
		period, splay time.Duration
	}{
		{time.Hour, 0},
		{time.Hour, time.Hour},
		{17 * time.Minute, 5 * time.Minute},
		{90 * time.Second, 90 * time.Second},
	} {
		t.Run(fmt.Sprintf("%v-%v", tc.period, tc.splay), func(t *testing.T) {
			s := mustSchedule(t, Config{Period: tc.period, Splay: tc.splay, NodeName: "ip-10-1-2-3.us-east-1.compute.internal"}, 42)
			offset := int64(s.Offset())
			prev := s.Next(t0)
			if !prev.After(t0) || prev.Sub(t0) > tc.period {
				t.Fatalf("Next(%v) = %v, want within (0, %v] after it", t0, prev, tc.period)
			}
			for range 200 {
				if r := (prev.UnixNano() - offset) % int64(tc.period); r != 0 {
					t.Fatalf("sync at %v is %v past a slot boundary, want 0", prev, time.Duration(r))
				}
				k := s.slotIndex(prev)
				if !s.slotTime(k).Equal(prev) || !s.syncTime(k).Equal(prev) {
					t.Fatalf("slot %d: slotTime %v, syncTime %v, want both %v", k, s.slotTime(k), s.syncTime(k), prev)
				}
				next := s.Next(prev)
				if d := next.Sub(prev); d != tc.period {
					t.Fatalf("Next(%v) = %v, %v later, want exactly one period (%v)", prev, next, d, tc.period)
				}
				// Any instant inside the interval leads to the same sync.
				if mid := prev.Add(tc.period / 3); !s.Next(mid).Equal(next) {
					t.Fatalf("Next(%v) = %v, want %v", mid, s.Next(mid), next)
				}
				prev = next
			}
		})
	}
}

// TestJitterBoundsAndOrder checks, over many seeds and slots, that every sync
// lies within its slot +- jitter*period/2, that sync times are strictly
// increasing, that draws are pure functions of (seed, slot) and that they
// cover the allowed range uniformly.
func TestJitterBoundsAndOrder(t *testing.T) {
	const (
		seeds   = 100
		slots   = 500
		buckets = 10
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, jitter := range []float64{0.1, 0.5, 0.9, math.Nextafter(1, 0)} {
		for _, period := range []time.Duration{time.Hour, 7 * time.Minute, 1000003} {
			t.Run(fmt.Sprintf("j=%v/P=%v", jitter, period), func(t *testing.T) {
				cfg := Config{Period: period, Jitter: jitter, Splay: period, NodeName: "ip-10-9-8-7.ap-southeast-2.compute.internal"}
				half := jitter * float64(period) / 2
				var counts [buckets]int
				minRel, maxRel, sumRel := math.Inf(1), math.Inf(-1), 0.0
				for seedIdx := range seeds {
					seed := rng.Uint64()
					if seedIdx == 0 {
						seed = 0
					}
					s := mustSchedule(t, cfg, seed)
					again := mustSchedule(t, cfg, seed)
					first := s.slotIndex(t0) - slots/2
					prev := s.syncTime(first - 1)
					for k := first; k < first+slots; k++ {
						sync := s.syncTime(k)
						d := float64(sync.Sub(s.slotTime(k)))
						if math.Abs(d) > half {
							t.Fatalf("seed %d slot %d: sync %v from slot, outside +-%v", seed, k, time.Duration(d), time.Duration(half))
						}
						if !sync.After(prev) {
							t.Fatalf("seed %d slot %d: sync %v not after previous slot's sync %v", seed, k, sync, prev)
						}
						if !s.syncTime(k).Equal(sync) || !again.syncTime(k).Equal(sync) {
							t.Fatalf("seed %d slot %d: syncTime is not a pure function of (seed, slot)", seed, k)
						}
						// Next from just before a sync finds it; from the sync
						// itself, the following one.
						if got := s.Next(sync.Add(-1)); !got.Equal(sync) {
							t.Fatalf("seed %d slot %d: Next(sync-1ns) = %v, want %v", seed, k, got, sync)
						}
						if got, want := s.Next(sync), s.syncTime(k+1); !got.Equal(want) {
							t.Fatalf("seed %d slot %d: Next(sync) = %v, want %v", seed, k, got, want)
						}
						rel := d / (2 * half) // in [-0.5, 0.5]
						minRel, maxRel, sumRel = min(minRel, rel), max(maxRel, rel), sumRel+rel
						counts[min(int((rel+0.5)*buckets), buckets-1)]++
						prev = sync
					}
				}
				n := float64(seeds * slots)
				if minRel > -0.49 || maxRel < 0.49 {
					t.Errorf("jitter draws span [%.3f, %.3f] of the window, want about [-0.5, 0.5]", minRel, maxRel)
				}
				if mean := sumRel / n; math.Abs(mean) > 0.01 {
					t.Errorf("mean jitter draw = %.4f of the window, want about 0", mean)
				}
				expected := n / buckets
				chi2 := 0.0
				for _, c := range counts {
					chi2 += (float64(c) - expected) * (float64(c) - expected) / expected
				}
				// 99.99th percentile of chi-square with 9 degrees of freedom.
				if chi2 > 33.7 {
					t.Errorf("chi-square of jitter draws = %.1f, counts %v", chi2, counts)
				}
			})
		}
	}
}

func TestJitterDependsOnSeedAndSlot(t *testing.T) {
	cfg := Config{Period: time.Hour, Jitter: 0.5}
	a, b := mustSchedule(t, cfg, 1), mustSchedule(t, cfg, 2)
	k := a.slotIndex(t0)
	sameSeed, sameSlot := 0, 0
	for i := range int64(100) {
		if a.syncTime(k + i).Equal(b.syncTime(k + i)) {
			sameSeed++
		}
		if a.syncTime(k+i).Sub(a.slotTime(k+i)) == a.syncTime(k+i+1).Sub(a.slotTime(k+i+1)) {
			sameSlot++
		}
	}
	if sameSeed > 0 {
		t.Errorf("seeds 1 and 2 drew the same jitter in %d of 100 slots", sameSeed)
	}
	if sameSlot > 0 {
		t.Errorf("consecutive slots drew the same jitter %d times in 100", sameSlot)
	}
}

// TestNextAgainstBruteForce compares Next with a search over all nearby slots,
// for random instants, and checks that all three possible answers occur: the
// slot at or before the instant (its sync was pushed past the instant), the
// following slot, and the one after that (the following slot's sync was pulled
// before the instant).
func TestNextAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := map[int64]int{}
	for _, jitter := range []float64{0, 0.25, 0.9} {
		for i := range 20000 {
			cfg := Config{Period: time.Duration(1 + rng.Int64N(int64(2*time.Hour))), Jitter: jitter, NodeName: fmt.Sprintf("n%d", i)}
			cfg.Splay = time.Duration(rng.Int64N(int64(cfg.Period) + 1))
			s := mustSchedule(t, cfg, rng.Uint64())
			// Instants from 1950 to 2150, also before the Unix epoch.
			after := time.Unix(0, -20*365*24*int64(time.Hour)+rng.Int64N(200*365*24*int64(time.Hour)))
			got := s.Next(after)
			if !got.After(after) {
				t.Fatalf("%+v: Next(%v) = %v, not after it", cfg, after, got)
			}
			base := s.slotIndex(after)
			if s.slotTime(base).After(after) || !s.slotTime(base+1).After(after) {
				t.Fatalf("%+v: slotIndex(%v) = %d, but slot %d is at %v", cfg, after, base, base, s.slotTime(base))
			}
			var want time.Time
			wantK := int64(0)
			for k := base - 3; k <= base+3; k++ {
				if st := s.syncTime(k); st.After(after) && (want.IsZero() || st.Before(want)) {
					want, wantK = st, k
				}
			}
			if !got.Equal(want) {
				t.Fatalf("%+v seed %d: Next(%v) = %v, want %v (slot %d)", cfg, s.Seed(), after, got, want, wantK)
			}
			cases[wantK-base]++
		}
	}
	for _, rel := range []int64{0, 1, 2} {
		if cases[rel] == 0 {
			t.Errorf("no instant had its next sync in slot %+d relative to its own slot; cases: %v", rel, cases)
		}
	}
}

func TestDisabledSchedule(t *testing.T) {
	s := mustSchedule(t, Config{Jitter: 0.5, NodeName: "n"}, 7)
	if s.Enabled() {
		t.Errorf("Enabled() = true with period 0")
	}
	if got := s.Next(t0); !got.IsZero() {
		t.Errorf("Next() = %v, want zero time", got)
	}
	if got := s.syncTime(3); !got.IsZero() {
		t.Errorf("syncTime() = %v, want zero time", got)
	}
	if got := s.slotTime(3); !got.IsZero() {
		t.Errorf("slotTime() = %v, want zero time", got)
	}
	if got := s.slotIndex(t0); got != 0 {
		t.Errorf("slotIndex() = %v, want 0", got)
	}
}

func TestNextKeepsLocation(t *testing.T) {
	s := mustSchedule(t, Config{Period: time.Hour, Jitter: 0.5}, 7)
	loc := time.FixedZone("test", 5*3600)
	if got := s.Next(t0.In(loc)); got.Location() != loc || !got.Equal(s.Next(t0)) {
		t.Errorf("Next(in %v) = %v, want %v in the same location", loc, got, s.Next(t0))
	}
}

func TestScheduleString(t *testing.T) {
	s := mustSchedule(t, Config{Period: time.Hour, Jitter: 0.5, Splay: time.Hour, NodeName: "node-1"}, 7)
	want := "period=1h0m0s jitter=0.5 splay=1h0m0s offset=12m33.613164854s"
	if got := s.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if s.Seed() != 7 || s.Config().NodeName != "node-1" {
		t.Errorf("Seed() = %d, Config() = %+v; want the inputs back", s.Seed(), s.Config())
	}
}
