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
	"runtime"
	"strings"
	"testing"
)

// What the drift check's state holds in memory, at the scale of the reported cluster; the
// helpers are in known_objects_memory_test.go.

// BenchmarkChainMemoryHeap reports the heap that the kernel link's chain memory alone keeps
// alive after it noted a full sync's transactions, as the link does after its commits
// (chainMemory.noteWrites), once their text is gone, and confirmed them into baselines, as the
// link does at the end of the sync (settle; the kernel hashes here are made up). Per chain.
func BenchmarkChainMemoryHeap(b *testing.B) {
	benchmarkHeldHeap(b, "chain", func(tb testing.TB, services int) (uint64, int) {
		fp, rec := syncedMemoryTestProxier(tb, services)
		m := &chainMemory{baselines: map[string]chainBaseline{}, pending: map[string]pendingWrite{}}
		for _, text := range rec.texts {
			m.noteWrites(text, 1, false)
		}
		rec.texts = nil
		chains := len(m.pending)
		if chains < services*6 {
			tb.Fatalf("the chain memory has %d chains pending, want at least one per service port (%d)", chains, services*6)
		}
		hashes := make(map[string]uint64, chains)
		for chain := range m.pending {
			hashes[chain] = uint64(len(hashes))
		}
		m.confirmed(hashes)
		hashes = nil
		if len(m.baselines) != chains || len(m.pending) != 0 {
			tb.Fatalf("after confirming: %d baselines, %d pending; want %d and none", len(m.baselines), len(m.pending), chains)
		}
		held := heapFreedBy(func() { m = nil })
		runtime.KeepAlive(fp)
		return held, chains
	})
}

// BenchmarkTextListingHeap reports the heap that a parsed text listing of the table
// (parseListing, what the drift check reads when it lists the table as text) alone keeps alive
// once nft's output is gone, per chain. The listing is made from a full sync's transactions, in
// nft's layout.
func BenchmarkTextListingHeap(b *testing.B) {
	benchmarkHeldHeap(b, "chain", func(tb testing.TB, services int) (uint64, int) {
		fp, rec := syncedMemoryTestProxier(tb, services)
		listing := listingOf(rec.texts)
		rec.texts = nil
		k := parseListing(listing)
		listing = ""
		chains := len(k.chains)
		if chains < services*6 {
			tb.Fatalf("the listing has %d chains, want at least one per service port (%d)", chains, services*6)
		}
		held := heapFreedBy(func() { k = nil })
		runtime.KeepAlive(fp)
		return held, chains
	})
}

// listingOf returns the table that transactions (knftables' text) write, as `nft -t list table`
// lays it out: each chain with its rules, one a line.
func listingOf(transactions []string) string {
	var order []string
	rules := map[string][]string{}
	for _, text := range transactions {
		for f := range nftCommands(text) {
			if len(f) < 5 || f[0] != "add" || f[1] != "chain" && f[1] != "rule" {
				continue
			}
			if _, ok := rules[f[4]]; !ok {
				order = append(order, f[4])
				rules[f[4]] = nil
			}
			if f[1] == "rule" && len(f) == 6 {
				rules[f[4]] = append(rules[f[4]], f[5])
			}
		}
	}
	var out strings.Builder
	out.WriteString("table ip6 kube-proxy {\n")
	for _, chain := range order {
		out.WriteString("\tchain " + chain + " {\n")
		for _, rule := range rules[chain] {
			out.WriteString("\t\t" + rule + "\n")
		}
		out.WriteString("\t}\n")
	}
	out.WriteString("}\n")
	return out.String()
}
