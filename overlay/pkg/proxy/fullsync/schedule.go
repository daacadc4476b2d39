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

// Package fullsync computes when kube-proxy performs its periodic full syncs.
//
// Upstream kube-proxy re-writes all of its rules once per hour counted from
// process start, so nodes that start together full-sync together forever. This
// package replaces that with a schedule anchored to the wall clock:
//
//   - Slot k of a node is at Unix epoch + offset + k*period, where offset is
//     derived from the node name with a stable hash and lies in [0, splay).
//   - The periodic full sync of slot k happens at slot k moved by a jitter draw
//     that is uniform in [-jitter*period/2, +jitter*period/2] and is a pure
//     function of (seed, k). Draws never accumulate, and because jitter < 1 the
//     sync times of consecutive slots are strictly increasing.
//
// Schedule holds the pure arithmetic; Tracker adds the state a proxier needs
// (when the next periodic full sync is planned) and a loop that triggers it.
package fullsync

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// Config describes a node's periodic full-sync schedule. The zero value is a
// valid configuration with periodic full syncs disabled.
type Config struct {
	// Period is the nominal interval between periodic full syncs
	// (--full-sync-period). 0 disables periodic full syncs.
	Period time.Duration
	// Jitter is the fraction j in [0, 1) of Period by which each periodic full
	// sync moves around its slot, up to j*Period/2 to either side
	// (--full-sync-jitter).
	Jitter float64
	// Splay is the largest per-node offset of the slots, in [0, Period]
	// (--sync-splay). The offset of a node lies in [0, Splay).
	Splay time.Duration
	// NodeName is hashed to derive this node's offset. All nodes with the same
	// name (including the empty name) get the same offset.
	NodeName string
	// PeriodSet is set when the user set Period (flag or config file) rather than
	// leaving upstream's default. The iptables proxier in large-cluster mode, which skips
	// periodic full syncs as upstream does, then runs them on this schedule.
	PeriodSet bool
}

// Validate reports every problem with c, joined into one error, or nil when c
// is valid. Each message names the command-line flag that sets the field and
// its allowed range. It rejects a negative period, a jitter that is NaN or
// outside [0, 1), a negative splay, a splay greater than the period, and a
// non-zero splay when the period is 0 (periodic full syncs disabled).
func (c Config) Validate() error {
	var errs []error
	if c.Period < 0 {
		errs = append(errs, fmt.Errorf("--full-sync-period must not be negative (0 disables periodic full syncs), got %v", c.Period))
	}
	if math.IsNaN(c.Jitter) || c.Jitter < 0 || c.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("--full-sync-jitter must be in [0, 1), got %v", c.Jitter))
	}
	switch {
	case c.Period < 0 && c.Splay < 0:
		// The period is already reported; the range of the splay depends on it.
		errs = append(errs, fmt.Errorf("--sync-splay must not be negative, got %v", c.Splay))
	case c.Period < 0:
		// The range of the splay is undefined until the period is fixed.
	case c.Period == 0 && c.Splay != 0:
		errs = append(errs, fmt.Errorf("--sync-splay must be 0 when --full-sync-period is 0 (periodic full syncs disabled), got %v", c.Splay))
	case c.Splay < 0 || c.Splay > c.Period:
		errs = append(errs, fmt.Errorf("--sync-splay must be between 0 and --full-sync-period (%v), got %v", c.Period, c.Splay))
	}
	return errors.Join(errs...)
}

// NodeOffset returns the offset of the node called nodeName for the given
// splay: a value in [0, splay) that depends only on the name and the splay
// (the first 64 bits of the SHA-256 digest of the name, scaled to the range),
// so it is the same in every process, on every architecture and across
// restarts. It returns 0 when splay <= 0.
func NodeOffset(nodeName string, splay time.Duration) time.Duration {
	if splay <= 0 {
		return 0
	}
	sum := sha256.Sum256([]byte(nodeName))
	h := binary.BigEndian.Uint64(sum[:8])
	// The high word of h*splay is floor(h/2^64 * splay), which lies in
	// [0, splay) and is uniform for a uniform h, up to a relative bias of at
	// most splay/2^64 (about 2e-7 for a splay of one hour).
	hi, _ := bits.Mul64(h, uint64(splay))
	return time.Duration(hi)
}

// RandomSeed returns a random seed for the jitter draws, suitable for
// production use where each process should draw independently.
func RandomSeed() uint64 {
	return rand.Uint64()
}

// Schedule is the immutable full-sync schedule of one node. All its methods
// are pure functions of the configuration and the seed, and are safe for
// concurrent use.
//
// Times are handled as nanoseconds since the Unix epoch, so they must lie
// between the years 1678 and 2262 (the range of time.Time.UnixNano).
type Schedule struct {
	cfg    Config
	seed   uint64
	offset int64 // nanoseconds, in [0, splay)
	width  int64 // nanoseconds covered by the jitter draws, in [0, period]
}

