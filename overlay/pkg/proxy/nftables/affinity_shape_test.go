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
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// perEndpointAffinitySet finds a per-endpoint affinity set (upstream's shape) in nft's listing:
// its name, unlike the shared set's, has a "/" in it.
var perEndpointAffinitySet = regexp.MustCompile(`set affinity-\S*/`)

// perEndpointSetDelete finds the deletions of upstream's per-endpoint sets in a transaction.
var perEndpointSetDelete = regexp.MustCompile(`delete set ip kube-proxy affinity-\S*/`)

func TestNFTTimeout(t *testing.T) {
	for secs, want := range map[int]string{
		1: "1s", 59: "59s", 60: "1m", 61: "1m1s", 3600: "1h", 3661: "1h1m1s",
		10800: "3h", 86399: "23h59m59s", 86400: "1d", 90061: "1d1h1m1s", 0: "0s",
	} {
		if got := nftTimeout(secs); got != want {
			t.Errorf("nftTimeout(%d) = %q, want %q", secs, got, want)
		}
	}
}

func TestAffinityIDs(t *testing.T) {
	seen := map[affinityID]string{}
	for svc := 0; svc < 200; svc++ {
		for ep := 0; ep < 20; ep++ {
			name := fmt.Sprintf("affinity-%08d-ns/svc%d/tcp/p80__10.180.%d.%d/80", svc, svc, ep/250, ep%250)
			a, b := affinityIDs(name)
			if a >= 1<<31 || b >= 1<<31 {
				t.Fatalf("affinityIDs(%q) = %d, %d: wider than the set's 31-bit fields", name, a, b)
			}
			if a2, b2 := affinityIDs(name); a2 != a || b2 != b {
				t.Fatalf("affinityIDs(%q) is not deterministic", name)
			}
			if other, dup := seen[affinityID{a, b}]; dup {
				t.Fatalf("%q and %q share an affinity ID", name, other)
			}
			seen[affinityID{a, b}] = name
		}
	}
	if got := numgenConst(0); got != "numgen random mod 1" {
		t.Errorf("numgenConst(0) = %q: nft lists offset 0 without the offset", got)
	}
	if got := numgenConst(7); got != "numgen random mod 1 offset 7" {
		t.Errorf("numgenConst(7) = %q", got)
	}
}

// affinityEndpoints returns the affinity IDs of the one service port of fp, by endpoint address.
func affinityEndpoints(t *testing.T, fp *Proxier) map[string]affinityID {
	t.Helper()
	ids := map[string]affinityID{}
	for name := range fp.svcPortMap {
		for _, ep := range fp.endpointsMap[name] {
			a, b := affinityIDs(ep.(*endpointInfo).affinitySetName)
			ids[ep.IP()] = affinityID{a, b}
		}
	}
	if len(ids) == 0 {
		t.Fatal("no endpoints")
	}
	return ids
}

func TestSharedAffinityShape(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		for _, n := range []int{1, 3, maxSetFreeEndpoints + 2} {
			t.Run(fmt.Sprintf("%s/%d endpoints", family, n), func(t *testing.T) {
				nft, fp := shapeTestProxier(t, family, n, true, false)
				saddr := "ip saddr . "
				if family == v1.IPv6Protocol {
					saddr = "ip6 saddr . "
				}
				for name := range nft.Table.Sets {
					if isAffinitySetName(name) && name != clientAffinitySet {
						t.Errorf("the shared shape created the per-endpoint set %s", name)
					}
				}
				set := nft.Table.Sets[clientAffinitySet]
				if set == nil {
					t.Fatalf("no %s set", clientAffinitySet)
				}
				if !strings.HasPrefix(set.TypeOf, saddr) || set.Size == nil || *set.Size != minClientAffinitySetSize {
					t.Errorf("shared set %+v: want typeof %q... and size %d", set, saddr, minClientAffinitySetSize)
				}
				rules := serviceChainRules(t, nft)
				ids := affinityEndpoints(t, fp)
				for _, ep := range fp.endpointsMap[firstServicePort(fp)] {
					epInfo := ep.(*endpointInfo)
					id := ids[ep.IP()]
					key := saddr + numgenConst(id.a) + " . " + numgenConst(id.b)
					lookup := key + " @affinity-clients goto " + epInfo.chainName
					if !slices.Contains(rules, lookup) {
						t.Errorf("no lookup %q in the service chain %v", lookup, rules)
					}
					update := "update @affinity-clients { " + key + " timeout 3h }"
					if ch := nft.Table.Chains[epInfo.chainName]; ch == nil || !chainHas(ch, update) {
						t.Errorf("endpoint chain %s does not record affinity with %q", epInfo.chainName, update)
					}
				}
			})
		}
	}
}

