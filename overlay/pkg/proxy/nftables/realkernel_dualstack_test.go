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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// The drift check of one family while the other family's proxier commits, on the real kernel.
// The commits are made between the pieces of the drift check's rule dump (the link's
// snapshotPieceRead), so the interleaving does not depend on timing.

// dualStackPair is a dual-stack kube-proxy's two proxiers, which share one link in a namespace
// of the test's, with their tables written and settled.
type dualStackPair struct {
	t        *testing.T
	run      func(args ...string) string
	nft      func(args ...string) error // run, for goroutines other than the test's
	real4    knftables.Interface
	fp4, fp6 *Proxier
	rec6     *txText
	link     *nftLink
	want6    map[string]string
	// ip4Changed is whether the IPv4 proxier's "plain" Service has its second endpoint
	// changed (commit4 toggles it).
	ip4Changed bool
}

// newDualStackPair writes the damage-test cluster through an IPv4 proxier and services IPv6
// Services through an IPv6 proxier, and settles both with periodic full syncs.
func newDualStackPair(t *testing.T, services int) *dualStackPair {
	t.Helper()
	real4, run := realNFT(t, knftables.IPv4Family)
	real6, err := knftables.New(knftables.IPv6Family, kubeProxyTable) // the same shim on PATH
	if err != nil {
		t.Fatal(err)
	}
	p := &dualStackPair{t: t, run: run, real4: real4}
	ns := kernelOf(t, real4).netns
	nftPath, err := lookPathNFT()
	if err != nil {
		t.Fatal(err)
	}
	p.nft = func(args ...string) error {
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns, nftPath}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	_, p.fp4 = NewFakeProxier(v1.IPv4Protocol)
	useKernel(p.fp4, &txText{Interface: real4})
	frozenClock(p.fp4)
	p.link = linkKernel(t, p.fp4, real4)
	p.fp4.maxTransactionOps = 20
	p.rec6 = &txText{Interface: real6}
	_, p.fp6 = NewFakeProxier(v1.IPv6Protocol)
	frozenClock(p.fp6)
	p.fp6.kernelLink = p.link
	useKernel(p.fp6, p.rec6)
	p.fp6.maxTransactionOps = 200

	setDamageTestCluster(p.fp4)
	if err := p.fp4.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	setOnePortTestServices(p.fp6, "ns6", services)
	if err := p.fp6.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	periodicFullSync(t, p.fp6)
	periodicFullSync(t, p.fp4)
	p.want6 = tableObjects(t, run, "ip6")
	if len(p.serviceChains6()) != services {
		t.Fatalf("the IPv6 proxier wrote %d service chains, want %d", len(p.serviceChains6()), services)
	}
	return p
}

// setOnePortTestServices gives fp n ClusterIP Services in namespace, of one TCP port each,
// each with two endpoints, addressed in fp's IP family.
func setOnePortTestServices(fp *Proxier, namespace string, n int) {
	addressType, clusterIP, endpoint := discovery.AddressTypeIPv4, func(i int) string {
		return fmt.Sprintf("172.30.%d.%d", i/250, i%250+1)
	}, func(j, i int) string { return fmt.Sprintf("10.%d.%d.%d", 179+j, i/250, i%250+1) }
	if fp.ipFamily == v1.IPv6Protocol {
		addressType, clusterIP, endpoint = discovery.AddressTypeIPv6, func(i int) string {
			return fmt.Sprintf("fd00:172:30::%x", i)
		}, func(j, i int) string { return fmt.Sprintf("fd00:10:180::%d:%x", j, i) }
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("svc%d", i)
		makeServiceMap(fp, makeTestService(namespace, name, func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIP(i)
			svc.Spec.Ports = []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP}}
		}))
		populateEndpointSlices(fp, makeTestEndpointSlice(namespace, name, 1, func(eps *discovery.EndpointSlice) {
			eps.AddressType = addressType
			eps.Endpoints = []discovery.Endpoint{{Addresses: []string{endpoint(1, i)}}, {Addresses: []string{endpoint(2, i)}}}
			eps.Ports = []discovery.EndpointPort{{Name: ptr.To("p80"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}}
		}))
	}
}

// serviceChains6 returns the service chains of the ip6 table as the IPv6 proxier wrote it,
// sorted.
func (p *dualStackPair) serviceChains6() []string {
	var chains []string
	for key := range p.want6 {
		if strings.HasPrefix(key, "chain service-") && strings.Contains(key, "-ns6/") {
			chains = append(chains, strings.TrimPrefix(key, "chain "))
		}
	}
	sort.Strings(chains)
	return chains
}

