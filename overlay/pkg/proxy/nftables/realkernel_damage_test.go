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
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// Damage done behind kube-proxy's back, on the real kernel: whatever is changed in
// kube-proxy's table, in any chain, set or map, or the table itself, the next periodic full
// sync puts back exactly what kube-proxy had written.

// setDamageTestCluster gives fp one Service of each kind whose rules live in different parts
// of the table: ClusterIP, NodePort with externalTrafficPolicy Local and an external IP,
// LoadBalancer with source ranges and session affinity, no endpoints, internalTrafficPolicy
// Local without local endpoints, and more endpoints than the set-free shapes take.
func setDamageTestCluster(fp *Proxier) {
	port := func(p, nodePort int32) []v1.ServicePort {
		return []v1.ServicePort{{Name: "p", Port: p, Protocol: v1.ProtocolTCP, NodePort: nodePort, TargetPort: intstr.FromInt32(8080)}}
	}
	makeServiceMap(fp,
		makeTestService("ns", "plain", func(svc *v1.Service) {
			svc.Spec.ClusterIP = "172.30.3.1"
			svc.Spec.Ports = port(80, 0)
		}),
		makeTestService("ns", "nodeport", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.ClusterIP = "172.30.3.2"
			svc.Spec.ExternalIPs = []string{"192.168.99.2"}
			svc.Spec.Ports = port(80, 30002)
		}),
		makeTestService("ns", "lb", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.30.3.3"
			svc.Spec.Ports = port(443, 30003)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "5.6.7.3"}}
			svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/25"}
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
		}),
		makeTestService("ns", "empty", func(svc *v1.Service) {
			svc.Spec.ClusterIP = "172.30.3.4"
			svc.Spec.Ports = port(80, 0)
		}),
		makeTestService("ns", "itp-local", func(svc *v1.Service) {
			svc.Spec.ClusterIP = "172.30.3.5"
			svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			svc.Spec.Ports = port(80, 0)
		}),
		makeTestService("ns", "many", func(svc *v1.Service) {
			svc.Spec.ClusterIP = "172.30.3.6"
			svc.Spec.Ports = port(80, 0)
		}),
	)
	slice := func(name string, endpoints ...discovery.Endpoint) *discovery.EndpointSlice {
		return makeTestEndpointSlice("ns", name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			eps.Endpoints = endpoints
			eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
		})
	}
	endpoint := func(ip, node string) discovery.Endpoint {
		return discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node)}
	}
	var many []discovery.Endpoint
	for i := range maxSetFreeEndpoints + 3 {
		many = append(many, endpoint(fmt.Sprintf("10.180.6.%d", i+1), "other-node"))
	}
	populateEndpointSlices(fp,
		slice("plain", endpoint("10.180.1.1", testNodeName), endpoint("10.180.1.2", "other-node")),
		slice("nodeport", endpoint("10.180.2.1", testNodeName), endpoint("10.180.2.2", "other-node")),
		slice("lb", endpoint("10.180.3.1", "other-node"), endpoint("10.180.3.2", "other-node")),
		slice("itp-local", endpoint("10.180.5.1", "other-node")),
		slice("many", many...),
	)
}

