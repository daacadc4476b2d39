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
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/features"
	testingclock "k8s.io/utils/clock/testing"
)

func TestNilProxierScheduleIsUpstream(t *testing.T) {
	var p *ProxierSchedule
	if p.PeriodicDue(time.Now()) {
		t.Error("due right after a full sync")
	}
	if !p.PeriodicDue(time.Now().Add(-UpstreamPeriod - time.Second)) {
		t.Error("not due although upstream's hour has passed")
	}
	p.FullSyncDone()
	if !p.NextTime().IsZero() {
		t.Error("the nil schedule plans a next full sync")
	}
	p.Start(nil, func() { t.Error("the nil schedule triggered a sync") })
}

func TestNewProxierScheduleRejectsBadConfig(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	for _, gate := range []bool{false, true} {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.KubeProxyFullSyncSchedule, gate)
		_, err := NewProxierSchedule(logger, Config{Period: time.Hour, Jitter: 1}, v1.IPv6Protocol, time.Second)
		if err == nil || !strings.Contains(err.Error(), "--full-sync-jitter") {
			t.Errorf("gate %v: error = %v, want one naming --full-sync-jitter", gate, err)
		}
	}
}

// TestNewProxierScheduleFollowsGate: with the KubeProxyFullSyncSchedule gate off, a valid
// configuration gives the nil schedule (upstream's hourly timer); with it on, a schedule.
func TestNewProxierScheduleFollowsGate(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cfg := Config{Period: 30 * time.Minute, Splay: 10 * time.Minute, NodeName: "n", PeriodSet: true}
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.KubeProxyFullSyncSchedule, false)
	p, err := NewProxierSchedule(logger, cfg, v1.IPv4Protocol, time.Second)
	if err != nil || p != nil {
		t.Errorf("gate off: got %v, %v; want the nil schedule", p, err)
	}
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.KubeProxyFullSyncSchedule, true)
	p, err = NewProxierSchedule(logger, cfg, v1.IPv4Protocol, time.Second)
	if err != nil || p == nil || !p.PeriodSet() {
		t.Errorf("gate on: got %v, %v; want a schedule with the period set", p, err)
	}
}

func TestProxierScheduleStartTriggersOnSchedule(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p, err := NewProxierScheduleWithClock(logger, Config{Period: 10 * time.Minute, NodeName: "n"}, v1.IPv4Protocol, time.Minute, clk, 7)
	if err != nil {
		t.Fatal(err)
	}
	triggered := make(chan struct{}, 10)
	stop := make(chan struct{})
	defer close(stop)
	p.Start(stop, func() { triggered <- struct{}{} })
	p.FullSyncDone()
	next := p.NextTime()
	if next.IsZero() {
		t.Fatal("no full sync planned after FullSyncDone")
	}
	// Wait until the trigger goroutine has armed its timer for the plan, then reach it.
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	if p.PeriodicDue(time.Time{}) {
		t.Fatal("due before the planned time")
	}
	clk.SetTime(next)
	select {
	case <-triggered:
	case <-time.After(30 * time.Second):
		t.Fatal("the trigger was not called at the planned time")
	}
	if !p.PeriodicDue(time.Time{}) {
		t.Error("not due at the planned time")
	}
}
