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
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

func TestResolve(t *testing.T) {
	const table = "ip kube-proxy"
	// link returns a link whose last seen generation is 20, in an epoch that started at
	// generation 10, with chain x written in that epoch and y written in the one before.
	link := func() *nftLink {
		l := newNFTLink(nil)
		l.gen, l.genKnown, l.epoch, l.epochStart = 20, true, 3, 10
		m := l.memory(table)
		m.baselines["intact"] = chainBaseline{kernel: 100, text: 1}
		m.baselines["damaged"] = chainBaseline{kernel: 200, text: 2}
		m.baselines["x"] = chainBaseline{kernel: 300, text: 3}
		m.baselines["gone"] = chainBaseline{kernel: 400, text: 4}
		m.pending["x"] = pendingWrite{text: 33, epoch: 3}
		m.pending["y"] = pendingWrite{text: 44, epoch: 2}
		return l
	}
	kernel := map[string]uint64{"intact": 100, "damaged": 201, "x": 301}

	for _, tc := range []struct {
		name string
		gen  uint32
		ok   bool
	}{
		{"at the last commit", 20, true},
		{"before another table's later commit of ours", 15, true},
		{"after someone else's commit", 21, false},
		{"before the epoch", 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := link()
			k := l.resolve(table, &tableSnapshot{gen: tc.gen, chains: kernel})
			if !tc.ok {
				if _, unknown := k.unknown["x"]; !unknown || len(k.unknown) != 1 {
					t.Fatalf("with a write that cannot be confirmed: text %v, unknown %v, want only x unknown", k.chains, k.unknown)
				}
				return
			}
			if len(k.unknown) != 0 {
				t.Fatalf("not resolved: unknown %v", k.unknown)
			}
			if k.chains["intact"] != 1 || k.drifted["intact"] {
				t.Errorf("intact chain: %x drifted=%v, want its baseline's text", k.chains["intact"], k.drifted["intact"])
			}
			if !k.drifted["damaged"] {
				t.Error("a chain whose kernel hash left its baseline, unwritten by kube-proxy, is not drifted")
			}
			if k.chains["x"] != 33 || k.drifted["x"] {
				t.Errorf("written chain: %x drifted=%v, want the written text", k.chains["x"], k.drifted["x"])
			}
			m := l.memory(table)
			if b := m.baselines["x"]; b != (chainBaseline{kernel: 301, text: 33}) {
				t.Errorf("the confirmed write left baseline %+v", b)
			}
			if _, ok := m.baselines["gone"]; ok {
				t.Error("the baseline of a chain the kernel no longer has was kept")
			}
			if len(m.pending) != 0 {
				t.Errorf("pending writes %v left after a complete resolve", m.pending)
			}
		})
	}

	// Someone else committed: the unconfirmed write of x is trusted only if the kernel
	// still holds exactly the bytes of its baseline.
	l := link()
	if k := l.resolve(table, &tableSnapshot{gen: 21, chains: map[string]uint64{"intact": 100, "x": 300}}); len(k.unknown) != 0 || k.chains["x"] != 3 {
		t.Error("a chain with its baseline's bytes did not resolve to its baseline's text")
	}
	// A chain with neither baseline nor write is unknown, with the shape the dump gave it.
	l = link()
	shape := chainShape{rules: 3, anonRefs: 1}
	k := l.resolve(table, &tableSnapshot{gen: 20, chains: map[string]uint64{"new": 1, "intact": 100}, shapes: map[string]chainShape{"new": shape, "intact": {rules: 1}}})
	if _, resolved := k.chains["new"]; resolved || k.unknown["new"] != shape {
		t.Errorf("a chain with neither baseline nor write: text %v, unknown %+v, want unknown with shape %+v", resolved, k.unknown, shape)
	}
	if k.chains["intact"] != 1 || len(k.unknown) != 1 {
		t.Errorf("the intact chain beside an unknown one: text %x, unknown %+v", k.chains["intact"], k.unknown)
	}
	if m := l.memory(table); len(m.pending) != 0 {
		t.Errorf("pending writes %v left after a resolve", m.pending)
	}
}

