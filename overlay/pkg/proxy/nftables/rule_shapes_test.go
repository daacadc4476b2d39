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
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// shapeTestProxier returns a fake proxier of family with one ClusterIP Service of n TCP
// endpoints (and session affinity if affinity is set), synced once.
func shapeTestProxier(t *testing.T, family v1.IPFamily, n int, affinity, upstreamShapes bool) (*knftables.Fake, *Proxier) {
	t.Helper()
	nft, fp := NewFakeProxier(family)
	fp.upstreamRuleShapes = upstreamShapes
	setShapeTestService(t, fp, family, n, affinity)
	return nft, fp
}

// setShapeTestService gives fp one ClusterIP Service of n TCP endpoints (and session affinity if
// affinity is set) and syncs it once.
func setShapeTestService(t *testing.T, fp *Proxier, family v1.IPFamily, n int, affinity bool) {
	t.Helper()
	clusterIP, epFmt, addrType := "172.30.0.41", "10.180.%d.%d", discovery.AddressTypeIPv4
	if family == v1.IPv6Protocol {
		clusterIP, epFmt, addrType = "fd00:172:30::41", "fd00:10:180::%x:%x", discovery.AddressTypeIPv6
	}
	makeServiceMap(fp, makeTestService("ns1", "svc1", func(svc *v1.Service) {
		svc.Spec.ClusterIP = clusterIP
		svc.Spec.Ports = []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP}}
		if affinity {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}}
		}
	}))
	populateEndpointSlices(fp, makeTestEndpointSlice("ns1", "svc1", 1, func(eps *discovery.EndpointSlice) {
		eps.AddressType = addrType
		for i := 0; i < n; i++ {
			eps.Endpoints = append(eps.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf(epFmt, i/250, i%250+1)}})
		}
		eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p80"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}}
	}))
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
}

// serviceChainRules returns the rules of the one service chain ("service-HASH-ns/name/proto/port")
// of the fake's table.
func serviceChainRules(t *testing.T, nft *knftables.Fake) []string {
	t.Helper()
	var rules []string
	for name, ch := range nft.Table.Chains {
		if strings.HasPrefix(name, "service-") && strings.Contains(name, "/") {
			for _, r := range ch.Rules {
				rules = append(rules, r.Rule)
			}
			return rules
		}
	}
	t.Fatal("no service chain")
	return nil
}

var pickModRegexp = regexp.MustCompile(`^numgen random mod (\d+) 0 `)

// pickProbabilities returns, for a chain of set-free load-balancing rules, the exact probability
// that a new connection ends at each rule: rule i is reached if no earlier rule picked, and then
// picks with probability 1/m for its "numgen random mod m 0", or always without one.
func pickProbabilities(t *testing.T, rules []string) []*big.Rat {
	t.Helper()
	reach := big.NewRat(1, 1)
	var probs []*big.Rat
	for _, r := range rules {
		p := big.NewRat(1, 1)
		if m := pickModRegexp.FindStringSubmatch(r); m != nil {
			mod, _ := strconv.Atoi(m[1])
			p = big.NewRat(1, int64(mod))
		}
		probs = append(probs, new(big.Rat).Mul(reach, p))
		reach.Mul(reach, new(big.Rat).Sub(big.NewRat(1, 1), p))
	}
	if reach.Sign() != 0 {
		t.Errorf("a connection can fall through every load-balancing rule (probability %v)", reach)
	}
	return probs
}

func TestSetFreeShapesAreUniformAndSetFree(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		for _, affinity := range []bool{false, true} {
			for _, n := range []int{1, 2, 3, maxSetFreeEndpoints} {
				t.Run(fmt.Sprintf("%s/affinity=%v/%d endpoints", family, affinity, n), func(t *testing.T) {
					nft, _ := shapeTestProxier(t, family, n, affinity, false)
					rules := serviceChainRules(t, nft)
					if affinity {
						// n affinity lookups (they use the named per-endpoint sets), then n picks.
						if len(rules) != 2*n {
							t.Fatalf("got %d rules, want %d: %v", len(rules), 2*n, rules)
						}
						rules = rules[n:]
					} else if len(rules) != n {
						t.Fatalf("got %d rules, want %d: %v", len(rules), n, rules)
					}
					for _, r := range rules {
						if strings.Contains(r, "{") || strings.Contains(r, " map ") || strings.Contains(r, "vmap") {
							t.Errorf("load-balancing rule creates a set: %s", r)
						}
					}
					for i, p := range pickProbabilities(t, rules) {
						if p.Cmp(big.NewRat(1, int64(n))) != 0 {
							t.Errorf("endpoint %d is picked with probability %v, want 1/%d", i, p, n)
						}
					}
				})
			}
		}
	}
}

