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
	"fmt"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

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

// newSplitTestProxier returns a fake proxier whose syncs are split at maxOps operations. The
// kernel's resize behaviour is taken as probed (affinityResize), so that the transactions
// recorded are the syncs' own.
func newSplitTestProxier(maxOps int) (*recordingNFT, *Proxier) {
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	rec := &recordingNFT{Fake: nft}
	fp.nftables = rec
	fp.maxTransactionOps = maxOps
	fp.affinityResize = resizeInPlace
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
			// One Service (two service ports) writes fewer than 40 operations here, and
			// the first transaction also holds the table setup; every other transaction
			// is cut at the first Service boundary after it reaches maxOps.
			for i, n := range rec.sizes[1:] {
				if n >= maxOps+40 {
					t.Errorf("transaction %d has %d operations, want fewer than %d", i+2, n, maxOps+40)
				}
			}
			if maxOps == 1 && len(rec.sizes) != splitTestServices+1 {
				t.Errorf("got %d transactions, want the setup and then one per Service (%d)", len(rec.sizes), splitTestServices+1)
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

func TestSplitterWeighsSetOperations(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, "t")
	counted := 0
	countSets := func() (int, map[string]int) { counted++; return 25000, map[string]int{"svc-a": 2, "svc-b": 1} }
	s := &txSplitter{committer: committer{nft: nft}, max: 1000, countSets: countSets}
	tx := s.cut(nft.NewTransaction())
	if len(s.queued) != 0 {
		t.Fatal("an empty transaction was cut")
	}
	tx.Add(&knftables.Chain{Name: "c"})
	s.weighSets(3, 2)
	if counted != 1 || s.sets != 25002 || s.surcharge != 750 {
		t.Fatalf("after 3 lookups creating 2 sets: counted %d times, sets %d, surcharge %d; want 1, 25002, 750", counted, s.sets, s.surcharge)
	}
	if s.cut(tx) != tx {
		t.Fatal("a transaction of weight 751 was cut at 1000")
	}
	s.weighSets(1, -2)
	next := s.cut(tx)
	if next == tx || len(s.queued) != 1 || s.surcharge != 0 {
		t.Fatalf("a transaction of weight 1001 was not cut at 1000 (queued %d, surcharge %d)", len(s.queued), s.surcharge)
	}
	s.weighSets(2, 0)
	if counted != 1 || s.sets != 25000 || s.surcharge != 500 {
		t.Errorf("after the cut: counted %d times, sets %d, surcharge %d; want 1, 25000, 500", counted, s.sets, s.surcharge)
	}
	s.weighSets(1, -30000)
	if s.sets != 0 {
		t.Errorf("sets went to %d, want 0", s.sets)
	}

	// A service port that flushes chains frees their anonymous sets, once.
	rec := &servicePortRecorder{}
	rec.entries = []stageEntry{
		{verb: stageFlush, obj: &knftables.Chain{Name: "svc-a"}},
		{verb: stageAdd, obj: &knftables.Chain{Name: "svc-b"}},
		{verb: stageFlush, obj: &knftables.Chain{Name: "svc-c"}},
	}
	if got := freedSets(s, rec); got != 2 {
		t.Errorf("flushing svc-a (2 anonymous sets) and svc-c (none) freed %d sets, want 2", got)
	}
	if got := freedSets(s, rec); got != 0 {
		t.Errorf("flushing svc-a again freed %d sets, want 0", got)
	}

	// Without splitting, nothing is weighed or counted.
	off := &txSplitter{committer: committer{nft: nft}, countSets: countSets}
	off.weighSets(5, 5)
	if counted != 1 || off.surcharge != 0 || off.cut(tx) != tx || freedSets(off, rec) != 0 {
		t.Errorf("a splitter with max 0 weighed set operations (counted %d, surcharge %d)", counted, off.surcharge)
	}
}

func TestSetOperationsMakeTransactionsSmaller(t *testing.T) {
	const maxOps = 50
	sync := func(scan int) *recordingNFT {
		rec, fp := newSplitTestProxier(maxOps)
		fp.setScan = scan
		fp.upstreamRuleShapes = true // one anonymous vmap per service port, per-endpoint affinity sets
		setSplitTestCluster(fp, 1)
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	unweighted := sync(1 << 30)
	weighted := sync(1)
	if got, want := sortedLines(weighted.Dump()), sortedLines(unweighted.Dump()); got != want {
		t.Errorf("weighing set operations changed the ruleset:\n%s\nwant:\n%s", got, want)
	}
	if len(weighted.sizes) <= len(unweighted.sizes) {
		t.Errorf("%d transactions with set operations weighed, %d without; want more", len(weighted.sizes), len(unweighted.sizes))
	}
	// Recount each transaction's weight from its text: a service port's operation on a set or
	// element, and each set that a rule in its chains names or creates, weighs as many
	// operations as the sets the sync created before it. After the first transaction (which
	// also sets up the table), each exceeds maxOps by at most its last service port: fewer
	// than 20 operations, each weighing at most the sets then.
	sets := 0
	for i, text := range weighted.texts {
		weight := weighted.sizes[i]
		for _, line := range strings.Split(text, "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 5 && f[0] == "add" && f[1] == "rule" && isServiceChainName(f[4]):
				named, literals := setReferences(strings.Join(f[5:], " "))
				weight += (named + literals) * sets
				sets += literals
			case len(f) >= 5 && (f[1] == "element" || f[1] == "set") && i > 0:
				weight += sets
				if f[0] == "add" && f[1] == "set" {
					sets++
				}
			}
		}
		if i > 0 && weight >= maxOps+20*(1+sets) {
			t.Errorf("transaction %d weighs %d (%d operations), want less than %d", i+1, weight, weighted.sizes[i], maxOps+20*(1+sets))
		}
	}
	if sets < splitTestServices*2 {
		t.Errorf("the sync created %d sets, want at least one per service port (%d)", sets, splitTestServices*2)
	}
}

func TestSetReferences(t *testing.T) {
	for rule, want := range map[string][2]int{
		"ip daddr 10.0.0.1 tcp dport 80 jump service-X":                                          {0, 0},
		"numgen random mod 2 vmap { 0 : goto endpoint-A , 1 : goto endpoint-B }":                 {0, 1},
		"ip saddr != { 10.0.0.0/8, 192.168.0.0/16 } drop":                                        {0, 1},
		"ip saddr != { 10.0.0.0/8 } drop":                                                        {0, 0},
		"ip saddr != {10.0.0.0/8,192.168.0.0/16} drop":                                           {0, 1},
		"numgen random mod 1 vmap { 0 : goto endpoint-A }":                                       {0, 1},
		"dnat ip to numgen random mod 1 map { 0 : 10.0.0.1 . 80 }":                               {0, 1},
		"update @affinity-X { ip saddr }":                                                        {1, 0},
		"ip saddr @affinity-X goto endpoint-A":                                                   {1, 0},
		"update @affinity { ip saddr . 1 } numgen random mod 2 vmap { 0 : goto a , 1 : goto b }": {1, 1},
	} {
		if named, literals := setReferences(rule); named != want[0] || literals != want[1] {
			t.Errorf("setReferences(%q) = %d, %d; want %d, %d", rule, named, literals, want[0], want[1])
		}
	}
}

// TestSplitTransactionsBoundDeletions deletes every Service at once (a namespace deleted): the
// clean-up is cut like the Services' writes, each transaction holding fewer than maxOps
// operations plus one Service's, and the table ends with no Service's chain or element.
func TestSplitTransactionsBoundDeletions(t *testing.T) {
	const maxOps = 20
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full sync %v", full), func(t *testing.T) {
			rec, fp := newSplitTestProxier(maxOps)
			setSplitTestCluster(fp, 1)
			if err := fp.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= splitTestServices; i++ {
				fp.OnServiceDelete(splitTestService(i))
			}
			fp.needFullSync = full
			before := len(rec.sizes)
			if err := fp.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			sizes := rec.sizes[before:]
			if len(sizes) < 3 {
				t.Errorf("deleting %d Services took %d transactions, want them cut", splitTestServices, len(sizes))
			}
			// One Service's deletion (two ports: chains flushed, elements deleted) is
			// fewer than 20 operations; a full sync's first transaction also holds the
			// table's setup.
			for i, n := range sizes {
				if i > 0 || !full {
					if n >= maxOps+20 {
						t.Errorf("transaction %d of the deletion has %d operations, want fewer than %d", i+1, n, maxOps+20)
					}
				}
			}
			settle(t, fp)
			dump := rec.Dump()
			for i := 1; i <= splitTestServices; i++ {
				if svc := fmt.Sprintf("ns/svc%d/", i); strings.Contains(dump, svc) {
					t.Errorf("%s is still in the table after its deletion:\n%s", svc, dump)
					break
				}
			}
		})
	}
}
