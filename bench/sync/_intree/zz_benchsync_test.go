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

// This file is laid into pkg/proxy/nftables of a copy of the pristine and of the patched tree by
// build/bench-sync.sh, with that tree's zz_benchsync_adapter_test.go, and built into a test
// binary. TestBenchSync then measures the Go side of syncProxyRules on a synthetic cluster: nft is
// replaced by an interface whose Run only notes the time and keeps the transaction (knftables'
// Fake is quadratic and must never be timed), and whose listings return an empty table, so every
// full sync generates everything. It prints one JSON line per measurement.

package nftables

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// benchNFT stands in for nft: Run notes when the sync handed over each transaction.
type benchNFT struct {
	*knftables.Fake
	runs []time.Time
	txs  []*knftables.Transaction
}

func (b *benchNFT) Run(_ context.Context, tx *knftables.Transaction) error {
	b.runs = append(b.runs, time.Now())
	b.txs = append(b.txs, tx)
	return nil
}

func (b *benchNFT) ListAll(context.Context) (map[string][]string, error) {
	return map[string][]string{}, nil
}

func (b *benchNFT) ListElements(context.Context, string, string) ([]*knftables.Element, error) {
	return nil, nil
}

// benchResult is one measurement.
type benchResult struct {
	Tree        string  `json:"tree"`
	Family      string  `json:"family"`
	Ports       int     `json:"ports"`
	Phase       string  `json:"phase"` // "initial", "full", "partial" or "batch"
	Workers     int     `json:"workers"`
	Ms          float64 `json:"ms"`              // sync start to the first transaction handed to nft
	GCCPUMs     float64 `json:"gc_cpu_ms"`       // CPU time the garbage collector used meanwhile
	AllocMB     float64 `json:"alloc_mb"`        // bytes allocated by the whole sync
	Allocs      uint64  `json:"allocs"`          // allocations by the whole sync
	Ops         int     `json:"ops"`             // operations in the sync's transactions
	Txs         int     `json:"txs"`             // transactions
	SerializeMs float64 `json:"serialize_ms"`    // knftables writing the transactions as nft commands
	Batch       int     `json:"batch,omitempty"` // phase "batch": Services changed at once
}

func envInts(name, def string) []int {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			panic(fmt.Sprintf("%s: %v", name, err))
		}
		out = append(out, n)
	}
	return out
}

// benchCluster adds services Services with 6 TCP ports and 2 endpoints each to p.
func benchCluster(p *Proxier, family v1.IPFamily, services int) {
	for i := 0; i < services; i++ {
		svc, slice := benchService(family, i, 0)
		p.OnServiceAdd(svc)
		p.OnEndpointSliceAdd(slice)
	}
}

// benchService returns Service i and its slice; generation g picks other endpoint addresses.
func benchService(family v1.IPFamily, i, g int) (*v1.Service, *discovery.EndpointSlice) {
	clusterIP := fmt.Sprintf("172.%d.%d.%d", 16+i/65000, (i/250)%256, i%250+1)
	addressType := discovery.AddressTypeIPv4
	ep := func(k int) string { return fmt.Sprintf("10.%d.%d.%d", k/65000, (k/250)%256, k%250+1) }
	if family == v1.IPv6Protocol {
		clusterIP = fmt.Sprintf("fd00:10:96::%x", i+1)
		addressType = discovery.AddressTypeIPv6
		ep = func(k int) string { return fmt.Sprintf("fd00:10::%x:%x", k/65000, k%65000+1) }
	}
	name := fmt.Sprintf("svc%d", i)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			IPFamilies: []v1.IPFamily{family}},
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-0", Namespace: "bench", Labels: map[string]string{discovery.LabelServiceName: name}},
		AddressType: addressType,
	}
	for p := 0; p < 6; p++ {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", p), Protocol: v1.ProtocolTCP,
			Port: int32(80 + p), TargetPort: intstr.FromInt32(int32(8080 + p))})
		slice.Ports = append(slice.Ports, discovery.EndpointPort{Name: ptr.To(fmt.Sprintf("p%d", p)),
			Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(int32(8080 + p))})
	}
	for e := 0; e < 2; e++ {
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{
			Addresses:  []string{ep(2*i + e + 1000000*g)},
			NodeName:   ptr.To("other-node"),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	return svc, slice
}

var gcCPU = []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}

func gcSeconds() float64 {
	metrics.Read(gcCPU)
	return gcCPU[0].Value.Float64()
}