// tableObjects returns kube-proxy's table in family ("ip" or "ip6") as the kernel holds it,
// from `nft -j list ruleset`: one entry per chain, rule, set and map, keyed by its kind and
// name (a rule by its chain and position), with handles dropped and the elements of each set
// and map sorted, so that two listings of the same content are equal. A missing table gives
// no entries.
func tableObjects(t *testing.T, run func(args ...string) string, family string) map[string]string {
	t.Helper()
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(run("-j", "list", "ruleset")), &doc); err != nil {
		t.Fatalf("parsing nft's JSON listing: %v", err)
	}
	objects := map[string]string{}
	rules := map[string]int{}
	for _, entry := range doc.Nftables {
		for kind, obj := range entry {
			if kind == "metainfo" || obj["family"] != family {
				continue
			}
			table := obj["table"]
			if kind == "table" {
				table = obj["name"]
			}
			if table != kubeProxyTable {
				continue
			}
			delete(obj, "handle")
			if elems, ok := obj["elem"].([]any); ok {
				sort.Slice(elems, func(i, j int) bool { return mustJSON(t, elems[i]) < mustJSON(t, elems[j]) })
			}
			key := kind + " " + fmt.Sprint(obj["name"])
			if kind == "rule" {
				chain := fmt.Sprint(obj["chain"])
				key = fmt.Sprintf("rule %s #%d", chain, rules[chain])
				rules[chain]++
			}
			objects[key] = mustJSON(t, obj)
		}
	}
	return objects
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tableDiff describes how got differs from want, or returns "" if they are equal.
func tableDiff(want, got map[string]string) string {
	var lines []string
	for key, w := range want {
		if g, ok := got[key]; !ok {
			lines = append(lines, "missing "+key)
		} else if g != w {
			lines = append(lines, fmt.Sprintf("changed %s:\n  got  %s\n  want %s", key, g, w))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			lines = append(lines, "extra "+key)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// settle ages fp's stale chains past upstream's one-second delay and runs a sync, which
// deletes them, so that the table holds only what fp uses.
func settle(t *testing.T, fp *Proxier) {
	t.Helper()
	for chain := range fp.staleChains {
		fp.staleChains[chain] = time.Time{}
	}
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("settling sync: %v", err)
	}
}

// damageKit is what a damage case works with: nft in the test's namespace, and the table as
// kube-proxy wrote it.
type damageKit struct {
	t    *testing.T
	run  func(args ...string) string
	want map[string]string
}

// serviceChain returns the name of svc's service chain ("service-..."), or, with endpoint
// true, of its first endpoint chain.
func (k *damageKit) serviceChain(svc string, endpoint bool) string {
	k.t.Helper()
	prefix := "chain service-"
	if endpoint {
		prefix = "chain endpoint-"
	}
	var names []string
	for key := range k.want {
		if strings.HasPrefix(key, prefix) && strings.Contains(key, "-ns/"+svc+"/tcp/p") {
			names = append(names, strings.TrimPrefix(key, "chain "))
		}
	}
	if len(names) == 0 {
		k.t.Fatalf("no %s chain for %s", prefix, svc)
	}
	sort.Strings(names)
	return names[0]
}

// ruleHandles returns the handles of chain's rules, in order.
func (k *damageKit) ruleHandles(chain string) []string {
	k.t.Helper()
	var handles []string
	for _, m := range ruleHandleRegexp.FindAllStringSubmatch(k.run("-a", "list", "chain", "ip", kubeProxyTable, chain), -1)[1:] {
		handles = append(handles, m[1])
	}
	if len(handles) == 0 {
		k.t.Fatalf("chain %s has no rules", chain)
	}
	return handles
}

func TestRealKernelRepairsDamage(t *testing.T) {
	type damage struct {
		name string
		do   func(k *damageKit)
	}
	cases := []damage{
		{"flush a service chain", func(k *damageKit) {
			k.run("flush", "chain", "ip", kubeProxyTable, k.serviceChain("plain", false))
		}},
		{"delete a service chain's rule", func(k *damageKit) {
			chain := k.serviceChain("nodeport", false)
			k.run("delete", "rule", "ip", kubeProxyTable, chain, "handle", k.ruleHandles(chain)[0])
		}},
		{"delete an endpoint chain's rule", func(k *damageKit) {
			chain := k.serviceChain("lb", true)
			k.run("delete", "rule", "ip", kubeProxyTable, chain, "handle", k.ruleHandles(chain)[0])
		}},
		{"insert a rule into a service chain", func(k *damageKit) {
			k.run("insert", "rule", "ip", kubeProxyTable, k.serviceChain("lb", false), "ip", "saddr", "10.9.9.9", "drop")
		}},
		{"replace a rule, keeping its handle", func(k *damageKit) {
			chain := k.serviceChain("plain", false)
			handles := k.ruleHandles(chain)
			k.run("replace", "rule", "ip", kubeProxyTable, chain, "handle", handles[len(handles)-1], "meta", "l4proto", "tcp", "dnat", "to", "10.9.9.9:8080")
		}},
		{"replace a numgen map rule with another map", func(k *damageKit) {
			chain := k.serviceChain("many", false)
			k.run("replace", "rule", "ip", kubeProxyTable, chain, "handle", k.ruleHandles(chain)[0],
				"meta", "l4proto", "tcp", "dnat", "ip", "to", "numgen", "random", "mod", "2", "map", "{", "0", ":", "10.180.6.1", ".", "8080", ",", "1", ":", "10.9.9.9", ".", "8080", "}")
		}},
		{"delete a service-ips element", func(k *damageKit) {
			k.run("delete", "element", "ip", kubeProxyTable, serviceIPsMap, "{", "172.30.3.1", ".", "tcp", ".", "80", "}")
		}},
		{"point a service-ips element at another service", func(k *damageKit) {
			k.run("delete", "element", "ip", kubeProxyTable, serviceIPsMap, "{", "172.30.3.1", ".", "tcp", ".", "80", "}")
			k.run("add", "element", "ip", kubeProxyTable, serviceIPsMap, "{", "172.30.3.1", ".", "tcp", ".", "80", ":", "goto", k.serviceChain("many", false), "}")
		}},
		{"add a stray service-ips element", func(k *damageKit) {
			k.run("add", "element", "ip", kubeProxyTable, serviceIPsMap, "{", "172.30.3.99", ".", "tcp", ".", "80", ":", "goto", k.serviceChain("plain", false), "}")
		}},
		{"add a stray cluster-ips element", func(k *damageKit) {
			k.run("add", "element", "ip", kubeProxyTable, clusterIPsSet, "{", "172.30.9.9", "}")
		}},
		{"add a stray no-endpoint-nodeports element", func(k *damageKit) {
			k.run("add", "element", "ip", kubeProxyTable, noEndpointNodePortsMap, "{", "tcp", ".", "31999", ":", "drop", "}")
		}},
		{"add a stray service chain", func(k *damageKit) {
			k.run("add", "chain", "ip", kubeProxyTable, "service-ZZZZZZZZ-ns/gone/tcp/p")
			k.run("add", "rule", "ip", kubeProxyTable, "service-ZZZZZZZZ-ns/gone/tcp/p", "drop")
		}},
		{"delete a base chain", func(k *damageKit) {
			k.run("flush", "chain", "ip", kubeProxyTable, "nat-prerouting")
			k.run("delete", "chain", "ip", kubeProxyTable, "nat-prerouting")
		}},
		{"delete the table", func(k *damageKit) {
			k.run("delete", "table", "ip", kubeProxyTable)
		}},
	}
	// Every chain of the table, flushed; every set and map that has elements, flushed.
	_, probeRun, _ := damageTestProxier(t)
	probe := tableObjects(t, probeRun, "ip")
	for key, obj := range probe {
		kind, name, _ := strings.Cut(key, " ")
		switch {
		case kind == "chain" && probe["rule "+name+" #0"] != "":
			cases = append(cases, damage{"flush chain " + name, func(k *damageKit) {
				k.run("flush", "chain", "ip", kubeProxyTable, name)
			}})
		case kind == "set" || kind == "map":
			if !strings.Contains(obj, `"elem":`) {
				continue
			}
			cases = append(cases, damage{"flush " + kind + " " + name, func(k *damageKit) {
				k.run("flush", kind, "ip", kubeProxyTable, name)
			}})
		}
	}

	for _, c := range cases {
		for _, restart := range []bool{false, true} {
			name := c.name
			if restart {
				name += ", then a restart"
			}
			t.Run(name, func(t *testing.T) {
				k := &damageKit{t: t}
				var fp *Proxier
				var real knftables.Interface
				real, k.run, fp = damageTestProxier(t)
				k.want = tableObjects(t, k.run, "ip")
				c.do(k)
				if tableDiff(k.want, tableObjects(t, k.run, "ip")) == "" {
					t.Fatal("the damage changed nothing in the table")
				}
				if restart {
					// kube-proxy was down: a new one, with no memory of its writes,
					// repairs the table at start-up.
					fp = newDamageTestProxier(t, real)
				} else {
					// A partial sync in between must not fail on the damage, nor undo any
					// of it wrongly; the periodic full sync repairs it.
					if err := fp.syncProxyRules(); err != nil {
						t.Logf("the partial sync after the damage failed (the next sync is a full one): %v", err)
					}
					periodicFullSync(t, fp)
				}
				settle(t, fp)
				if diff := tableDiff(k.want, tableObjects(t, k.run, "ip")); diff != "" {
					t.Errorf("the repairing full sync left the table damaged:\n%s", diff)
				}
				// The full sync dumped the damaged table, and its own commits since kept
				// the link's count of sets, which weighs transactions, true.
				checkSetCount(t, fp)
			})
		}
	}
}

// damageTestProxier returns a proxier from newDamageTestProxier on the kernel of a new
// namespace (real), after a periodic full sync over what it wrote (so that it holds baselines
// of its own writes), and a function that runs nft in that namespace.
func damageTestProxier(t *testing.T) (knftables.Interface, func(args ...string) string, *Proxier) {
	t.Helper()
	real, run := realNFT(t, knftables.IPv4Family)
	fp := newDamageTestProxier(t, real)
	periodicFullSync(t, fp)
	settle(t, fp)
	return real, run, fp
}

// newDamageTestProxier returns a new proxier with a kernel link, in transactions of at most 20
// operations, that has run its start-up sync of the damage-test cluster through real (of its
// next state, with changed set: see changeDamageTestCluster).
func newDamageTestProxier(t *testing.T, real knftables.Interface, changed ...bool) *Proxier {
	t.Helper()
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	fp.nftables = real
	linkKernel(t, fp, real)
	fp.maxTransactionOps = 20
	setDamageTestCluster(fp)
	if len(changed) > 0 && changed[0] {
		changeDamageTestCluster(fp)
	}
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	return fp
}

func TestRealKernelSetCountFollowsOwnCommits(t *testing.T) {
	// Transactions are weighed by the table's sets (see txSplitter). After the dump at
	// start-up, kube-proxy's own commits keep that count: partial syncs and quiet full syncs
	// read no dump.
	_, _, fp := damageTestProxier(t)
	checkSetCount(t, fp)
	manySlice := func(first int) *discovery.EndpointSlice {
		return makeTestEndpointSlice("ns", "many", 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			for i := range maxSetFreeEndpoints + 3 {
				eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.180.6.%d", first+i)}, NodeName: ptr.To("other-node")})
			}
			eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
		})
	}
	sync := func(what string) {
		t.Helper()
		if err := fp.syncProxyRules(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkSetCount(t, fp)
	}
	// New endpoints: the service chain's numgen map is replaced by another.
	fp.OnEndpointSliceUpdate(manySlice(1), manySlice(101))
	sync("partial sync replacing a numgen map")
	// The Service goes: its chain is flushed, and deleted a second later.
	many := makeTestService("ns", "many", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "172.30.3.6"
		svc.Spec.Ports = []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
	})
	fp.OnServiceDelete(many)
	fp.OnEndpointSliceDelete(manySlice(101))
	sync("partial sync removing the Service")
	settle(t, fp)
	checkSetCount(t, fp)
	// It comes back, and a quiet periodic full sync reads no dump.
	fp.OnServiceAdd(many)
	fp.OnEndpointSliceAdd(manySlice(201))
	sync("partial sync adding the Service back")
	periodicFullSync(t, fp)
	checkSetCount(t, fp)
}

func TestRealKernelDualStackDamage(t *testing.T) {
	// A dual-stack kube-proxy's two proxiers share one link, in one namespace. Damage to the
	// ip6 table, followed by the IPv4 proxier's own commit (which is where the link sees that
	// someone else committed), is still repaired by the IPv6 proxier's next periodic full
	// sync; and the IPv4 table, which nobody damaged, is not re-written.
	real4, run := realNFT(t, knftables.IPv4Family)
	real6, err := knftables.New(knftables.IPv6Family, kubeProxyTable) // the same shim on PATH
	if err != nil {
		t.Fatal(err)
	}
	rec4 := &txText{Interface: real4}
	_, fp4 := NewFakeProxier(v1.IPv4Protocol)
	fp4.nftables = rec4
	link := linkKernel(t, fp4, real4)
	fp4.maxTransactionOps = 20
	rec6 := &txText{Interface: real6}
	_, fp6 := NewFakeProxier(v1.IPv6Protocol)
	fp6.nftables = rec6
	fp6.kernelLink = link
	fp6.maxTransactionOps = 20

	setDamageTestCluster(fp4)
	if err := fp4.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	setShapeTestService(t, fp6, v1.IPv6Protocol, 3, true)
	periodicFullSync(t, fp6)
	periodicFullSync(t, fp4)
	want6 := tableObjects(t, run, "ip6")
	if len(want6) == 0 {
		t.Fatal("the IPv6 proxier wrote no ip6 table")
	}

	// Damage: flush the ip6 service chain.
	var chain string
	for key := range want6 {
		if strings.HasPrefix(key, "chain service-") && strings.Contains(key, "-ns1/svc1/") {
			chain = strings.TrimPrefix(key, "chain ")
		}
	}
	if chain == "" {
		t.Fatal("no ip6 service chain for ns1/svc1")
	}
	run("flush", "chain", "ip6", kubeProxyTable, chain)

	// The IPv4 proxier commits a change of its own.
	old := makeTestEndpointSlice("ns", "plain", 1, func(eps *discovery.EndpointSlice) {
		eps.AddressType = discovery.AddressTypeIPv4
		eps.Endpoints = []discovery.Endpoint{{Addresses: []string{"10.180.1.1"}, NodeName: ptr.To(testNodeName)}, {Addresses: []string{"10.180.1.2"}, NodeName: ptr.To("other-node")}}
		eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
	})
	changed := old.DeepCopy()
	changed.Endpoints[1].Addresses = []string{"10.180.1.3"}
	fp4.OnEndpointSliceUpdate(old, changed)
	if err := fp4.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	want4 := tableObjects(t, run, "ip")

	n := len(rec6.texts)
	periodicFullSync(t, fp6)
	if diff := tableDiff(want6, tableObjects(t, run, "ip6")); diff != "" {
		t.Errorf("the IPv6 proxier's periodic full sync left its table damaged:\n%s", diff)
	}
	if written := rec6.writtenServiceChains(n); !written[chain] {
		t.Errorf("the repairing full sync re-wrote %v, want %s", written, chain)
	}
	n = len(rec4.texts)
	periodicFullSync(t, fp4)
	if diff := tableDiff(want4, tableObjects(t, run, "ip")); diff != "" {
		t.Errorf("the IPv4 proxier's periodic full sync changed its table:\n%s", diff)
	}
	if written := rec4.writtenServiceChains(n); len(written) != 0 {
		t.Errorf("the IPv4 proxier's periodic full sync re-wrote %v in its intact table", written)
	}
	checkSetCount(t, fp4)
	checkSetCount(t, fp6)
}

// failingNFT runs transactions through the real kernel, except the failAt-th one (counting
// from 1), which it refuses without running, as if kube-proxy had died before it.
type failingNFT struct {
	knftables.Interface
	runs, failAt int
}

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	f.runs++
	if f.runs == f.failAt {
		return fmt.Errorf("injected failure of transaction %d", f.runs)
	}
	return f.Interface.Run(ctx, tx)
}

