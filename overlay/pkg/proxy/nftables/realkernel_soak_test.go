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
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// A model-based soak on the real kernel.
//
// A seeded random walk changes a small cluster (Services of every kind, policy and protocol,
// with and without affinity, with endpoints on this node and others, ready, terminating and
// not, across the set-free limit), and between its changes restarts kube-proxy, switches its
// rule shapes, refuses commits, fails map reads, damages the table behind its back and steps its
// clock. After every commit, an invariant checker reads the kernel's table:
//
//   - every element of service-ips, service-nodeports and firewall-ips leads to a chain that
//     exists and has rules (nothing dangles, and nothing leads to a flushed chain);
//   - each ClusterIP is routed on a set of ports that its Service had at some point since the
//     last successful sync (a Service is as it was or as it will be, never cut);
//   - no port of a Service that has had endpoints for its ClusterIP traffic throughout is in
//     no-endpoint-services (it is never rejected).
//
// After every successful sync that follows no damage, the table is compared with the one that a
// fresh kube-proxy writes for the same cluster (chains that the soaked proxier has flushed and
// not yet deleted aside). Each failed invariant is printed with the seed and the step, and the
// last line is "soak: N steps, N commits checked, N violations".
//
// make test runs a short walk; make soak runs a long one (KUBE_PROXY_OVERLAY_SOAK_STEPS,
// KUBE_PROXY_OVERLAY_SOAK_SEED).

// soakCluster is the soak's model: the Services and their endpoint slices, by name.
type soakCluster struct {
	family   v1.IPFamily
	services map[string]*v1.Service
	slices   map[string]*discovery.EndpointSlice
	next     int
}

func (c *soakCluster) ip(i int) string {
	if c.family == v1.IPv6Protocol {
		return netip.MustParseAddr(fmt.Sprintf("fd00:172:30::%x", i)).String() // as nft lists it
	}
	return fmt.Sprintf("172.30.%d.%d", 8+i/250, 1+i%250)
}

func (c *soakCluster) endpointIP(svc, i int) string {
	if c.family == v1.IPv6Protocol {
		return fmt.Sprintf("fd00:10:180::%x:%x", svc, i+1)
	}
	return fmt.Sprintf("10.190.%d.%d", svc, i+1)
}

// load gives fp the cluster's Services and endpoint slices, in name order, as a kube-proxy that
// starts sees them.
func (c *soakCluster) load(fp *Proxier) {
	var svcs []*v1.Service
	var eps []*discovery.EndpointSlice
	for _, name := range slices.Sorted(maps.Keys(c.services)) {
		svcs = append(svcs, c.services[name])
		eps = append(eps, c.slices[name])
	}
	makeServiceMap(fp, svcs...)
	populateEndpointSlices(fp, eps...)
}

// randomService returns a new random version of Service number i.
func (c *soakCluster) randomService(r *rand.Rand, i int) *v1.Service {
	return makeTestService("soak", fmt.Sprintf("svc%d", i), func(svc *v1.Service) {
		svc.Spec.ClusterIP = c.ip(i)
		proto := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP}[r.IntN(2)]
		svc.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: proto, TargetPort: intstr.FromInt32(8080)}}
		if r.IntN(2) == 0 {
			svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "b", Port: 81, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8081)})
		}
		switch r.IntN(4) {
		case 1, 2:
			svc.Spec.Type = v1.ServiceTypeNodePort
			for p := range svc.Spec.Ports {
				svc.Spec.Ports[p].NodePort = int32(30000 + i*2 + p)
			}
			if r.IntN(3) == 0 {
				svc.Spec.ExternalIPs = []string{c.ip(200 + i)}
			}
		case 3:
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			for p := range svc.Spec.Ports {
				svc.Spec.Ports[p].NodePort = int32(30000 + i*2 + p)
			}
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: c.ip(100 + i)}}
			if r.IntN(2) == 0 {
				if c.family == v1.IPv6Protocol {
					svc.Spec.LoadBalancerSourceRanges = []string{"fd00:203::/64"}
				} else {
					svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/25"}
				}
			}
		}
		if svc.Spec.Type != "" && r.IntN(2) == 0 {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = int32(32000 + i)
		}
		if r.IntN(4) == 0 {
			svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}
		if r.IntN(3) == 0 {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](int32(60 + r.IntN(3600)))}}
		}
	})
}