// measure runs one sync of p and describes it.
func measure(p *Proxier, nft *benchNFT) benchResult {
	if len(p.staleChains) > 0 {
		panic("the benchmark's syncs must not leave stale chains")
	}
	nft.runs, nft.txs = nil, nil
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	gc0 := gcSeconds()
	start := time.Now()
	p.syncProxyRules()
	gc1 := gcSeconds()
	runtime.ReadMemStats(&after)
	if len(nft.runs) == 0 {
		panic("the sync ran no transaction")
	}
	r := benchResult{
		Ms:      float64(nft.runs[0].Sub(start).Microseconds()) / 1000,
		GCCPUMs: (gc1 - gc0) * 1000,
		AllocMB: float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20),
		Allocs:  after.Mallocs - before.Mallocs,
		Txs:     len(nft.txs),
	}
	s := time.Now()
	for _, tx := range nft.txs {
		r.Ops += tx.NumOperations()
		_ = tx.String()
	}
	r.SerializeMs = float64(time.Since(s).Microseconds()) / 1000
	return r
}

// TestBenchSync is the benchmark's driver; it runs only with BENCHSYNC=1. Environment:
// BENCHSYNC_FAMILY (ipv4|ipv6), BENCHSYNC_PORTS (service ports, a multiple of 6),
// BENCHSYNC_WORKERS (worker counts to measure, e.g. "1,2"), BENCHSYNC_FULL (full syncs per worker
// count), BENCHSYNC_PARTIAL (partial syncs), BENCHSYNC_DUMP (a file for the ruleset of the first
// full sync, for nft --check), BENCHSYNC_BATCH (patched only: numbers of Services changed at
// once, each synced serially and on the pool).
func TestBenchSync(t *testing.T) {
	if os.Getenv("BENCHSYNC") != "1" {
		t.Skip("BENCHSYNC=1 runs the sync benchmark's driver")
	}
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	family := v1.IPv4Protocol
	if os.Getenv("BENCHSYNC_FAMILY") == "ipv6" {
		family = v1.IPv6Protocol
	}
	ports := envInts("BENCHSYNC_PORTS", "6000")[0]
	workers := envInts("BENCHSYNC_WORKERS", "1")
	fulls := envInts("BENCHSYNC_FULL", "3")[0]
	partials := envInts("BENCHSYNC_PARTIAL", "10")[0]

	fake, p := NewFakeProxier(family)
	nft := &benchNFT{Fake: fake}
	p.nftables = nft
	benchConfigure(p, workers[0])
	services := ports / 6
	benchCluster(p, family, services)
	p.setInitialized(true)
	out := json.NewEncoder(os.Stdout)
	emit := func(r benchResult, phase string, w int) {
		r.Tree, r.Family, r.Ports, r.Phase, r.Workers = benchTree, strings.ToLower(string(family)), ports, phase, w
		if err := out.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	// The first sync also applies the whole cluster's changes; it is reported as "initial", and
	// its transactions are dumped for nft --check.
	first := measure(p, nft)
	emit(first, "initial", workers[0])
	if dump := os.Getenv("BENCHSYNC_DUMP"); dump != "" {
		var b strings.Builder
		for _, tx := range nft.txs {
			b.WriteString(tx.String())
		}
		if err := os.MkdirAll(filepath.Dir(dump), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dump, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < fulls; round++ {
		for _, w := range workers {
			benchConfigure(p, w)
			p.needFullSync = true
			emit(measure(p, nft), "full", w)
		}
	}
	// generation[i] is how many times Service i's endpoints were replaced.
	generation := make([]int, services)
	change := func(i int) {
		_, oldSlice := benchService(family, i, generation[i])
		generation[i]++
		_, newSlice := benchService(family, i, generation[i])
		p.OnEndpointSliceUpdate(oldSlice, newSlice)
	}
	w := workers[len(workers)-1]
	benchConfigure(p, w)
	for round := 0; round < partials; round++ {
		change((round * 7919) % services)
		emit(measure(p, nft), "partial", w)
	}
	// Partial syncs of k changed Services, serial and on the pool regardless of the
	// threshold, to place the threshold.
	if batches := os.Getenv("BENCHSYNC_BATCH"); batches != "" && benchTree == "patched" {
		for _, k := range envInts("BENCHSYNC_BATCH", "") {
			for round := 0; round < max(partials, 1); round++ {
				for _, bw := range []int{1, w} {
					benchConfigure(p, bw)
					benchForcePool(p, true)
					for j := 0; j < min(k, services); j++ {
						change((round*k + j*7919) % services)
					}
					r := measure(p, nft)
					r.Batch = k
					emit(r, "batch", bw)
					benchForcePool(p, false)
				}
			}
		}
	}
}