// firstServicePort returns a service port of fp (the only one, in these tests).
func firstServicePort(fp *Proxier) proxy.ServicePortName {
	for name := range fp.svcPortMap {
		return name
	}
	return proxy.ServicePortName{}
}

func chainHas(ch *knftables.FakeChain, rule string) bool {
	for _, r := range ch.Rules {
		if r.Rule == rule {
			return true
		}
	}
	return false
}

func TestSharedAffinityTrace(t *testing.T) {
	// A new connection to an affinity Service reaches one of its endpoints through the
	// shared shape's lookups (no match: no affinity yet), picks and endpoint chains.
	nft, _ := shapeTestProxier(t, v1.IPv4Protocol, 3, true, false)
	_, out, masq := tracePacket(t, nft, "10.0.0.2", "tcp", "172.30.0.41", "80", []string{"192.168.0.2"})
	want := map[string]bool{"10.180.0.1:80": true, "10.180.0.2:80": true, "10.180.0.3:80": true}
	if out != "10.180.0.1:80, 10.180.0.2:80, 10.180.0.3:80" || masq {
		t.Errorf("trace to the affinity Service: got %q (masquerade %v), want each of %v once, unmasqueraded", out, masq, want)
	}
}

// sharedAffinitySetOf returns the name of the shared affinity set in nft's table, which depends
// on the kernel (affinity_resize.go), or clientAffinitySet when the table has none.
func sharedAffinitySetOf(t *testing.T, nft knftables.Interface) string {
	t.Helper()
	names, err := nft.List(context.Background(), "set")
	if err != nil && !knftables.IsNotFound(err) {
		t.Fatal(err)
	}
	for _, name := range names {
		if isClientAffinitySetName(name) {
			return name
		}
	}
	return clientAffinitySet
}

// affinityElements returns the shared set's elements of fake as "client/endpoint" strings,
// naming the endpoint by its address in ids (or "?" for an ID that none has), sorted.
func affinityElements(t *testing.T, nft knftables.Interface, ids map[string]affinityID) []string {
	t.Helper()
	elems, err := nft.ListElements(context.Background(), "set", sharedAffinitySetOf(t, nft))
	if err != nil {
		if knftables.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	var out []string
	for _, e := range elems {
		id, ok := elementAffinityID(e)
		if !ok {
			t.Fatalf("element %v of the shared set has no affinity ID", e.Key)
		}
		ep := "?"
		for addr, epID := range ids {
			if epID == id {
				ep = addr
			}
		}
		out = append(out, e.Key[0]+"/"+ep)
	}
	sort.Strings(out)
	return out
}

// addAffinity adds shared-set elements for client: one per endpoint address in eps (by its ID in
// ids), as the packet path would, plus one with an ID that no endpoint has when stray is set.
func addAffinity(t *testing.T, nft knftables.Interface, ids map[string]affinityID, client string, stray bool, eps ...string) {
	t.Helper()
	set := sharedAffinitySetOf(t, nft)
	tx := nft.NewTransaction()
	for _, ep := range eps {
		id := ids[ep]
		tx.Add(&knftables.Element{Set: set, Key: []string{client, strconv.Itoa(int(id.a)), strconv.Itoa(int(id.b))}})
	}
	if stray {
		tx.Add(&knftables.Element{Set: set, Key: []string{client, "1", "2"}})
	}
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

// checkAffinityPruning runs the pruning scenario on fp, whose nftables is nft (knftables' Fake or
// the real kernel), for family.
func checkAffinityPruning(t *testing.T, fp *Proxier, nft knftables.Interface, family v1.IPFamily) {
	t.Helper()
	client, stray := "10.0.0.9", "10.0.0.8"
	if family == v1.IPv6Protocol {
		client, stray = "fd00::9", "fd00::8"
	}
	setShapeTestService(t, fp, family, 3, true)
	ids := affinityEndpoints(t, fp)
	var eps []string
	for ep := range ids {
		eps = append(eps, ep)
	}
	sort.Strings(eps)
	addAffinity(t, nft, ids, client, false, eps...)
	addAffinity(t, nft, ids, stray, true)
	check := func(when string, want ...string) {
		t.Helper()
		sort.Strings(want)
		if got := affinityElements(t, nft, ids); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: shared set holds %v, want %v", when, got, want)
		}
	}
	check("before", client+"/"+eps[0], client+"/"+eps[1], client+"/"+eps[2], stray+"/?")

	// A partial sync that removes an endpoint takes its affinity with it, as upstream's
	// deletion of the endpoint's set does. Affinity it does not know of stays.
	setShapeTestService(t, fp, family, 2, true)
	check("after the endpoint's removal", client+"/"+eps[0], client+"/"+eps[1], stray+"/?")

	// A full sync also removes affinity that no endpoint has (left by a crashed kube-proxy,
	// or by an endpoint removed while it was down).
	periodicFullSync(t, fp)
	check("after a full sync", client+"/"+eps[0], client+"/"+eps[1])

	// Turning affinity off takes the service's affinity with it.
	setShapeTestService(t, fp, family, 2, false)
	check("after affinity was turned off")

	// Upstream's shapes delete the shared set at the next full sync, and use per-endpoint sets.
	setShapeTestService(t, fp, family, 2, true)
	fp.upstreamRuleShapes = true
	periodicFullSync(t, fp)
	if _, err := nft.ListElements(context.Background(), "set", clientAffinitySet); !knftables.IsNotFound(err) {
		t.Errorf("with upstream's shapes the shared set survived a full sync (err %v)", err)
	}
	setName := fp.endpointsMap[firstServicePort(fp)][0].(*endpointInfo).affinitySetName
	if _, err := nft.ListElements(context.Background(), "set", setName); err != nil {
		t.Errorf("with upstream's shapes, no per-endpoint set %s: %v", setName, err)
	}
}

func TestSharedAffinityPruning(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		t.Run(string(family), func(t *testing.T) {
			nft, fp := NewFakeProxier(family)
			checkAffinityPruning(t, fp, nft, family)
		})
	}
}

