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
	"slices"
	"strings"
	"testing"
)

// kernelTable is what the real-kernel tests read of kube-proxy's table: each chain's rule count
// and each map's elements.
type kernelTable struct {
	rules    map[string]int                 // rules per chain
	elements map[string]map[string][]string // map name -> "key" -> value ("goto x", "drop", ...)
}

// readKernelTable reads kube-proxy's table in family ("ip", "ip6") from nft's JSON listing,
// through run (from realNFT).
func readKernelTable(t *testing.T, run func(args ...string) string, family string) kernelTable {
	t.Helper()
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(run("-j", "list", "table", family, kubeProxyTable)), &doc); err != nil {
		t.Fatalf("parsing nft's JSON listing: %v", err)
	}
	tab := kernelTable{rules: map[string]int{}, elements: map[string]map[string][]string{}}
	for _, entry := range doc.Nftables {
		if raw, ok := entry["chain"]; ok {
			var ch struct{ Name string }
			_ = json.Unmarshal(raw, &ch)
			tab.rules[ch.Name] += 0
		}
		if raw, ok := entry["rule"]; ok {
			var r struct{ Chain string }
			_ = json.Unmarshal(raw, &r)
			tab.rules[r.Chain]++
		}
		if raw, ok := entry["map"]; ok {
			var m struct {
				Name string
				Elem [][]json.RawMessage
			}
			_ = json.Unmarshal(raw, &m)
			elems := map[string][]string{}
			for _, kv := range m.Elem {
				if len(kv) != 2 {
					continue
				}
				key := jsonKey(elemValue(kv[0])) // without its comment
				elems[key] = append(elems[key], jsonVerdict(kv[1]))
			}
			tab.elements[m.Name] = elems
		}
	}
	return tab
}

// jsonKey renders a map element's key ({"concat": [...]} or a value) as "a . b . c".
func jsonKey(raw json.RawMessage) string {
	var concat struct{ Concat []any }
	if json.Unmarshal(raw, &concat) == nil && concat.Concat != nil {
		parts := make([]string, len(concat.Concat))
		for i, p := range concat.Concat {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, " . ")
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	return fmt.Sprint(v)
}

// jsonVerdict renders a map element's verdict: "goto <chain>", "jump <chain>", or its kind.
func jsonVerdict(raw json.RawMessage) string {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	for kind, arg := range v {
		var target struct{ Target string }
		if json.Unmarshal(arg, &target) == nil && target.Target != "" {
			return kind + " " + target.Target
		}
		return kind
	}
	return string(raw)
}

// routedPorts returns, for each address in the service-ips map, the ports it is routed on
// ("tcp/80"), sorted and joined with commas.
func (tab kernelTable) routedPorts() map[string]string {
	ports := map[string][]string{}
	for key := range tab.elements[serviceIPsMap] {
		if f := strings.Split(key, " . "); len(f) == 3 {
			ports[f[0]] = append(ports[f[0]], f[1]+"/"+f[2])
		}
	}
	out := make(map[string]string, len(ports))
	for ip, p := range ports {
		slices.Sort(p)
		out[ip] = strings.Join(p, ",")
	}
	return out
}

// deadEnds returns, for the elements of maps that send traffic to a service-port chain with
// no rules (or none at all), "map key -> chain".
func (tab kernelTable) deadEnds(maps ...string) []string {
	var out []string
	for _, m := range maps {
		for key, values := range tab.elements[m] {
			for _, v := range values {
				_, chain, ok := strings.Cut(v, " ")
				if ok && strings.Contains(chain, "/") && tab.rules[chain] == 0 {
					out = append(out, m+" "+key+" -> "+chain)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
