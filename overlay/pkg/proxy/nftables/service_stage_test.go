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
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-base/metrics/testutil"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// randomCluster is a random set of Services and EndpointSlices that covers what the
// per-service-port stage distinguishes: ClusterIP, NodePort and LoadBalancer Services (with and
// without source ranges), external IPs, session affinity, Local and Cluster traffic policies,
// several ports and protocols, ready, serving-terminating and non-serving endpoints on this node
// and others, endpoints shared between Services, and Services without endpoints.
type randomCluster struct {
	r        *rand.Rand
	family   v1.IPFamily
	next     int // the next Service number; numbers are never reused
	services map[types.NamespacedName]*v1.Service
	slices   map[types.NamespacedName][]*discovery.EndpointSlice
}

func newRandomCluster(seed int64, family v1.IPFamily) *randomCluster {
	return &randomCluster{
		r: rand.New(rand.NewSource(seed)), family: family,
		services: map[types.NamespacedName]*v1.Service{},
		slices:   map[types.NamespacedName][]*discovery.EndpointSlice{},
	}
}

// ip returns address number n of a /16 block: block 0 for ClusterIPs, 1 for external and
// load-balancer IPs, 2 for pods.
func (c *randomCluster) ip(block, n int) string {
	if c.family == v1.IPv6Protocol {
		return fmt.Sprintf("fd00:10:%d::%x", 96+block, n+1)
	}
	return fmt.Sprintf("%d.%d.%d.%d", []int{172, 198, 10}[block], []int{30, 18, 0}[block], (n+1)/250, (n+1)%250+1)
}

func (c *randomCluster) chance(percent int) bool { return c.r.Intn(100) < percent }

// newService returns a random Service with number n.
func (c *randomCluster) newService(n int) *v1.Service {
	r := c.r
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc%d", n), Namespace: fmt.Sprintf("ns%d", n%3)},
		Spec: v1.ServiceSpec{
			ClusterIP: c.ip(0, n), ClusterIPs: []string{c.ip(0, n)}, IPFamilies: []v1.IPFamily{c.family},
			Type: v1.ServiceTypeClusterIP,
		},
	}
	switch r.Intn(3) {
	case 1:
		svc.Spec.Type = v1.ServiceTypeNodePort
	case 2:
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: c.ip(1, 2*n)}}
		if c.chance(40) {
			src := "203.0.113.0/25"
			if c.family == v1.IPv6Protocol {
				src = "2001:db8:ff::/64"
			}
			svc.Spec.LoadBalancerSourceRanges = []string{src}
		}
	}
	if c.chance(20) {
		svc.Spec.ExternalIPs = []string{c.ip(1, 2*n+1)}
	}
	external := svc.Spec.Type != v1.ServiceTypeClusterIP || len(svc.Spec.ExternalIPs) > 0
	if external && c.chance(40) {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			svc.Spec.HealthCheckNodePort = int32(32000 + n)
		}
	}
	if c.chance(25) {
		svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}
	if c.chance(30) {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		// The timeout is fixed per Service: a partial sync (upstream's too) re-adds an
		// existing affinity set without changing its timeout.
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(60 + n%1000))}}
	}
	protocols := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
	for p := 0; p < 1+r.Intn(3); p++ {
		port := v1.ServicePort{
			Name: fmt.Sprintf("p%d", p), Protocol: protocols[r.Intn(3)],
			Port: int32(80 + p), TargetPort: intstr.FromInt32(int32(8080 + p)),
		}
		if svc.Spec.Type != v1.ServiceTypeClusterIP {
			port.NodePort = int32(30000 + 3*n + p)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, port)
	}
	return svc
}

// newSlices returns random EndpointSlices for svc. Pods come from a small pool, so Services
// share endpoints; a Service may get none.
func (c *randomCluster) newSlices(svc *v1.Service) []*discovery.EndpointSlice {
	r := c.r
	addressType := discovery.AddressTypeIPv4
	if c.family == v1.IPv6Protocol {
		addressType = discovery.AddressTypeIPv6
	}
	var slices []*discovery.EndpointSlice
	// A Service's endpoints have distinct addresses: upstream picks one of duplicates in map
	// order.
	pods := r.Perm(40)
	for s := 0; s < r.Intn(3); s++ {
		slice := &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", svc.Name, s), Namespace: svc.Namespace,
				Labels: map[string]string{discovery.LabelServiceName: svc.Name},
			},
			AddressType: addressType,
		}
		for e := 0; e < 1+r.Intn(4); e++ {
			node := testNodeName
			if c.chance(50) {
				node = "other-node"
			}
			ready, serving, terminating := true, true, false
			switch r.Intn(6) {
			case 0:
				ready, terminating = false, true
			case 1:
				ready, serving, terminating = false, false, true
			case 2:
				ready, serving = false, false
			}
			pods = pods[1:]
			slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{
				Addresses:  []string{c.ip(2, pods[0])},
				NodeName:   ptr.To(node),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
			})
		}
		for _, port := range svc.Spec.Ports {
			if c.chance(90) {
				slice.Ports = append(slice.Ports, discovery.EndpointPort{
					Name: ptr.To(port.Name), Protocol: ptr.To(port.Protocol), Port: ptr.To(port.TargetPort.IntVal),
				})
			}
		}
		slices = append(slices, slice)
	}
	return slices
}