func TestSharedAffinitySetAddedOncePerWritingSync(t *testing.T) {
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	rec := &txText{Interface: nft}
	fp.nftables = rec
	fp.maxTransactionOps = 20
	setSplitTestCluster(fp, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	addSet := "add set ip kube-proxy " + clientAffinitySet + " "
	count := func(from int) (adds int, firstUse, addedIn int) {
		firstUse, addedIn = -1, -1
		for i, text := range rec.texts[from:] {
			adds += strings.Count(text, addSet)
			if addedIn < 0 && strings.Contains(text, addSet) {
				addedIn = i
			}
			if firstUse < 0 && strings.Contains(text, "@"+clientAffinitySet) {
				firstUse = i
			}
		}
		return
	}
	adds, firstUse, addedIn := count(0)
	if len(rec.texts) < 3 || adds != 1 || firstUse < 0 || addedIn != firstUse {
		t.Errorf("cold start in %d transactions: %d adds of the shared set, in transaction %d; first rule using it in %d: want one add, in that transaction",
			len(rec.texts), adds, addedIn, firstUse)
	}
	if strings.Index(rec.texts[addedIn], addSet) > strings.Index(rec.texts[addedIn], "@"+clientAffinitySet) {
		t.Errorf("the shared set is added after the first rule that uses it:\n%s", rec.texts[addedIn])
	}

	// A full sync with nothing drifted writes no rule, and so does not add the set again.
	n := len(rec.texts)
	periodicFullSync(t, fp)
	if adds, _, _ := count(n); adds != 0 {
		t.Errorf("a full sync with nothing drifted added the shared set %d times", adds)
	}

	// A partial sync that re-writes affinity rules adds it once more (it may have been
	// deleted along with every rule that used it).
	n = len(rec.texts)
	setSplitTestCluster(fp, 2)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if adds, firstUse, addedIn := count(n); adds != 1 || addedIn != firstUse {
		t.Errorf("partial sync: %d adds of the shared set, in transaction %d, first use in %d", adds, addedIn, firstUse)
	}
}

func TestRealKernelSharedAffinity(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		t.Run(string(family), func(t *testing.T) {
			nftFamily, listFamily := kernelFamily(family)
			real, run := realNFT(t, nftFamily)
			_, fp := NewFakeProxier(family)
			useKernel(fp, real)
			linkKernel(t, fp, real)
			setShapeTestService(t, fp, family, 3, true)
			listed := run("list", "table", listFamily, kubeProxyTable)
			if perEndpointAffinitySet.MatchString(listed) || !strings.Contains(listed, "set "+sharedAffinitySetOf(t, real)+" {") {
				t.Fatalf("want the shared affinity set and no per-endpoint one:\n%s", listed)
			}

			// The kernel lists the rules as written: a restart writes no chain.
			rec := &txText{Interface: real}
			_, restarted := NewFakeProxier(family)
			useKernel(restarted, rec)
			linkKernel(t, restarted, real)
			setShapeTestService(t, restarted, family, 3, true)
			if written := rec.writtenServiceChains(0); len(written) != 0 {
				t.Errorf("the start-up full sync over the kernel's intact affinity rules re-wrote %v", written)
			}

			checkAffinityPruning(t, restarted, real, family)
		})
	}
}

