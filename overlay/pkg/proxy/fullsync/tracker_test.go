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
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

func mustTracker(t *testing.T, cfg Config, seed uint64, clk *testingclock.FakeClock, retry time.Duration) *Tracker {
	t.Helper()
	tr, err := NewTracker(cfg, seed, clk, retry)
	if err != nil {
		t.Fatalf("NewTracker(%+v): %v", cfg, err)
	}
	return tr
}

func TestNewTrackerErrors(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	if _, err := NewTracker(Config{Period: time.Hour, Jitter: 1.5}, 1, clk, 0); err == nil || !strings.Contains(err.Error(), "--full-sync-jitter") {
		t.Errorf("NewTracker(jitter 1.5) error = %v, want one naming --full-sync-jitter", err)
	}
	if _, err := NewTracker(Config{Period: time.Hour}, 1, clk, -time.Second); err == nil || !strings.Contains(err.Error(), "retry interval must not be negative") {
		t.Errorf("NewTracker(retry -1s) error = %v, want a negative retry interval error", err)
	}
	if got := mustTracker(t, Config{Period: time.Hour}, 1, clk, 0).retryInterval(); got != DefaultRetryInterval {
		t.Errorf("retryInterval() with 0 = %v, want %v", got, DefaultRetryInterval)
	}
	if got := mustTracker(t, Config{Period: time.Hour}, 1, clk, time.Minute).retryInterval(); got != time.Minute {
		t.Errorf("retryInterval() = %v, want 1m", got)
	}
}

func TestTrackerDueAndSynced(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	cfg := Config{Period: time.Hour, Jitter: 0.5, Splay: time.Hour, NodeName: "ip-10-0-0-1.us-east-1.compute.internal"}
	tr := mustTracker(t, cfg, 99, clk, time.Minute)
	sched := tr.Schedule()

	// Before the first Synced, nothing is planned, however much time passes:
	// the proxier forces its start-up full sync itself.
	if !tr.NextTime().IsZero() || tr.Due() {
		t.Fatalf("before Synced: NextTime() = %v, Due() = %v; want zero, false", tr.NextTime(), tr.Due())
	}
	clk.Step(3 * time.Hour)
	if tr.Due() {
		t.Fatalf("Due() = true before the first Synced")
	}

	// The start-up sync completes: the plan is the next sync time.
	tr.Synced(clk.Now())
	planned := tr.NextTime()
	if want := sched.Next(clk.Now()); !planned.Equal(want) {
		t.Fatalf("NextTime() = %v, want Next(now) = %v", planned, want)
	}
	clk.SetTime(planned.Add(-time.Nanosecond))
	if tr.Due() {
		t.Fatalf("Due() = true 1ns before the planned time %v", planned)
	}
	clk.SetTime(planned)
	if !tr.Due() {
		t.Fatalf("Due() = false at the planned time %v", planned)
	}
	clk.Step(10 * time.Minute)
	if !tr.Due() {
		t.Fatalf("Due() = false after the planned time while no full sync happened")
	}

	// The periodic full sync completes: the next one is planned, one slot
	// later, and is not due.
	tr.Synced(clk.Now())
	if want := sched.syncTime(sched.slotIndex(planned.Add(time.Hour/2)) + 1); !tr.NextTime().Equal(want) {
		t.Fatalf("after the periodic sync, NextTime() = %v, want the next slot's sync %v", tr.NextTime(), want)
	}
	if tr.Due() {
		t.Fatalf("Due() = true right after Synced")
	}

	// A full sync forced before the plan (e.g. after a failed partial sync)
	// keeps the plan, since the planned sync is still after it.
	before := tr.NextTime()
	clk.SetTime(before.Add(-time.Minute))
	tr.Synced(clk.Now())
	if !tr.NextTime().Equal(before) {
		t.Fatalf("after a forced sync 1m before the plan, NextTime() = %v, want unchanged %v", tr.NextTime(), before)
	}
}

