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
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-base/metrics/testutil"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// Transitions on the real kernel: a take-over of another shape's table, failed reads and
// commits between bounded transactions, and syncs that would fail the same way for ever.

// fallbacksTotal returns kubeproxy_sync_proxy_rules_nftables_fallbacks_total for IPv4 and reason.
func fallbacksTotal(t *testing.T, reason string) float64 {
	t.Helper()
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	v, err := testutil.GetCounterMetricValue(metrics.NFTablesSyncFallbacksTotal.WithLabelValues(string(v1.IPv4Protocol), reason))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// expectCleanTable settles fp (its stale chains deleted) and checks that the IPv4 table that run
// lists is want, a clean kube-proxy's.
func expectCleanTable(t *testing.T, fp *Proxier, run func(args ...string) string, want map[string]string, when string) {
	t.Helper()
	settle(t, fp)
	if d := tableDiff(want, tableObjects(t, run, "ip")); d != "" {
		t.Errorf("%s, the table differs from a clean kube-proxy's:\n%s", when, d)
	}
}

// checkedProxier returns a proxier on the kernel of a new namespace, through a checkedNFT, with
// transactions of at most maxOps operations, and a function that runs nft there.
func checkedProxier(t *testing.T, maxOps int) (*checkedNFT, func(args ...string) string, *Proxier) {
	t.Helper()
	real, run := realNFT(t, knftables.IPv4Family)
	checked := &checkedNFT{Interface: real}
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	useKernel(fp, checked)
	frozenClock(fp)
	linkKernel(t, fp, real)
	fp.maxTransactionOps = maxOps
	return checked, run, fp
}

// routedPorts returns, for each ClusterIP in the kernel's IPv4 service-ips map, its ports
// ("tcp/80"), sorted and joined with commas. It fails the test if an element sends traffic to
// a chain without rules.
func routedPorts(t *testing.T, run func(args ...string) string) map[string]string {
	t.Helper()
	tab := readKernelTable(t, run, "ip")
	for _, dead := range tab.deadEnds(serviceIPsMap) {
		t.Errorf("an element leads to a chain without rules: %s", dead)
	}
	return tab.routedPorts()
}

// twoPortServices gives fp Services svcFROM..svcTO at 172.30.4.FROM..TO, each with TCP ports
// 80 and 81 and two remote endpoints of generation gen.
func twoPortServices(fp *Proxier, from, to, gen int) {
	var svcs []*v1.Service
	var slices []*discovery.EndpointSlice
	for i := from; i <= to; i++ {
		name := fmt.Sprintf("svc%d", i)
		svcs = append(svcs, makeTestService("ns", name, func(svc *v1.Service) {
			svc.Spec.ClusterIP = fmt.Sprintf("172.30.4.%d", i)
			svc.Spec.Ports = []v1.ServicePort{
				{Name: "a", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
				{Name: "b", Port: 81, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8081)},
			}
		}))
		slices = append(slices, makeTestEndpointSlice("ns", name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			eps.Endpoints = remoteEndpoints(fmt.Sprintf("10.181.%d.%d", gen, i), fmt.Sprintf("10.182.%d.%d", gen, i))
			eps.Ports = []discovery.EndpointPort{
				{Name: ptr.To("a"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)},
				{Name: ptr.To("b"), Port: ptr.To[int32](8081), Protocol: ptr.To(v1.ProtocolTCP)},
			}
		}))
	}
	makeServiceMap(fp, svcs...)
	populateEndpointSlices(fp, slices...)
}

