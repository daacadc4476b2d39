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
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// recordingNFT wraps the fake to record each transaction's size, count listings, and fail the
// failAt-th Run (counting from 1; 0 never fails).
type recordingNFT struct {
	*knftables.Fake
	sizes    []int
	runs     int
	failAt   int
	listAlls int
}

func (r *recordingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	r.runs++
	if r.runs == r.failAt {
		return fmt.Errorf("injected failure of run %d", r.runs)
	}
	r.sizes = append(r.sizes, tx.NumOperations())
	return r.Fake.Run(ctx, tx)
}

func (r *recordingNFT) ListAll(ctx context.Context) (map[string][]string, error) {
	r.listAlls++
	return r.Fake.ListAll(ctx)
}

const splitTestServices = 30

// splitTestService is the i-th Service of the split-test cluster: ClusterIP 172.30.1.<i>, with
// a TCP port 80 ("a") and a UDP port 53 ("b"); every seventh has session affinity.
func splitTestService(i int) *v1.Service {
	return makeTestService("ns", fmt.Sprintf("svc%d", i), func(svc *v1.Service) {
		svc.Spec.ClusterIP = fmt.Sprintf("172.30.1.%d", i)
		svc.Spec.Ports = []v1.ServicePort{
			{Name: "a", Port: 80, Protocol: v1.ProtocolTCP},
			{Name: "b", Port: 53, Protocol: v1.ProtocolUDP},
		}
		if i%7 == 0 {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
		}
	})
}

// setSplitTestCluster gives fp splitTestServices ClusterIP services (two ports each) whose
// endpoints are 10.180.<generation>.<i>, replacing the endpoints of an earlier generation.
func setSplitTestCluster(fp *Proxier, generation int) {
	var svcs []*v1.Service
	var slices []*discovery.EndpointSlice
	for i := 1; i <= splitTestServices; i++ {
		name := fmt.Sprintf("svc%d", i)
		svcs = append(svcs, splitTestService(i))
		slices = append(slices, makeTestEndpointSlice("ns", name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			eps.Endpoints = []discovery.Endpoint{
				{Addresses: []string{fmt.Sprintf("10.180.%d.%d", generation, i)}},
				{Addresses: []string{fmt.Sprintf("10.180.%d.%d", generation, 100+i)}},
			}
			eps.Ports = []discovery.EndpointPort{
				{Name: ptr.To("a"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)},
				{Name: ptr.To("b"), Port: ptr.To[int32](5353), Protocol: ptr.To(v1.ProtocolUDP)},
			}
		}))
	}
	if generation == 1 {
		makeServiceMap(fp, svcs...)
		populateEndpointSlices(fp, slices...)
		return
	}
	for _, eps := range slices {
		eps.Name = eps.Labels[discovery.LabelServiceName] + "-1"
		old := eps.DeepCopy()
		for j := range old.Endpoints {
			old.Endpoints[j].Addresses[0] = strings.Replace(old.Endpoints[j].Addresses[0], fmt.Sprintf("10.180.%d.", generation), fmt.Sprintf("10.180.%d.", generation-1), 1)
		}
		fp.OnEndpointSliceUpdate(old, eps)
	}
}

// destinations traces a new connection to each service port and returns where it can go, as a
// sorted, comma-separated list.
func destinations(t *testing.T, nft *knftables.Fake) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 1; i <= splitTestServices; i++ {
		ip := fmt.Sprintf("172.30.1.%d", i)
		_, tcp, _ := tracePacket(t, nft, "10.0.0.2", "tcp", ip, "80", []string{"192.168.0.2"})
		_, udp, _ := tracePacket(t, nft, "10.0.0.2", "udp", ip, "53", []string{"192.168.0.2"})
		out[ip+"/tcp"], out[ip+"/udp"] = sortedList(tcp), sortedList(udp)
	}
	return out
}

func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	sort.Strings(l)
	return strings.Join(l, "\n")
}

func sortedList(s string) string {
	l := strings.Split(s, ", ")
	sort.Strings(l)
	return strings.Join(l, ", ")
}

// generationDestinations is where service port i's connections go with the endpoints of
// generation.
func generationDestinations(i, generation int, port string) string {
	return sortedList(fmt.Sprintf("10.180.%d.%d:%s, 10.180.%d.%d:%s", generation, i, port, generation, 100+i, port))
}

// newSplitTestProxier returns a fake proxier whose syncs are split at maxOps operations.
func newSplitTestProxier(maxOps int) (*recordingNFT, *Proxier) {
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	rec := &recordingNFT{Fake: nft}
	fp.nftables = rec
	fp.maxTransactionOps = maxOps
	return rec, fp
}

