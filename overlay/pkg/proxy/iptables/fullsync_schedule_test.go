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

package iptables

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2/ktesting"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/fullsync"
	"k8s.io/kubernetes/pkg/proxy/fullsync/fullsynctest"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestFullSyncFollowsSchedule(t *testing.T) {
	fullsynctest.CheckFollowsSchedule(t, func() fullsynctest.Proxier {
		fp := NewFakeProxier(iptablestest.NewFake())
		return fullsynctest.Proxier{
			Mode:            kubeproxyconfig.ProxyModeIPTables,
			Family:          v1.IPv4Protocol,
			SetSchedule:     func(s *fullsync.ProxierSchedule) { fp.fullSync = s },
			Sync:            fp.syncProxyRules,
			LastFullSync:    func() time.Time { return fp.lastFullSync },
			SetLastFullSync: func(t time.Time) { fp.lastFullSync = t },
		}
	})
}

// largeClusterProxier returns a fake iptables proxier in large-cluster mode, after its first
// sync, on schedule cfg with a fake clock.
func largeClusterProxier(t *testing.T, cfg fullsync.Config) (*Proxier, *fullsync.ProxierSchedule, *testingclock.FakeClock) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	fp := NewFakeProxier(iptablestest.NewFake())
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPTables)
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	s, err := fullsync.NewProxierScheduleWithClock(logger, cfg, v1.IPv4Protocol, time.Minute, clk, 1)
	if err != nil {
		t.Fatal(err)
	}
	fp.fullSync = s
	// More endpoints than largeClusterEndpointsThreshold.
	makeServiceMap(fp, makeTestService("ns", "big", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "172.30.0.41"
		svc.Spec.Ports = []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP}}
	}))
	slice := makeTestEndpointSlice("ns", "big", 1, func(eps *discovery.EndpointSlice) {
		eps.AddressType = discovery.AddressTypeIPv4
		for i := 0; i <= largeClusterEndpointsThreshold; i++ {
			eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)}})
		}
		eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}}
	})
	populateEndpointSlices(fp, slice)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if !fp.largeClusterMode {
		t.Fatal("the proxier is not in large-cluster mode")
	}
	return fp, s, clk
}

// TestLargeClusterSkipReplans: in large-cluster mode the iptables proxier skips periodic full
// syncs, as upstream does. A skipped one must be planned anew, or the schedule's trigger would
// find it due, and wake the sync runner, at every retry interval for ever.
func TestLargeClusterSkipReplans(t *testing.T) {
	fp, s, clk := largeClusterProxier(t, fullsync.Config{Period: time.Hour, Splay: time.Hour, NodeName: "node-a"})
	first := s.NextTime()
	clk.SetTime(first)
	if !s.PeriodicDue(fp.lastFullSync) {
		t.Fatal("the periodic full sync is not due at its planned time")
	}
	last := fp.lastFullSync
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if !fp.lastFullSync.Equal(last) {
		t.Error("a periodic full sync ran in large-cluster mode; upstream skips them")
	}
	if s.PeriodicDue(fp.lastFullSync) {
		t.Error("the skipped periodic full sync is still due: the trigger would fire at every retry interval")
	}
	if next := s.NextTime(); !next.After(first) {
		t.Errorf("after the skip, next = %v, want after %v", next, first)
	}
}

// TestLargeClusterFollowsPeriodTheUserSet: a full-sync period that the user set is followed in
// large-cluster mode too: each planned periodic full sync runs, and plans the next one.
func TestLargeClusterFollowsPeriodTheUserSet(t *testing.T) {
	fp, s, clk := largeClusterProxier(t, fullsync.Config{Period: 20 * time.Minute, Splay: 20 * time.Minute, NodeName: "node-a", PeriodSet: true})
	for i := 0; i < 3; i++ {
		planned := s.NextTime()
		clk.SetTime(planned)
		last := fp.lastFullSync
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
		if fp.lastFullSync.Equal(last) {
			t.Fatalf("periodic full sync %d (planned %v) did not run in large-cluster mode with a period the user set", i+1, planned)
		}
		if next := s.NextTime(); next.Sub(planned) != 20*time.Minute {
			t.Errorf("after full sync %d, next = %v, want one period (20m) after %v", i+1, next, planned)
		}
	}
}
