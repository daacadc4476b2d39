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

package nftables

import (
	"errors"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// These tests send real TCP connections through the rules that the patched proxier programs into
// the real kernel (see realkernel_topology_test.go for the namespaces), through a Service's life:
// two endpoints, no endpoint (rejected), endpoints back, a forced full sync, and deletion (the
// stale chains are flushed at once and deleted by a later sync, and the ClusterIP is dropped).
// make conformance-kernel61 runs them, with the other real-kernel tests, under Linux 6.1 in a VM;
// make test runs them on the host's kernel.

// packetConnections is how many connections a check makes to see every endpoint: with two
// endpoints, missing one of them by chance has probability 2^-31.
const packetConnections = 32

// dropWait is how long a check that expects kube-proxy to drop a connection waits for an answer
// that must not come (a dropped SYN has no other sign); every other check waits up to 20s, for
// slow emulated machines.
const dropWait = 2 * time.Second

// packetService is the ClusterIP Service "web" of the packet tests: port 80 ("http") to the
// endpoints' packetEndpointPort.
func packetService(ipv6 bool) *v1.Service {
	clusterIP := "172.30.0.41"
	if ipv6 {
		clusterIP = "fd00:10:96::41"
	}
	return makeTestService("ns", "web", func(svc *v1.Service) {
		svc.Spec.ClusterIP = clusterIP
		svc.Spec.Ports = []v1.ServicePort{{
			Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(packetEndpointPort),
		}}
	})
}

// packetSlice is web's EndpointSlice holding the given endpoint addresses.
func packetSlice(ipv6 bool, addrs ...string) *discovery.EndpointSlice {
	return makeTestEndpointSlice("ns", "web", 1, func(eps *discovery.EndpointSlice) {
		eps.AddressType = discovery.AddressTypeIPv4
		if ipv6 {
			eps.AddressType = discovery.AddressTypeIPv6
		}
		for _, a := range addrs {
			eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{Addresses: []string{a}})
		}
		eps.Ports = []discovery.EndpointPort{{
			Name: ptr.To("http"), Port: ptr.To[int32](packetEndpointPort), Protocol: ptr.To(v1.ProtocolTCP),
		}}
	})
}

// answers makes n connections to ip:80 and returns the distinct answers, sorted: what the server
// said, "refused" for a refused connection, "dropped" for one that got no answer within timeout;
// any other error fails the test.
// (Measured on 6.18: an IPv6 connection is refused about 1s after it starts, on the first SYN
// retransmit, with or without the node's ICMPv6 rate limit; an IPv4 one at once.)
func (top *packetTopology) answers(t *testing.T, ip string, n int, timeout time.Duration) []string {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		answer, err := top.dial(ip, 80, timeout)
		var netErr net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			answer = "refused"
		case errors.As(err, &netErr) && netErr.Timeout():
			answer = "dropped"
		case err != nil:
			t.Fatalf("connection %d to %s: %v", i, ip, err)
		}
		seen[answer] = true
	}
	var out []string
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// expectAnswers checks that connections to ip:80 get exactly the answers want. Only a check that
// wants "dropped" waits for a connection that gets no answer, and only for dropWait.
func (top *packetTopology) expectAnswers(t *testing.T, step, ip string, n int, want ...string) {
	t.Helper()
	sort.Strings(want)
	timeout := 20 * time.Second
	if slices.Contains(want, "dropped") {
		timeout = dropWait
	}
	if got := top.answers(t, ip, n, timeout); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: connections to %s got %v, want %v", step, ip, got, want)
	}
}

// syncOrFail runs one sync of fp and fails the test if it fails, or if it was not the kind of
// sync the step needs (full, or partial).
func syncOrFail(t *testing.T, step string, fp *Proxier, full bool) {
	t.Helper()
	// Each sync is stamped a millisecond after the one before: far from the second that
	// stale chains wait.
	fp.clock.(*testingclock.FakeClock).Step(time.Millisecond)
	before := fp.now()
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("%s: sync failed: %v", step, err)
	}
	if wasFull := !fp.lastFullSync.Before(before); wasFull != full {
		t.Fatalf("%s: full sync %v, want %v", step, wasFull, full)
	}
}

