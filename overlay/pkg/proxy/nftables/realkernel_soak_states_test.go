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
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The soak's per-Service invariant reads, for each Service, the part of the table that routes
// its traffic: its elements in the maps and sets that dispatch on a destination, and everything
// those elements lead to (chains, their rules, the maps and chains the rules name). Between two
// syncs each Service's part must be one that the Service has had: as it was before, or as a
// fresh kube-proxy writes it for one of the cluster states since.

// dispatchMaps are the maps and sets whose elements are keyed by a Service's destination.
var dispatchMaps = []string{serviceIPsMap, serviceNodePortsMap, noEndpointServicesMap, noEndpointNodePortsMap, firewallIPsMap, clusterIPsSet}

// graphElem is one element of a map or set: its key as nft's JSON has it (comments included),
// the key's plain value ("a . b . c"), and the element's value as JSON ("" in a set).
type graphElem struct{ key, plain, value string }

// tableGraph is kube-proxy's table, parsed from nft's JSON listing for following references.
type tableGraph struct {
	rules   map[string][]string    // chain -> its rules' expressions (JSON, no handles), in order
	elems   map[string][]graphElem // map or set -> its elements
	dynamic map[string]bool        // sets that packets fill (affinity): their elements are not state
}

// parseTableGraph parses `nft -j list table` output.
func parseTableGraph(t *testing.T, listing string) tableGraph {
	t.Helper()
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(listing), &doc); err != nil {
		t.Fatalf("parsing nft's JSON listing: %v", err)
	}
	g := tableGraph{rules: map[string][]string{}, elems: map[string][]graphElem{}, dynamic: map[string]bool{}}
	for _, entry := range doc.Nftables {
		if raw, ok := entry["chain"]; ok {
			var ch struct{ Name string }
			_ = json.Unmarshal(raw, &ch)
			g.rules[ch.Name] = g.rules[ch.Name][:0:0]
		}
		if raw, ok := entry["rule"]; ok {
			var r struct {
				Chain   string
				Expr    json.RawMessage
				Comment string
			}
			_ = json.Unmarshal(raw, &r)
			// A Service's state names the shared affinity set as clientAffinitySet: a partial
			// sync on a kernel that keeps set sizes writes the name it finds, which the full
			// sync that follows replaces (affinity_resize.go); the kernel refuses a rule that
			// names a set it does not hold.
			g.rules[r.Chain] = append(g.rules[r.Chain], unsizedAffinityRefs(string(r.Expr))+" "+r.Comment)
		}
		for _, kind := range []string{"map", "set"} {
			raw, ok := entry[kind]
			if !ok {
				continue
			}
			var m struct {
				Name  string
				Flags []string
				Elem  []json.RawMessage
			}
			_ = json.Unmarshal(raw, &m)
			g.dynamic[m.Name] = slices.Contains(m.Flags, "dynamic") || slices.Contains(m.Flags, "timeout")
			for _, e := range m.Elem {
				var kv []json.RawMessage
				if kind == "map" && json.Unmarshal(e, &kv) == nil && len(kv) == 2 {
					g.elems[m.Name] = append(g.elems[m.Name], graphElem{key: string(kv[0]), plain: jsonKey(elemValue(kv[0])), value: string(kv[1])})
				} else {
					g.elems[m.Name] = append(g.elems[m.Name], graphElem{key: string(e), plain: jsonKey(elemValue(e))})
				}
			}
		}
	}
	return g
}

// elemValue returns an element key's value without its annotations: {"elem": {"val": V,
// "comment": ...}} is V.
func elemValue(raw json.RawMessage) json.RawMessage {
	var annotated struct {
		Elem struct{ Val json.RawMessage }
	}
	if json.Unmarshal(raw, &annotated) == nil && annotated.Elem.Val != nil {
		return annotated.Elem.Val
	}
	return raw
}

// references returns the chains (goto, jump) and the maps and sets ("@name") that a JSON
// expression names.
func references(expr string) (chains, sets []string) {
	var v any
	if json.Unmarshal([]byte(expr), &v) != nil {
		return nil, nil
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if target, ok := sub.(map[string]any); ok && (k == "goto" || k == "jump") {
					if name, ok := target["target"].(string); ok {
						chains = append(chains, name)
						continue
					}
				}
				walk(sub)
			}
		case []any:
			for _, sub := range v {
				walk(sub)
			}
		case string:
			if name, ok := strings.CutPrefix(v, "@"); ok {
				sets = append(sets, name)
			}
		}
	}
	walk(v)
	return chains, sets
}

// serviceStates returns each Service's part of the table (see above), as sorted lines, by the
// Service's name. owner names the Service that an element of a dispatch map belongs to, or "".
func (g tableGraph) serviceStates(owner func(set, key, value string) string) map[string]string {
	parts := map[string][]string{}
	for _, m := range dispatchMaps {
		for _, e := range g.elems[m] {
			name := owner(m, e.plain, e.key+" "+e.value)
			if name == "" {
				continue
			}
			parts[name] = append(parts[name], g.reach(m, e)...)
		}
	}
	states := make(map[string]string, len(parts))
	for name, lines := range parts {
		slices.Sort(lines)
		states[name] = strings.Join(slices.Compact(lines), "\n")
	}
	return states
}

// reach returns the lines for element e of map m and for everything it leads to.
func (g tableGraph) reach(m string, e graphElem) []string {
	lines := []string{fmt.Sprintf("element %s %s : %s", m, e.key, e.value)}
	seen := map[string]bool{}
	var queue []string
	follow := func(expr string) {
		chains, sets := references(expr)
		for _, c := range chains {
			if !seen["chain "+c] {
				seen["chain "+c] = true
				queue = append(queue, c)
			}
		}
		for _, s := range sets {
			if seen["set "+s] || g.dynamic[s] || slices.Contains(dispatchMaps, s) {
				continue
			}
			seen["set "+s] = true
			for _, se := range g.elems[s] {
				lines = append(lines, fmt.Sprintf("element %s %s : %s", s, se.key, se.value))
				queue = append(queue, func() []string { c, _ := references(se.value); return c }()...)
			}
		}
	}
	follow(e.value)
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		rules, exists := g.rules[c]
		switch {
		case !exists:
			lines = append(lines, "chain "+c+" (missing)")
		case len(rules) == 0:
			lines = append(lines, "chain "+c+" (no rules)")
		}
		for i, r := range rules {
			lines = append(lines, fmt.Sprintf("rule %s #%d %s", c, i, r))
			follow(r)
		}
	}
	return lines
}

// soakOwnerPattern finds the Service in a chain name or comment ("soak/svc3/tcp/a", "soak/svc3:a").
var soakOwnerPattern = regexp.MustCompile(`soak/(svc[0-9]+)[/:]`)

// stateDiff returns the lines of got that are not in want ("+") and of want not in got ("-"),
// at most max of them.
func stateDiff(want, got string, max int) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range g {
		if l != "" && !slices.Contains(w, l) {
			out = append(out, "  + "+l)
		}
	}
	for _, l := range w {
		if l != "" && !slices.Contains(g, l) {
			out = append(out, "  - "+l)
		}
	}
	if len(out) > max {
		out = append(out[:max], fmt.Sprintf("  (%d more)", len(out)-max))
	}
	return strings.Join(out, "\n")
}
