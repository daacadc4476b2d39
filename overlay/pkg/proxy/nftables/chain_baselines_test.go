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
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"sigs.k8s.io/knftables"
)

func TestNoteWritesCountsSets(t *testing.T) {
	m := &chainMemory{baselines: map[string]chainBaseline{}, pending: map[string]pendingWrite{}}
	// The dump: the service-ips map, one named set, and chain "old" with two anonymous sets.
	m.countSets([]string{serviceIPsMap, "aff"}, map[string]chainShape{"old": {rules: 2, anonRefs: 2}, "plain": {rules: 1}})
	if m.setTotal() != 4 {
		t.Fatalf("after the dump: %d sets, want 4", m.setTotal())
	}
	m.noteWrites(strings.Join([]string{
		"add map ip kube-proxy service-ips { type ipv4_addr : verdict ; }",                                                          // exists
		"add set ip kube-proxy client-affinity { type ipv4_addr ; }",                                                                // new: 5
		"flush chain ip kube-proxy old",                                                                                             // frees 2: 3
		"add rule ip kube-proxy old ip daddr { 10.0.0.1, 10.0.0.2 } dnat to numgen random mod 2 map { 0 : 10.1.0.1, 1 : 10.1.0.2 }", // 2 literals: 5
		"add rule ip kube-proxy old update @client-affinity { ip saddr }",                                                           // a key, not a literal
		"add chain ip kube-proxy new",
		"add rule ip kube-proxy new numgen random mod 2 vmap { 0 : drop, 1 : accept }", // 6
		"delete set ip kube-proxy aff",                                                 // 5
		"delete set ip kube-proxy never-there",
		"add element ip kube-proxy service-ips { 172.30.0.1 : goto new }",
	}, "\n"), 1, false)
	if m.setTotal() != 5 || m.anon["old"] != 2 || m.anon["new"] != 1 {
		t.Errorf("after the writes: %d sets, anonymous %v; want 5, old 2 and new 1", m.setTotal(), m.anon)
	}
	m.noteWrites("delete chain ip kube-proxy new\nflush chain ip kube-proxy old", 1, true)
	if m.setTotal() != 2 || len(m.anon) != 0 {
		t.Errorf("after deleting new and flushing old: %d sets, anonymous %v; want 2 and none", m.setTotal(), m.anon)
	}
	m.noteWrites("add rule ip kube-proxy plain ip daddr { 10.0.0.3 } drop\ndelete table ip kube-proxy", 1, false)
	if m.setTotal() != 0 || len(m.anon) != 0 || len(m.named) != 0 {
		t.Errorf("after deleting the table: %d sets, anonymous %v, named %v; want none", m.setTotal(), m.anon, m.named)
	}
	m.noteWrites("add table ip kube-proxy\nadd map ip kube-proxy service-ips { type ipv4_addr : verdict ; }", 1, false)
	if m.setTotal() != 1 {
		t.Errorf("after re-creating the table and its map: %d sets, want 1", m.setTotal())
	}
}

func TestNoteWrites(t *testing.T) {
	m := &chainMemory{
		baselines: map[string]chainBaseline{"gone": {1, 2}, "kept": {3, 4}},
		pending:   map[string]pendingWrite{"gone": {text: 5}},
	}
	m.noteWrites(strings.Join([]string{
		"add chain ip kube-proxy a",
		"flush chain ip kube-proxy a",
		"add rule ip kube-proxy a ip daddr 10.0.0.1 drop",
		`add rule ip kube-proxy a counter comment "c"`,
		"add chain ip kube-proxy empty",
		"flush chain ip kube-proxy empty",
		"add chain ip kube-proxy kept",
		"add rule ip kube-proxy unflushed counter",
		"flush chain ip kube-proxy placed",
		"add rule ip kube-proxy placed index 0 counter",
		"flush chain ip kube-proxy replaced",
		"replace rule ip kube-proxy replaced handle 4 counter",
		"delete chain ip kube-proxy gone",
		"add element ip kube-proxy service-ips { 172.30.0.1 . tcp . 80 : goto a }",
	}, "\n"), 7, false)

	want := hashRule(hashRule(fnvOffset64, "ip daddr 10.0.0.1 drop"), `counter comment "c"`)
	if p := m.pending["a"]; p.unsure || p.text != want || p.epoch != 7 {
		t.Errorf("flushed and filled chain: pending %+v, want text %x of epoch 7", p, want)
	}
	if p := m.pending["empty"]; p.unsure || p.text != fnvOffset64 {
		t.Errorf("flushed chain: pending %+v, want the empty chain's text", p)
	}
	for _, chain := range []string{"unflushed", "placed", "replaced"} {
		if p, ok := m.pending[chain]; !ok || !p.unsure {
			t.Errorf("%s: pending %+v, want an unsure write", chain, p)
		}
	}
	if _, ok := m.pending["kept"]; ok {
		t.Error("a chain that was only added (ensured) is a pending write")
	}
	if _, ok := m.baselines["kept"]; !ok {
		t.Error("adding an existing chain dropped its baseline")
	}
	if _, ok := m.pending["gone"]; ok {
		t.Error("a deleted chain is still pending")
	}
	if _, ok := m.baselines["gone"]; ok {
		t.Error("a deleted chain still has a baseline")
	}

	// A write of a transaction that raced another commit is unsure, whatever it wrote.
	m.noteWrites("flush chain ip kube-proxy a\nadd rule ip kube-proxy a counter\n", 8, true)
	if p := m.pending["a"]; !p.unsure {
		t.Errorf("a write noted as unsure: pending %+v", p)
	}

	// Deleting the table forgets everything.
	m.noteWrites("delete table ip kube-proxy\n", 9, false)
	if len(m.pending) != 0 || len(m.baselines) != 0 {
		t.Errorf("after delete table: pending %v, baselines %v", m.pending, m.baselines)
	}
}