func TestSplitTransactionsGiveTheSameRuleset(t *testing.T) {
	_, ref := newSplitTestProxier(0)
	setSplitTestCluster(ref, 1)
	if err := ref.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	// Elements are dumped in insertion order, which follows Go's map order; compare sorted lines.
	want := sortedLines(ref.nftables.(*recordingNFT).Dump())

	for _, maxOps := range []int{1, 7, 50, 100000} {
		t.Run(fmt.Sprintf("max %d", maxOps), func(t *testing.T) {
			rec, fp := newSplitTestProxier(maxOps)
			setSplitTestCluster(fp, 1)
			if err := fp.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			if got := sortedLines(rec.Dump()); got != want {
				t.Errorf("the split sync gave a different ruleset:\n%s\nwant:\n%s", got, want)
			}
			// One service port writes fewer than 20 operations here, and the first
			// transaction also holds the table setup; every other transaction is cut
			// as soon as it reaches maxOps.
			for i, n := range rec.sizes[1:] {
				if n >= maxOps+20 {
					t.Errorf("transaction %d has %d operations, want fewer than %d", i+2, n, maxOps+20)
				}
			}
			if maxOps == 1 && len(rec.sizes) != 2*splitTestServices+1 {
				t.Errorf("got %d transactions, want the setup and then one per service port (%d)", len(rec.sizes), 2*splitTestServices+1)
			}
			if maxOps == 100000 && len(rec.sizes) != 1 {
				t.Errorf("got %d transactions, want 1", len(rec.sizes))
			}
		})
	}
}

func TestSplitTransactionFailureLeavesEveryServiceWorking(t *testing.T) {
	// Count the transactions of the changing sync once, then fail each of them in turn.
	rec, fp := newSplitTestProxier(7)
	setSplitTestCluster(fp, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	setSplitTestCluster(fp, 2)
	before := rec.runs
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	txs := rec.runs - before
	if txs < 10 {
		t.Fatalf("the changing sync ran only %d transactions; the test needs many", txs)
	}

	for k := 1; k <= txs; k++ {
		t.Run(fmt.Sprintf("transaction %d of %d fails", k, txs), func(t *testing.T) {
			rec, fp := newSplitTestProxier(7)
			setSplitTestCluster(fp, 1)
			if err := fp.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			setSplitTestCluster(fp, 2)
			rec.failAt = rec.runs + k
			if err := fp.syncProxyRules(); err == nil {
				t.Fatal("the sync succeeded although a transaction failed")
			}
			// Every service port still has working rules: all of its old endpoints or
			// all of its new ones, never none and never a mix.
			newCount := 0
			dests := destinations(t, rec.Fake)
			for i := 1; i <= splitTestServices; i++ {
				for _, pp := range [][2]string{{"tcp", "8080"}, {"udp", "5353"}} {
					got := dests[fmt.Sprintf("172.30.1.%d/%s", i, pp[0])]
					switch got {
					case generationDestinations(i, 1, pp[1]):
					case generationDestinations(i, 2, pp[1]):
						newCount++
					default:
						t.Errorf("svc%d/%s goes to %q, want all old or all new endpoints", i, pp[0], got)
					}
				}
			}
			if k == 1 && newCount != 0 {
				t.Errorf("%d service ports changed although the first transaction failed", newCount)
			}
			// The next sync repairs the rest.
			if err := fp.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			for key, got := range destinations(t, rec.Fake) {
				var i int
				var proto string
				fmt.Sscanf(strings.Replace(key, "/", " ", 1), "172.30.1.%d %s", &i, &proto)
				port := map[string]string{"tcp": "8080", "udp": "5353"}[proto]
				if want := generationDestinations(i, 2, port); got != want {
					t.Errorf("after the repairing sync, %s goes to %q, want %q", key, got, want)
				}
			}
		})
	}
}

func TestPartialSyncsDoNotListTheTable(t *testing.T) {
	rec, fp := newSplitTestProxier(0)
	setSplitTestCluster(fp, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if rec.listAlls != 1 {
		t.Fatalf("the first (full) sync listed the table %d times, want 1", rec.listAlls)
	}

	// A partial sync that deletes a Service: its chains are flushed without listing.
	fp.OnServiceDelete(splitTestService(3))
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if rec.listAlls != 1 {
		t.Errorf("a partial sync listed the table")
	}
	if len(fp.staleChains) != 2 {
		t.Errorf("got stale chains %v, want svc3's two service chains", fp.staleChains)
	}
	for chain := range fp.staleChains {
		if !strings.Contains(chain, "ns/svc3/") {
			t.Errorf("unexpected stale chain %q", chain)
		}
		if ch := rec.Table.Chains[chain]; ch == nil || len(ch.Rules) != 0 {
			t.Errorf("stale chain %q was not flushed", chain)
		}
	}
	if _, _, _ = tracePacket(t, rec.Fake, "10.0.0.2", "tcp", "172.30.1.3", "80", nil); len(rec.Table.Chains) == 0 {
		t.Fatal("empty table")
	}

	// A failed sync makes the next one a full sync, which lists again.
	setSplitTestCluster(fp, 2)
	rec.failAt = rec.runs + 1
	if err := fp.syncProxyRules(); err == nil {
		t.Fatal("the sync succeeded although its transaction failed")
	}
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if rec.listAlls < 2 {
		t.Errorf("the full sync after a failure did not list the table")
	}
}
