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
	"encoding/json"
	"fmt"
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

// A cluster with one Service of each kind, written by linked proxiers to the real kernel, and
// kube-proxy's whole table as the kernel holds it, for the damage, interruption and set-count
// tests.

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
	populateEndpointSlices(fp,
		damageTestSlice("plain", damageTestEndpoint("10.180.1.1", testNodeName), damageTestEndpoint("10.180.1.2", "other-node")),
		damageTestSlice("nodeport", damageTestEndpoint("10.180.2.1", testNodeName), damageTestEndpoint("10.180.2.2", "other-node")),
		damageTestSlice("lb", remoteEndpoints("10.180.3.1", "10.180.3.2")...),
		damageTestSlice("itp-local", remoteEndpoints("10.180.5.1")...),
		damageTestSlice("many", manyEndpoints("10.180.6.%d", 1)...),
	)
}

// damageTestSlice returns the endpoint slice of the damage-test cluster's Service name, with
// endpoints, for its TCP port "p" on 8080.
func damageTestSlice(name string, endpoints ...discovery.Endpoint) *discovery.EndpointSlice {
	return makeTestEndpointSlice("ns", name, 1, func(eps *discovery.EndpointSlice) {
		eps.AddressType = discovery.AddressTypeIPv4
		eps.Endpoints = endpoints
		eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
	})
}

// damageTestEndpoint returns an endpoint at ip on node.
func damageTestEndpoint(ip, node string) discovery.Endpoint {
	return discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node)}
}

// remoteEndpoints returns endpoints at ips on another node.
func remoteEndpoints(ips ...string) []discovery.Endpoint {
	var endpoints []discovery.Endpoint
	for _, ip := range ips {
		endpoints = append(endpoints, damageTestEndpoint(ip, "other-node"))
	}
	return endpoints
}

// manyEndpoints returns more endpoints than the set-free shapes take, on another node, at the
// addresses that format gives for first, first+1 and so on.
func manyEndpoints(format string, first int) []discovery.Endpoint {
	var ips []string
	for i := range maxSetFreeEndpoints + 3 {
		ips = append(ips, fmt.Sprintf(format, first+i))
	}
	return remoteEndpoints(ips...)
}

// changeDamageTestCluster moves fp's damage-test cluster to its next state: new endpoints for
// three Services (one of them with affinity, one above the set-free limit), one Service
// removed and one added.
func changeDamageTestCluster(fp *Proxier) {
	for _, eps := range []*discovery.EndpointSlice{
		damageTestSlice("plain", remoteEndpoints("10.180.11.1", "10.180.11.2", "10.180.11.3")...),
		damageTestSlice("lb", remoteEndpoints("10.180.13.1")...),
		damageTestSlice("many", manyEndpoints("10.180.16.%d", 1)...),
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
	fp.OnEndpointSliceAdd(damageTestSlice("fresh", remoteEndpoints("10.180.17.1", "10.180.17.2")...))
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
	useKernel(fp, real)
	frozenClock(fp)
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