// commit4 has the IPv4 proxier commit a change of its own: the second endpoint of its "plain"
// Service changes address, back and forth. It may run on any goroutine.
func (p *dualStackPair) commit4() error {
	a := damageTestSlice("plain", damageTestEndpoint("10.180.1.1", testNodeName), damageTestEndpoint("10.180.1.2", "other-node"))
	b := a.DeepCopy()
	b.Endpoints[1].Addresses = []string{"10.180.1.3"}
	if p.ip4Changed {
		a, b = b, a
	}
	p.ip4Changed = !p.ip4Changed
	p.fp4.OnEndpointSliceUpdate(a, b)
	return p.fp4.syncProxyRules()
}

// flush6 flushes chains of the ip6 table in one nft transaction, behind kube-proxy's back. It
// may run on any goroutine.
func (p *dualStackPair) flush6(chains []string) error {
	var script strings.Builder
	for _, chain := range chains {
		fmt.Fprintf(&script, "flush chain ip6 %s %s\n", kubeProxyTable, chain)
	}
	file := filepath.Join(p.t.TempDir(), "flush.nft")
	if err := os.WriteFile(file, []byte(script.String()), 0o644); err != nil {
		return err
	}
	return p.nft("-f", file)
}

// duringRuleDumps6 makes do run after the first piece of each of the next n dumps of ip6 rules
// that a snapshot reads (n < 0: every one), and returns a function that tells how many times it
// ran and the errors it returned so far.
func (p *dualStackPair) duringRuleDumps6(n int, do func() error) func() (int, []error) {
	ran := 0
	var errs []error
	p.link.snapshotPieceRead = func(family uint8, msg uint16, piece int) {
		if family != nfprotoIPv6 || msg != nftMsgGetRule || piece != 1 || n >= 0 && ran >= n {
			return
		}
		ran++
		if err := do(); err != nil {
			errs = append(errs, err)
		}
	}
	return func() (int, []error) { return ran, errs }
}

// textListings6 returns how many times nft has listed the ip6 table as text so far.
func (p *dualStackPair) textListings6() int {
	p.t.Helper()
	b, err := os.ReadFile(kernelOf(p.t, p.real4).invocations)
	if err != nil && !os.IsNotExist(err) {
		p.t.Fatal(err)
	}
	return strings.Count(string(b), "-t list table ip6 "+kubeProxyTable+"\n")
}

// counts are the figures that say how the IPv6 drift check read its table.
type dualStackCounts struct {
	text, fallbacks, netlink, kept int
}

// counts returns the IPv6 drift check's text listings, fallbacks to them, netlink reads, and
// the snapshots the link kept across the other family's commits, so far.
func (p *dualStackPair) counts() dualStackCounts {
	p.t.Helper()
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	fallbacks, err := testutil.GetCounterMetricValue(metrics.NFTablesSyncFallbacksTotal.WithLabelValues(string(v1.IPv6Protocol), driftDumpFailed))
	if err != nil {
		p.t.Fatal(err)
	}
	netlink, err := testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesDriftReadSeconds.WithLabelValues(string(v1.IPv6Protocol), "netlink"))
	if err != nil {
		p.t.Fatal(err)
	}
	p.link.mu.Lock()
	kept := p.link.keptAcrossCommits
	p.link.mu.Unlock()
	return dualStackCounts{text: p.textListings6(), fallbacks: int(fallbacks), netlink: int(netlink), kept: int(kept)}
}

// checkRepaired checks that the ip6 table is exactly as the IPv6 proxier wrote it, and that
// the syncs since its transaction number from re-wrote some service-port chain.
func (p *dualStackPair) checkRepaired(from int) {
	p.t.Helper()
	if diff := tableDiff(p.want6, tableObjects(p.t, p.run, "ip6")); diff != "" {
		p.t.Errorf("the IPv6 proxier's periodic full sync left its table damaged:\n%s", diff)
	}
	if len(p.rec6.writtenServiceChains(from)) == 0 {
		p.t.Error("the repairing full sync re-wrote no service-port chain")
	}
}