// TestRealKernelCutsFallBetweenServices changes every two-port Service and deletes a third of
// them, in transactions of a few operations, and checks after every commit that each Service
// has both ports or (deleted) neither, never one; and that a commit refused part-way leaves the
// same.
func TestRealKernelCutsFallBetweenServices(t *testing.T) {
	const n = 12
	for _, c := range []struct{ maxOps, refuseAt int }{{10, 0}, {13, 0}, {13, 3}, {25, 2}} {
		maxOps, refuseAt := c.maxOps, c.refuseAt
		t.Run(fmt.Sprintf("maxOps %d, refuse transaction %d", maxOps, refuseAt), func(t *testing.T) {
			checked, run, fp := checkedProxier(t, maxOps)
			twoPortServices(fp, 1, n, 1)
			if err := fp.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			commits := 0
			checked.after = func() {
				commits++
				for ip, ports := range routedPorts(t, run) {
					if ports != "tcp/80,tcp/81" {
						t.Errorf("after commit %d, %s is routed on %s: a cut inside a Service", commits, ip, ports)
					}
				}
			}
			first := checked.runs
			checked.refuse = func(k int, _ *knftables.Transaction) error {
				if refuseAt > 0 && k == first+refuseAt {
					return fmt.Errorf("injected refusal of transaction %d", k-first)
				}
				return nil
			}
			// svc1..svc4 deleted, new endpoints for the rest, and svc13..svc20 added.
			for i := 1; i <= 4; i++ {
				fp.OnServiceDelete(makeTestService("ns", fmt.Sprintf("svc%d", i), func(svc *v1.Service) {
					svc.Spec.ClusterIP = fmt.Sprintf("172.30.4.%d", i)
					svc.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "b", Port: 81, Protocol: v1.ProtocolTCP}}
				}))
			}
			twoPortServices(fp, 5, n+8, 2)
			err := fp.syncProxyRules()
			if refuseAt == 0 && err != nil {
				t.Fatal(err)
			}
			routed := routedPorts(t, run)
			for i := 5; i <= n; i++ { // (new Services may or may not be there yet)
				if ip := fmt.Sprintf("172.30.4.%d", i); routed[ip] != "tcp/80,tcp/81" {
					t.Errorf("%s is routed on %q, want both ports", ip, routed[ip])
				}
			}
			if refuseAt == 0 {
				if checked.runs-first < 3 {
					t.Fatalf("the sync ran %d transactions; the test needs the change cut into several", checked.runs-first)
				}
				for i := 1; i <= 4; i++ {
					if ip := fmt.Sprintf("172.30.4.%d", i); routed[ip] != "" {
						t.Errorf("deleted Service %s is still routed on %s", ip, routed[ip])
					}
				}
				for i := n + 1; i <= n+8; i++ {
					if ip := fmt.Sprintf("172.30.4.%d", i); routed[ip] != "tcp/80,tcp/81" {
						t.Errorf("new Service %s is routed on %q, want both ports", ip, routed[ip])
					}
				}
			}
		})
	}
}

// TestRealKernelRemovedServicesLeaveWhole removes, in a sync that walks the whole table (the
// first after a restart or a failed sync, which knows nothing of the last one), a LoadBalancer
// Service with endpoints and one without, among Services that the sync re-writes in
// transactions of a few operations. After every commit, each removed Service must be as it was
// or gone, whatever maps its elements are in: never its ClusterIP left in cluster-ips (which
// rejects its ports) without its service-ips elements, nor part of its no-endpoint elements.
func TestRealKernelRemovedServicesLeaveWhole(t *testing.T) {
	for _, maxOps := range []int{4, 8, 12} {
		t.Run(fmt.Sprintf("maxOps %d", maxOps), func(t *testing.T) { removeServicesInCuts(t, maxOps) })
	}
}