// randomSlice returns a new random endpoint slice for Service svc: 0 to 12 endpoints, some on
// this node, some not ready, some terminating.
func (c *soakCluster) randomSlice(r *rand.Rand, i int, svc *v1.Service) *discovery.EndpointSlice {
	return makeTestEndpointSlice("soak", svc.Name, 1, func(eps *discovery.EndpointSlice) {
		eps.AddressType = discovery.AddressTypeIPv4
		if c.family == v1.IPv6Protocol {
			eps.AddressType = discovery.AddressTypeIPv6
		}
		n := []int{0, 1, 2, 3, 8, 9, 12}[r.IntN(7)]
		for e := 0; e < n; e++ {
			node := "other-node"
			if r.IntN(3) == 0 {
				node = testNodeName
			}
			ep := discovery.Endpoint{Addresses: []string{c.endpointIP(i, e)}, NodeName: ptr.To(node)}
			switch r.IntN(8) {
			case 0:
				ep.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
			case 1:
				ep.Conditions = discovery.EndpointConditions{Ready: ptr.To(false)}
			}
			eps.Endpoints = append(eps.Endpoints, ep)
		}
		for _, p := range svc.Spec.Ports {
			eps.Ports = append(eps.Ports, discovery.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.TargetPort.IntVal), Protocol: ptr.To(p.Protocol)})
		}
	})
}

// routable reports whether ClusterIP traffic to svc has an endpoint to go to, as kube-proxy
// picks them: ready endpoints, or, when there are none, serving terminating ones; only this
// node's with internalTrafficPolicy Local.
func routable(svc *v1.Service, slice *discovery.EndpointSlice) bool {
	localOnly := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	ready, serving := false, false
	for _, ep := range slice.Endpoints {
		if localOnly && (ep.NodeName == nil || *ep.NodeName != testNodeName) {
			continue
		}
		c := ep.Conditions
		switch {
		case c.Ready == nil || *c.Ready:
			ready = true
		case c.Serving != nil && *c.Serving && c.Terminating != nil && *c.Terminating:
			serving = true
		}
	}
	return ready || serving
}

// portSet returns a Service's ports as the service-ips map keys them ("tcp/80"), sorted, or ""
// when its ClusterIP traffic has no endpoint (then no port is in service-ips).
func portSet(svc *v1.Service, slice *discovery.EndpointSlice) string {
	if svc == nil || slice == nil || !routable(svc, slice) {
		return ""
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, strings.ToLower(string(p.Protocol))+"/"+strconv.Itoa(int(p.Port)))
	}
	slices.Sort(ports)
	return strings.Join(ports, ",")
}

// soak is one run of the walk.
type soak struct {
	t          *testing.T
	seed       uint64
	step       int
	commits    int
	violations int
	cluster    *soakCluster
	run        func(args ...string) string
	family     string
	// allowed are, per ClusterIP, the port sets its Service has had since the last
	// successful sync; rejectable are the ClusterIPs whose Service has had no ready endpoint
	// at some point since then.
	allowed    map[string]map[string]bool
	rejectable map[string]bool
	// damaged is set from damage behind kube-proxy's back until the full sync that repairs
	// it: the checks after each commit do not hold meanwhile.
	damaged bool
}

func (s *soak) violation(format string, args ...any) {
	s.violations++
	s.t.Errorf("soak seed %d step %d: %s", s.seed, s.step, fmt.Sprintf(format, args...))
}

// note records the current model as one that the table may show until the next successful sync.
func (s *soak) note() {
	current := map[string]bool{}
	for _, svc := range s.cluster.services {
		current[svc.Spec.ClusterIP] = true
	}
	for ip := range s.allowed {
		if !current[ip] { // deleted: gone, or still as it was
			s.allowed[ip][""], s.rejectable[ip] = true, true
		}
	}
	for name, svc := range s.cluster.services {
		ip := svc.Spec.ClusterIP
		if s.allowed[ip] == nil { // new: absent until its commit
			s.allowed[ip] = map[string]bool{"": true}
		}
		set := portSet(svc, s.cluster.slices[name])
		s.allowed[ip][set] = true
		if set == "" {
			s.rejectable[ip] = true
		}
	}
}

// synced forgets the states before a successful sync: a Service deleted since must be gone.
func (s *soak) synced() {
	allowed := map[string]map[string]bool{}
	for ip := range s.allowed {
		allowed[ip] = map[string]bool{"": true}
	}
	for name, svc := range s.cluster.services {
		allowed[svc.Spec.ClusterIP] = map[string]bool{portSet(svc, s.cluster.slices[name]): true}
	}
	s.allowed, s.rejectable = allowed, map[string]bool{}
	s.note()
}