// TestTrackerRestartKeepsSlot models a kube-proxy restart: trackers created at
// different times for the same node and configuration plan the same slot.
func TestTrackerRestartKeepsSlot(t *testing.T) {
	name := "ip-10-3-4-5.us-west-2.compute.internal"
	for _, jitter := range []float64{0, 0.5} {
		t.Run(fmt.Sprintf("jitter=%v", jitter), func(t *testing.T) {
			cfg := Config{Period: time.Hour, Jitter: jitter, Splay: time.Hour, NodeName: name}
			sched := mustSchedule(t, cfg, 0)
			// Both processes start in the same slot interval, well away from
			// the jitter windows at its ends.
			k := sched.slotIndex(t0)
			start := sched.slotTime(k).Add(time.Hour / 2)

			clkA := testingclock.NewFakeClock(start.Add(-4 * time.Minute))
			a := mustTracker(t, cfg, 1111, clkA, 0)
			clkA.Step(time.Minute) // start-up sync duration
			a.Synced(clkA.Now())

			clkB := testingclock.NewFakeClock(start.Add(3 * time.Minute))
			b := mustTracker(t, cfg, 2222, clkB, 0) // a new process draws a new seed
			clkB.Step(2 * time.Minute)
			b.Synced(clkB.Now())

			if a.Offset() != b.Offset() || a.Offset() != NodeOffset(name, time.Hour) {
				t.Fatalf("offsets %v and %v, want both %v", a.Offset(), b.Offset(), NodeOffset(name, time.Hour))
			}
			na, nb := a.NextTime(), b.NextTime()
			if got, want := sched.slotIndex(na.Add(time.Hour/2)), k+1; got != want {
				t.Fatalf("first process planned %v, in slot %d; want slot %d", na, got, want)
			}
			if got, want := sched.slotIndex(nb.Add(time.Hour/2)), k+1; got != want {
				t.Fatalf("restarted process planned %v, in slot %d; want slot %d", nb, got, want)
			}
			if jitter == 0 {
				if !na.Equal(nb) || !na.Equal(sched.slotTime(k+1)) {
					t.Fatalf("without jitter, planned %v and %v, want both exactly slot %v", na, nb, sched.slotTime(k+1))
				}
			} else if na.Equal(nb) {
				t.Fatalf("with jitter and different seeds, both planned %v; want independent draws", na)
			}
		})
	}
}

func TestTrackerDisabled(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	tr := mustTracker(t, Config{Jitter: 0.5, NodeName: "n"}, 1, clk, time.Second)
	tr.Synced(clk.Now())
	clk.Step(1000 * time.Hour)
	if tr.Due() || !tr.NextTime().IsZero() {
		t.Fatalf("disabled: Due() = %v, NextTime() = %v; want false and zero", tr.Due(), tr.NextTime())
	}

	h := startRun(t, tr, clk)
	h.expectWait(waitDisabled, 0)
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("disabled Run set %d timers, want none", n)
	}
	for range 10 {
		tr.Synced(clk.Now())
		clk.Step(100 * time.Hour)
	}
	h.stopAndExpectNoMoreEvents()
}

func TestTrackerKeyValuesAndString(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	cfg := Config{Period: time.Hour, Jitter: 0.5, Splay: time.Hour, NodeName: "node-1"}
	tr := mustTracker(t, cfg, 5, clk, 0)
	kv := tr.KeyValues()
	want := []any{"period", time.Hour, "jitter", 0.5, "splay", time.Hour, "offset", NodeOffset("node-1", time.Hour), "next", tr.Schedule().Next(t0)}
	if fmt.Sprint(kv) != fmt.Sprint(want) {
		t.Errorf("KeyValues() before Synced = %v, want %v", kv, want)
	}
	clk.Step(2 * time.Hour)
	tr.Synced(clk.Now())
	if got := tr.KeyValues()[9]; got != tr.NextTime() {
		t.Errorf("KeyValues() next = %v, want NextTime() %v", got, tr.NextTime())
	}
	if s := tr.String(); !strings.HasPrefix(s, "period=1h0m0s jitter=0.5 splay=1h0m0s offset=12m33.613164854s next=") {
		t.Errorf("String() = %q", s)
	}
	disabled := mustTracker(t, Config{}, 5, clk, 0)
	if got := disabled.KeyValues()[9]; !got.(time.Time).IsZero() {
		t.Errorf("disabled KeyValues() next = %v, want zero time", got)
	}
}