// proxiers are the proxiers that a differential test keeps in step.
type proxiers []*Proxier

// addService creates a new random Service with its slices in the cluster and in ps.
func (c *randomCluster) addService(ps proxiers) {
	svc := c.newService(c.next)
	c.next++
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	c.services[name] = svc
	c.slices[name] = c.newSlices(svc)
	for _, p := range ps {
		p.OnServiceAdd(svc)
		for _, s := range c.slices[name] {
			p.OnEndpointSliceAdd(s)
		}
	}
}

// names returns the cluster's Services in a stable order.
func (c *randomCluster) names() []types.NamespacedName {
	var names []types.NamespacedName
	for i := 0; i < c.next; i++ {
		for ns := 0; ns < 3; ns++ {
			name := types.NamespacedName{Namespace: fmt.Sprintf("ns%d", ns), Name: fmt.Sprintf("svc%d", i)}
			if c.services[name] != nil {
				names = append(names, name)
			}
		}
	}
	return names
}

// mutate changes one random Service of the cluster, in ps too: it re-creates the Service with
// new random settings but the same number, replaces or deletes its slices, deletes it, or adds
// a new one. It returns what it did.
func (c *randomCluster) mutate(ps proxiers) string {
	names := c.names()
	if len(names) == 0 {
		c.addService(ps)
		return "add"
	}
	name := names[c.r.Intn(len(names))]
	old := c.services[name]
	switch c.r.Intn(5) {
	case 0:
		svc := c.newService(atoiSuffix(name.Name))
		c.services[name] = svc
		for _, p := range ps {
			p.OnServiceUpdate(old, svc)
		}
		return "update service " + name.String()
	case 1, 2:
		oldSlices := c.slices[name]
		c.slices[name] = c.newSlices(old)
		for _, p := range ps {
			for _, s := range oldSlices {
				p.OnEndpointSliceDelete(s)
			}
			for _, s := range c.slices[name] {
				p.OnEndpointSliceAdd(s)
			}
		}
		return "replace endpoints of " + name.String()
	case 3:
		for _, p := range ps {
			for _, s := range c.slices[name] {
				p.OnEndpointSliceDelete(s)
			}
			p.OnServiceDelete(old)
		}
		delete(c.services, name)
		delete(c.slices, name)
		return "delete " + name.String()
	}
	c.addService(ps)
	return "add"
}

func atoiSuffix(name string) int {
	n := 0
	fmt.Sscanf(strings.TrimPrefix(name, "svc"), "%d", &n)
	return n
}

// fresh returns a new fake proxier with the cluster's current state, after its first (full)
// sync.
func (c *randomCluster) fresh(workers int) (*knftables.Fake, *Proxier) {
	nft, p := NewFakeProxier(c.family)
	p.syncWorkers = workers
	p.nftables = resizingFake{nft}
	for _, name := range c.names() {
		p.OnServiceAdd(c.services[name])
		for _, s := range c.slices[name] {
			p.OnEndpointSliceAdd(s)
		}
	}
	p.setInitialized(true)
	p.syncProxyRules()
	return nft, p
}

// deleteStaleChains lets p's next sync delete the stale chains (as it would a second later)
// and runs it, so that its table can be compared with a fresh proxier's.
func deleteStaleChains(p *Proxier) {
	for chain := range p.staleChains {
		p.staleChains[chain] = time.Time{}
	}
	p.syncProxyRules()
}