// check reads the kernel after a commit and checks the invariants.
func (s *soak) check() {
	s.commits++
	if s.damaged {
		return
	}
	tab := readKernelTable(s.t, s.run, s.family)
	for _, dead := range tab.deadEnds(serviceIPsMap, serviceNodePortsMap, firewallIPsMap) {
		s.violation("after commit %d, an element leads to a chain without rules: %s", s.commits, dead)
	}
	routed := tab.routedPorts()
	for ip, allowed := range s.allowed {
		if got := routed[ip]; !allowed[got] {
			s.violation("after commit %d, %s is routed on %q, which its Service never had (%v)", s.commits, ip, got, slices.Sorted(maps.Keys(allowed)))
		}
	}
	for key := range tab.elements[noEndpointServicesMap] {
		ip, _, _ := strings.Cut(key, " . ")
		if _, known := s.allowed[ip]; known && !s.rejectable[ip] {
			s.violation("after commit %d, %s is in no-endpoint-services although its Service had ready endpoints throughout", s.commits, key)
		}
	}
}

// soakWalks returns the walks to run, seed to steps: from the environment (make soak), or the
// two short, fixed walks of make test, one per IP family (an odd seed walks an IPv6 cluster).
func soakWalks(t *testing.T) map[uint64]int {
	if os.Getenv("KUBE_PROXY_OVERLAY_SOAK_STEPS") == "" && os.Getenv("KUBE_PROXY_OVERLAY_SOAK_SEED") == "" {
		return map[uint64]int{1: 50, 2: 50}
	}
	steps, seed := 50, uint64(1)
	if v := os.Getenv("KUBE_PROXY_OVERLAY_SOAK_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KUBE_PROXY_OVERLAY_SOAK_STEPS=%q: want a positive number", v)
		}
		steps = n
	}
	if v := os.Getenv("KUBE_PROXY_OVERLAY_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("KUBE_PROXY_OVERLAY_SOAK_SEED=%q: want a number", v)
		}
		seed = n
	}
	return map[uint64]int{seed: steps}
}

func TestRealKernelSoak(t *testing.T) {
	for seed, steps := range soakWalks(t) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { soakWalk(t, seed, steps) })
	}
}

// soakWalk runs one walk of steps steps from seed.
func soakWalk(t *testing.T, seed uint64, steps int) {
	family := v1.IPv4Protocol
	nftFamily, listFamily := knftables.IPv4Family, "ip"
	if seed%2 == 1 {
		family, nftFamily, listFamily = v1.IPv6Protocol, knftables.IPv6Family, "ip6"
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	real, run := realNFT(t, nftFamily)
	refReal, refRun := realNFT(t, nftFamily)
	cluster := &soakCluster{family: family, services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}}
	s := &soak{t: t, seed: seed, cluster: cluster, run: run, family: listFamily}
	s.synced()
	checked := &checkedNFT{Interface: real, after: s.check}
	upstreamShapes := false
	newProxier := func() *Proxier {
		_, fp := NewFakeProxier(family)
		fp.nftables = checked
		frozenClock(fp)
		linkKernel(t, fp, real)
		fp.maxTransactionOps = 10 + r.IntN(40)
		fp.upstreamRuleShapes = upstreamShapes
		cluster.load(fp)
		return fp
	}
	fp := newProxier()
	for s.step = 1; s.step <= steps; s.step++ {
		checked.refuse, checked.failListing = nil, ""
		action := r.IntN(20)
		switch {
		case action < 5 || len(cluster.services) < 3: // add a Service
			if len(cluster.services) >= 14 {
				break
			}
			i := cluster.next
			cluster.next++
			svc := cluster.randomService(r, i)
			slice := cluster.randomSlice(r, i, svc)
			cluster.services[svc.Name], cluster.slices[svc.Name] = svc, slice
			fp.OnServiceAdd(svc)
			fp.OnEndpointSliceAdd(slice)
		case action < 7: // delete a Service
			name := soakPick(r, cluster.services)
			fp.OnEndpointSliceDelete(cluster.slices[name])
			fp.OnServiceDelete(cluster.services[name])
			delete(cluster.services, name)
			delete(cluster.slices, name)
		case action < 10: // change a Service
			name := soakPick(r, cluster.services)
			i, _ := strconv.Atoi(strings.TrimPrefix(name, "svc"))
			svc := cluster.randomService(r, i)
			slice := cluster.randomSlice(r, i, svc)
			fp.OnServiceUpdate(cluster.services[name], svc)
			fp.OnEndpointSliceUpdate(cluster.slices[name], slice)
			cluster.services[name], cluster.slices[name] = svc, slice
		case action < 13: // change endpoints
			name := soakPick(r, cluster.services)
			i, _ := strconv.Atoi(strings.TrimPrefix(name, "svc"))
			slice := cluster.randomSlice(r, i, cluster.services[name])
			fp.OnEndpointSliceUpdate(cluster.slices[name], slice)
			cluster.slices[name] = slice
		case action == 13: // restart kube-proxy
			fp = newProxier()
		case action == 14: // switch rule shapes (a restart with the other setting)
			upstreamShapes = !upstreamShapes
			fp = newProxier()
		case action == 15: // refuse one of the next sync's commits
			k := 1 + r.IntN(4)
			first := checked.runs
			checked.refuse = func(n int, _ *knftables.Transaction) error {
				if n == first+k {
					return fmt.Errorf("soak: refused commit %d", k)
				}
				return nil
			}
			fp.needFullSync = r.IntN(2) == 0
		case action == 16: // fail a map read in a full sync
			checked.failListing = []string{serviceIPsMap, clusterIPsSet, noEndpointServicesMap, serviceNodePortsMap}[r.IntN(4)]
			fp.needFullSync = true
		case action == 17: // damage behind kube-proxy's back; the next full sync repairs it
			soakDamage(t, r, run, listFamily)
			s.damaged = true
		default: // time passes: stale chains age, a periodic full sync may come
			fp.clock.(interface{ Step(time.Duration) }).Step(time.Duration(1+r.IntN(3)) * time.Second)
			if r.IntN(3) == 0 {
				fp.lastFullSync = fp.now().Add(-2 * time.Hour)
			}
		}
		s.note()
		if s.damaged {
			fp.lastFullSync = fp.now().Add(-2 * time.Hour) // the periodic full sync repairs
		}
		wasFull := fp.needFullSync || fp.now().Sub(fp.lastFullSync) > time.Hour
		if err := fp.syncProxyRules(); err != nil {
			if checked.refuse == nil && checked.failListing == "" {
				s.violation("the sync failed with no failure injected: %v", err)
			}
			continue
		}
		s.synced()
		if wasFull {
			s.damaged = false
		}
		if !s.damaged {
			s.compareWithFresh(fp, refReal, refRun, upstreamShapes)
		}
	}
	s.step--
	fmt.Printf("soak: %d steps, %d commits checked, %d violations\n", steps, s.commits, s.violations)
}