// changeDamageTestCluster moves fp's damage-test cluster to its next state: new endpoints for
// three Services (one of them with affinity, one above the set-free limit), one Service
// removed and one added.
func changeDamageTestCluster(fp *Proxier) {
	slice := func(name string, ips ...string) *discovery.EndpointSlice {
		return makeTestEndpointSlice("ns", name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = discovery.AddressTypeIPv4
			for _, ip := range ips {
				eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To("other-node")})
			}
			eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
		})
	}
	var many []string
	for i := range maxSetFreeEndpoints + 3 {
		many = append(many, fmt.Sprintf("10.180.16.%d", i+1))
	}
	for _, eps := range []*discovery.EndpointSlice{
		slice("plain", "10.180.11.1", "10.180.11.2", "10.180.11.3"),
		slice("lb", "10.180.13.1"),
		slice("many", many...),
	} {
		// The old slice only needs the same name: the change tracker takes the new one.
		fp.OnEndpointSliceUpdate(eps, eps)
	}
	fp.OnServiceDelete(makeTestService("ns", "itp-local", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "172.30.3.5"
		svc.Spec.Ports = []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP}}
	}))
	fp.OnServiceAdd(makeTestService("ns", "fresh", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "172.30.3.7"
		svc.Spec.Ports = []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
	}))
	fp.OnEndpointSliceAdd(slice("fresh", "10.180.17.1", "10.180.17.2"))
}