// runDifferential builds a random cluster of services Services, then applies steps random
// changes, each followed by a partial sync, in a serial proxier (1 worker) and a parallel one
// (workers). After every sync the two must have run the same transaction and hold the same
// table. Every few steps, and at the end, the table must also equal that of a fresh proxier
// whose only sync was a full one, and a forced full sync must change nothing.
func runDifferential(t *testing.T, seed int64, family v1.IPFamily, services, steps, workers int) {
	t.Helper()
	c := newRandomCluster(seed, family)
	serialNFT, serial := NewFakeProxier(family)
	parallelNFT, parallel := NewFakeProxier(family)
	serial.syncWorkers, parallel.syncWorkers = 1, workers
	serial.nftables, parallel.nftables = resizingFake{serialNFT}, resizingFake{parallelNFT}
	ps := proxiers{serial, parallel}
	for i := 0; i < services; i++ {
		c.addService(ps)
	}
	step := "initial full sync"
	compare := func() {
		t.Helper()
		if s, p := canonicalTransaction(serialNFT.LastTransaction), canonicalTransaction(parallelNFT.LastTransaction); s != p {
			t.Fatalf("seed %d, %s: the serial and parallel transactions differ:\n%s\n%s", seed, step, lineDiff(s, p), firstDifference(s, p))
		}
		if s, p := portOrder(serialNFT.LastTransaction), portOrder(parallelNFT.LastTransaction); s != p {
			t.Fatalf("seed %d, %s: the serial and parallel transactions write the service ports in different orders:\n%s", seed, step, firstDifference(s, p))
		}
		if s, p := canonicalDump(serialNFT), canonicalDump(parallelNFT); s != p {
			t.Fatalf("seed %d, %s: the serial and parallel tables differ:\n%s", seed, step, lineDiff(s, p))
		}
	}
	checkAgainstFresh := func() {
		t.Helper()
		for _, p := range ps {
			deleteStaleChains(p)
		}
		compare()
		freshNFT, _ := c.fresh(workers)
		if got, want := canonicalDump(serialNFT), canonicalDump(freshNFT); got != want {
			t.Fatalf("seed %d, after %s: the partially synced table differs from a fresh full sync's:\n%s", seed, step, lineDiff(want, got))
		}
		before := canonicalDump(serialNFT)
		for _, p := range ps {
			p.needFullSync = true
			p.syncProxyRules()
		}
		compare()
		if after := canonicalDump(serialNFT); after != before {
			t.Fatalf("seed %d, after %s: a forced full sync changed the table:\n%s", seed, step, lineDiff(before, after))
		}
		// The kernel already holds every chain as generated: the full sync's drift check,
		// which hashes the generated rule objects, must find them all intact.
		for _, l := range strings.Split(serialNFT.LastTransaction.String(), "\n") {
			if f := strings.Fields(l); len(f) > 4 && (f[1] == "chain" || f[1] == "rule") && chainOwner(f[4]) != "" {
				t.Fatalf("seed %d, after %s: a full sync over an intact table re-wrote a service-port chain: %s", seed, step, l)
			}
		}
	}
	for _, p := range ps {
		p.setInitialized(true)
		p.syncProxyRules()
	}
	compare()
	checkAgainstFresh()
	for i := 0; i < steps; i++ {
		// Most steps change one Service; some change many at once, so that partial syncs
		// also run on the pool.
		n := 1
		if c.chance(25) {
			n = minParallelServicePorts
		}
		var did []string
		for j := 0; j < n; j++ {
			did = append(did, c.mutate(ps))
		}
		step = fmt.Sprintf("step %d (%s)", i, strings.Join(did, ", "))
		for _, p := range ps {
			p.syncProxyRules()
		}
		compare()
		if i%4 == 3 || i == steps-1 {
			checkAgainstFresh()
		}
	}
}

// canonicalTransaction returns tx's commands in a form that keeps what has meaning: the order
// of the rules added to each chain. Every other command is sorted. (Upstream creates a service
// port's endpoint chains and affinity sets in map order when it has both Local and Cluster
// endpoints, and deletes stale elements in map order.)
func canonicalTransaction(tx *knftables.Transaction) string {
	rules := map[string][]string{}
	var other []string
	for _, l := range strings.Split(tx.String(), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "add" && f[1] == "rule" {
			rules[f[4]] = append(rules[f[4]], l)
		} else {
			other = append(other, l)
		}
	}
	for _, chainRules := range rules {
		other = append(other, strings.Join(chainRules, "\n"))
	}
	sort.Strings(other)
	return strings.Join(other, "\n")
}

// portOrder returns the order in which tx writes to service ports: the owners of the
// service-port chains that its commands name, with repeats in a row collapsed.
func portOrder(tx *knftables.Transaction) string {
	var order []string
	for _, l := range strings.Split(tx.String(), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[1] != "chain" && f[1] != "rule" {
			continue
		}
		if owner := chainOwner(f[4]); owner != "" && (len(order) == 0 || order[len(order)-1] != owner) {
			order = append(order, owner)
		}
	}
	return strings.Join(order, "\n")
}

// canonicalDump returns nft's table with the map and set elements sorted: the order in which
// elements were added has no meaning, while the order of a chain's rules has.
func canonicalDump(nft *knftables.Fake) string {
	var rest, elements []string
	for _, l := range strings.Split(nft.Dump(), "\n") {
		if strings.HasPrefix(l, "add element ") {
			elements = append(elements, l)
		} else {
			rest = append(rest, l)
		}
	}
	sort.Strings(elements)
	return strings.Join(append(rest, elements...), "\n")
}

