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
	"testing"
)

func TestOwnCommitLog(t *testing.T) {
	var g ownCommitLog
	// Generations 11 and 12: the IPv4 table; 13: the IPv6 table; 14: not the link's own.
	g.note(11, nfprotoIPv4)
	g.note(12, nfprotoIPv4)
	g.note(13, nfprotoIPv6)
	for _, tc := range []struct {
		name     string
		family   uint8
		from, to uint32
		want     bool
	}{
		{"no commit", nfprotoIPv6, 12, 12, true},
		{"the other family's commits", nfprotoIPv6, 10, 12, true},
		{"a commit to the same family's table", nfprotoIPv6, 10, 13, false},
		{"the IPv6 commit, read by the IPv4 side", nfprotoIPv4, 12, 13, true},
		{"its own family's commits, read by the IPv4 side", nfprotoIPv4, 10, 12, false},
		{"a commit the link did not make", nfprotoIPv4, 13, 14, false},
		{"a generation before the log", nfprotoIPv6, 9, 12, false},
		{"a generation that went back", nfprotoIPv6, 12, 11, false},
		{"the zero family of an empty slot", 0, 100, 101, false},
	} {
		if got := g.onlyOtherFamilies(tc.family, tc.from, tc.to); got != tc.want {
			t.Errorf("%s: onlyOtherFamilies(%d, %d, %d) = %v, want %v", tc.name, tc.family, tc.from, tc.to, got, tc.want)
		}
	}

	// A slot holds the latest generation that maps to it: an older one is forgotten.
	g.note(11+ownCommitSlots, nfprotoIPv4)
	if g.onlyOtherFamilies(nfprotoIPv6, 10, 12) {
		t.Error("a generation whose slot a later commit took still counts as the link's own")
	}
	// More commits than the log holds are never all the link's own.
	for gen := uint32(1000); gen <= 1000+ownCommitSlots; gen++ {
		g.note(gen, nfprotoIPv4)
	}
	if !g.onlyOtherFamilies(nfprotoIPv6, 1000, 1000+ownCommitSlots-1) {
		t.Error("a full log of the other family's commits does not count as theirs")
	}
	if g.onlyOtherFamilies(nfprotoIPv6, 999, 1000+ownCommitSlots) {
		t.Error("more commits than the log holds count as the link's own")
	}
	// The kernel's generation skips 0 when it wraps around, so a read across the wrap is not
	// kept (runTracked notes no commit there either): a retry, never a wrong answer.
	g.note(0xffffffff, nfprotoIPv4)
	g.note(1, nfprotoIPv4)
	if g.onlyOtherFamilies(nfprotoIPv6, 0xfffffffe, 1) {
		t.Error("commits across the generation's wrap-around count, with generation 0 never noted")
	}
	if !g.onlyOtherFamilies(nfprotoIPv6, 0xfffffffe, 0xffffffff) {
		t.Error("the last commit before the wrap-around does not count")
	}
}

func TestRebaselineAcrossOtherFamilyCommits(t *testing.T) {
	const table = "ip6 kube-proxy"
	snap := &tableSnapshot{gen: 20, chains: map[string]uint64{"a": 100}}
	listing := &kernelListing{chains: map[string]uint64{"a": 1}}
	for _, tc := range []struct {
		name   string
		own    map[uint32]uint8 // the link's own commits: generation, family
		gen    uint32
		listed bool
	}{
		{"no commit during the listing", nil, 20, true},
		{"the IPv4 proxier's commits during the listing", map[uint32]uint8{21: nfprotoIPv4, 22: nfprotoIPv4}, 22, true},
		{"a commit of the IPv6 proxier's own", map[uint32]uint8{21: nfprotoIPv4, 22: nfprotoIPv6}, 22, false},
		{"someone else's commit", map[uint32]uint8{21: nfprotoIPv4}, 22, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newNFTLink(nil)
			l.gen, l.genKnown, l.epoch, l.epochStart = 20, true, 1, 10
			for gen, family := range tc.own {
				l.own.note(gen, family)
			}
			l.rebaseline(table, snap, listing, tc.gen, true)
			b, ok := l.memory(table).baselines["a"]
			if ok != tc.listed || ok && b != (chainBaseline{kernel: 100, text: 1}) {
				t.Errorf("baseline of a: %+v (recorded: %v), want recorded: %v", b, ok, tc.listed)
			}
		})
	}
}
