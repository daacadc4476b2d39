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
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

// periodicFullSync makes fp's next sync a periodic full sync (upstream's hour has passed, and no
// failure forces one) and runs it.
func periodicFullSync(t *testing.T, fp *Proxier) {
	t.Helper()
	fp.lastFullSync = fp.now().Add(-2 * time.Hour)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if fp.now().Sub(fp.lastFullSync) > time.Minute {
		t.Fatal("the sync was not a full sync")
	}
}

func TestDriftOnlyFullSync(t *testing.T) {
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	rec := &txText{Interface: nft}
	fp.nftables = rec
	setSplitTestCluster(fp, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	want := sortedLines(nft.Dump())

	// Nothing changed: a periodic full sync re-writes no service-port chain.
	n := len(rec.texts)
	periodicFullSync(t, fp)
	if written := rec.writtenServiceChains(n); len(written) != 0 {
		t.Errorf("a periodic full sync with nothing drifted re-wrote %d service-port chains: %v", len(written), written)
	}

	// Damage behind kube-proxy's back: drop a rule from one service chain and every rule
	// from another. The next periodic full sync re-writes those service ports, and only them.
	var damaged []string
	for _, svc := range []int{4, 9} {
		for name, ch := range nft.Table.Chains {
			if strings.Contains(name, fmt.Sprintf("ns/svc%d/tcp/", svc)) && strings.HasPrefix(name, "service-") {
				ch.Rules = ch.Rules[:svc%2]
				damaged = append(damaged, name)
			}
		}
	}
	if len(damaged) != 2 {
		t.Fatalf("damaged %v, want 2 chains", damaged)
	}
	n = len(rec.texts)
	periodicFullSync(t, fp)
	written := rec.writtenServiceChains(n)
	for _, chain := range damaged {
		if !written[chain] {
			t.Errorf("the damaged chain %s was not re-written", chain)
		}
	}
	if len(written) != len(damaged) {
		t.Errorf("re-wrote %v, want only the damaged %v", written, damaged)
	}
	if got := sortedLines(nft.Dump()); got != want {
		t.Errorf("after the repairing full sync the ruleset differs:\n%s\nwant:\n%s", got, want)
	}

	// The off switch: every periodic full sync re-writes everything.
	fp.rewriteAllOnFullSync = true
	n = len(rec.texts)
	periodicFullSync(t, fp)
	// Each service port has its service chain; those with affinity also have one chain per
	// endpoint (two).
	wantChains := 0
	for i := 1; i <= splitTestServices; i++ {
		wantChains += 2
		if splitTestService(i).Spec.SessionAffinity == v1.ServiceAffinityClientIP {
			wantChains += 2 * 2
		}
	}
	if written := rec.writtenServiceChains(n); len(written) != wantChains {
		t.Errorf("with --full-sync-rewrite-all, a periodic full sync re-wrote %d service-port chains, want %d", len(written), wantChains)
	}
}

func TestParseListedChains(t *testing.T) {
	listing := "table ip kube-proxy {\n" +
		"\tcomment \"rules for kube-proxy\"\n" +
		"\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n" +
		"\t\telements = { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }\n\t}\n\n" +
		"\tchain service-ULMVA6XW-ns1/svc1/tcp/p80 {\n" +
		"\t\tnumgen random mod 2 0 meta l4proto tcp dnat to 10.180.0.1:80\n" +
		"\t\tmeta l4proto tcp dnat to 10.180.0.2:80\n\t}\n\n" +
		"\tchain endpoint-2OCDJSZQ-ns1/svc1/tcp/p80__10.180.0.1/80 {\n\t}\n}\n"
	got := parseListing(listing).chains
	// What the stage writes to the same chains, hashed as the drift check hashes it.
	svc, ep := "service-ULMVA6XW-ns1/svc1/tcp/p80", "endpoint-2OCDJSZQ-ns1/svc1/tcp/p80__10.180.0.1/80"
	write := func(rules ...string) []chainWrite {
		rec := &servicePortRecorder{}
		rec.ensureChain(svc, false)
		for _, rule := range rules {
			rec.Add(&knftables.Rule{Chain: svc, Rule: rule})
		}
		rec.ensureChain(ep, false)
		return chainWritesOf(rec)
	}
	written := write("numgen random mod 2 0 meta l4proto tcp dnat to 10.180.0.1:80", "meta l4proto tcp dnat to 10.180.0.2:80")
	if len(written) != 2 {
		t.Fatalf("hashed %v, want the service and the endpoint chain", written)
	}
	for _, w := range written {
		if got[w.chain] != w.hash {
			t.Errorf("chain %s: listed hash %x, written hash %x", w.chain, got[w.chain], w.hash)
		}
	}
	// One rule less must change the hash.
	if fewer := write("meta l4proto tcp dnat to 10.180.0.2:80"); got[svc] == fewer[0].hash {
		t.Error("different rules gave the same hash")
	}
}

func TestParseListingSets(t *testing.T) {
	// `nft -t list table` output: named sets without their elements, maps, and chains
	// whose rules use anonymous maps and named sets.
	listing := "table ip kube-proxy {\n" +
		"\tset cluster-ips {\n\t\ttype ipv4_addr\n\t\tcomment \"Active ClusterIPs\"\n\t}\n\n" +
		"\tset affinity-XPHNAVT3-ns1/svc1/tcp/p80__10.180.0.1/80 {\n\t\ttype ipv4_addr\n\t\tflags dynamic,timeout\n\t\ttimeout 3h\n\t}\n\n" +
		"\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t}\n\n" +
		"\tchain service-ULMVA6XW-ns1/svc1/tcp/p80 {\n" +
		"\t\tip saddr @affinity-XPHNAVT3-ns1/svc1/tcp/p80__10.180.0.1/80 goto endpoint-2OCDJSZQ-ns1/svc1/tcp/p80__10.180.0.1/80\n" +
		"\t\tnumgen random mod 2 vmap { 0 : goto endpoint-2OCDJSZQ-ns1/svc1/tcp/p80__10.180.0.1/80, 1 : goto endpoint-X/80 }\n\t}\n}\n"
	k := parseListing(listing)
	if !k.listedSets {
		t.Error("a listing of nft's own must count as listing the sets")
	}
	wantSets := []string{"cluster-ips", "affinity-XPHNAVT3-ns1/svc1/tcp/p80__10.180.0.1/80"}
	if strings.Join(k.sets, ",") != strings.Join(wantSets, ",") {
		t.Errorf("sets = %v, want %v (maps are not sets)", k.sets, wantSets)
	}
	if len(k.chains) != 1 || k.chains["service-ULMVA6XW-ns1/svc1/tcp/p80"] == fnvOffset64 {
		t.Errorf("chains = %v, want the one chain with its two rules hashed", k.chains)
	}
}

func TestRestartOverIntactTableRewritesNothing(t *testing.T) {
	nft, first := NewFakeProxier(v1.IPv4Protocol)
	setSplitTestCluster(first, 1)
	if err := first.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	want := sortedLines(nft.Dump())

	// A new kube-proxy (nothing remembered) over the same table: its start-up full sync
	// finds every service-port chain as it would write it.
	_, restarted := NewFakeProxier(v1.IPv4Protocol)
	rec := &txText{Interface: nft}
	restarted.nftables = rec
	setSplitTestCluster(restarted, 1)
	if err := restarted.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if written := rec.writtenServiceChains(0); len(written) != 0 {
		t.Errorf("the start-up full sync over an intact table re-wrote %d service-port chains: %v", len(written), written)
	}
	if got := sortedLines(nft.Dump()); got != want {
		t.Errorf("the start-up full sync changed the table:\n%s\nwant:\n%s", got, want)
	}

	// A restart with different Services re-writes exactly the ports that changed.
	_, changed := NewFakeProxier(v1.IPv4Protocol)
	rec = &txText{Interface: nft}
	changed.nftables = rec
	setSplitTestCluster(changed, 2)
	if err := changed.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if written := rec.writtenServiceChains(0); len(written) == 0 {
		t.Error("a start-up full sync with changed endpoints re-wrote nothing")
	}
}

func TestListedForm(t *testing.T) {
	for _, c := range []struct{ rule, want string }{
		{"meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }",
			"meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.0.0.1 . 80, 1 : 10.0.0.2 . 80 }"},
		{"meta l4proto udp dnat ip6 addr . port to numgen random mod 2 map { 0 : fd00::1 . 53 , 1 : fd00::2 . 53 }",
			"meta l4proto udp dnat ip6 to numgen random mod 2 map { 0 : fd00::1 . 53, 1 : fd00::2 . 53 }"},
		{"numgen random mod 2 vmap { 0 : goto endpoint-a , 1 : goto endpoint-b }",
			"numgen random mod 2 vmap { 0 : goto endpoint-a, 1 : goto endpoint-b }"},
		// Already listed, or nothing to change.
		{"meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.0.0.1 . 80, 1 : 10.0.0.2 . 80 }",
			"meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.0.0.1 . 80, 1 : 10.0.0.2 . 80 }"},
		{"numgen random mod 3 0 meta l4proto tcp dnat to 10.0.0.1:80", "numgen random mod 3 0 meta l4proto tcp dnat to 10.0.0.1:80"},
		{"update @affinity-x { ip saddr }", "update @affinity-x { ip saddr }"},
	} {
		if got := listedForm(c.rule); got != c.want {
			t.Errorf("listedForm(%q) = %q, want %q", c.rule, got, c.want)
		}
		if hashRule(fnvOffset64, c.rule) != hashRule(fnvOffset64, c.want) {
			t.Errorf("%q and its listed form hash differently", c.rule)
		}
	}
}

func TestChainWritesOfShapes(t *testing.T) {
	rec := &servicePortRecorder{}
	rec.ensureChain("svc", false)
	rec.entries = append(rec.entries,
		stageEntry{verb: stageAdd, obj: &knftables.Rule{Chain: "svc", Rule: "numgen random mod 2 0 goto ep-a"}},
		stageEntry{verb: stageAdd, obj: &knftables.Rule{Chain: "svc", Rule: "goto ep-b"}},
	)
	rec.ensureChain("map", false)
	rec.entries = append(rec.entries,
		stageEntry{verb: stageAdd, obj: &knftables.Rule{Chain: "map", Rule: "numgen random mod 2 vmap { 0 : goto ep-a, 1 : goto ep-b }"}})
	rec.ensureChain("empty", false)
	got := chainWritesOf(rec)
	want := []chainWrite{
		{chain: "svc", hash: hashRule(hashRule(fnvOffset64, "numgen random mod 2 0 goto ep-a"), "goto ep-b"), rules: 2},
		{chain: "map", hash: hashRule(fnvOffset64, "numgen random mod 2 vmap { 0 : goto ep-a, 1 : goto ep-b }"), rules: 1, braces: true},
		{chain: "empty", hash: fnvOffset64},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("chainWritesOf = %+v, want %+v", got, want)
	}
}

func TestChainsIntactListsTextOnlyWhenUndecided(t *testing.T) {
	setFree := chainWrite{chain: "svc", hash: 7, rules: 2}
	intact := chainWrite{chain: "ep", hash: 1, rules: 1}
	for _, tc := range []struct {
		name      string
		writes    []chainWrite
		shape     chainShape // the kernel's shape of "svc", whose text the dump left unknown
		text      map[string]uint64
		want      bool
		listings  int
		textFails bool
	}{
		{name: "another number of rules", writes: []chainWrite{intact, setFree}, shape: chainShape{rules: 1}},
		{name: "an anonymous set where the sync writes no literal", writes: []chainWrite{intact, setFree}, shape: chainShape{rules: 2, anonRefs: 1}},
		{name: "a known chain differs before an undecided one", writes: []chainWrite{setFree, {chain: "ep", hash: 2, rules: 1}}, shape: chainShape{rules: 2}},
		{name: "same shape, same text", writes: []chainWrite{intact, setFree}, shape: chainShape{rules: 2}, text: map[string]uint64{"svc": 7}, want: true, listings: 1},
		{name: "same shape, other text", writes: []chainWrite{intact, setFree}, shape: chainShape{rules: 2}, text: map[string]uint64{"svc": 8}, listings: 1},
		{name: "same shape, gone from the text listing", writes: []chainWrite{intact, setFree}, shape: chainShape{rules: 2}, text: map[string]uint64{}, listings: 1},
		{name: "a set literal may be an anonymous set", writes: []chainWrite{{chain: "svc", hash: 7, rules: 1, braces: true}}, shape: chainShape{rules: 1, anonRefs: 1}, text: map[string]uint64{"svc": 7}, want: true, listings: 1},
		{name: "the text listing fails", writes: []chainWrite{intact, setFree}, shape: chainShape{rules: 2}, listings: 1, textFails: true},
		{name: "an unhashed write", writes: []chainWrite{intact, {chain: "svc", unknown: true}}, shape: chainShape{rules: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listings := 0
			k := &kernelListing{
				chains:  map[string]uint64{"ep": 1},
				unknown: map[string]chainShape{"svc": tc.shape},
				text: sync.OnceValue(func() *kernelListing {
					listings++
					if tc.textFails {
						return nil
					}
					return &kernelListing{chains: tc.text}
				}),
			}
			for range 2 { // the listing runs once however often it is needed
				if got := k.intact(tc.writes); got != tc.want {
					t.Errorf("intact = %v, want %v", got, tc.want)
				}
			}
			if listings != tc.listings {
				t.Errorf("listed the table as text %d times, want %d", listings, tc.listings)
			}
		})
	}
}