// firstDifference shows where the lines of a and b first differ.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < min(len(al), len(bl)); i++ {
		if al[i] != bl[i] {
			lo := max(0, i-2)
			return fmt.Sprintf("first difference at line %d:\n  %s\nagainst:\n  %s", i,
				strings.Join(al[lo:min(len(al), i+3)], "\n  "), strings.Join(bl[lo:min(len(bl), i+3)], "\n  "))
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d and %d lines)", len(al), len(bl))
}

// lineDiff returns the lines of want missing from got (-) and those of got not in want (+).
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		for ; n > 0; n-- {
			out = append(out, "- "+l)
		}
		for ; n < 0; n++ {
			out = append(out, "+ "+l)
		}
	}
	if len(out) > 40 {
		out = append(out[:40], fmt.Sprintf("... and %d more", len(out)-40))
	}
	return strings.Join(out, "\n")
}

func TestServicePortStageDifferential(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", family, seed), func(t *testing.T) {
				runDifferential(t, seed, family, 60, 12, 4)
			})
		}
	}
}

// FuzzServicePortStage runs the differential test on fuzzed seeds, sizes and worker counts.
func FuzzServicePortStage(f *testing.F) {
	f.Add(int64(7), uint8(20), uint8(6), uint8(2))
	f.Add(int64(8), uint8(45), uint8(10), uint8(3))
	f.Add(int64(-3), uint8(1), uint8(4), uint8(8))
	f.Fuzz(func(t *testing.T, seed int64, services, steps, workers uint8) {
		family := v1.IPv4Protocol
		if seed%2 != 0 {
			family = v1.IPv6Protocol
		}
		runDifferential(t, seed, family, int(services%64), int(steps%12), 1+int(workers%8))
	})
}

// TestPartialSyncGeneratesOnlyChangedServicePorts checks that a partial sync's Go work covers
// the changed Service only, and a full sync's every service port.
func TestPartialSyncGeneratesOnlyChangedServicePorts(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	c := newRandomCluster(42, v1.IPv4Protocol)
	_, p := NewFakeProxier(v1.IPv4Protocol)
	for i := 0; i < 200; i++ {
		c.addService(proxiers{p})
	}
	p.setInitialized(true)
	generated := func() (count uint64, sum float64) {
		t.Helper()
		h, err := testutil.GetHistogramMetricValue(metrics.SyncProxyRulesGeneratedServicePorts.WithLabelValues(string(v1.IPv4Protocol)))
		if err != nil {
			t.Fatal(err)
		}
		n, err := testutil.GetHistogramMetricCount(metrics.SyncProxyRulesGeneratedServicePorts.WithLabelValues(string(v1.IPv4Protocol)))
		if err != nil {
			t.Fatal(err)
		}
		return n, h
	}
	n0, s0 := generated()
	p.syncProxyRules()
	n1, s1 := generated()
	if n1 != n0+1 || int(s1-s0) != len(p.svcPortMap) {
		t.Fatalf("full sync generated %v service ports in %d syncs, want %d in 1", s1-s0, n1-n0, len(p.svcPortMap))
	}
	name := c.names()[17]
	old := c.services[name]
	updated := old.DeepCopy()
	updated.Spec.Ports = append(updated.Spec.Ports, v1.ServicePort{Name: "extra", Protocol: v1.ProtocolTCP, Port: 9999, TargetPort: intstr.FromInt32(9999)})
	p.OnServiceUpdate(old, updated)
	p.syncProxyRules()
	n2, s2 := generated()
	if n2 != n1+1 || int(s2-s1) != len(updated.Spec.Ports) {
		t.Fatalf("partial sync generated %v service ports, want the %d of the changed Service", s2-s1, len(updated.Spec.Ports))
	}
	p.syncProxyRules()
	n3, s3 := generated()
	if n3 != n2+1 || s3 != s2 {
		t.Fatalf("a sync without changes generated %v service ports, want 0", s3-s2)
	}
	// The metric's old name (served until v1.37) gets the same observations.
	oldLabelled := metrics.OldSyncProxyRulesGeneratedServicePorts.WithLabelValues(string(v1.IPv4Protocol))
	oldN, err := testutil.GetHistogramMetricCount(oldLabelled)
	if err != nil {
		t.Fatal(err)
	}
	oldSum, err := testutil.GetHistogramMetricValue(oldLabelled)
	if err != nil {
		t.Fatal(err)
	}
	if oldN != n3 || oldSum != s3 {
		t.Errorf("old name: %d observations summing to %v, want the new name's %d and %v", oldN, oldSum, n3, s3)
	}
}