// runEvent is something Run did: a trigger call (at the fake clock's time)
// or a wait.
type runEvent struct {
	trigger bool
	at      time.Time
	kind    waitKind
	d       time.Duration
}

func (e runEvent) String() string {
	if e.trigger {
		return fmt.Sprintf("trigger at %v", e.at)
	}
	return fmt.Sprintf("wait kind %d for %v", e.kind, e.d)
}

// runHarness runs Tracker.Run in a goroutine and reports, in order, every
// trigger call and every time Run blocks. Run cannot proceed until the test
// has received its event, so the sequence of events is exact.
type runHarness struct {
	t      *testing.T
	clk    *testingclock.FakeClock
	events chan runEvent
	stop   chan struct{}
	done   chan struct{}

	mu sync.Mutex
	// late collects the events Run produced that nobody received before it
	// was stopped.
	late []runEvent
}

func startRun(t *testing.T, tr *Tracker, clk *testingclock.FakeClock) *runHarness {
	h := &runHarness{t: t, clk: clk, events: make(chan runEvent), stop: make(chan struct{}), done: make(chan struct{})}
	send := func(e runEvent) {
		select {
		case h.events <- e:
		case <-h.stop:
			h.mu.Lock()
			defer h.mu.Unlock()
			h.late = append(h.late, e)
		}
	}
	tr.onWait = func(kind waitKind, d time.Duration) { send(runEvent{kind: kind, d: d}) }
	go func() {
		defer close(h.done)
		tr.Run(h.stop, func() { send(runEvent{trigger: true, at: clk.Now()}) })
	}()
	t.Cleanup(h.stopRun)
	return h
}

// next returns Run's next event, failing the test if there is none within a
// generous real-time limit (a safety net against hangs, not a sleep).
func (h *runHarness) next() runEvent {
	h.t.Helper()
	select {
	case e := <-h.events:
		return e
	case <-time.After(30 * time.Second):
		h.t.Fatalf("Run did nothing for 30s of real time")
		return runEvent{}
	}
}

func (h *runHarness) expectWait(kind waitKind, d time.Duration) {
	h.t.Helper()
	if e := h.next(); e.trigger || e.kind != kind || e.d != d {
		h.t.Fatalf("got %v, want wait kind %d for %v", e, kind, d)
	}
	wantTimers := 1
	if kind == waitSynced || kind == waitDisabled {
		wantTimers = 0
	}
	if n := h.clk.Waiters(); n != wantTimers {
		h.t.Fatalf("Run is waiting with %d timers set, want %d", n, wantTimers)
	}
}

func (h *runHarness) expectTrigger(at time.Time) {
	h.t.Helper()
	if e := h.next(); !e.trigger || !e.at.Equal(at) {
		h.t.Fatalf("got %v, want trigger at %v", e, at)
	}
}

func (h *runHarness) stopRun() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		h.t.Errorf("Run did not return within 30s of real time after stop")
	}
}

// stopAndExpectNoMoreEvents stops Run and checks that it did nothing more
// since the last event the test received.
func (h *runHarness) stopAndExpectNoMoreEvents() {
	h.t.Helper()
	h.stopRun()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.late) > 0 {
		h.t.Fatalf("Run did more than expected: %v", h.late)
	}
}

