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

// endpointInfos returns the endpoints that are *endpointInfo, in order; the others are skipped,
// as upstream skips them.
func endpointInfos(endpoints []proxy.Endpoint) []*endpointInfo {
	infos := make([]*endpointInfo, 0, len(endpoints))
	for _, ep := range endpoints {
		if epInfo, ok := ep.(*endpointInfo); ok {
			infos = append(infos, epInfo)
		}
	}
	return infos
}

// pickPrefix returns the match that makes rule i of n pick its endpoint with conditional
// probability 1/(n-i): empty for the last rule, which always picks.
func pickPrefix(i, n int) []string {
	if i == n-1 {
		return nil
	}
	return []string{"numgen random mod", strconv.Itoa(n - i), "0"}
}

// writeSetFreeEndpointDNATs writes svcChain's load-balancing rules, DNATing to one of endpoints
// with equal probability, without sets. It writes nothing when no endpoint is usable.
func (proxier *Proxier) writeSetFreeEndpointDNATs(tx *servicePortRecorder, svcInfo *servicePortInfo, svcChain string, endpoints []proxy.Endpoint) {
	protocol := strings.ToLower(string(svcInfo.Protocol()))
	infos := endpointInfos(endpoints)
	for i, epInfo := range infos {
		tx.Add(&knftables.Rule{
			Chain: svcChain,
			Rule: knftables.Concat(
				pickPrefix(i, len(infos)),
				"meta l4proto", protocol,
				"dnat to", epInfo.String(),
			),
		})
	}
}

// writeSetFreeEndpointJumps writes svcChain's rules for a service with session affinity: first,
// for each endpoint, a jump to its chain when the client is in its affinity set; then, for a
// client without affinity, a jump to one of the endpoint chains with equal probability, without
// sets.
func (proxier *Proxier) writeSetFreeEndpointJumps(tx *servicePortRecorder, svcChain string, endpoints []proxy.Endpoint) {
	ipX := "ip"
	if proxier.ipFamily == v1.IPv6Protocol {
		ipX = "ip6"
	}
	infos := endpointInfos(endpoints)
	for _, epInfo := range infos {
		tx.Add(&knftables.Rule{
			Chain: svcChain,
			Rule: knftables.Concat(
				ipX, "saddr", "@", epInfo.affinitySetName,
				"goto", epInfo.chainName,
			),
		})
	}
	for i, epInfo := range infos {
		tx.Add(&knftables.Rule{
			Chain: svcChain,
			Rule: knftables.Concat(
				pickPrefix(i, len(infos)),
				"goto", epInfo.chainName,
			),
		})
	}
}