// NewSchedule returns the schedule for cfg whose jitter draws derive from
// seed, or the error from cfg.Validate if cfg is invalid.
func NewSchedule(cfg Config, seed uint64) (*Schedule, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Schedule{cfg: cfg, seed: seed, offset: int64(NodeOffset(cfg.NodeName, cfg.Splay))}
	if cfg.Period > 0 {
		// Clamping to the period keeps consecutive sync times strictly
		// increasing even if Jitter*Period rounds up to the period.
		s.width = min(int64(cfg.Jitter*float64(cfg.Period)), int64(cfg.Period))
	}
	return s, nil
}

// Enabled reports whether periodic full syncs happen at all (Period > 0).
func (s *Schedule) Enabled() bool { return s.cfg.Period > 0 }

// Config returns the configuration the schedule was built from.
func (s *Schedule) Config() Config { return s.cfg }

// Seed returns the seed of the jitter draws.
func (s *Schedule) Seed() uint64 { return s.seed }

// Offset returns this node's offset of the slots from the Unix epoch, in
// [0, Splay); see NodeOffset.
func (s *Schedule) Offset() time.Duration { return time.Duration(s.offset) }

// String describes the schedule for a log line, e.g.
// "period=1h0m0s jitter=0.5 splay=1h0m0s offset=23m4.5s".
func (s *Schedule) String() string {
	return fmt.Sprintf("period=%v jitter=%v splay=%v offset=%v", s.cfg.Period, s.cfg.Jitter, s.cfg.Splay, s.Offset())
}

// slotIndex returns the index k of the last slot at or before t, that is the
// largest k with slotTime(k) <= t. It returns 0 when the schedule is disabled.
func (s *Schedule) slotIndex(t time.Time) int64 {
	if !s.Enabled() {
		return 0
	}
	return floorDiv(t.UnixNano()-s.offset, int64(s.cfg.Period))
}

// slotTime returns the nominal time of slot k: Unix epoch + offset +
// k*period. It returns the zero time when the schedule is disabled.
func (s *Schedule) slotTime(k int64) time.Time {
	if !s.Enabled() {
		return time.Time{}
	}
	return time.Unix(0, s.slotNanos(k))
}

// syncTime returns the time of the periodic full sync of slot k: slotTime(k)
// moved by the jitter draw of slot k, which lies in
// [-Jitter*Period/2, +Jitter*Period/2] and depends only on the seed and k.
// syncTime is strictly increasing in k. It returns the zero time when the
// schedule is disabled.
func (s *Schedule) syncTime(k int64) time.Time {
	if !s.Enabled() {
		return time.Time{}
	}
	return time.Unix(0, s.syncNanos(k))
}

// Next returns the earliest periodic full-sync time (syncTime(k) for some k)
// that is strictly after after, in after's location. It returns the zero time
// when the schedule is disabled.
func (s *Schedule) Next(after time.Time) time.Time {
	if !s.Enabled() {
		return time.Time{}
	}
	a := after.UnixNano()
	// Slot k is the last slot at or before a. A sync time lies within half a
	// period of its slot, so the answer is the sync of slot k (if its draw
	// pushed it past a), k+1, or k+2 (if the sync of slot k+1 was pulled to or
	// before a); slot k-1's sync is before slot k, hence before a. Sync times
	// are strictly increasing in k, so the first one after a is the answer.
	k := floorDiv(a-s.offset, int64(s.cfg.Period))
	for s.syncNanos(k) <= a {
		k++
	}
	return time.Unix(0, s.syncNanos(k)).In(after.Location())
}

// slotNanos is slotTime(k) in nanoseconds since the Unix epoch.
func (s *Schedule) slotNanos(k int64) int64 {
	return s.offset + k*int64(s.cfg.Period)
}

// syncNanos is syncTime(k) in nanoseconds since the Unix epoch.
func (s *Schedule) syncNanos(k int64) int64 {
	return s.slotNanos(k) + s.jitterNanos(k)
}

// jitterNanos returns the jitter draw of slot k in nanoseconds: uniform over
// the width integers [-width/2, width-1-width/2], a subset of
// [-width/2, +width/2]. Since width <= period, two draws differ by less than
// one period, so sync times never swap order.
func (s *Schedule) jitterNanos(k int64) int64 {
	if s.width == 0 {
		return 0
	}
	u, _ := bits.Mul64(slotDraw(s.seed, k), uint64(s.width))
	return int64(u) - s.width/2
}

// slotDraw returns 64 pseudo-random bits that are a pure function of seed and
// the slot index k.
func slotDraw(seed uint64, k int64) uint64 {
	return mix64(seed ^ mix64(uint64(k)*golden64+golden64))
}

// golden64 is 2^64 divided by the golden ratio, the increment of SplitMix64.
const golden64 = 0x9e3779b97f4a7c15

// mix64 is the SplitMix64 finalizer: a bijection on 64-bit values whose output
// bits each depend on all input bits.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// floorDiv returns floor(a/b) for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
