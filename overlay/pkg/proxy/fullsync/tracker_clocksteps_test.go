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
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// wallClock is a fake clock whose wall time (Now) can be stepped apart from the elapsed time
// that its timers measure, as NTP steps a node's clock while Go's timers keep counting.
type wallClock struct {
	*testingclock.FakeClock
	offset time.Duration
}

func (c *wallClock) Now() time.Time                  { return c.FakeClock.Now().Add(c.offset) }
func (c *wallClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func steppedTracker(t *testing.T) (*Tracker, *wallClock, *runHarness) {
	t.Helper()
	fc := testingclock.NewFakeClock(t0)
	wc := &wallClock{FakeClock: fc}
	tr, err := NewTracker(Config{Period: time.Hour, Jitter: 0.5, Splay: time.Hour, NodeName: "a"}, 3, wc, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h := startRun(t, tr, fc)
	h.expectWait(waitSynced, 0)
	return tr, wc, h
}

// TestClockStepBackDoesNotPostpone: the wall clock is stepped back 40 minutes while Run waits
// for the planned full sync. The full sync still happens when the planned wait has elapsed,
// and the proxier sees it as due.
func TestClockStepBackDoesNotPostpone(t *testing.T) {
	tr, wc, h := steppedTracker(t)
	tr.Synced(wc.Now())
	planned := tr.NextTime()
	wait := planned.Sub(wc.Now())
	h.expectWait(waitPlanned, wait)

	wc.offset = -40 * time.Minute
	wc.Step(wait - time.Nanosecond)
	if tr.Due() {
		t.Fatal("due before the planned wait has elapsed")
	}
	wc.Step(time.Nanosecond)
	h.expectTrigger(wc.FakeClock.Now())
	if !tr.Due() {
		t.Fatal("the planned wait has elapsed, but the full sync is not due: the step back postponed it")
	}
	h.expectWait(waitRetry, time.Minute)

	// The full sync runs: the next one is planned from the (stepped) wall clock, and is not due.
	tr.Synced(wc.Now())
	next := tr.NextTime()
	if tr.Due() {
		t.Fatal("due right after the full sync")
	}
	h.expectWait(waitPlanned, next.Sub(wc.Now()))
	h.stopAndExpectNoMoreEvents()
}

// TestClockStepForwardBringsOneSyncForward: the wall clock is stepped past the plan. The full
// sync is due at once (one extra, early), and once it has run the next one is planned from
// the new time: the old plan's timer triggers nothing more.
func TestClockStepForwardBringsOneSyncForward(t *testing.T) {
	tr, wc, h := steppedTracker(t)
	tr.Synced(wc.Now())
	planned := tr.NextTime()
	wait := planned.Sub(wc.Now())
	h.expectWait(waitPlanned, wait)

	wc.offset = wait + time.Minute
	if !tr.Due() {
		t.Fatal("the wall clock is past the plan, but the full sync is not due")
	}
	tr.Synced(wc.Now())
	next := tr.NextTime()
	if !next.After(wc.Now()) || tr.Due() {
		t.Fatalf("after the full sync, next %v is not after now %v, or it is still due", next, wc.Now())
	}
	h.expectWait(waitPlanned, next.Sub(wc.Now()))
	// The old plan's wait elapses: nothing happens.
	wc.Step(wait)
	if tr.Due() {
		t.Fatal("due again when the old plan's wait elapsed")
	}
	h.stopAndExpectNoMoreEvents()
}