func TestRealKernelAffinityUpgrade(t *testing.T) {
	// Upstream's shapes wrote the table, with per-endpoint affinity sets; the shared shape
	// takes it over, in small transactions. Endpoints that stayed have their sets deleted in
	// the transaction that re-writes their chains; those of endpoints that went away, once
	// their stale chains are flushed. The kernel refuses to delete a set that a rule still
	// names, so the sync fails if either comes too early.
	for _, generation := range []int{1, 2} {
		t.Run(fmt.Sprintf("endpoints of generation %d", generation), func(t *testing.T) {
			real, run := realNFT(t, knftables.IPv4Family)
			writeUpstreamShapes(t, real)
			before := strings.Count(run("list", "sets", "ip"), "set affinity-")
			if before == 0 {
				t.Fatal("upstream's shapes wrote no per-endpoint affinity set")
			}

			rec, fp, refFake, ref := linkedProxier(t, real, 40)
			for g := 1; g <= generation; g++ {
				setSplitTestCluster(fp, g)
				setSplitTestCluster(ref, g)
			}
			if err := fp.syncProxyRules(); err != nil {
				t.Fatalf("taking over upstream's table: %v", err)
			}
			if err := ref.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			if sets := run("list", "sets", "ip"); perEndpointAffinitySet.MatchString(sets) {
				t.Errorf("per-endpoint affinity sets survived the upgrade:\n%s", sets)
			}
			checkServiceChainsMatch(t, refFake, run, "ip")
			deletes, withDeletes := 0, 0
			for _, text := range rec.texts {
				// Per-endpoint sets only: the resize probe's set has no "/".
				if n := len(perEndpointSetDelete.FindAllString(text, -1)); n > 0 {
					deletes += n
					withDeletes++
				}
			}
			if deletes != before {
				t.Errorf("deleted %d per-endpoint sets, want the %d upstream wrote", deletes, before)
			}
			if generation == 1 && withDeletes < 2 {
				t.Errorf("the %d set deletions all went into one of the %d transactions", deletes, len(rec.texts))
			}
			// The take-over's dump counted upstream's sets; its commits deleted and freed
			// them, and the link's count, which weighs transactions, followed.
			checkSetCount(t, fp)
			if generation == 2 {
				// Upstream's stale chains, flushed by the take-over, go too.
				settle(t, fp)
				checkSetCount(t, fp)
			}
		})
	}
}

