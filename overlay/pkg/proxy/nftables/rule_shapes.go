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
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/proxy"
	"sigs.k8s.io/knftables"
)

// Set-free load balancing.
//
// Upstream balances a service chain with one rule such as
//
//	meta l4proto tcp dnat ip addr . port to numgen random mod 3 map { 0 : a . 80, 1 : b . 80, 2 : c . 80 }
//
// Each such rule makes the kernel create an anonymous set, and creating or finding a set scans
// every set in the table, so a transaction with N services costs the kernel O(N^2) or worse
// while it holds the netns commit mutex. The shapes here use no set at all. For endpoints
// e0..e(k-1), rule i picks ei when a fresh random draw modulo (k-i) is 0, and the last rule picks
// e(k-1) unconditionally:
//
//	numgen random mod 3 0 meta l4proto tcp dnat to a:80
//	numgen random mod 2 0 meta l4proto tcp dnat to b:80
//	meta l4proto tcp dnat to c:80
//
// Rule i is reached with probability (k-i)/k and then matches with probability 1/(k-i), so
// every endpoint is picked with probability 1/k, as with upstream's map (and as iptables mode
// does it). A new connection's first packet walks at most k rules; established connections never
// reach the service chain.

// maxSetFreeEndpoints is the most endpoints a service port balances over with set-free rules; a
// service port with more gets upstream's one numgen map rule. Each set-free rule costs `nft` a
// rule to parse and to list (drift checks list the table), and a new connection one more rule
// to walk, while the map costs the kernel one anonymous set per service port. Few service ports
// have this many endpoints, so their sets stay few. make bench-kernel-probe with
// PROBE_ENDPOINTS measures both sides; bench/kernel/README.md has the figures behind this value.
const maxSetFreeEndpoints = 8

// setFreeShape reports whether a service port with these endpoints gets set-free rules: unless
// --nftables-rule-shapes=Upstream asks for upstream's maps everywhere, when it has at most
// maxSetFreeEndpoints usable endpoints.
func (proxier *Proxier) setFreeShape(endpoints []proxy.Endpoint) bool {
	return !proxier.upstreamRuleShapes && usableEndpoints(endpoints) <= maxSetFreeEndpoints
}

// usableEndpoints returns how many of endpoints are *endpointInfo; upstream skips the others.
func usableEndpoints(endpoints []proxy.Endpoint) int {
	n := 0
	for _, ep := range endpoints {
		if _, ok := ep.(*endpointInfo); ok {
			n++
		}
	}
	return n
}

// objectAdder is what the rule-shape writers add their rules to: a sync's transaction, or one
// service port's recorder in the generation stage.
type objectAdder interface {
	Add(obj knftables.Object)
}

// pick returns rule text that picks rule i of n with conditional probability 1/(n-i), in
// front of the concatenation of then: the last rule, which always picks, is then alone. The
// text is what knftables.Concat would build, written in one allocation: syncs write one such
// rule per endpoint.
func pick(i, n int, then ...string) string {
	size := 0
	for _, s := range then {
		size += len(s)
	}
	var b strings.Builder
	if i < n-1 {
		var digits [20]byte
		mod := strconv.AppendInt(digits[:0], int64(n-i), 10)
		b.Grow(len("numgen random mod ") + len(mod) + len(" 0 ") + size)
		b.WriteString("numgen random mod ")
		b.Write(mod)
		b.WriteString(" 0 ")
	} else {
		b.Grow(size)
	}
	for _, s := range then {
		b.WriteString(s)
	}
	return b.String()
}

// dnatTo returns the start of a DNAT rule for protocol, up to the destination.
func dnatTo(protocol v1.Protocol) string {
	switch protocol {
	case v1.ProtocolTCP:
		return "meta l4proto tcp dnat to "
	case v1.ProtocolUDP:
		return "meta l4proto udp dnat to "
	case v1.ProtocolSCTP:
		return "meta l4proto sctp dnat to "
	}
	return "meta l4proto " + strings.ToLower(string(protocol)) + " dnat to "
}

// writeSetFreeEndpointDNATs writes svcChain's load-balancing rules, DNATing to one of endpoints
// with equal probability, without sets. It writes nothing when no endpoint is usable.
func (proxier *Proxier) writeSetFreeEndpointDNATs(tx objectAdder, svcInfo *servicePortInfo, svcChain string, endpoints []proxy.Endpoint) {
	dnat := dnatTo(svcInfo.Protocol())
	n, i := usableEndpoints(endpoints), 0
	for _, ep := range endpoints {
		epInfo, ok := ep.(*endpointInfo)
		if !ok {
			continue
		}
		tx.Add(&knftables.Rule{Chain: svcChain, Rule: pick(i, n, dnat, epInfo.String())})
		i++
	}
}

// writeSetFreeEndpointJumps writes svcChain's rules for a service with session affinity that
// send a client without affinity to one of the endpoint chains with equal probability, without
// sets. They follow the rules that send a client with affinity to its endpoint's chain, which
// writeServiceToEndpointJumps writes for both shapes.
func (proxier *Proxier) writeSetFreeEndpointJumps(tx objectAdder, svcChain string, endpoints []proxy.Endpoint) {
	n, i := usableEndpoints(endpoints), 0
	for _, ep := range endpoints {
		if epInfo, ok := ep.(*endpointInfo); ok {
			tx.Add(&knftables.Rule{Chain: svcChain, Rule: pick(i, n, "goto ", epInfo.chainName)})
			i++
		}
	}
}