// removeServicesInCuts is TestRealKernelRemovedServicesLeaveWhole with transactions of at most
// maxOps operations.
func removeServicesInCuts(t *testing.T, maxOps int) {
	checked, run, fp := checkedProxier(t, maxOps)
	owners := map[string]string{}
	lb := func(i int, endpoints bool) (*v1.Service, *discovery.EndpointSlice) {
		name := fmt.Sprintf("svc%d", i)
		ip, lbIP, nodePort := fmt.Sprintf("172.30.6.%d", i), fmt.Sprintf("198.18.6.%d", i), int32(30100+i)
		owners[ip], owners[lbIP], owners[fmt.Sprintf("tcp . %d", nodePort)] = name, name, name
		svc := makeTestService("soak", name, func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = ip
			svc.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP, NodePort: nodePort, TargetPort: intstr.FromInt32(8080)}}
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbIP}}
		})
		slice := makeTestEndpointSlice("soak", name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			if endpoints {
				eps.Endpoints = remoteEndpoints(fmt.Sprintf("10.183.%d.1", i), fmt.Sprintf("10.183.%d.2", i))
			}
			eps.Ports = []discovery.EndpointPort{{Name: ptr.To("a"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
		})
		return svc, slice
	}
	var svcs []*v1.Service
	var slices []*discovery.EndpointSlice
	for i := 1; i <= 8; i++ {
		svc, slice := lb(i, i != 2)
		svcs, slices = append(svcs, svc), append(slices, slice)
	}
	makeServiceMap(fp, svcs...)
	populateEndpointSlices(fp, slices...)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	cluster := &soakCluster{owners: owners}
	states := func() map[string]string {
		return parseTableGraph(t, run("-j", "list", "table", "ip", kubeProxyTable)).serviceStates(cluster.owner)
	}
	before := states()
	for _, removed := range []string{"svc1", "svc2"} {
		if before[removed] == "" {
			t.Fatalf("%s is not in the table before its removal", removed)
		}
	}
	// A restarted kube-proxy, without svc1 (endpoints) and svc2 (none), and with new
	// endpoints for the others, so that the sync is cut into several transactions.
	_, restarted := NewFakeProxier(v1.IPv4Protocol)
	useKernel(restarted, checked)
	frozenClock(restarted)
	linkKernel(t, restarted, checked.Interface)
	restarted.maxTransactionOps = maxOps
	svcs, slices = nil, nil
	for i := 3; i <= 8; i++ {
		svc, slice := lb(i, true)
		slice.Endpoints = remoteEndpoints(fmt.Sprintf("10.184.%d.1", i))
		svcs, slices = append(svcs, svc), append(slices, slice)
	}
	makeServiceMap(restarted, svcs...)
	populateEndpointSlices(restarted, slices...)
	commits := 0
	checked.after = func() {
		commits++
		now := states()
		for _, removed := range []string{"svc1", "svc2"} {
			if got := now[removed]; got != "" && got != before[removed] {
				t.Errorf("after commit %d, removed %s is neither as it was nor gone:\n%s", commits, removed, stateDiff(before[removed], got, 12))
			}
		}
	}
	if err := restarted.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if commits < 3 {
		t.Fatalf("the sync made %d commits; the test needs it cut into several", commits)
	}
	after := states()
	for _, removed := range []string{"svc1", "svc2"} {
		if after[removed] != "" {
			t.Errorf("removed %s is still in the table:\n%s", removed, after[removed])
		}
	}
}

// TestRealKernelStaleChainsOfADeletedTable: a Service's chains go stale (flushed, to be deleted
// a second later); then the whole table is deleted behind kube-proxy's back and a full sync
// writes it again, without them. The partial syncs after that must not flush or delete those
// chains, which are no longer there: the kernel would refuse the whole transaction (the soak's
// seed 62 found every partial sync after such a repair failing once).
func TestRealKernelStaleChainsOfADeletedTable(t *testing.T) {
	_, run, fp := checkedProxier(t, 0)
	twoPortServices(fp, 1, 3, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	fp.OnServiceDelete(makeTestService("ns", "svc3", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "172.30.4.3"
		svc.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "b", Port: 81, Protocol: v1.ProtocolTCP}}
	}))
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if len(fp.staleChains) == 0 {
		t.Fatal("deleting svc3 left no stale chains; the test needs some")
	}
	run("delete", "table", "ip", kubeProxyTable)
	fp.needFullSync = true
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("the full sync after the table was deleted: %v", err)
	}
	for chain := range fp.staleChains {
		t.Errorf("stale chain %s is not in the table any more, but the proxier still means to delete it", chain)
	}
	twoPortServices(fp, 1, 2, 2) // new endpoints: a partial sync
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("the partial sync after the repair: %v", err)
	}
	if routed := routedPorts(t, run); routed["172.30.4.1"] != "tcp/80,tcp/81" || routed["172.30.4.3"] != "" {
		t.Errorf("routed %v, want svc1 on both ports and svc3 gone", routed)
	}
}