// TestAffinityFillMetric: a full sync lists the shared affinity set, and reports how many
// elements it holds and how many it can hold.
func TestAffinityFillMetric(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	nft, fp := shapeTestProxier(t, v1.IPv4Protocol, 3, true, false)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	// Three clients' affinity, as the packet path would record it.
	tx := nft.NewTransaction()
	for i := 1; i <= 3; i++ {
		tx.Add(&knftables.Element{Set: clientAffinitySet, Key: []string{fmt.Sprintf("192.0.2.%d", i), "1", "2"}})
	}
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	periodicFullSync(t, fp)
	gauge := func(g *basemetrics.GaugeVec) float64 {
		v, err := testutil.GetGaugeMetricValue(g.WithLabelValues(string(v1.IPv4Protocol)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := gauge(metrics.NFTablesAffinityElements); got != 3 {
		t.Errorf("affinity elements = %v, want 3", got)
	}
	if got := gauge(metrics.NFTablesAffinityCapacity); got != minClientAffinitySetSize {
		t.Errorf("affinity capacity = %v, want %d", got, minClientAffinitySetSize)
	}
}

// TestAffinitySetSize: the shared set holds what upstream's per-endpoint sets of 65535 hold
// together, in powers of two, from 2^20 up to 2^31.
func TestAffinitySetSize(t *testing.T) {
	for _, c := range []struct {
		endpoints int
		want      uint64
	}{{0, 1 << 20}, {16, 1 << 20}, {17, 1 << 21}, {40, 1 << 22}, {100000, 1 << 31}} {
		if got := affinitySetSize(c.endpoints); got != c.want {
			t.Errorf("affinitySetSize(%d) = %d, want %d", c.endpoints, got, c.want)
		}
		if got := affinitySetSize(c.endpoints); got < uint64(c.endpoints)*upstreamAffinitySetSize && got < maxClientAffinitySetSize {
			t.Errorf("affinitySetSize(%d) = %d holds less than upstream's sets", c.endpoints, got)
		}
	}
}

// TestAffinitySetGrowsWithEndpoints: when a Service with ClientIP affinity gains endpoints, the
// sync that writes them re-adds the shared set with the size that they need, and the fill
// metric's capacity follows.
func TestAffinitySetGrowsWithEndpoints(t *testing.T) {
	nft, fp := shapeTestProxier(t, v1.IPv4Protocol, 10, true, false)
	size := func() uint64 {
		set := nft.Table.Sets[clientAffinitySet]
		if set == nil || set.Size == nil {
			t.Fatalf("no sized %s set", clientAffinitySet)
		}
		return *set.Size
	}
	if got := size(); got != 1<<20 {
		t.Fatalf("10 endpoints: size %d, want %d", got, 1<<20)
	}
	setShapeTestService(t, fp, v1.IPv4Protocol, 40, true)
	// The fake keeps an existing set as it was; the kernel resizes it (see
	// TestRealKernelAffinitySetResized). The transaction asks for the new size.
	if text := nft.LastTransaction.String(); !strings.Contains(text, "add set ip kube-proxy affinity-clients") || !strings.Contains(text, "size 4194304 ;") {
		t.Errorf("40 endpoints (40 x 65535, rounded up: 4194304): the sync did not re-add the set with that size:\n%s", text)
	}
}

// TestAffinitySetShrinksWithRemovedService: when a Service with ClientIP affinity goes, the
// partial sync that removes it writes no rule that uses the shared set, yet re-adds the set
// with the smaller size that the remaining endpoints need, as a fresh kube-proxy would write.
// TestAffinitySetResizedAfterRestart: a kube-proxy that starts on a table whose affinity rules
// are intact (a restart, or a take-over) writes no affinity rule in its first sync, and must
// still give the shared set the size that its own affinity endpoints call for, not the size the
// previous kube-proxy left (found by make soak STEPS=5000 SEED=51).
func TestAffinitySetResizedAfterRestart(t *testing.T) {
	nft, _, svcs, epSlices := syncedAffinityProxier(t)
	size := func() uint64 { return *nft.Table.Sets[clientAffinitySet].Size }
	// The second Service goes while kube-proxy is down; the new one finds the first Service's
	// chains intact.
	_, restarted := NewFakeProxier(v1.IPv4Protocol)
	restarted.nftables = resizingFake{nft}
	makeServiceMap(restarted, svcs[0])
	populateEndpointSlices(restarted, epSlices[0])
	if err := restarted.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != 1<<20 {
		t.Errorf("after the restart, 10 affinity endpoints: size %d, want %d", got, 1<<20)
	}
}

// syncedAffinityProxier returns a proxier that has synced two ClientIP-affinity Services of 10
// endpoints each (affinityServices) on a resizingFake, and checks that the shared set got the
// size of 20 affinity endpoints.
func syncedAffinityProxier(t *testing.T) (*knftables.Fake, *Proxier, []*v1.Service, []*discovery.EndpointSlice) {
	t.Helper()
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	fp.nftables = resizingFake{nft}
	svcs, epSlices := affinityServices(2, 10)
	makeServiceMap(fp, svcs...)
	populateEndpointSlices(fp, epSlices...)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if got := *nft.Table.Sets[clientAffinitySet].Size; got != 1<<21 {
		t.Fatalf("20 affinity endpoints: size %d, want %d", got, 1<<21)
	}
	return nft, fp, svcs, epSlices
}

// affinityServices returns n ClusterIP Services with ClientIP affinity, each with one port and
// an EndpointSlice of endpoints ready endpoints.
func affinityServices(n, endpoints int) ([]*v1.Service, []*discovery.EndpointSlice) {
	var svcs []*v1.Service
	var epSlices []*discovery.EndpointSlice
	for s := 1; s <= n; s++ {
		name := fmt.Sprintf("svc%d", s)
		svcs = append(svcs, makeTestService("ns1", name, func(svc *v1.Service) {
			svc.Spec.ClusterIP = fmt.Sprintf("172.30.0.%d", 40+s)
			svc.Spec.Ports = []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP}}
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}}
		}))
		epSlices = append(epSlices, makeTestEndpointSlice("ns1", name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			for i := 0; i < endpoints; i++ {
				eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.180.%d.%d", s, i+1)}})
			}
			eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p80"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}}
		}))
	}
	return svcs, epSlices
}

