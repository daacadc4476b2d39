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
	"errors"
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
// not, across the set-free limit), deletes many Services at once (a namespace), and between its
// changes restarts kube-proxy, switches its rule shapes, refuses commits, fails map reads, the
// drift check's listing and the affinity prune's, damages the table behind its back (flushed
// chains, added rules, deleted, foreign or re-pointed elements, the table deleted), steps its
// clock, and rolls the node back to upstream's own proxier (an unpatched build of this package,
// realkernel_soak_upstream_test.go) and upgrades it again. After every commit, an invariant
// checker reads the kernel's table:
//
//   - every element of service-ips, service-nodeports and firewall-ips leads to a chain that
//     exists and has rules (nothing dangles, and nothing leads to a flushed chain);
//   - each Service's part of the table (its elements in the dispatch maps, and every chain,
//     rule and map they lead to: realkernel_soak_states_test.go) is one that the Service has had:
//     as the table showed it after the last successful sync, or as a fresh kube-proxy writes it
//     for one of the cluster states since (a Service is as it was or as it will be, never cut,
//     whatever its kind: ClusterIP, NodePort, LoadBalancer, external IPs, firewall);
//   - each ClusterIP is routed on a set of ports that its Service had at some point since the
//     last successful sync, a check against the model itself rather than against kube-proxy;
//   - no port of a Service that has had endpoints for its ClusterIP traffic throughout is in
//     no-endpoint-services (it is never rejected).
//
// After every successful sync that follows no damage, the table is compared with the one that a
// fresh kube-proxy writes for the same cluster (chains that the soaked proxier has flushed and
// not yet deleted aside); after a rollback, with the one upstream's proxier writes from nothing,
// exactly. Each failed invariant is printed with the seed and the step, and the last line is
// "soak: N steps, N commits checked, N violations".
//
// make test runs a short walk; make soak runs a long one (KUBE_PROXY_OVERLAY_SOAK_STEPS,
// KUBE_PROXY_OVERLAY_SOAK_SEED). To replay a violation, KUBE_PROXY_OVERLAY_SOAK_TRACE=STEP
// (make soak TRACE=STEP) also prints that step's action and each transaction it commits.

// soakCluster is the soak's model: the Services and their endpoint slices, by name.
type soakCluster struct {
	family   v1.IPFamily
	services map[string]*v1.Service
	slices   map[string]*discovery.EndpointSlice
	next     int
	// owners names the Service that each destination (an address, or a node port as
	// "tcp . 30004") has belonged to. Service i's destinations are its own for ever.
	owners map[string]string
}

// Service i's addresses: its ClusterIP, external IP and load balancer IP come from three
// ranges (the first inside the fake proxier's service CIDR), so that no two Services ever share
// one, however long the walk.
func (c *soakCluster) ip(i int) string         { return c.addr("172.30", "fd00:172:30", 8+i/250, i) }
func (c *soakCluster) externalIP(i int) string { return c.addr("198.19", "fd00:198:19", i/250, i) }
func (c *soakCluster) lbIP(i int) string       { return c.addr("198.18", "fd00:198:18", i/250, i) }

func (c *soakCluster) addr(v4, v6 string, third, i int) string {
	if c.family == v1.IPv6Protocol {
		return netip.MustParseAddr(fmt.Sprintf("%s::%x", v6, i)).String() // as nft lists it
	}
	return fmt.Sprintf("%s.%d.%d", v4, third, 1+i%250)
}

// endpointIP is endpoint i of Service svc (i < 12).
func (c *soakCluster) endpointIP(svc, i int) string {
	if c.family == v1.IPv6Protocol {
		return fmt.Sprintf("fd00:10:180::%x:%x", svc, i+1)
	}
	return fmt.Sprintf("10.%d.%d.%d", 180+i, svc/250, 1+svc%250)
}