func TestRealKernelTrackedCommits(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	link := linkKernel(t, fp, real)
	// Writes wait for a snapshot to be confirmed until the test settles them.
	const table = "ip kube-proxy"
	write := func(rule string) {
		t.Helper()
		tx := real.NewTransaction()
		tx.Add(&knftables.Table{})
		tx.Add(&knftables.Chain{Name: "a"})
		tx.Flush(&knftables.Chain{Name: "a"})
		tx.Add(&knftables.Rule{Chain: "a", Rule: rule})
		if err := link.runTracked(table, tx.String(), func() error { return real.Run(context.Background(), tx) }); err != nil {
			t.Fatal(err)
		}
	}
	resolve := func() *kernelListing {
		t.Helper()
		snap, err := link.snapshot(nfprotoIPv4, kubeProxyTable)
		if err != nil {
			t.Fatal(err)
		}
		return link.resolve(table, snap)
	}
	if k := resolve(); len(k.unknown) != 0 || len(k.chains) != 0 {
		t.Fatalf("the missing table did not resolve as empty: %+v", k)
	}
	write("ip daddr 10.0.0.1 drop")
	k := resolve()
	if want := hashRule(fnvOffset64, "ip daddr 10.0.0.1 drop"); len(k.unknown) != 0 || k.chains["a"] != want {
		t.Fatalf("kube-proxy's own write did not resolve to its text: %+v", k)
	}

	// Someone else commits after kube-proxy's write: the write cannot be confirmed.
	write("ip daddr 10.0.0.2 drop")
	run("add", "table", "ip", "other")
	if k := resolve(); len(k.unknown) != 1 || k.unknown["a"] != (chainShape{rules: 1}) {
		t.Fatalf("a write followed by someone else's commit: text %v, unknown %+v, want a unknown with one rule", k.chains, k.unknown)
	}

	// Someone else commits before kube-proxy's write: the write is confirmed.
	run("add", "table", "ip", "another")
	write("ip daddr 10.0.0.3 drop")
	if k := resolve(); len(k.unknown) != 0 || k.chains["a"] != hashRule(fnvOffset64, "ip daddr 10.0.0.3 drop") {
		t.Fatalf("a write made after someone else's commit did not resolve to its text: %+v", k)
	}

	// A failed transaction notes nothing and leaves the baseline.
	tx := real.NewTransaction()
	tx.Flush(&knftables.Chain{Name: "a"})
	tx.Add(&knftables.Rule{Chain: "a", Rule: "this is not a rule"})
	if err := link.runTracked(table, tx.String(), func() error { return real.Run(context.Background(), tx) }); err == nil {
		t.Fatal("the broken transaction succeeded")
	}
	if k := resolve(); len(k.unknown) != 0 || k.chains["a"] != hashRule(fnvOffset64, "ip daddr 10.0.0.3 drop") {
		t.Fatalf("after a failed transaction: %+v", k)
	}

	// Confirmed at the end of its sync (settle), by a dump of the written chain, a write
	// stands even if someone else commits after it; and the same chain changed behind
	// kube-proxy's back after that is drifted.
	write("ip daddr 10.0.0.4 drop")
	if pending, confirmed := link.settle(table); pending != 1 || !confirmed {
		t.Errorf("settle found %d writes pending and confirmed them: %v; want 1, true", pending, confirmed)
	}
	if m := link.memory(table); len(m.pending) != 0 {
		t.Errorf("a one-chain write is still pending: %v", m.pending)
	}
	// A write whose outcome is unknown stays pending, and does not keep settle from
	// confirming the sure ones.
	write("ip daddr 10.0.0.5 drop")
	link.memory(table).noteWrites("flush chain ip kube-proxy b\nadd rule ip kube-proxy b counter\n", link.epoch, true)
	if pending, confirmed := link.settle(table); pending != 2 || confirmed {
		t.Errorf("settle with one unsure write found %d pending, all confirmed: %v; want 2, false", pending, confirmed)
	}
	if m := link.memory(table); len(m.pending) != 1 || !m.pending["b"].unsure || m.baselines["a"].text != hashRule(fnvOffset64, "ip daddr 10.0.0.5 drop") {
		t.Errorf("after settle: pending %v, baseline of a %+v; want only b pending and a confirmed", m.pending, m.baselines["a"])
	}
	link.memory(table).dropPending()
	write("ip daddr 10.0.0.4 drop")
	if pending, confirmed := link.settle(table); pending != 1 || !confirmed {
		t.Errorf("settle found %d writes pending and confirmed them: %v; want 1, true", pending, confirmed)
	}
	run("add", "table", "ip", "yet-another")
	if k := resolve(); len(k.unknown) != 0 || k.drifted["a"] || k.chains["a"] != hashRule(fnvOffset64, "ip daddr 10.0.0.4 drop") {
		t.Fatalf("a write confirmed at once, then someone else's commit: %+v", k)
	}
	run("add", "rule", "ip", kubeProxyTable, "a", "counter")
	if k := resolve(); !k.drifted["a"] {
		t.Fatalf("a confirmed chain changed behind kube-proxy's back is not drifted: %+v", k)
	}

	// A link that cannot open sockets runs the transaction and confirms nothing.
	broken := newNFTLink(func() (int, error) { return -1, errors.New("no netlink") })
	ran := false
	if err := broken.runTracked(table, tx.String(), func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("without netlink, runTracked ran=%v err=%v", ran, err)
	}
}