// TestRealKernelFailedListingAndCommit fails the read of service-ips in a full sync (which then
// flushes the map and refills it) and the second commit of that sync: no Service may be left
// out of service-ips, as none could be with upstream's one transaction.
func TestRealKernelFailedListingAndCommit(t *testing.T) {
	const n = 30 // 60 ClusterIP service ports
	checked, run, fp := checkedProxier(t, 40)
	twoPortServices(fp, 1, n, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	fallbacks := func(reason string) float64 { return fallbacksTotal(t, reason) }
	before := fallbacks("listing_failed")
	checked.failListing = serviceIPsMap
	first := checked.runs
	checked.refuse = func(k int, _ *knftables.Transaction) error {
		if k == first+2 {
			return fmt.Errorf("injected refusal of the second transaction")
		}
		return nil
	}
	fp.needFullSync = true
	_ = fp.syncProxyRules() // one transaction: the second is never needed
	routed := routedPorts(t, run)
	for i := 1; i <= n; i++ {
		if ip := fmt.Sprintf("172.30.4.%d", i); routed[ip] != "tcp/80,tcp/81" {
			t.Errorf("after the sync with a failed listing, %s is routed on %q, want both ports", ip, routed[ip])
		}
	}
	if got := checked.runs - first; got != 1 {
		t.Errorf("the sync with a failed listing ran %d transactions, want 1", got)
	}
	if got := fallbacks("listing_failed") - before; got != 1 {
		t.Errorf("fallbacks_total{reason=listing_failed} rose by %v, want 1", got)
	}
	// With the listing back, syncs are cut again.
	checked.failListing, checked.refuse = "", nil
	fp.needFullSync = true
	first = checked.runs
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	twoPortServices(fp, 1, n, 2)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if got := checked.runs - first; got < 3 {
		t.Errorf("the next syncs ran %d transactions; want them cut again", got)
	}
}

// TestRealKernelRepeatedFailureFallsBack refuses every transaction that writes one Service, as
// a kernel would refuse a rule it cannot take. Two syncs fail; the third is written as one
// transaction (which fails too); from the fourth on, every other Service is programmed, and
// once the refusal stops, the next sync leaves exactly the clean table.
func TestRealKernelRepeatedFailureFallsBack(t *testing.T) {
	refReal, refRun := realNFT(t, knftables.IPv4Family)
	ref := newDamageTestProxier(t, refReal, true)
	settle(t, ref)
	want := tableObjects(t, refRun, "ip")

	checked, run, fp := checkedProxier(t, 20)
	setDamageTestCluster(fp)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	fallbacks := func(reason string) float64 { return fallbacksTotal(t, reason) }
	repeated, isolated := fallbacks("repeated_failure"), fallbacks("isolate")
	// "plain" gets new endpoints, and its transactions are refused.
	checked.refuse = func(_ int, tx *knftables.Transaction) error {
		if strings.Contains(tx.String(), "ns/plain/tcp/p") {
			return fmt.Errorf("injected refusal of ns/plain")
		}
		return nil
	}
	changeDamageTestCluster(fp)
	for sync := 1; sync <= 3; sync++ {
		if err := fp.syncProxyRules(); err == nil {
			t.Fatalf("sync %d succeeded although every transaction with ns/plain is refused", sync)
		}
	}
	if got := fallbacks("repeated_failure") - repeated; got != 1 {
		t.Errorf("fallbacks_total{reason=repeated_failure} rose by %v, want 1", got)
	}
	if err := fp.syncProxyRules(); err == nil {
		t.Fatal("the isolating sync succeeded although ns/plain is refused")
	}
	if got := fallbacks("isolate") - isolated; got != 1 {
		t.Errorf("fallbacks_total{reason=isolate} rose by %v, want 1", got)
	}
	// Every other Service of the changed cluster is programmed as it should be.
	routed := routedPorts(t, run)
	for _, ip := range []string{"172.30.3.2", "172.30.3.3", "172.30.3.6", "172.30.3.7"} {
		if routed[ip] == "" {
			t.Errorf("%s is not routed after the isolating sync", ip)
		}
	}
	for _, svc := range []string{"ns/lb/tcp/p", "ns/many/tcp/p", "ns/fresh/tcp/p"} {
		if !strings.Contains(run("list", "table", "ip", kubeProxyTable), svc) {
			t.Errorf("no chain of %s after the isolating sync", svc)
		}
	}
	checked.refuse = nil
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("the sync after the refusals stopped failed: %v", err)
	}
	expectCleanTable(t, fp, run, want, "after recovering")
}