func TestRealKernelInterruptedSyncRecovers(t *testing.T) {
	// The table a clean kube-proxy writes for the changed cluster.
	refReal, refRun := realNFT(t, knftables.IPv4Family)
	settle(t, newDamageTestProxier(t, refReal, true))
	want := tableObjects(t, refRun, "ip")

	// A sync of the change is cut off before each of its transactions in turn. The
	// transactions before stand; the same proxier's next sync, or a restarted kube-proxy's
	// first, must then write exactly the clean table.
	for failAt := 1; ; failAt++ {
		interrupted := false
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("transaction %d, restart=%v", failAt, restart), func(t *testing.T) {
				real, run := realNFT(t, knftables.IPv4Family)
				fp := newDamageTestProxier(t, real)
				failing := &failingNFT{Interface: real, failAt: failAt}
				fp.nftables = failing
				fp.maxTransactionOps = 5
				changeDamageTestCluster(fp)
				if err := fp.syncProxyRules(); err == nil {
					if failing.runs >= failAt {
						t.Fatalf("the sync succeeded although transaction %d failed", failAt)
					}
					return // the sync has fewer transactions: all cases ran
				}
				interrupted = true
				checkEveryServiceRouted(t, run, "172.30.3.1", "172.30.3.2", "172.30.3.3", "172.30.3.6")
				if restart {
					// A new kube-proxy starts on the changed cluster.
					fp = newDamageTestProxier(t, real, true)
				} else {
					fp.nftables = real
					if err := fp.syncProxyRules(); err != nil {
						t.Fatalf("the recovering sync failed: %v", err)
					}
				}
				settle(t, fp)
				if diff := tableDiff(want, tableObjects(t, run, "ip")); diff != "" {
					t.Errorf("after the interrupted sync and a recovering one, the table differs from a clean one:\n%s", diff)
				}
				checkSetCount(t, fp)
			})
		}
		if !interrupted {
			if failAt <= 3 {
				t.Fatalf("the change's sync ran %d transactions, want it split into several", failAt-1)
			}
			break
		}
	}
}

var gotoChainRegexp = regexp.MustCompile(`(\S+) \. tcp \. \d+ : goto (\S+?),?$`)

// checkEveryServiceRouted checks that the kernel's service-ips map sends each of ips somewhere,
// and that every chain it sends anything to has rules: every Service has working rules, old or
// new.
func checkEveryServiceRouted(t *testing.T, run func(args ...string) string, ips ...string) {
	t.Helper()
	routed := map[string]bool{}
	for _, line := range strings.Split(run("list", "map", "ip", kubeProxyTable, serviceIPsMap), "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "elements = {")), "}")
		m := gotoChainRegexp.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		routed[m[1]] = true
		if len(kernelChainRules(run, "ip", m[2])) == 0 {
			t.Errorf("%s goes to chain %s, which has no rules", m[1], m[2])
		}
	}
	for _, ip := range ips {
		if !routed[ip] {
			t.Errorf("no service-ips element sends %s anywhere", ip)
		}
	}
}
