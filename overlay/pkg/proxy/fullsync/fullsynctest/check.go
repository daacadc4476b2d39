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

// Package fullsynctest checks that a proxier follows its full-sync schedule. The iptables and
// nftables proxier tests share it, so both modes are held to the same contract.
package fullsynctest

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/fullsync"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	testingclock "k8s.io/utils/clock/testing"
)

// Proxier is what the check needs of a fake proxier: a way to give it a schedule, to run one
// sync, and to read (and set) the time of its last full sync, which changes only when a sync
// was a full one.
type Proxier struct {
	Mode            kubeproxyconfig.ProxyMode
	Family          v1.IPFamily
	SetSchedule     func(*fullsync.ProxierSchedule)
	Sync            func() error
	LastFullSync    func() time.Time
	SetLastFullSync func(time.Time)
}

// synced runs one sync, which must succeed, and reports whether it was a full one.
func synced(t *testing.T, p Proxier) bool {
	t.Helper()
	before := p.LastFullSync()
	if err := p.Sync(); err != nil {
		t.Fatalf("sync failed: %v", err)
	}
	return !p.LastFullSync().Equal(before)
}

// CheckFollowsSchedule checks, with a fake clock, that newProxier's proxier full-syncs at
// start-up, then only when its schedule says so, updates the next-full-sync gauge, never
// full-syncs periodically when the schedule is disabled, and keeps upstream's hour when it has
// no schedule at all. newProxier must return a fresh fake proxier on each call.
func CheckFollowsSchedule(t *testing.T, newProxier func() Proxier) {
	logger, _ := ktesting.NewTestContext(t)
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

	t.Run("follows the schedule", func(t *testing.T) {
		p := newProxier()
		metrics.RegisterMetrics(p.Mode)
		clk := testingclock.NewFakeClock(start)
		s, err := fullsync.NewProxierScheduleWithClock(logger, fullsync.Config{Period: time.Hour, Splay: time.Hour, NodeName: "node-a"}, p.Family, time.Minute, clk, 1)
		if err != nil {
			t.Fatal(err)
		}
		p.SetSchedule(s)
		if !synced(t, p) {
			t.Fatal("the start-up sync was not a full sync")
		}
		next := s.NextTime()
		if !next.After(start) || next.After(start.Add(time.Hour)) {
			t.Fatalf("next full sync planned at %v, want within the period after %v", next, start)
		}
		gauge, err := testutil.GetGaugeMetricValue(metrics.SyncFullProxyRulesNextTimestamp.WithLabelValues(string(p.Family)))
		if err != nil {
			t.Fatal(err)
		}
		if want := float64(next.UnixNano()) / 1e9; gauge != want {
			t.Errorf("next-full-sync gauge = %v, want %v", gauge, want)
		}
		// Jitter is 0, so the slot is the node's offset past a whole period since the epoch.
		if off := fullsync.NodeOffset("node-a", time.Hour); next.Sub(time.Unix(0, 0)).Truncate(time.Hour) != next.Sub(time.Unix(0, 0))-off {
			t.Errorf("next full sync %v is not on node-a's slot (offset %v)", next, off)
		}
		clk.SetTime(next.Add(-time.Second))
		if synced(t, p) {
			t.Error("a sync one second before the planned full sync was a full sync")
		}
		clk.SetTime(next)
		if !synced(t, p) {
			t.Error("the sync at the planned time was not a full sync")
		}
		if got := s.NextTime(); !got.Equal(next.Add(time.Hour)) {
			t.Errorf("after the periodic full sync, next = %v, want %v", got, next.Add(time.Hour))
		}
		if synced(t, p) {
			t.Error("the sync right after a periodic full sync was a full sync")
		}
	})

	t.Run("disabled", func(t *testing.T) {
		p := newProxier()
		metrics.RegisterMetrics(p.Mode)
		clk := testingclock.NewFakeClock(start)
		s, err := fullsync.NewProxierScheduleWithClock(logger, fullsync.Config{NodeName: "node-a"}, p.Family, time.Minute, clk, 1)
		if err != nil {
			t.Fatal(err)
		}
		p.SetSchedule(s)
		if !synced(t, p) {
			t.Fatal("the start-up sync was not a full sync")
		}
		// Upstream would full-sync now: its hour has long passed.
		p.SetLastFullSync(time.Now().Add(-48 * time.Hour))
		clk.Step(48 * time.Hour)
		if synced(t, p) {
			t.Error("a periodic full sync happened although --full-sync-period is 0")
		}
		gauge, err := testutil.GetGaugeMetricValue(metrics.SyncFullProxyRulesNextTimestamp.WithLabelValues(string(p.Family)))
		if err != nil {
			t.Fatal(err)
		}
		if gauge != 0 {
			t.Errorf("next-full-sync gauge = %v, want 0 when disabled", gauge)
		}
	})

	t.Run("no schedule keeps upstream's hour", func(t *testing.T) {
		p := newProxier()
		if !synced(t, p) {
			t.Fatal("the start-up sync was not a full sync")
		}
		if synced(t, p) {
			t.Error("a second sync right away was a full sync")
		}
		p.SetLastFullSync(time.Now().Add(-fullsync.UpstreamPeriod - time.Second))
		if !synced(t, p) {
			t.Error("no full sync although upstream's hour has passed")
		}
	})
}