// TestRealKernelTakeOverLocalAffinityService is an upgrade: a kube-proxy with upstream's rule
// shapes programs a LoadBalancer Service with externalTrafficPolicy Local, ClientIP affinity and
// endpoints on this node and another; then a default-shape kube-proxy starts on that table while
// the Service's policy has become Cluster. Upstream's local-policy chain still names the
// per-endpoint affinity sets, so they can go only after it is flushed: the first sync must
// succeed, in one transaction or in many, and leave the clean table.
func TestRealKernelTakeOverLocalAffinityService(t *testing.T) {
	service := func(policy v1.ServiceExternalTrafficPolicy) *v1.Service {
		return makeTestService("ns", "lb", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ExternalTrafficPolicy = policy
			svc.Spec.ClusterIP = "172.30.5.1"
			svc.Spec.Ports = []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30005, TargetPort: intstr.FromInt32(8080)}}
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "5.6.7.5"}}
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
			if policy == v1.ServiceExternalTrafficPolicyLocal {
				svc.Spec.HealthCheckNodePort = 30105
			}
		})
	}
	slice := damageTestSlice("lb", damageTestEndpoint("10.180.5.1", testNodeName), damageTestEndpoint("10.180.5.2", "other-node"))
	for _, maxOps := range []int{0, 5} {
		t.Run(fmt.Sprintf("maxOps %d", maxOps), func(t *testing.T) {
			refReal, refRun := realNFT(t, knftables.IPv4Family)
			_, ref := NewFakeProxier(v1.IPv4Protocol)
			useKernel(ref, refReal)
			frozenClock(ref)
			makeServiceMap(ref, service(v1.ServiceExternalTrafficPolicyCluster))
			populateEndpointSlices(ref, slice)
			settle(t, ref)
			want := tableObjects(t, refRun, "ip")

			real, run := realNFT(t, knftables.IPv4Family)
			_, old := NewFakeProxier(v1.IPv4Protocol)
			useKernel(old, real)
			frozenClock(old)
			old.upstreamRuleShapes = true
			makeServiceMap(old, service(v1.ServiceExternalTrafficPolicyLocal))
			populateEndpointSlices(old, slice)
			if err := old.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(run("list", "table", "ip", kubeProxyTable), "set affinity-") {
				t.Fatal("upstream's shapes wrote no per-endpoint affinity set")
			}

			_, fp := NewFakeProxier(v1.IPv4Protocol)
			useKernel(fp, real)
			frozenClock(fp)
			linkKernel(t, fp, real)
			fp.maxTransactionOps = maxOps
			makeServiceMap(fp, service(v1.ServiceExternalTrafficPolicyCluster))
			populateEndpointSlices(fp, slice)
			if err := fp.syncProxyRules(); err != nil {
				t.Fatalf("the first sync over upstream's shapes failed: %v", err)
			}
			expectCleanTable(t, fp, run, want, "after the take-over")
		})
	}
}