// owner names the Service that an element of dispatch map set belongs to, from the chain or
// comment in its text, or from its destination (its plain key, or the key's address).
func (c *soakCluster) owner(set, plain, text string) string {
	if m := soakOwnerPattern.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	if name := c.owners[plain]; name != "" {
		return name
	}
	addr, _, _ := strings.Cut(plain, " . ")
	return c.owners[addr]
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
	svc := makeTestService("soak", fmt.Sprintf("svc%d", i), func(svc *v1.Service) {
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
				svc.Spec.ExternalIPs = []string{c.externalIP(i)}
			}
		case 3:
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			for p := range svc.Spec.Ports {
				svc.Spec.Ports[p].NodePort = int32(30000 + i*2 + p)
			}
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: c.lbIP(i)}}
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
	for _, addr := range []string{c.ip(i), c.externalIP(i), c.lbIP(i)} {
		c.owners[addr] = svc.Name
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			c.owners[strings.ToLower(string(p.Protocol))+" . "+strconv.Itoa(int(p.NodePort))] = svc.Name
		}
	}
	return svc
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
	handovers  int
	cluster    *soakCluster
	run        func(args ...string) string
	family     string
	// allowed are, per ClusterIP, the port sets its Service has had since the last
	// successful sync; rejectable are the ClusterIPs whose Service has had no ready endpoint
	// at some point since then.
	allowed    map[string]map[string]bool
	rejectable map[string]bool
	// states are, per Service, the parts of the table that route it (serviceStates) that it
	// has had since the last successful sync: the one the table showed then, and those that a
	// fresh kube-proxy writes for each cluster state since. before is the first of them.
	states map[string]map[string]bool
	before map[string]string
	// want is the table that a fresh kube-proxy writes for the current cluster (tableObjects).
	want map[string]string
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

// synced forgets the states before a successful sync: a Service deleted since must be gone,
// and each Service's part of the table is now the one the table shows.
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
	s.before = s.serviceStates(s.run)
	s.states = map[string]map[string]bool{}
	for name := range s.cluster.services {
		s.states[name] = map[string]bool{s.before[name]: true}
	}
	for name, state := range s.before {
		s.states[name] = map[string]bool{state: true}
	}
}

// serviceStates lists the table that run reads and returns each Service's part of it.
func (s *soak) serviceStates(run func(args ...string) string) map[string]string {
	return parseTableGraph(s.t, run("-j", "list", "table", s.family, kubeProxyTable)).serviceStates(s.cluster.owner)
}

// check reads the kernel after a commit and checks the invariants.
func (s *soak) check() {
	s.commits++
	if s.damaged {
		return
	}
	listing := s.run("-j", "list", "table", s.family, kubeProxyTable)
	s.checkRouting(readKernelTable(s.t, func(...string) string { return listing }, s.family))
	states := parseTableGraph(s.t, listing).serviceStates(s.cluster.owner)
	for name, allowed := range s.states {
		if got := states[name]; !allowed[got] {
			s.violation("after commit %d, %s is routed by a part of the table that it never had; against the table before the sync:\n%s", s.commits, name, stateDiff(s.before[name], got, 12))
		}
	}
	for name, got := range states {
		if s.states[name] == nil {
			s.violation("after commit %d, the table routes traffic for %s, which no cluster state since the last sync has:\n%s", s.commits, name, stateDiff("", got, 12))
		}
	}
}