func TestAffinitySetShrinksWithRemovedService(t *testing.T) {
	nft, fp, svcs, epSlices := syncedAffinityProxier(t)
	size := func() uint64 { return *nft.Table.Sets[clientAffinitySet].Size }
	fp.OnEndpointSliceDelete(epSlices[1])
	fp.OnServiceDelete(svcs[1])
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != 1<<20 {
		t.Errorf("10 affinity endpoints left: size %d, want %d", got, 1<<20)
	}
}

// The shared affinity set is sized from the endpoints of the ClientIP-affinity service ports. A
// partial sync recounts only the ports it generates or removes; after each sync the count must
// equal a walk of every service port.
func TestAffinityEndpointCountFollowsPartialSyncs(t *testing.T) {
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	service := func(i int, affinity bool) *v1.Service {
		return makeTestService("ns", fmt.Sprintf("svc%d", i), func(svc *v1.Service) {
			svc.Spec.ClusterIP = fmt.Sprintf("172.30.0.%d", 10+i)
			svc.Spec.Ports = []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP}}
			if affinity {
				svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			}
		})
	}
	slice := func(i, endpoints int) *discovery.EndpointSlice {
		return makeTestEndpointSlice("ns", fmt.Sprintf("svc%d", i), 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			for e := 0; e < endpoints; e++ {
				eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.180.%d.%d", i, e+1)}})
			}
			eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p80"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}}
		})
	}
	walked := func() int {
		n := 0
		for name, svc := range fp.svcPortMap {
			if svc.SessionAffinityType() == v1.ServiceAffinityClientIP {
				n += len(fp.endpointsMap[name])
			}
		}
		return n
	}
	check := func(step string, want int) {
		t.Helper()
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
		if fp.known == nil {
			t.Fatalf("%s: the sync kept no known objects", step)
		}
		if got := fp.known.affinityTotal; got != want || walked() != want {
			t.Errorf("%s: counted %d affinity endpoints, a walk of every port %d, want %d", step, got, walked(), want)
		}
	}
	svcs := []*v1.Service{service(0, true), service(1, true), service(2, false)}
	slices := []*discovery.EndpointSlice{slice(0, 2), slice(1, 3), slice(2, 4)}
	for i := range svcs {
		fp.OnServiceAdd(svcs[i])
		fp.OnEndpointSliceAdd(slices[i])
	}
	check("the first sync", 5)
	lastFull := fp.lastFullSync

	grown := slice(0, 4)
	fp.OnEndpointSliceUpdate(slices[0], grown)
	slices[0] = grown
	check("more endpoints for svc0", 7)
	fp.OnServiceUpdate(svcs[2], service(2, true))
	svcs[2] = service(2, true)
	check("affinity for svc2", 11)
	fp.OnEndpointSliceDelete(slices[1])
	fp.OnServiceDelete(svcs[1])
	check("svc1 deleted", 8)
	fp.OnServiceUpdate(svcs[0], service(0, false))
	svcs[0] = service(0, false)
	check("no affinity for svc0", 4)
	if !fp.lastFullSync.Equal(lastFull) {
		t.Error("a sync after the first was a full sync; the test covers partial syncs")
	}
}
