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
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

// Damage done behind kube-proxy's back, on the real kernel: whatever is changed in
// kube-proxy's table, in any chain, set or map, or the table itself, the next periodic full
// sync puts back exactly what kube-proxy had written.

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
	useKernel(fp4, rec4)
	frozenClock(fp4)
	link := linkKernel(t, fp4, real4)
	fp4.maxTransactionOps = 20
	rec6 := &txText{Interface: real6}
	_, fp6 := NewFakeProxier(v1.IPv6Protocol)
	frozenClock(fp6)
	fp6.kernelLink = link
	useKernel(fp6, rec6)
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
	old := damageTestSlice("plain", damageTestEndpoint("10.180.1.1", testNodeName), damageTestEndpoint("10.180.1.2", "other-node"))
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