func TestRealKernelDualStackDumpOverlap(t *testing.T) {
	// Enough rules that the ip6 rule dump comes in several pieces of 32 KiB.
	const services = 300

	t.Run("the IPv4 proxier commits during the IPv6 dump", func(t *testing.T) {
		p := newDualStackPair(t, services)
		// A chain damaged behind kube-proxy's back (which also ends the IPv6 proxier's
		// quiet: its periodic full sync must dump the table).
		damaged := p.serviceChains6()[len(p.serviceChains6())/2]
		p.run("flush", "chain", "ip6", kubeProxyTable, damaged)
		gen0, err := p.link.generation()
		if err != nil {
			t.Fatal(err)
		}
		// As on a node where the dump outlasts the other family's sync period, the IPv4
		// proxier commits during every dump of the ip6 rules: a retry would not help.
		fired := p.duringRuleDumps6(-1, p.commit4)
		before, n := p.counts(), len(p.rec6.texts)
		periodicFullSync(t, p.fp6)
		p.link.snapshotPieceRead = nil
		ran, errs := fired()
		if ran != 1 || len(errs) != 0 {
			t.Errorf("the IPv4 commits during the IPv6 rule dumps ran %d times, errors %v, want once: the first dump stands", ran, errs)
		}
		if gen, err := p.link.generation(); err != nil || gen == gen0 {
			t.Fatalf("the IPv4 proxier's sync left the generation at %d (%v): it committed nothing", gen, err)
		}
		after := p.counts()
		if after.kept != before.kept+1 || after.text != before.text || after.fallbacks != before.fallbacks || after.netlink != before.netlink+1 {
			t.Errorf("the IPv6 drift check read %+v (before: %+v), want one netlink read kept across the IPv4 commits and no text listing", after, before)
		}
		p.checkRepaired(n)
		if written := p.rec6.writtenServiceChains(n); !written[damaged] {
			t.Errorf("the repairing full sync re-wrote %d chains, not the damaged %s", len(written), damaged)
		}
		checkSetCount(t, p.fp6)
		checkSetCount(t, p.fp4)

		// With nothing damaged, a full sync that the IPv4 commits overlap again re-writes
		// nothing and lists no text. Another program's commit to a table of its own, before
		// the sync, makes the IPv6 proxier dump its table again.
		p.run("add", "table", "inet", "unrelated")
		fired = p.duringRuleDumps6(-1, p.commit4)
		before, n = p.counts(), len(p.rec6.texts)
		periodicFullSync(t, p.fp6)
		p.link.snapshotPieceRead = nil
		if ran, errs := fired(); ran != 1 || len(errs) != 0 {
			t.Errorf("the IPv4 commits during the IPv6 rule dumps ran %d times, errors %v, want once: the first dump stands", ran, errs)
		}
		if after := p.counts(); after.kept != before.kept+1 || after.text != before.text || after.netlink != before.netlink+1 {
			t.Errorf("the IPv6 drift check read %+v (before: %+v), want one netlink read kept across the IPv4 commit", after, before)
		}
		if written := p.rec6.writtenServiceChains(n); len(written) != 0 {
			t.Errorf("a full sync of the intact ip6 table re-wrote %v", written)
		}
	})

	t.Run("someone else damages the IPv6 table during its dump", func(t *testing.T) {
		p := newDualStackPair(t, services)
		p.run("add", "table", "inet", "unrelated")
		// Every service chain is flushed after the dump has read the first of them: a dump
		// kept across that commit would take those for intact.
		chains := p.serviceChains6()
		fired := p.duringRuleDumps6(1, func() error {
			if err := p.commit4(); err != nil {
				return err
			}
			return p.flush6(chains)
		})
		before, n := p.counts(), len(p.rec6.texts)
		periodicFullSync(t, p.fp6)
		p.link.snapshotPieceRead = nil
		if ran, errs := fired(); ran != 1 || len(errs) != 0 {
			t.Fatalf("the damage during the IPv6 rule dump ran %d times, errors %v, want once", ran, errs)
		}
		if after := p.counts(); after.kept != before.kept || after.fallbacks != before.fallbacks || after.text != before.text {
			t.Errorf("the IPv6 drift check read %+v (before: %+v), want the interrupted read dropped and the next one kept, with no text listing", after, before)
		}
		p.checkRepaired(n)
		written := p.rec6.writtenServiceChains(n)
		for _, chain := range chains {
			if !written[chain] {
				t.Errorf("the damaged chain %s was not re-written", chain)
			}
		}
		checkSetCount(t, p.fp6)
	})

	t.Run("someone else commits during every try", func(t *testing.T) {
		p := newDualStackPair(t, services)
		damaged := p.serviceChains6()[0]
		p.run("flush", "chain", "ip6", kubeProxyTable, damaged)
		other := 0
		fired := p.duringRuleDumps6(-1, func() error {
			other++
			return p.nft("add", "table", "inet", fmt.Sprintf("other-%d", other))
		})
		before, n := p.counts(), len(p.rec6.texts)
		periodicFullSync(t, p.fp6)
		p.link.snapshotPieceRead = nil
		if ran, errs := fired(); ran != 3 || len(errs) != 0 {
			t.Fatalf("the commits during the IPv6 rule dumps ran %d times, errors %v, want once in each of three tries", ran, errs)
		}
		after := p.counts()
		if after.kept != before.kept || after.fallbacks != before.fallbacks+1 || after.text != before.text+1 {
			t.Errorf("the IPv6 drift check read %+v (before: %+v), want no read kept, one fallback counted and one text listing", after, before)
		}
		p.checkRepaired(n)
		if written := p.rec6.writtenServiceChains(n); !written[damaged] {
			t.Errorf("the repairing full sync re-wrote %d chains, not the damaged %s", len(written), damaged)
		}
	})
}
