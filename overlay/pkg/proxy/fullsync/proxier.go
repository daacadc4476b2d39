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
	"time"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/utils/clock"
)

// UpstreamPeriod is upstream kube-proxy's fixed full-sync period, measured from the last full
// sync. A proxier without a schedule (a nil *ProxierSchedule) keeps that behaviour.
const UpstreamPeriod = time.Hour

// ProxierSchedule is the full-sync schedule of one proxier (one IP family). The proxier asks it
// whether a periodic full sync is due, reports each successful full sync, and starts its trigger
// next to the sync runner.
//
// The nil *ProxierSchedule is valid and behaves as upstream does: a periodic full sync is due
// once UpstreamPeriod has passed since the last one, and nothing is triggered on a timer (the
// sync runner's own maximum interval does that). This keeps proxiers that are built by hand,
// such as upstream's NewFakeProxier, unchanged.
type ProxierSchedule struct {
	tracker   *Tracker
	family    v1.IPFamily
	clock     clock.PassiveClock
	periodSet bool
}

// NewProxierSchedule validates cfg and returns the schedule for the proxier of family. Jitter
// draws use a random seed; retry is how long the trigger waits before asking again when a
// triggered sync did not complete (the proxier's sync period). It logs the schedule, including
// this node's splay offset. With the KubeProxyFullSyncSchedule feature gate off, it returns the
// nil schedule (upstream's behaviour) once cfg is valid, and logs that.
func NewProxierSchedule(logger klog.Logger, cfg Config, family v1.IPFamily, retry time.Duration) (*ProxierSchedule, error) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.KubeProxyFullSyncSchedule) {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("invalid full-sync schedule: %w", err)
		}
		logger.Info("Full syncs follow upstream's hourly timer: the KubeProxyFullSyncSchedule feature gate is off", "ipFamily", family)
		return nil, nil
	}
	return NewProxierScheduleWithClock(logger, cfg, family, retry, clock.RealClock{}, RandomSeed())
}

// NewProxierScheduleWithClock is NewProxierSchedule with an injected clock and jitter seed, for
// tests and simulations.
func NewProxierScheduleWithClock(logger klog.Logger, cfg Config, family v1.IPFamily, retry time.Duration, clk clock.Clock, seed uint64) (*ProxierSchedule, error) {
	t, err := NewTracker(cfg, seed, clk, retry)
	if err != nil {
		return nil, fmt.Errorf("invalid full-sync schedule: %w", err)
	}
	t.SetLogger(logger)
	logger.Info("Full sync schedule", append([]any{"ipFamily", family, "periodSet", cfg.PeriodSet}, t.KeyValues()...)...)
	return &ProxierSchedule{tracker: t, family: family, clock: clk, periodSet: cfg.PeriodSet}, nil
}

// PeriodicDue reports whether a periodic full sync is due now. lastFullSync is the time of the
// proxier's last successful full sync; only the nil schedule uses it.
func (p *ProxierSchedule) PeriodicDue(lastFullSync time.Time) bool {
	if p == nil {
		return time.Since(lastFullSync) > UpstreamPeriod
	}
	return p.tracker.Due()
}

// FullSyncDone records a successful full sync (periodic or not) that finished now: the next
// periodic one is planned from the schedule, and the next-full-sync gauge is updated. It does
// nothing for the nil schedule.
func (p *ProxierSchedule) FullSyncDone() {
	if p == nil {
		return
	}
	p.tracker.Synced(p.clock.Now())
	gauge := metrics.SyncFullProxyRulesNextTimestamp.WithLabelValues(string(p.family))
	if next := p.tracker.NextTime(); next.IsZero() {
		gauge.Set(0)
	} else {
		gauge.Set(float64(next.UnixNano()) / 1e9)
	}
}

// PeriodSet reports whether the user set the full-sync period (Config.PeriodSet): false for
// the nil schedule.
func (p *ProxierSchedule) PeriodSet() bool {
	return p != nil && p.periodSet
}

// FullSyncSkipped records that the proxier skipped a periodic full sync that was due (the
// iptables proxier does in large-cluster mode, as upstream does): the next one is planned from
// now, as after a full sync, so that Start's trigger does not fire again at every retry
// interval. It does nothing for the nil schedule.
func (p *ProxierSchedule) FullSyncSkipped() {
	p.FullSyncDone()
}

// NextTime returns the planned next periodic full sync; zero before the first FullSyncDone,
// when periodic full syncs are disabled, and for the nil schedule.
func (p *ProxierSchedule) NextTime() time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.tracker.NextTime()
}

// Start runs the schedule's trigger in a new goroutine until stopCh closes: at each planned
// periodic full sync it calls trigger (the sync runner's Run), so that the sync happens on the
// schedule rather than on the runner's maximum interval. It does nothing for the nil schedule.
func (p *ProxierSchedule) Start(stopCh <-chan struct{}, trigger func()) {
	if p == nil {
		return
	}
	go p.tracker.Run(stopCh, trigger)
}