// checkRouting checks the table against the model: nothing leads to a chain without rules,
// each ClusterIP is routed on ports its Service has had, and no Service with endpoints
// throughout is rejected.
func (s *soak) checkRouting(tab kernelTable) {
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
	// timing draws whether a periodic full sync comes due with a step's changes. It is a
	// stream of its own so that a seed walks the same steps as before it was added.
	timing := rand.New(rand.NewPCG(seed^0x5bd1e995, seed))
	real, run, netns := realNFTNetns(t, nftFamily)
	soakedPath := os.Getenv("PATH")
	refReal, refRun, refNetns := realNFTNetns(t, nftFamily)
	refPath := os.Getenv("PATH")
	// Each namespace's nft is a shim on PATH, and a proxier's text listing (listKernelText)
	// runs the nft it finds there at that moment: each proxier syncs with its own first.
	soaked := func() { os.Setenv("PATH", soakedPath) }
	reference := func() { os.Setenv("PATH", refPath) }
	upstream := newUpstreamKubeProxy(t)
	cluster := &soakCluster{family: family, services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}, owners: map[string]string{}}
	s := &soak{t: t, seed: seed, cluster: cluster, run: run, family: listFamily,
		allowed: map[string]map[string]bool{}, rejectable: map[string]bool{}, states: map[string]map[string]bool{}}
	checked := &checkedNFT{Interface: real, after: s.check}
	traceStep, _ := strconv.Atoi(os.Getenv("KUBE_PROXY_OVERLAY_SOAK_TRACE"))
	upstreamShapes := false
	newProxier := func() *Proxier {
		_, fp := NewFakeProxier(family)
		useKernel(fp, checked)
		frozenClock(fp)
		linkKernel(t, fp, real)
		fp.maxTransactionOps = 10 + r.IntN(40)
		fp.upstreamRuleShapes = upstreamShapes
		soakAffinityResizing(fp)
		cluster.load(fp)
		return fp
	}
	fp := newProxier()
	for s.step = 1; s.step <= steps; s.step++ {
		checked.refuse, checked.failListing, checked.trace = nil, "", nil
		action := r.IntN(24)
		if s.step == traceStep {
			fmt.Printf("soak trace: step %d: action %d, failed syncs in a row %d\n", s.step, action, fp.recovery.failures)
			checked.trace = func(n int, tx *knftables.Transaction) {
				fmt.Printf("soak trace: commit %d (%d operations):\n%s", n, tx.NumOperations(), tx)
			}
		}
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
		case action == 21 && len(cluster.services) > 3: // delete a namespace's worth of Services
			for n := 2 + r.IntN(len(cluster.services)-2); n > 0; n-- {
				name := soakPick(r, cluster.services)
				fp.OnEndpointSliceDelete(cluster.slices[name])
				fp.OnServiceDelete(cluster.services[name])
				delete(cluster.services, name)
				delete(cluster.slices, name)
			}
		case action == 22: // fail another read of a full sync
			switch r.IntN(3) {
			case 0: // the drift check's listing: the sync re-writes every chain
				fp.driftReader = failingReader{fp.driftReader}
			case 1: // the affinity prune's listing: the elements time out instead
				checked.failListing = clientAffinitySet
			default: // the drift check's listing and a commit
				fp.driftReader = failingReader{fp.driftReader}
				first := checked.runs
				checked.refuse = func(n int, _ *knftables.Transaction) error {
					if n == first+2 {
						return errors.New("soak: refused commit 2")
					}
					return nil
				}
			}
			fp.needFullSync = true
		case action == 23: // damage of another kind
			soakDamageMore(t, r, run, listFamily)
			s.damaged = true
		case action == 18 && upstream != nil: // roll back to upstream's kube-proxy, and upgrade again
			s.handover(upstream, netns, refReal, refNetns, refRun)
			fp = newProxier()
		default: // time passes: stale chains age, a periodic full sync may come
			fp.clock.(interface{ Step(time.Duration) }).Step(time.Duration(1+r.IntN(3)) * time.Second)
			if r.IntN(3) == 0 {
				fp.lastFullSync = fp.now().Add(-2 * time.Hour)
			}
		}
		if action < 13 || action == 21 {
			// A change of Services or endpoints: a quarter of the time the periodic full
			// sync is due too, and writes the change while it re-checks the whole table.
			if timing.IntN(4) == 0 {
				fp.lastFullSync = fp.now().Add(-2 * time.Hour)
			}
		}
		s.note()
		if s.damaged {
			fp.lastFullSync = fp.now().Add(-2 * time.Hour) // the periodic full sync repairs
		}
		reference()
		s.expect(refReal, refRun, upstreamShapes)
		soaked()
		wasFull := fp.needFullSync || fp.now().Sub(fp.lastFullSync) > time.Hour
		err := fp.syncProxyRules()
		if f, ok := fp.driftReader.(failingReader); ok {
			fp.driftReader = f.tableReader
		}
		if err != nil {
			if checked.refuse == nil && (checked.failListing == "" || checked.failListing == clientAffinitySet) {
				s.violation("the sync failed with no failure injected: %v (the kernel's last refusal: %v)", err, checked.lastErr)
			}
			continue
		}
		if wasFull {
			s.damaged = false
		}
		// A sync that leaves a full sync due (a partial one that could not replace the shared
		// affinity set: affinity_resize.go) knows its table is not yet a fresh kube-proxy's.
		if !s.damaged && !fp.needFullSync {
			s.compareWithFresh()
		}
		s.synced()
	}
	s.step--
	if upstream == nil {
		fmt.Printf("upstream handovers: none (%s is not set)\n", upstreamKubeProxyEnv)
	} else {
		fmt.Printf("upstream handovers: %d\n", s.handovers)
	}
	fmt.Printf("soak: %d steps, %d commits checked, %d violations\n", steps, s.commits, s.violations)
}

// expect runs a fresh kube-proxy for the current cluster in the reference namespace: its
// table is the one the next successful sync must leave (want), and each Service's part of it
// is one that the Service may show from now on.
func (s *soak) expect(refReal knftables.Interface, refRun func(args ...string) string, upstreamShapes bool) {
	s.t.Helper()
	deleteTable(s.t, refReal)
	_, ref := NewFakeProxier(s.cluster.family)
	useKernel(ref, refReal)
	frozenClock(ref)
	ref.upstreamRuleShapes = upstreamShapes
	soakAffinityResizing(ref)
	s.cluster.load(ref)
	if err := ref.syncProxyRules(); err != nil {
		s.t.Fatalf("soak seed %d step %d: the fresh kube-proxy's sync failed: %v", s.seed, s.step, err)
	}
	s.want = tableObjects(s.t, refRun, s.family)
	s.allowStates(s.serviceStates(refRun))
}

