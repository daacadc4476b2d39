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

// syncedMemoryTestProxier returns an IPv6 proxier with services memory-test Services, synced
// once over a discardNFT, and the text of the transactions that sync ran.
func syncedMemoryTestProxier(tb testing.TB, services int) (*Proxier, *txText) {
	tb.Helper()
	fake, fp := NewFakeProxier(v1.IPv6Protocol)
	rec := &txText{Interface: discardNFT{Fake: fake}}
	fp.nftables = rec
	setMemoryTestCluster(fp, services)
	if err := fp.syncProxyRules(); err != nil {
		tb.Fatal(err)
	}
	return fp, rec
}

// heapFreedBy returns how many bytes of heap a garbage collection frees once drop has dropped
// the references it holds.
func heapFreedBy(drop func()) uint64 {
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	drop()
	runtime.GC()
	runtime.ReadMemStats(&without)
	if without.HeapAlloc >= with.HeapAlloc {
		return 0
	}
	return with.HeapAlloc - without.HeapAlloc
}

// benchmarkHeldHeap reports, for 6,000 and 36,000 service ports (the size of the reported
// cluster), the heap that held measures (bytes, and how many of unit they are for): MiB in all
// and bytes per unit. Each iteration builds and syncs a new proxier; run with -benchtime=1x.
func benchmarkHeldHeap(b *testing.B, unit string, held func(tb testing.TB, services int) (uint64, int)) {
	for _, services := range []int{1000, 6000} {
		b.Run(fmt.Sprintf("ports=%d", services*6), func(b *testing.B) {
			var bytes uint64
			var n int
			for i := 0; i < b.N; i++ {
				bytes, n = held(b, services)
			}
			b.ReportMetric(float64(bytes)/(1<<20), "MiB-held")
			b.ReportMetric(float64(bytes)/float64(n), "B/"+unit)
		})
	}
}

// BenchmarkKnownObjectsHeap reports the heap that the known objects alone keep alive after a
// full sync (what a garbage collection frees when they are dropped), per service port.
func BenchmarkKnownObjectsHeap(b *testing.B) {
	benchmarkHeldHeap(b, "port", func(tb testing.TB, services int) (uint64, int) {
		fp, _ := syncedMemoryTestProxier(tb, services)
		if fp.known == nil || len(fp.known.ports) != services*6 {
			tb.Fatalf("the sync left known objects %v, want %d service ports", fp.known != nil, services*6)
		}
		held := heapFreedBy(func() { fp.known = nil })
		runtime.KeepAlive(fp)
		return held, services * 6
	})
}
