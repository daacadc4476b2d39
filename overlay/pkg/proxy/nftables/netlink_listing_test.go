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
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

func TestNLAttrs(t *testing.T) {
	b := append(nlAttr(1, nlString("abc")), nlAttr(2|0x8000, []byte{1, 2, 3, 4, 5})...)
	var got []string
	if err := nlAttrs(b, func(typ uint16, data []byte) {
		got = append(got, string(rune('0'+typ))+":"+cString(data))
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1:abc", "2:\x01\x02\x03\x04\x05"}; !slices.Equal(got, want) {
		t.Errorf("attributes %q, want %q (the nested flag cleared)", got, want)
	}
	if err := nlAttrs([]byte{200, 0, 1, 0, 0, 0, 0, 0}, func(uint16, []byte) {}); err == nil {
		t.Error("an attribute longer than its buffer parsed without error")
	}
}

// netlinkTestTable is loaded by TestRealKernelNetlinkSnapshot: rules with and without an
// anonymous map, an empty chain, a named set and a named map.
const netlinkTestTable = `add table ip kube-proxy
add chain ip kube-proxy a
add rule ip kube-proxy a ip daddr 10.0.0.1 tcp dport 80 counter
add rule ip kube-proxy a ip saddr 10.0.0.2 drop comment "two"
add chain ip kube-proxy b
add chain ip kube-proxy c
add rule ip kube-proxy c meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.1.0.1 . 80, 1 : 10.1.0.2 . 80 }
add set ip kube-proxy s { type ipv4_addr ; }
add map ip kube-proxy m { type ipv4_addr : verdict ; }
add rule ip kube-proxy b ip saddr @s jump a
`

func TestRealKernelNetlinkSnapshot(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	link := linkKernel(t, fp, real)
	// snap reads the table both ways, its rules in one dump and chain by chain
	// (perChainDumpAbove), and fails unless the two read the same.
	snap := func() *tableSnapshot {
		t.Helper()
		var both [2]*tableSnapshot
		for i, above := range []int{math.MaxInt, 0} {
			link.perChainAbove = above
			s, err := link.snapshot(nfprotoIPv4, kubeProxyTable)
			if err != nil {
				t.Fatal(err)
			}
			both[i] = s
		}
		whole, perChain := both[0], both[1]
		if !maps.Equal(whole.chains, perChain.chains) || !maps.Equal(whole.shapes, perChain.shapes) ||
			!slices.Equal(whole.sets, perChain.sets) || whole.allSets != perChain.allSets {
			t.Fatalf("the table read in one dump %+v and chain by chain %+v differ", whole, perChain)
		}
		return whole
	}
	if s := snap(); len(s.chains) != 0 || len(s.sets) != 0 {
		t.Fatalf("a missing table read as %d chains and sets %v, want none", len(s.chains), s.sets)
	}
	gen0, err := link.generation()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "table.nft")
	if err := os.WriteFile(file, []byte(netlinkTestTable), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-f", file)
	first := snap()
	if first.gen != gen0+1 {
		t.Errorf("one nft -f moved the generation from %d to %d, want one step", gen0, first.gen)
	}
	if got := slices.Sorted(maps.Keys(first.chains)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("chains %v, want [a b c]", got)
	}
	if !slices.Equal(first.sets, []string{"s"}) {
		t.Errorf("named sets %v, want [s] (no map, no anonymous set)", first.sets)
	}
	if first.chains["a"] == kernelHashSeed(link.seed) || first.chains["a"] == first.chains["c"] {
		t.Error("chains with different rules hash the same")
	}
	// Shapes: a named set is not an anonymous one; a map literal is.
	wantShapes := map[string]chainShape{"a": {rules: 2}, "b": {rules: 1}, "c": {rules: 1, anonRefs: 1}}
	if !maps.Equal(first.shapes, wantShapes) {
		t.Errorf("chain shapes %+v, want %+v", first.shapes, wantShapes)
	}
	// Another table's change leaves this table's hashes alone.
	run("add", "table", "ip", "other")
	if s := snap(); !maps.Equal(s.chains, first.chains) {
		t.Error("adding another table changed this table's chain hashes")
	}

	// handle returns the handle of chain's rule number i (from 0).
	handle := func(chain string, i int) string {
		t.Helper()
		m := ruleHandleRegexp.FindAllStringSubmatch(run("-a", "list", "chain", "ip", kubeProxyTable, chain), -1)
		if len(m) < i+2 {
			t.Fatalf("no rule %d in %s", i, chain)
		}
		return m[i+1][1]
	}
	// Each change behind kube-proxy's back changes the hash of its chain, and only that one.
	for _, tc := range []struct {
		name, chain string
		change      func()
	}{
		{"a rule replaced, same handle", "a", func() {
			run("replace", "rule", "ip", kubeProxyTable, "a", "handle", handle("a", 0), "ip", "daddr", "10.0.0.1", "tcp", "dport", "81", "counter")
		}},
		{"a comment changed", "a", func() {
			run("replace", "rule", "ip", kubeProxyTable, "a", "handle", handle("a", 1), "ip", "saddr", "10.0.0.2", "drop", "comment", `"three"`)
		}},
		{"the anonymous map re-created with the same elements", "c", func() {
			run("replace", "rule", "ip", kubeProxyTable, "c", "handle", handle("c", 0), "meta", "l4proto", "tcp", "dnat", "ip", "to",
				"numgen", "random", "mod", "2", "map", "{", "0", ":", "10.1.0.1", ".", "80", ",", "1", ":", "10.1.0.2", ".", "80", "}")
		}},
		{"the named set a rule looks up re-created", "b", func() {
			recreate := filepath.Join(t.TempDir(), "recreate.nft")
			text := "flush chain ip kube-proxy b\ndelete set ip kube-proxy s\nadd set ip kube-proxy s { type ipv4_addr ; }\nadd rule ip kube-proxy b ip saddr @s jump a\n"
			if err := os.WriteFile(recreate, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			run("-f", recreate)
		}},
		{"a rule added to an empty chain", "b", func() {
			run("add", "rule", "ip", kubeProxyTable, "b", "counter")
		}},
		{"a chain flushed", "a", func() {
			run("flush", "chain", "ip", kubeProxyTable, "a")
		}},
	} {
		before := snap()
		tc.change()
		after := snap()
		for chain, h := range after.chains {
			if changed := h != before.chains[chain]; changed != (chain == tc.chain) {
				t.Errorf("%s: chain %s changed=%v", tc.name, chain, changed)
			}
		}
	}

	// Equal rules hash equally, whoever wrote them: flushing a chain and adding the same
	// rules back gives the same hash.
	run("flush", "chain", "ip", kubeProxyTable, "a")
	run("add", "rule", "ip", kubeProxyTable, "a", "ip", "daddr", "10.0.0.1", "tcp", "dport", "80", "counter")
	run("add", "rule", "ip", kubeProxyTable, "a", "ip", "saddr", "10.0.0.2", "drop", "comment", `"two"`)
	if got := snap().chains["a"]; got != first.chains["a"] {
		t.Error("chain a, re-written with its first rules, hashes differently from the first time")
	}

	// A chain deleted between the chain dump and the dump of its rules by name: the reading
	// saw the table change, and the next one stands without it.
	link.perChainAbove = 0
	deleted := false
	link.snapshotPieceRead = func(_ uint8, msg uint16, _ int) {
		if msg == nftMsgGetChain && !deleted {
			deleted = true
			run("delete", "chain", "ip", kubeProxyTable, "b")
		}
	}
	s, err := link.snapshot(nfprotoIPv4, kubeProxyTable)
	if err != nil || !deleted {
		t.Fatalf("a reading that a deleted chain interrupted: err %v, deleted %v", err, deleted)
	}
	if _, found := s.chains["b"]; found || len(s.chains) != 2 {
		t.Errorf("after chain b was deleted during a reading, it read chains %v", slices.Sorted(maps.Keys(s.chains)))
	}
}