func TestSetFreeShapesText(t *testing.T) {
	nft, _ := shapeTestProxier(t, v1.IPv6Protocol, 3, false, false)
	want := []string{
		"numgen random mod 3 0 meta l4proto tcp dnat to [fd00:10:180::1]:80",
		"numgen random mod 2 0 meta l4proto tcp dnat to [fd00:10:180::2]:80",
		"meta l4proto tcp dnat to [fd00:10:180::3]:80",
	}
	if got := serviceChainRules(t, nft); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUpstreamRuleShapesSwitch(t *testing.T) {
	nft, _ := shapeTestProxier(t, v1.IPv4Protocol, 2, false, true)
	want := "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 80 , 1 : 10.180.0.2 . 80 }"
	if got := serviceChainRules(t, nft); len(got) != 1 || got[0] != want {
		t.Errorf("with upstream rule shapes, got %q, want [%q]", got, want)
	}
	nft, _ = shapeTestProxier(t, v1.IPv4Protocol, 2, true, true)
	got := serviceChainRules(t, nft)
	if last := got[len(got)-1]; !strings.HasPrefix(last, "numgen random mod 2 vmap {") {
		t.Errorf("with upstream rule shapes and affinity, the last rule is %q, want upstream's vmap", last)
	}
}

func TestSetFreeShapesStopAtMaxSetFreeEndpoints(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		n := maxSetFreeEndpoints + 1
		nft, _ := shapeTestProxier(t, family, n, false, false)
		rules := serviceChainRules(t, nft)
		if len(rules) != 1 || !strings.Contains(rules[0], fmt.Sprintf("to numgen random mod %d map {", n)) {
			t.Errorf("%s: a service port with %d endpoints got %d rules, want upstream's one numgen map: %v", family, n, len(rules), rules)
		}
		nft, _ = shapeTestProxier(t, family, n, true, false)
		rules = serviceChainRules(t, nft)
		if len(rules) != n+1 || !strings.HasPrefix(rules[n], fmt.Sprintf("numgen random mod %d vmap {", n)) {
			t.Errorf("%s: a service port with %d endpoints and affinity got %v, want %d affinity lookups and upstream's vmap", family, n, rules, n)
		}
	}
}

func TestSetFreeShapeFollowsEndpointCount(t *testing.T) {
	// A service port that grows past maxSetFreeEndpoints changes shape at the next sync, and
	// back when it shrinks; the chain never holds both shapes.
	nft, fp := shapeTestProxier(t, v1.IPv4Protocol, 2, false, false)
	for _, n := range []int{maxSetFreeEndpoints + 4, maxSetFreeEndpoints, 3} {
		setShapeTestService(t, fp, v1.IPv4Protocol, n, false)
		rules := serviceChainRules(t, nft)
		maps := 0
		for _, r := range rules {
			if strings.Contains(r, " map {") {
				maps++
			}
		}
		wantRules, wantMaps := n, 0
		if n > maxSetFreeEndpoints {
			wantRules, wantMaps = 1, 1
		}
		if len(rules) != wantRules || maps != wantMaps {
			t.Errorf("%d endpoints: got %d rules (%d maps), want %d (%d): %v", n, len(rules), maps, wantRules, wantMaps, rules)
		}
	}
}

// TestPickText checks the text of set-free rules against the nft syntax that knftables.Concat
// would build from the same words.
func TestPickText(t *testing.T) {
	for _, c := range []struct {
		i, n int
		then []string
		want string
	}{
		{0, 3, []string{dnatTo(v1.ProtocolTCP), "10.0.0.1:80"}, "numgen random mod 3 0 meta l4proto tcp dnat to 10.0.0.1:80"},
		{1, 3, []string{"goto ", "endpoint-x"}, "numgen random mod 2 0 goto endpoint-x"},
		{2, 3, []string{dnatTo(v1.ProtocolSCTP), "[fd00::1]:80"}, "meta l4proto sctp dnat to [fd00::1]:80"},
		{0, 1, []string{dnatTo(v1.ProtocolUDP), "10.0.0.1:53"}, "meta l4proto udp dnat to 10.0.0.1:53"},
		{10, 12, []string{dnatTo(v1.Protocol("DCCP")), "a"}, "numgen random mod 2 0 meta l4proto dccp dnat to a"},
		{0, 120, []string{"goto ", "c"}, "numgen random mod 120 0 goto c"},
	} {
		if got := pick(c.i, c.n, c.then...); got != c.want {
			t.Errorf("pick(%d, %d, %q) = %q, want %q", c.i, c.n, c.then, got, c.want)
		}
	}
}
