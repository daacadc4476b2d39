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
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultRetryInterval is the retry interval NewTracker uses when it is given
// 0: how long Run waits after a trigger that was not followed by Synced
// before it triggers again.
const DefaultRetryInterval = 30 * time.Second

// Tracker plans the periodic full syncs of a proxier on a Schedule. The
// proxier forces its own full sync at start-up and after a failure, calls
// Synced after every successful full sync, asks Due whether a partial sync
// should be a full one, and runs Run in a goroutine to be woken up when the
// next periodic full sync is planned.
//
// A Tracker must be created with NewTracker. Its methods are safe for
// concurrent use.
type Tracker struct {
	sched *Schedule
	clock clock.Clock
	retry time.Duration

	mu sync.Mutex
	// next is the planned periodic full sync; zero before the first Synced
	// and when the schedule is disabled.
	next time.Time
	// elapsed is the plan whose wait Run's timer has seen run out. Slots are
	// wall-clock times, but timers measure elapsed time, so a plan is due
	// when either says so: a wall clock stepped back cannot postpone a full
	// sync (the timer still runs out), and one stepped forward brings at most
	// one full sync forward (the next plan starts from the new time).
	elapsed time.Time
	logger  klog.Logger
	// changed holds one pending notification for Run that next has been set.
	// Synced sends and snapshot drains it with mu held, so once Run has read
	// the plan, a notification it finds always reflects a newer plan.
	changed chan struct{}

	// onWait, when set (by tests), is called by Run from its goroutine each
	// time it is about to block, after any timer has been created.
	onWait func(kind waitKind, d time.Duration)
}

// waitKind says what Run is waiting for when it blocks.
type waitKind int

const (
	// waitDisabled: the schedule is disabled; Run only waits for stop.
	waitDisabled waitKind = iota
	// waitSynced: nothing is planned before the first Synced.
	waitSynced
	// waitPlanned: a timer is set for the planned time (or for Synced).
	waitPlanned
	// waitRetry: trigger was called; a timer is set for the retry interval
	// (or for Synced).
	waitRetry
)

// NewTracker returns a Tracker for cfg whose jitter draws derive from seed
// (production passes RandomSeed()), that reads the time and sets timers
// through clk. retryInterval is how long Run waits after calling its trigger
// before it calls it again if no Synced has moved the plan; 0 selects
// DefaultRetryInterval. It returns an error if cfg is invalid (see
// Config.Validate) or retryInterval is negative. The tracker logs through
// klog.Background() until SetLogger is called.
func NewTracker(cfg Config, seed uint64, clk clock.Clock, retryInterval time.Duration) (*Tracker, error) {
	sched, err := NewSchedule(cfg, seed)
	if err != nil {
		return nil, err
	}
	if retryInterval < 0 {
		return nil, fmt.Errorf("full sync retry interval must not be negative, got %v", retryInterval)
	}
	if retryInterval == 0 {
		retryInterval = DefaultRetryInterval
	}
	return &Tracker{
		sched:   sched,
		clock:   clk,
		retry:   retryInterval,
		logger:  klog.Background(),
		changed: make(chan struct{}, 1),
	}, nil
}

// SetLogger makes the tracker log through logger from now on.
func (t *Tracker) SetLogger(logger klog.Logger) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logger = logger
}

// Schedule returns the schedule the tracker plans on.
func (t *Tracker) Schedule() *Schedule { return t.sched }

// Offset returns this node's offset of the slots; see Schedule.Offset.
func (t *Tracker) Offset() time.Duration { return t.sched.Offset() }

// retryInterval returns the retry interval of Run.
func (t *Tracker) retryInterval() time.Duration { return t.retry }