// TestRealKernelLegacyAffinitySetDeleted is an upgrade from an earlier version of this
// kube-proxy, whose shared affinity set was named "client-affinity" (a name that upstream's
// kube-proxy never deletes). The first sync re-writes the rules that name it and deletes it.
func TestRealKernelLegacyAffinitySetDeleted(t *testing.T) {
	refReal, refRun := realNFT(t, knftables.IPv4Family)
	settle(t, newDamageTestProxier(t, refReal))
	want := tableObjects(t, refRun, "ip")
	shared := sharedAffinitySetOf(t, refReal)
	if !strings.Contains(refRun("list", "table", "ip", kubeProxyTable), "set "+shared+" {") {
		t.Fatalf("the damage-test cluster has no shared affinity set %s", shared)
	}

	// The same table, with the set under its old name.
	legacy := strings.ReplaceAll(refRun("list", "table", "ip", kubeProxyTable), shared, legacyClientAffinitySet)
	real, run := realNFT(t, knftables.IPv4Family)
	file := filepath.Join(t.TempDir(), "legacy.nft")
	if err := os.WriteFile(file, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-f", file)
	fp := newDamageTestProxier(t, real)
	expectCleanTable(t, fp, run, want, "after the take-over")
	if listing := run("list", "table", "ip", kubeProxyTable); strings.Contains(listing, legacyClientAffinitySet) {
		t.Errorf("the legacy shared set is still there after the take-over:\n%s", listing)
	}
}

// TestRealKernelAffinityPruneAfterCommit: a client's packet records affinity for an endpoint
// while the sync that removes the endpoint is under way (here: right after its first commit).
// The prune must still take that affinity away, as upstream's deletion of the endpoint's set,
// atomic, would: so it lists the shared set only after every other commit of the sync.
func TestRealKernelAffinityPruneAfterCommit(t *testing.T) {
	for _, maxOps := range []int{0, 3} {
		t.Run(fmt.Sprintf("maxOps %d", maxOps), func(t *testing.T) {
			checked, _, fp := checkedProxier(t, maxOps)
			setShapeTestService(t, fp, v1.IPv4Protocol, 3, true)
			before := affinityEndpoints(t, fp)
			checked.after = func() {
				checked.after = nil
				// The packet path, between two commits: a new client sticks to every
				// endpoint the Service had.
				var eps []string
				for ep := range before {
					eps = append(eps, ep)
				}
				addAffinity(t, checked.Interface, before, "10.0.0.7", false, eps...)
			}
			setShapeTestService(t, fp, v1.IPv4Protocol, 2, true)
			after := affinityEndpoints(t, fp)
			var want []string
			for ep := range after {
				want = append(want, "10.0.0.7/"+ep)
			}
			slices.Sort(want)
			if got := affinityElements(t, checked.Interface, before); !slices.Equal(got, want) {
				t.Errorf("after the endpoint's removal, the shared set holds %v, want %v", got, want)
			}
		})
	}
}

// TestRealKernelAffinitySetResized: when the Services with ClientIP affinity gain endpoints, the
// kernel's shared set grows to the size that they need (affinitySetSize). A kernel that resizes
// sets (6.12, 6.18) does so in place: the affinity that clients already have stays. One that
// keeps a set's size (6.1) gets a new set of that size, under a new name, in the full sync that
// the partial one asks for, and the old set goes.
func TestRealKernelAffinitySetResized(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	useKernel(fp, real)
	frozenClock(fp)
	setShapeTestService(t, fp, v1.IPv4Protocol, 10, true)
	resizing, _ := fp.affinityResizing()
	inPlace := resizing == resizeInPlace
	t.Logf("the kernel resizes sets in place: %v", inPlace)
	before := sharedAffinitySetOf(t, real)
	set := func() string { return run("list", "set", "ip", kubeProxyTable, sharedAffinitySetOf(t, real)) }
	if got := set(); !strings.Contains(got, "size 1048576") {
		t.Fatalf("10 endpoints: want size 1048576:\n%s", got)
	}
	run("add", "element", "ip", kubeProxyTable, before, "{ 192.0.2.1 . 1 . 2 timeout 1h }")
	setShapeTestService(t, fp, v1.IPv4Protocol, 40, true)
	if !inPlace {
		if !fp.needFullSync {
			t.Fatal("the partial sync that needs a larger set did not ask for a full sync")
		}
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
	}
	got := set()
	if !strings.Contains(got, "size 4194304") {
		t.Errorf("40 endpoints: want size 4194304 (40 x 65535, rounded up):\n%s", got)
	}
	if inPlace && !strings.Contains(got, "192.0.2.1 . 1 . 2") {
		t.Errorf("resizing lost the affinity that a client had:\n%s", got)
	}
	listing := run("list", "table", "ip", kubeProxyTable)
	if n := regexp.MustCompile(`(?m)^\s*set affinity-clients`).FindAllString(listing, -1); len(n) != 1 {
		t.Errorf("want one shared set, found %d:\n%s", len(n), listing)
	}
}

// TestRealKernelAffinityResizeProbe: the probe finds what the kernel does with a set that is
// added again with another size, as nft lists it, and leaves no set behind.
func TestRealKernelAffinityResizeProbe(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	useKernel(fp, real)
	got, err := fp.probeAffinityResize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sets := run("list", "sets", "ip"); strings.Contains(sets, affinityProbeSet) {
		t.Errorf("the probe left its set:\n%s", sets)
	}
	run("add", "set", "ip", kubeProxyTable, "sized", "{ type ipv4_addr; size 1; }")
	run("add", "set", "ip", kubeProxyTable, "sized", "{ type ipv4_addr; size 2; }")
	want := resizeByReplacing
	if strings.Contains(run("list", "set", "ip", kubeProxyTable, "sized"), "size 2") {
		want = resizeInPlace
	}
	t.Logf("the kernel resizes sets in place: %v", want == resizeInPlace)
	if got != want {
		t.Errorf("the probe found %d, nft's listing says %d", got, want)
	}
}

// TestRealKernelAffinitySetReplaced replaces the shared set, as on a kernel that keeps a set's
// size (on any kernel: the behaviour is set, not probed), while small transactions re-write
// the Services one by one. The kernel refuses to delete a set that a rule names, so the syncs
// fail if the old set goes too early. After each full sync, the table is the one a fresh
// kube-proxy writes.
func TestRealKernelAffinitySetReplaced(t *testing.T) {
	_, run, fp := checkedProxier(t, 30)
	fp.affinityResize = resizeByReplacing
	refReal, refRun := realNFT(t, knftables.IPv4Family)
	small, smallSlices := affinityServices(3, 10)
	big, bigSlices := affinityServices(3, 30)
	type object struct {
		svc   *v1.Service
		slice *discovery.EndpointSlice
	}
	cluster := map[string]object{}
	for _, step := range []struct {
		name   string
		add    []object
		delete []string
		want   string
	}{
		{"two Services of 10", []object{{small[0], smallSlices[0]}, {small[1], smallSlices[1]}}, nil, "affinity-clients-2097152"},
		{"a third of 30", []object{{big[2], bigSlices[2]}}, nil, "affinity-clients-4194304"},
		{"one of 10 left", nil, []string{small[1].Name, big[2].Name}, "affinity-clients-1048576"},
	} {
		for _, o := range step.add {
			fp.OnServiceAdd(o.svc)
			fp.OnEndpointSliceAdd(o.slice)
			cluster[o.svc.Name] = o
		}
		for _, name := range step.delete {
			fp.OnEndpointSliceDelete(cluster[name].slice)
			fp.OnServiceDelete(cluster[name].svc)
			delete(cluster, name)
		}
		fp.mu.Lock()
		fp.servicesSynced, fp.endpointSlicesSynced = true, true
		fp.mu.Unlock()
		for i := 0; i < 2 && (i == 0 || fp.needFullSync); i++ {
			if err := fp.syncProxyRules(); err != nil {
				t.Fatalf("%s: sync %d: %v", step.name, i+1, err)
			}
		}
		listing := run("list", "table", "ip", kubeProxyTable)
		if got := regexp.MustCompile(`set (affinity-clients\S*) \{`).FindAllStringSubmatch(listing, -1); len(got) != 1 || got[0][1] != step.want {
			t.Errorf("%s: shared sets %v, want only %s:\n%s", step.name, got, step.want, listing)
		}

		deleteTable(t, refReal)
		_, ref := NewFakeProxier(v1.IPv4Protocol)
		useKernel(ref, refReal)
		frozenClock(ref)
		ref.affinityResize = resizeByReplacing
		for _, o := range cluster {
			makeServiceMap(ref, o.svc)
			populateEndpointSlices(ref, o.slice)
		}
		if err := ref.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
		settle(t, fp)
		if d := tableDiff(tableObjects(t, refRun, "ip"), tableObjects(t, run, "ip")); d != "" {
			t.Errorf("%s: the table differs from a fresh kube-proxy's:\n%s", step.name, d)
		}
	}
}