func TestRealKernelDriftCheckOverNetlink(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	rec, fp, refFake, ref := linkedProxier(t, real, 50)
	setSplitTestCluster(fp, 1)
	setSplitTestCluster(ref, 1)
	sync := func() {
		t.Helper()
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
		if err := ref.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	driftReads := func(source string) uint64 {
		t.Helper()
		n, err := testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesDriftReadSeconds.WithLabelValues(string(v1.IPv4Protocol), source))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// check runs a periodic full sync and checks what it re-wrote, how it read the table
	// (read: "generation" when nothing else can have changed it, else "netlink"), and how
	// often it listed the table as text.
	check := func(step string, wantWritten []string, read string, wantListings int) {
		t.Helper()
		n, listings := len(rec.texts), textListings(t, real)
		reads := map[string]uint64{"generation": driftReads("generation"), "netlink": driftReads("netlink"), "text": driftReads("text")}
		stale := maps.Clone(fp.staleChains)
		periodicFullSync(t, fp)
		written := rec.writtenServiceChains(n)
		// Stale chains (of the endpoints before generation 2) are flushed again by every full
		// sync until they are old enough to delete, and then deleted; they are not re-writes.
		for chain := range fp.staleChains {
			delete(written, chain)
		}
		for chain := range stale {
			delete(written, chain)
		}
		if len(written) != len(wantWritten) {
			t.Errorf("%s: the full sync re-wrote %v, want %v", step, written, wantWritten)
		}
		for _, chain := range wantWritten {
			if !written[chain] {
				t.Errorf("%s: the full sync did not re-write %s", step, chain)
			}
		}
		if got := textListings(t, real) - listings; got != wantListings {
			t.Errorf("%s: the full sync listed the table as text %d times, want %d", step, got, wantListings)
		}
		// The drift-read metric counts the same reads: one generation check or netlink dump,
		// and the text listings.
		for source := range reads {
			want := uint64(0)
			switch source {
			case read:
				want = 1
			case "text":
				want = uint64(wantListings)
			}
			if got := driftReads(source) - reads[source]; got != want {
				t.Errorf("%s: %s reads in the metric: %d, want %d", step, source, got, want)
			}
		}
		checkServiceChainsMatch(t, refFake, run, "ip")
	}
	// Every commit since the first sync's complete read was kube-proxy's own: no dump.
	check("after the first sync", nil, "generation", 0)

	// New endpoints everywhere (a partial sync re-writes every service port), then someone
	// else commits. With writes left for the snapshot to confirm (settle off), they cannot be
	// confirmed any more, so the full sync lists the table as text, once, and finds nothing to
	// re-write.
	link := fp.kernelLink
	link.keepPending = true
	setSplitTestCluster(fp, 2)
	setSplitTestCluster(ref, 2)
	sync()
	run("add", "table", "ip", "other")
	check("after someone else's commit", nil, "netlink", 1)
	// That sync's own writes are pending, and no one else has committed since: the next one
	// confirms them chain by chain and reads no dump of the table.
	check("the next full sync", nil, "generation", 0)
	// Writes left pending, then someone else's commit: the full sync before that commit
	// confirmed them, so the dump after it resolves every chain without a text listing.
	setSplitTestCluster(fp, 3)
	setSplitTestCluster(ref, 3)
	sync()
	if m := link.memory("ip kube-proxy"); len(m.pending) == 0 {
		t.Fatal("a partial sync's writes were confirmed although settle is off")
	}
	check("after writes left pending", nil, "generation", 0)
	run("add", "table", "ip", "before-the-dump")
	check("after someone else's commit, with the writes confirmed", nil, "netlink", 0)
	link.keepPending = false
	check("with nothing pending", nil, "generation", 0)

	// A rule replaced behind kube-proxy's back keeps its handle; its chain is still found and
	// re-written, without a text listing.
	var damaged string
	for name := range refFake.Table.Chains {
		if strings.HasPrefix(name, "service-") && strings.HasSuffix(name, "ns/svc3/tcp/a") {
			damaged = name
		}
	}
	m := ruleHandleRegexp.FindAllStringSubmatch(run("-a", "list", "chain", "ip", kubeProxyTable, damaged), -1)
	if len(m) < 2 {
		t.Fatalf("no rule in %s", damaged)
	}
	run("replace", "rule", "ip", kubeProxyTable, damaged, "handle", m[1][1], "counter")
	check("after a rule was replaced", []string{damaged}, "netlink", 0)
	// The read that found drift does not stand for the table: the next one dumps it again.
	check("after the repair", nil, "netlink", 0)
	check("once repaired", nil, "generation", 0)

	// A partial sync that changes a service keeps the table remembered: its writes are
	// confirmed at once. Someone else's commit after it costs a dump, but no text listing.
	setSplitTestCluster(fp, 4)
	setSplitTestCluster(ref, 4)
	sync()
	check("after a partial sync", nil, "generation", 0)
	setSplitTestCluster(fp, 5)
	setSplitTestCluster(ref, 5)
	sync()
	run("add", "table", "ip", "another")
	check("after a partial sync and someone else's commit", nil, "netlink", 0)
	// Flushing a chain behind kube-proxy's back is a commit too: found, and re-written.
	run("flush", "chain", "ip", kubeProxyTable, damaged)
	check("after a chain was flushed", []string{damaged}, "netlink", 0)
}

func TestNoteWritesAcrossTransactions(t *testing.T) {
	m := &chainMemory{baselines: map[string]chainBaseline{}, pending: map[string]pendingWrite{}}
	m.noteWrites("flush chain ip kube-proxy a\nadd rule ip kube-proxy a counter\n", 4, false)
	// A later transaction of the same epoch adds a rule to a without flushing it.
	m.noteWrites("add rule ip kube-proxy a drop\n", 4, false)
	if p, want := m.pending["a"], hashRule(hashRule(fnvOffset64, "counter"), "drop"); p.unsure || p.text != want {
		t.Errorf("rules added over two transactions: pending %+v, want text %x", p, want)
	}
	// After someone else's commit (a new epoch) the same addition is unsure.
	m.noteWrites("add rule ip kube-proxy a drop\n", 5, false)
	if p := m.pending["a"]; !p.unsure {
		t.Errorf("a rule added in a later epoch: pending %+v, want unsure", p)
	}
}

func TestNoteWritesKeepsHeldTable(t *testing.T) {
	m := &chainMemory{baselines: map[string]chainBaseline{}, pending: map[string]pendingWrite{}}
	m.hold(map[string]uint64{"a": 1, "c": 3}, []string{"s"}, 7)
	m.noteWrites(`add chain ip kube-proxy b
flush chain ip kube-proxy b
add rule ip kube-proxy b drop
delete chain ip kube-proxy a
add chain ip kube-proxy c
add chain ip kube-proxy d
add set ip kube-proxy t { type ipv4_addr ; }
delete set ip kube-proxy s
add map ip kube-proxy m { type ipv4_addr : verdict ; }
`, 7, false)
	wantChains := map[string]uint64{"b": hashRule(fnvOffset64, "drop"), "c": 3, "d": fnvOffset64}
	if !m.heldValid || !maps.Equal(m.held, wantChains) || !maps.Equal(m.heldSets, map[string]bool{"t": true}) {
		t.Errorf("held %v (valid %v), sets %v; want %v and [t]", m.held, m.heldValid, m.heldSets, wantChains)
	}
	// A rule placed by index leaves the chain's rules unknown: the table is no longer held.
	m.noteWrites("add rule ip kube-proxy b index 0 counter\n", 7, false)
	if m.heldValid {
		t.Error("the table is still held after a write whose result is unknown")
	}
}