// Synced records that a full sync (of any kind: start-up, after a failure, or
// periodic) completed successfully at now. The next periodic full sync is then
// planned at Schedule().Next(now), and a running Run re-arms for it. It does
// nothing when the schedule is disabled.
func (t *Tracker) Synced(now time.Time) {
	if !t.sched.Enabled() {
		return
	}
	next := t.sched.Next(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	// After a step back of the wall clock, the plan whose wait has elapsed
	// can still lie ahead of now: it is done, so plan the slot after it.
	if !t.elapsed.IsZero() && !next.After(t.elapsed) {
		next = t.sched.Next(t.elapsed)
	}
	t.elapsed = time.Time{}
	t.next = next
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// NextTime returns the planned next periodic full sync, or the zero time when
// the schedule is disabled or Synced has not been called yet.
func (t *Tracker) NextTime() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next
}

// Due reports whether a periodic full sync is due, that is whether a next
// periodic full sync is planned and either the clock has reached it or Run's
// timer for it has run out (whichever comes first, so that a step of the wall
// clock in either direction neither skips nor repeats full syncs: see
// Tracker.elapsed). It is false before the first Synced and always false when
// the schedule is disabled.
func (t *Tracker) Due() bool {
	t.mu.Lock()
	next, elapsed := t.next, t.elapsed
	t.mu.Unlock()
	return !next.IsZero() && (!t.clock.Now().Before(next) || elapsed.Equal(next))
}

// waited records that Run's timer for the plan next has run out, unless the
// plan has changed since.
func (t *Tracker) waited(next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next.Equal(next) {
		t.elapsed = next
	}
}

// elapsedFor reports whether Run's timer for the plan next has run out.
func (t *Tracker) elapsedFor(next time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !next.IsZero() && t.elapsed.Equal(next)
}

// String describes the schedule and the plan for a log line.
func (t *Tracker) String() string {
	return fmt.Sprintf("%v next=%v", t.sched, t.NextTime())
}

// KeyValues returns the structured-logging key/value pairs of the schedule
// for the start-up log line: period, jitter, splay, offset and next. "next"
// is the planned next periodic full sync; before the first Synced, it is the
// one that would follow the current time, and when the schedule is disabled it
// is the zero time.
func (t *Tracker) KeyValues() []any {
	cfg := t.sched.Config()
	next := t.NextTime()
	if next.IsZero() {
		next = t.sched.Next(t.clock.Now())
	}
	return []any{"period", cfg.Period, "jitter", cfg.Jitter, "splay", cfg.Splay, "offset", t.Offset(), "next", next}
}

// Run calls trigger each time a periodic full sync becomes due, until stopCh
// is closed; it is meant to run in its own goroutine, and trigger (in
// production, a request to the sync runner) should return quickly. Run waits
// with timers of the tracker's clock: before the first Synced it waits for
// Synced; then it waits until NextTime (or until its timer for that wait runs
// out, if the wall clock was stepped back meanwhile) and calls trigger. If no Synced follows
// within the retry interval (the sync failed, was skipped, or is still
// running), it calls trigger again, once per retry interval, never in a busy
// loop. After every Synced, Run re-arms for the (possibly new) NextTime. When
// the schedule is disabled, Run never calls trigger and only waits for stopCh.
func (t *Tracker) Run(stopCh <-chan struct{}, trigger func()) {
	if !t.sched.Enabled() {
		t.notifyWait(waitDisabled, 0)
		<-stopCh
		return
	}
	// triggered is the plan for which trigger was last called.
	var triggered time.Time
	for {
		select {
		case <-stopCh:
			return
		default:
		}
		next, logger := t.snapshot()
		kind, d := waitSynced, time.Duration(0)
		if !next.IsZero() {
			now := t.clock.Now()
			if now.Before(next) && !t.elapsedFor(next) {
				kind, d = waitPlanned, next.Sub(now)
			} else {
				if next.Equal(triggered) {
					logger.V(2).Info("Periodic full sync still not done after the retry interval, triggering it again", "planned", next, "retryInterval", t.retry)
				} else {
					logger.V(4).Info("Periodic full sync due", "planned", next)
				}
				triggered = next
				trigger()
				kind, d = waitRetry, t.retry
			}
		}
		fired, ok := t.wait(kind, d, stopCh)
		if !ok {
			return
		}
		if fired && kind == waitPlanned {
			t.waited(next)
		}
	}
}

// snapshot returns the plan and the logger, and consumes any pending change
// notification, which the returned plan already reflects.
func (t *Tracker) snapshot() (time.Time, klog.Logger) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.changed:
	default:
	}
	return t.next, t.logger
}

// wait blocks until the plan changes, stopCh is closed or, unless kind is
// waitSynced, d has passed on the tracker's clock. It returns whether its
// timer fired, and false if stopCh was closed.
func (t *Tracker) wait(kind waitKind, d time.Duration, stopCh <-chan struct{}) (fired, ok bool) {
	var timerC <-chan time.Time
	if kind != waitSynced {
		timer := t.clock.NewTimer(d)
		defer timer.Stop()
		timerC = timer.C()
	}
	t.notifyWait(kind, d)
	select {
	case <-stopCh:
		return false, false
	case <-t.changed:
		// The caller's next snapshot reads the new plan.
	case <-timerC:
		return true, true
	}
	return false, true
}

// notifyWait calls the test hook, if any.
func (t *Tracker) notifyWait(kind waitKind, d time.Duration) {
	if t.onWait != nil {
		t.onWait(kind, d)
	}
}