func TestRunWaitsForFirstSyncedThenTriggers(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	tr := mustTracker(t, Config{Period: time.Hour, Jitter: 0.5, Splay: time.Hour, NodeName: "a"}, 3, clk, time.Minute)
	h := startRun(t, tr, clk)

	// Nothing is planned, so no timer; time passing changes nothing.
	h.expectWait(waitSynced, 0)
	clk.Step(5 * time.Hour)

	tr.Synced(clk.Now())
	planned := tr.NextTime()
	h.expectWait(waitPlanned, planned.Sub(clk.Now()))
	clk.SetTime(planned.Add(-time.Nanosecond))
	clk.Step(time.Nanosecond)
	h.expectTrigger(planned)
	h.expectWait(waitRetry, time.Minute)

	// The periodic sync completes 2m later: Run re-arms for the next plan
	// right away, without waiting for the retry timer.
	clk.Step(2 * time.Minute)
	tr.Synced(clk.Now())
	second := tr.NextTime()
	if second.Sub(planned) < time.Hour/2 {
		t.Fatalf("second plan %v is less than (1-jitter)*period after the first %v", second, planned)
	}
	h.expectWait(waitPlanned, second.Sub(clk.Now()))
	clk.SetTime(second)
	h.expectTrigger(second)
	h.expectWait(waitRetry, time.Minute)
	h.stopAndExpectNoMoreEvents()
}

// TestRunRetriesAfterFailure: the triggered sync fails (no Synced), so Run
// triggers again once per retry interval, and never in between.
func TestRunRetriesAfterFailure(t *testing.T) {
	const retry = 30 * time.Second
	clk := testingclock.NewFakeClock(t0)
	tr := mustTracker(t, Config{Period: time.Hour, Splay: time.Hour, NodeName: "b"}, 3, clk, retry)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(4)))
	tr.SetLogger(logger)
	h := startRun(t, tr, clk)
	h.expectWait(waitSynced, 0)

	tr.Synced(clk.Now())
	planned := tr.NextTime()
	h.expectWait(waitPlanned, planned.Sub(clk.Now()))
	clk.SetTime(planned)
	h.expectTrigger(planned)

	for i := 1; i <= 5; i++ {
		h.expectWait(waitRetry, retry)
		if !tr.Due() {
			t.Fatalf("Due() = false while the planned sync has not happened")
		}
		// Just short of the retry interval nothing happens; the next event
		// must be the trigger at exactly planned + i*retry.
		clk.Step(retry - time.Nanosecond)
		clk.Step(time.Nanosecond)
		h.expectTrigger(planned.Add(time.Duration(i) * retry))
	}
	h.expectWait(waitRetry, retry)

	// A sync that runs longer than the retry interval: triggered again while
	// running, then it completes and Run re-arms for the next slot.
	clk.Step(retry)
	h.expectTrigger(planned.Add(6 * retry))
	h.expectWait(waitRetry, retry)
	clk.Step(retry / 3)
	tr.Synced(clk.Now())
	if want := planned.Add(time.Hour); !tr.NextTime().Equal(want) {
		t.Fatalf("NextTime() = %v, want the next slot %v", tr.NextTime(), want)
	}
	h.expectWait(waitPlanned, tr.NextTime().Sub(clk.Now()))
	h.stopAndExpectNoMoreEvents()

	// One trigger was the planned one, six were retries; only the retries
	// are logged at V(2), so that failing syncs are visible.
	messages := map[string]int{}
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		messages[fmt.Sprintf("V(%d) %s", e.Verbosity, e.Message)]++
	}
	want := map[string]int{
		"V(4) Periodic full sync due": 1,
		"V(2) Periodic full sync still not done after the retry interval, triggering it again": 6,
	}
	if fmt.Sprint(messages) != fmt.Sprint(want) {
		t.Errorf("logged %v, want %v", messages, want)
	}
}