// allowStates adds each Service's part of a table that kube-proxy may write to the ones the
// Service may show (a Service not in states may show none).
func (s *soak) allowStates(states map[string]string) {
	for name := range s.states {
		s.states[name][states[name]] = true
	}
	for name, state := range states {
		if s.states[name] == nil {
			s.states[name] = map[string]bool{"": true}
		}
		s.states[name][state] = true
	}
}

// soakAffinityResizing makes fp replace the shared affinity set for each new size, as on a
// kernel that keeps set sizes (6.1), when KUBE_PROXY_OVERLAY_SOAK_AFFINITY=replace: the soak
// then walks that behaviour on any kernel. Otherwise fp probes its kernel.
func soakAffinityResizing(fp *Proxier) {
	if os.Getenv("KUBE_PROXY_OVERLAY_SOAK_AFFINITY") == "replace" {
		fp.affinityResize = resizeByReplacing
	}
}

// deleteTable deletes kube-proxy's table, if there is one, through nft.
func deleteTable(t *testing.T, nft knftables.Interface) {
	t.Helper()
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatalf("deleting the table: %v", err)
	}
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

// failingReader is a drift check's reader whose listing fails; it wraps the one to restore.
type failingReader struct{ tableReader }

func (failingReader) readTable(context.Context) (*kernelListing, error) {
	return nil, errors.New("soak: injected failure of the drift check's listing")
}

// soakDamageMore damages the table in one of the ways soakDamage does not: a rule added to a
// service-port chain, an element sent to another Service's chain, a ClusterIP or node port
// element deleted, an element for a destination no Service has, or the whole table deleted.
func soakDamageMore(t *testing.T, r *rand.Rand, run func(args ...string) string, family string) {
	tab := readKernelTable(t, run, family)
	var chains, elems []string
	for chain, n := range tab.rules {
		if strings.HasPrefix(chain, "service-") && n > 0 {
			chains = append(chains, chain)
		}
	}
	for key := range tab.elements[serviceIPsMap] {
		elems = append(elems, key)
	}
	slices.Sort(chains)
	slices.Sort(elems)
	bogus := "203.0.113.200 . tcp . 9"
	if family == "ip6" {
		bogus = "fd00:203::c8 . tcp . 9"
	}
	switch kind := r.IntN(6); {
	case kind == 0 && len(chains) > 0:
		run("add", "rule", family, kubeProxyTable, chains[r.IntN(len(chains))], "counter")
	case kind == 1 && len(chains) > 1 && len(elems) > 0:
		key := elems[r.IntN(len(elems))]
		run("delete", "element", family, kubeProxyTable, serviceIPsMap, "{ "+key+" }")
		run("add", "element", family, kubeProxyTable, serviceIPsMap, "{ "+key+" : goto "+chains[r.IntN(len(chains))]+" }")
	case kind == 2 && len(tab.elements[clusterIPsSet]) > 0:
		ips := slices.Sorted(maps.Keys(tab.elements[clusterIPsSet]))
		run("delete", "element", family, kubeProxyTable, clusterIPsSet, "{ "+ips[r.IntN(len(ips))]+" }")
	case kind == 3 && len(tab.elements[serviceNodePortsMap]) > 0:
		ports := slices.Sorted(maps.Keys(tab.elements[serviceNodePortsMap]))
		run("delete", "element", family, kubeProxyTable, serviceNodePortsMap, "{ "+ports[r.IntN(len(ports))]+" }")
	case kind == 4 && len(chains) > 0:
		run("add", "element", family, kubeProxyTable, serviceIPsMap, "{ "+bogus+" : goto "+chains[r.IntN(len(chains))]+" }")
	case kind == 5:
		run("delete", "table", family, kubeProxyTable)
	default:
		soakDamage(t, r, run, family)
	}
}

// compareWithFresh compares the soaked table with the one a fresh kube-proxy wrote for the same
// cluster (expect): equal, but for chains that the soaked kube-proxy has flushed and not yet
// deleted.
func (s *soak) compareWithFresh() {
	s.t.Helper()
	got := tableObjects(s.t, s.run, s.family)
	for key := range got {
		// A flushed chain waits to be deleted (fp may have forgotten it after a failed sync,
		// until its next full sync finds it).
		if chain, ok := strings.CutPrefix(key, "chain "); ok && s.want[key] == "" && got["rule "+chain+" #0"] == "" {
			delete(got, key)
		}
	}
	if d := tableDiff(s.want, got); d != "" {
		s.violation("the table differs from a fresh kube-proxy's:\n%s", d)
	}
}