func TestRealKernelPacketsServiceLifecycle(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		name, family, listFamily, ipFamily := "IPv4", knftables.IPv4Family, "ip", v1.IPv4Protocol
		if ipv6 {
			name, family, listFamily, ipFamily = "IPv6", knftables.IPv6Family, "ip6", v1.IPv6Protocol
		}
		t.Run(name, func(t *testing.T) {
			real, run, nodeNS := realNFTNetns(t, family)
			top := newPacketTopology(t, nodeNS)
			n := packetNets[ipv6]
			_, fp := NewFakeProxier(ipFamily)
			useKernel(fp, real)
			frozenClock(fp)
			linkKernel(t, fp, real)
			svc := packetService(ipv6)
			clusterIP := svc.Spec.ClusterIP

			// Before kube-proxy has programmed anything, the ClusterIP reaches the sink.
			top.expectAnswers(t, "no rules", clusterIP, 1, "sink")

			// Two endpoints: every connection reaches one of them, and both are used.
			makeServiceMap(fp, svc)
			slice := packetSlice(ipv6, n.endpoints...)
			populateEndpointSlices(fp, slice)
			syncOrFail(t, "two endpoints", fp, true)
			top.expectAnswers(t, "two endpoints", clusterIP, packetConnections, n.endpoints...)

			// The Service loses its last endpoint (a partial sync): it rejects.
			empty := packetSlice(ipv6)
			fp.OnEndpointSliceUpdate(slice, empty)
			syncOrFail(t, "no endpoints", fp, false)
			top.expectAnswers(t, "no endpoints", clusterIP, 4, "refused")

			// Its endpoints come back: both serve again.
			fp.OnEndpointSliceUpdate(empty, slice)
			syncOrFail(t, "endpoints back", fp, false)
			top.expectAnswers(t, "endpoints back", clusterIP, packetConnections, n.endpoints...)

			// A forced full sync (as after a failed sync) leaves the Service working.
			fp.needFullSync = true
			syncOrFail(t, "forced full sync", fp, true)
			top.expectAnswers(t, "forced full sync", clusterIP, packetConnections, n.endpoints...)

			// The Service is deleted (a partial sync): its chains are flushed and left for a
			// later sync to delete, and its ClusterIP, now unallocated in the service CIDR, is
			// dropped: it reaches neither an endpoint nor the sink behind the node.
			fp.OnEndpointSliceDelete(slice)
			fp.OnServiceDelete(svc)
			syncOrFail(t, "service deleted", fp, false)
			checkStaleWebChains(t, fp, run, listFamily)
			top.expectAnswers(t, "service deleted", clusterIP, 1, "dropped")

			// The stale chains' grace period is over: the next sync deletes them.
			for chain := range fp.staleChains {
				fp.staleChains[chain] = fp.now().Add(-time.Minute)
			}
			syncOrFail(t, "stale chains deleted", fp, false)
			if len(fp.staleChains) != 0 {
				t.Errorf("stale chains %v remain after the sync that deletes them", fp.staleChains)
			}
			if listed := run("list", "table", listFamily, kubeProxyTable); strings.Contains(listed, "ns/web/") {
				t.Errorf("web's chains are still in the kernel:\n%s", listed)
			}
			top.expectAnswers(t, "stale chains deleted", clusterIP, 1, "dropped")

			// And a forced full sync after all that programs the same: still dropped.
			fp.needFullSync = true
			syncOrFail(t, "full sync after deletion", fp, true)
			top.expectAnswers(t, "full sync after deletion", clusterIP, 1, "dropped")
		})
	}
}

var listedChainRegexp = regexp.MustCompile(`(?m)^\s*chain (\S+) \{`)

// checkStaleWebChains checks that right after web's deletion every chain of web that the kernel
// still holds (its service chain at least) is in fp.staleChains and holds no rule.
func checkStaleWebChains(t *testing.T, fp *Proxier, run func(args ...string) string, listFamily string) {
	t.Helper()
	var inKernel []string
	for _, m := range listedChainRegexp.FindAllStringSubmatch(run("list", "table", listFamily, kubeProxyTable), -1) {
		if strings.Contains(m[1], "ns/web/") {
			inKernel = append(inKernel, m[1])
		}
	}
	service := false
	for _, chain := range inKernel {
		service = service || strings.HasPrefix(chain, "service-")
		if _, ok := fp.staleChains[chain]; !ok {
			t.Errorf("web's chain %s is in the kernel but not noted as stale (%v)", chain, fp.staleChains)
		}
		if rules := kernelChainRules(run, listFamily, chain); len(rules) != 0 {
			t.Errorf("stale chain %s still has rules %v", chain, rules)
		}
	}
	if !service {
		t.Errorf("web's service chain is not left in the kernel for a later sync to delete; web's chains: %v", inKernel)
	}
}