// soakPick returns a random key of m.
func soakPick[V any](r *rand.Rand, m map[string]V) string {
	keys := slices.Sorted(maps.Keys(m))
	return keys[r.IntN(len(keys))]
}

// soakDamage damages the table behind kube-proxy's back: a service-port chain flushed, or a
// service-ips element deleted.
func soakDamage(t *testing.T, r *rand.Rand, run func(args ...string) string, family string) {
	tab := readKernelTable(t, run, family)
	var chains, elems []string
	for chain := range tab.rules {
		if strings.Contains(chain, "/") {
			chains = append(chains, chain)
		}
	}
	for key := range tab.elements[serviceIPsMap] {
		elems = append(elems, key)
	}
	slices.Sort(chains)
	slices.Sort(elems)
	if len(chains) > 0 && (len(elems) == 0 || r.IntN(2) == 0) {
		run("flush", "chain", family, kubeProxyTable, chains[r.IntN(len(chains))])
	} else if len(elems) > 0 {
		run("delete", "element", family, kubeProxyTable, serviceIPsMap, "{ "+elems[r.IntN(len(elems))]+" }")
	}
}

// compareWithFresh compares the soaked table with what a fresh kube-proxy writes for the same
// cluster, in the reference namespace: equal, but for chains that fp has flushed and not yet
// deleted.
func (s *soak) compareWithFresh(fp *Proxier, refReal knftables.Interface, refRun func(args ...string) string, upstreamShapes bool) {
	s.t.Helper()
	_ = refReal.Run(context.Background(), func() *knftables.Transaction {
		tx := refReal.NewTransaction()
		tx.Add(&knftables.Table{})
		tx.Delete(&knftables.Table{})
		return tx
	}())
	_, ref := NewFakeProxier(s.cluster.family)
	ref.nftables = refReal
	frozenClock(ref)
	ref.upstreamRuleShapes = upstreamShapes
	s.cluster.load(ref)
	if err := ref.syncProxyRules(); err != nil {
		s.t.Fatalf("soak seed %d step %d: the fresh kube-proxy's sync failed: %v", s.seed, s.step, err)
	}
	want, got := tableObjects(s.t, refRun, s.family), tableObjects(s.t, s.run, s.family)
	for key := range got {
		// A flushed chain waits to be deleted (fp may have forgotten it after a failed sync,
		// until its next full sync finds it).
		if chain, ok := strings.CutPrefix(key, "chain "); ok && want[key] == "" && got["rule "+chain+" #0"] == "" {
			delete(got, key)
		}
	}
	if d := tableDiff(want, got); d != "" {
		s.violation("the table differs from a fresh kube-proxy's:\n%s", d)
	}
}