// TestRunRearmsOnSynced: each Synced makes Run re-read the plan and replace
// its timer, even when the plan did not change.
func TestRunRearmsOnSynced(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	tr := mustTracker(t, Config{Period: 20 * time.Minute, Jitter: 0.9, NodeName: "c"}, 8, clk, time.Minute)
	h := startRun(t, tr, clk)
	h.expectWait(waitSynced, 0)

	tr.Synced(clk.Now())
	planned := tr.NextTime()
	h.expectWait(waitPlanned, planned.Sub(clk.Now()))

	// Forced full syncs before the plan keep the plan; Run re-arms with the
	// remaining time and keeps exactly one timer (checked by expectWait).
	for range 3 {
		clk.Step(planned.Sub(clk.Now()) / 4)
		tr.Synced(clk.Now())
		if !tr.NextTime().Equal(planned) {
			t.Fatalf("NextTime() moved from %v to %v after a sync before it", planned, tr.NextTime())
		}
		h.expectWait(waitPlanned, planned.Sub(clk.Now()))
	}

	// Several Synced calls before Run gets to look collapse into a single
	// re-arm for the latest plan.
	tr.Synced(clk.Now())
	tr.Synced(clk.Now())
	h.expectWait(waitPlanned, planned.Sub(clk.Now()))

	clk.SetTime(planned)
	h.expectTrigger(planned)
	h.expectWait(waitRetry, time.Minute)
	clk.Step(10 * time.Second)
	tr.Synced(clk.Now())
	second := tr.NextTime()
	if sched := tr.Schedule(); !second.Equal(sched.syncTime(sched.slotIndex(planned.Add(10*time.Minute)) + 1)) {
		t.Fatalf("plan after the periodic sync = %v, want the next slot's sync", second)
	}
	h.expectWait(waitPlanned, second.Sub(clk.Now()))
	clk.SetTime(second)
	h.expectTrigger(second)
	h.expectWait(waitRetry, time.Minute)
	h.stopAndExpectNoMoreEvents()
}

// TestRunFollowsSchedule drives Run through many periods, completing each
// triggered sync after a fixed duration, and checks that every trigger
// happens exactly at the schedule's next sync time.
func TestRunFollowsSchedule(t *testing.T) {
	const syncDuration = 90 * time.Second
	clk := testingclock.NewFakeClock(t0)
	tr := mustTracker(t, Config{Period: time.Hour, Jitter: 0.5, Splay: time.Hour, NodeName: "d"}, 12345, clk, 2*time.Minute)
	sched := tr.Schedule()
	h := startRun(t, tr, clk)
	h.expectWait(waitSynced, 0)

	clk.Step(syncDuration) // start-up sync
	tr.Synced(clk.Now())
	var triggers []time.Time
	for range 48 {
		planned := tr.NextTime()
		h.expectWait(waitPlanned, planned.Sub(clk.Now()))
		clk.SetTime(planned)
		h.expectTrigger(planned)
		triggers = append(triggers, planned)
		h.expectWait(waitRetry, 2*time.Minute)
		clk.Step(syncDuration)
		tr.Synced(clk.Now())
	}
	h.expectWait(waitPlanned, tr.NextTime().Sub(clk.Now()))
	first := sched.slotIndex(triggers[0].Add(time.Hour / 2))
	for i, at := range triggers {
		if want := sched.syncTime(first + int64(i)); !at.Equal(want) {
			t.Fatalf("trigger %d at %v, want slot %d's sync %v", i, at, first+int64(i), want)
		}
	}
	h.stopAndExpectNoMoreEvents()
}

func TestRunStopsWhileWaiting(t *testing.T) {
	for name, kind := range map[string]waitKind{"for Synced": waitSynced, "for the plan": waitPlanned, "to retry": waitRetry} {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			tr := mustTracker(t, Config{Period: time.Hour}, 1, clk, time.Minute)
			h := startRun(t, tr, clk)
			h.expectWait(waitSynced, 0)
			if kind != waitSynced {
				tr.Synced(clk.Now())
				h.expectWait(waitPlanned, tr.NextTime().Sub(clk.Now()))
			}
			if kind == waitRetry {
				clk.SetTime(tr.NextTime())
				h.expectTrigger(tr.NextTime())
				h.expectWait(waitRetry, time.Minute)
			}
			h.stopAndExpectNoMoreEvents()
			if n := clk.Waiters(); n != 0 {
				t.Errorf("%d timers left behind after Run returned", n)
			}
		})
	}
}
