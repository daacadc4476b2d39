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
	"context"
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// What the known objects hold in memory, at the scale of the reported cluster.

// discardNFT stands in for nft in a memory measurement: every transaction succeeds without
// being applied (knftables' Fake is quadratic in the table's size), and the table lists as
// empty, so a full sync generates everything and keeps it as its known objects.
type discardNFT struct {
	*knftables.Fake
}

func (discardNFT) Run(context.Context, *knftables.Transaction) error { return nil }

func (discardNFT) ListAll(context.Context) (map[string][]string, error) {
	return map[string][]string{}, nil
}

func (discardNFT) ListElements(context.Context, string, string) ([]*knftables.Element, error) {
	return nil, nil
}

// setMemoryTestCluster gives fp, an IPv6 proxier, services Services of 6 TCP ports with 2
// endpoints each (the shape of bench/e2e's cluster without its affinity and NodePort shares),
// every fifth of them a NodePort Service.
func setMemoryTestCluster(fp *Proxier, services int) {
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("svc%d", i)
		svc := makeTestService("mem", name, func(svc *v1.Service) {
			svc.Spec.ClusterIP = fmt.Sprintf("fd00:10:96::%x", i+1)
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
			svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
			if i%5 == 0 {
				svc.Spec.Type = v1.ServiceTypeNodePort
			}
			for p := 0; p < 6; p++ {
				port := v1.ServicePort{Name: fmt.Sprintf("p%d", p), Protocol: v1.ProtocolTCP, Port: int32(80 + p)}
				if i%5 == 0 {
					port.NodePort = int32(30000 + (i/5*6+p)%2700)
				}
				svc.Spec.Ports = append(svc.Spec.Ports, port)
			}
		})
		slice := makeTestEndpointSlice("mem", name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv6
			for e := 0; e < 2; e++ {
				eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{
					Addresses: []string{fmt.Sprintf("fd00:10::%x:%x", e, i+1)},
					NodeName:  ptr.To("other-node"),
				})
			}
			for p := 0; p < 6; p++ {
				eps.Ports = append(eps.Ports, discovery.EndpointPort{Name: ptr.To(fmt.Sprintf("p%d", p)),
					Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(int32(8080 + p))})
			}
		})
		makeServiceMap(fp, svc)
		populateEndpointSlices(fp, slice)
	}
}

// knownObjectsHeld syncs a proxier with services memory-test Services and returns how many
// bytes of heap its known objects alone keep alive (what a garbage collection frees when they
// are dropped), with the number of service ports they know.
func knownObjectsHeld(tb testing.TB, services int) (held uint64, ports int) {
	tb.Helper()
	fake, fp := NewFakeProxier(v1.IPv6Protocol)
	fp.nftables = discardNFT{Fake: fake}
	setMemoryTestCluster(fp, services)
	if err := fp.syncProxyRules(); err != nil {
		tb.Fatal(err)
	}
	if fp.known == nil {
		tb.Fatal("the sync left no known objects")
	}
	ports = len(fp.known.ports)
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	fp.known = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	runtime.KeepAlive(fp)
	if without.HeapAlloc >= with.HeapAlloc {
		return 0, ports
	}
	return with.HeapAlloc - without.HeapAlloc, ports
}

// BenchmarkKnownObjectsHeap reports the heap that the known objects hold after a full sync of
// 6,000 and 36,000 IPv6 service ports (the size of the reported cluster): MiB in all and bytes
// per service port. Run with -benchtime=1x; each iteration builds and syncs a new proxier.
func BenchmarkKnownObjectsHeap(b *testing.B) {
	for _, services := range []int{1000, 6000} {
		b.Run(fmt.Sprintf("ports=%d", services*6), func(b *testing.B) {
			var held uint64
			var ports int
			for i := 0; i < b.N; i++ {
				held, ports = knownObjectsHeld(b, services)
			}
			if ports != services*6 {
				b.Fatalf("the known objects hold %d service ports, want %d", ports, services*6)
			}
			b.ReportMetric(float64(held)/(1<<20), "MiB-held")
			b.ReportMetric(float64(held)/float64(ports), "B/port")
		})
	}
}

// chainMemoryHeld syncs a proxier with services memory-test Services, notes its transactions in
// a chain memory as the kernel link does after its commits (chainMemory.noteWrites), and returns
// how many bytes of heap that memory alone keeps alive once the transactions' text is gone, with
// the number of chains it has pending.
func chainMemoryHeld(tb testing.TB, services int) (held uint64, chains int) {
	tb.Helper()
	fake, fp := NewFakeProxier(v1.IPv6Protocol)
	rec := &txText{Interface: discardNFT{Fake: fake}}
	fp.nftables = rec
	setMemoryTestCluster(fp, services)
	if err := fp.syncProxyRules(); err != nil {
		tb.Fatal(err)
	}
	m := &chainMemory{baselines: map[string]chainBaseline{}, pending: map[string]pendingWrite{}}
	for _, text := range rec.texts {
		m.noteWrites(text, 1, false)
	}
	rec.texts = nil
	chains = len(m.pending)
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	runtime.KeepAlive(m)
	m = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	runtime.KeepAlive(fp)
	if without.HeapAlloc >= with.HeapAlloc {
		return 0, chains
	}
	return with.HeapAlloc - without.HeapAlloc, chains
}

// BenchmarkChainMemoryHeap reports the heap that the kernel link's chain memory holds for the
// pending writes of a full sync of 6,000 and 36,000 IPv6 service ports: MiB in all and bytes per
// chain. Run with -benchtime=1x.
func BenchmarkChainMemoryHeap(b *testing.B) {
	for _, services := range []int{1000, 6000} {
		b.Run(fmt.Sprintf("ports=%d", services*6), func(b *testing.B) {
			var held uint64
			var chains int
			for i := 0; i < b.N; i++ {
				held, chains = chainMemoryHeld(b, services)
			}
			if chains < services*6 {
				b.Fatalf("the chain memory has %d chains pending, want at least one per service port (%d)", chains, services*6)
			}
			b.ReportMetric(float64(held)/(1<<20), "MiB-held")
			b.ReportMetric(float64(held)/float64(chains), "B/chain")
		})
	}
}