func TestCertainlyCommits(t *testing.T) {
	for text, want := range map[string]bool{
		"": false,
		"add table ip kube-proxy\nadd chain ip kube-proxy a\n":       false,
		"flush chain ip kube-proxy a\n":                              false,
		"add element ip kube-proxy m { 1 : goto a }\n":               false,
		"add chain ip kube-proxy a\nadd rule ip kube-proxy a drop\n": true,
		"delete chain ip kube-proxy a\n":                             true,
		"delete element ip kube-proxy m { 1 }\n":                     true,
		"create chain ip kube-proxy a\n":                             true,
		"insert rule ip kube-proxy a drop\n":                         true,
	} {
		if got := certainlyCommits(text); got != want {
			t.Errorf("certainlyCommits(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestRealKernelLargeSyncStaysConfirmed(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	// One transaction per sync, as without --max-sync-transaction-size.
	rec, fp, _, _ := linkedProxier(t, real, 0)
	link := fp.kernelLink
	const table = "ip kube-proxy"
	// The first sync writes every chain, more than settle confirms at once (confirmBatch): it
	// ends by confirming them all, batch by batch.
	setOnePortTestServices(fp, "ns", confirmBatch+20)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	m := link.memory(table)
	if chains := strings.Count(run("list", "table", "ip", kubeProxyTable), "\tchain "); len(m.pending) != 0 || len(m.baselines) != chains || chains <= confirmBatch {
		t.Fatalf("after the first sync: %d writes pending, %d baselines; want none pending, a baseline for each of %d chains (more than %d)",
			len(m.pending), len(m.baselines), chains, confirmBatch)
	}

	// A Service with no endpoints adds only map elements: its transaction still commits
	// certainly, so the link's epoch goes on and the table stays as remembered.
	epoch := link.epoch
	makeServiceMap(fp, makeTestService("ns", "no-endpoints", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "172.30.99.1"
		svc.Spec.Ports = []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP}}
	}))
	n := len(rec.texts)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if len(rec.texts) != n+1 || !strings.Contains(rec.texts[n], "add element") || !strings.Contains(rec.texts[n], commitMarker) {
		t.Fatalf("the partial sync for a Service with no endpoints wrote %q, want its elements and the commit marker", rec.texts[n:])
	}
	if link.epoch != epoch {
		t.Errorf("the element-only commit started a new epoch (%d, was %d): it was taken for someone else's", link.epoch, epoch)
	}
	if out := run("list", "table", "ip", kubeProxyTable); strings.Contains(out, commitMarker) || !strings.Contains(out, "172.30.99.1") {
		t.Errorf("the table after the partial sync:\n%s\nwant the new ClusterIP and no %s", out, commitMarker)
	}
	if k := link.quiet(table); k == nil {
		t.Error("after kube-proxy's own element-only commit, the table is not as remembered (quiet)")
	}

	// Someone else commits: the full sync dumps the table, and every chain resolves from the
	// baselines the first sync's settle recorded, with no text listing and nothing re-written.
	run("add", "table", "ip", "other")
	listings, n := textListings(t, real), len(rec.texts)
	periodicFullSync(t, fp)
	if got := textListings(t, real) - listings; got != 0 {
		t.Errorf("the full sync after someone else's commit listed the table as text %d times, want 0", got)
	}
	if written := rec.writtenServiceChains(n); len(written) != 0 {
		t.Errorf("the full sync of an intact table re-wrote %v", written)
	}
}
