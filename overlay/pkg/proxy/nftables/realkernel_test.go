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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/test/netns"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"
)

// These tests program the real kernel, with the real nft binary, inside a network namespace that
// they create and remove. They need root, ip and nft. They skip without them, unless
// KUBE_PROXY_OVERLAY_REAL_KERNEL=required (as in `make test`), which makes a missing
// prerequisite a failure instead.

// addTestNetns creates the network namespace name, and removes it when the test ends. The
// first call also removes the namespaces that earlier test processes left (sweepTestNetns).
func addTestNetns(t *testing.T, name string) {
	t.Helper()
	sweepOnce.Do(func() { sweepTestNetns(t) })
	if err := netns.Add(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Error(err)
		}
	})
}

var sweepOnce sync.Once

// testNetnsName matches the namespaces that these tests create: kpo-test-<pid>-<n>.
var testNetnsName = regexp.MustCompile(`^kpo-test-([0-9]+)-[0-9]+$`)

// sweepTestNetns removes the namespaces of test processes that are gone: a test binary killed
// by a timeout or an interrupt, or one that panicked, runs no clean-up. A namespace of a live
// process (a test binary running beside this one) stays.
func sweepTestNetns(t *testing.T) {
	t.Helper()
	deleted, err := netns.Sweep(func(name string) bool {
		m := testNetnsName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		return err == nil && netns.ProcessGone(pid)
	})
	for _, name := range deleted {
		t.Logf("removed the leftover namespace %s of a test process that is gone", name)
	}
	if err != nil {
		t.Logf("removing leftover namespaces: %v", err)
	}
}

// realNFT returns a knftables.Interface for kube-proxy's table whose nft runs inside a new
// network namespace, and a function that runs nft in that namespace and returns its output.
func realNFT(t *testing.T, family knftables.Family) (knftables.Interface, func(args ...string) string) {
	t.Helper()
	nft, run, _ := realNFTNetns(t, family)
	return nft, run
}

// realNFTNetns is realNFT that also returns the name of the network namespace (under
// /var/run/netns), for tests that wire it to other namespaces.
func realNFTNetns(t *testing.T, family knftables.Family) (knftables.Interface, func(args ...string) string, string) {
	t.Helper()
	required := os.Getenv("KUBE_PROXY_OVERLAY_REAL_KERNEL") == "required"
	skip := func(why string) {
		if required {
			t.Fatalf("real-kernel test cannot run: %s", why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		skip("needs root")
	}
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		skip("needs ip (iproute2)")
	}
	nftPath, err := lookPathNFT()
	if err != nil {
		skip("needs nft (nftables)")
	}
	ns := fmt.Sprintf("kpo-test-%d-%d", os.Getpid(), time.Now().UnixNano()%1000000)
	addTestNetns(t, ns)
	// knftables runs the nft it finds on PATH: put one there that runs the real one inside
	// the namespace.
	dir := t.TempDir()
	// The shim also logs each invocation's arguments, for tests that count them.
	invocations := filepath.Join(dir, "invocations")
	shim := fmt.Sprintf("#!/bin/sh\necho \"$*\" >>%s\nexec %s netns exec %s %s \"$@\"\n", invocations, ipPath, ns, nftPath)
	if err := os.WriteFile(filepath.Join(dir, "nft"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	nft, err := knftables.New(family, kubeProxyTable)
	if err != nil {
		t.Fatalf("knftables.New: %v", err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(ipPath, append([]string{"netns", "exec", ns, nftPath}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("nft %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	realKernels.Store(nft, realKernel{netns: ns, invocations: invocations})
	return nft, run, ns
}

// frozenClock gives fp a fake clock, at the real time now, that moves only when the test
// moves it: what ages (stale chains) and what is stamped (the last full sync) then does not
// depend on how fast the machine runs the test. It returns the clock.
func frozenClock(fp *Proxier) *testingclock.FakeClock {
	c := testingclock.NewFakeClock(time.Now())
	fp.clock = c
	return c
}

// lookPathNFT finds the real nft binary once, before any test has put its shim (which runs nft
// in the test's namespace) on PATH: a subtest's nft must not be its parent's shim.
var lookPathNFT = sync.OnceValues(func() (string, error) { return exec.LookPath("nft") })

// realKernel is where a knftables.Interface from realNFT runs nft.
type realKernel struct {
	netns       string
	invocations string // the shim's log of nft's arguments, one invocation per line
}

// realKernels maps each knftables.Interface from realNFT to its realKernel.
var realKernels sync.Map

// kernelOf returns where real, from realNFT, runs nft.
func kernelOf(t *testing.T, real knftables.Interface) realKernel {
	t.Helper()
	k, ok := realKernels.Load(real)
	if !ok {
		t.Fatal("not a knftables.Interface from realNFT")
	}
	return k.(realKernel)
}

// useKernel makes fp write through nft, a knftables.Interface from realNFT (or a wrapper of
// one), and read the table for its drift checks as NewProxier's proxiers do (kernelReader),
// over fp's kernel link if it has one.
func useKernel(fp *Proxier, nft knftables.Interface) {
	fp.nftables = nft
	fp.driftReader = newKernelReader(fp.ipFamily, fp.kernelLink, fp.logger)
}

// linkKernel gives fp a kernel link of its own into the namespace where real (from realNFT)
// runs nft, as NewProxier gives every proxier the process's link on a node: fp's drift checks
// then read the table over netlink. It returns the link.
func linkKernel(t *testing.T, fp *Proxier, real knftables.Interface) *nftLink {
	t.Helper()
	ns := kernelOf(t, real).netns
	fp.kernelLink = newNFTLink(func() (fd int, err error) {
		err = netns.Do(ns, func() error {
			fd, err = openNetfilterSocket()
			return err
		})
		return fd, err
	})
	fp.driftReader = newKernelReader(fp.ipFamily, fp.kernelLink, fp.logger)
	return fp.kernelLink
}

// writeUpstreamShapes has a proxier with upstream's rule shapes write the split-test cluster
// to the kernel through real, as pristine upstream would.
func writeUpstreamShapes(t *testing.T, real knftables.Interface) {
	t.Helper()
	_, old := NewFakeProxier(v1.IPv4Protocol)
	old.nftables = real
	frozenClock(old)
	old.upstreamRuleShapes = true
	setSplitTestCluster(old, 1)
	if err := old.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
}

// linkedProxier returns a proxier that writes to the kernel through real, recording the text
// of its transactions (rec), with a kernel link and transactions of at most maxOps operations,
// and a reference proxier on knftables' Fake (ref, refFake).
func linkedProxier(t *testing.T, real knftables.Interface, maxOps int) (rec *txText, fp *Proxier, refFake *knftables.Fake, ref *Proxier) {
	t.Helper()
	rec = &txText{Interface: real}
	_, fp = NewFakeProxier(v1.IPv4Protocol)
	fp.nftables = rec
	frozenClock(fp)
	linkKernel(t, fp, real)
	fp.maxTransactionOps = maxOps
	refFake, ref = NewFakeProxier(v1.IPv4Protocol)
	return rec, fp, refFake, ref
}

// textListings returns how many times nft has listed a table as text, through real (from
// realNFT), so far.
func textListings(t *testing.T, real knftables.Interface) int {
	t.Helper()
	b, err := os.ReadFile(kernelOf(t, real).invocations)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "-t list table ") {
			n++
		}
	}
	return n
}

var listedRuleRegexp = regexp.MustCompile(`^\s+(.*?)\s*$`)

// kernelFamily returns the knftables family of a proxier of family, and its name in nft's
// commands.
func kernelFamily(family v1.IPFamily) (knftables.Family, string) {
	if family == v1.IPv6Protocol {
		return knftables.IPv6Family, "ip6"
	}
	return knftables.IPv4Family, "ip"
}

// kernelChainRules returns the rules of chain as the kernel lists them (without handles).
func kernelChainRules(run func(args ...string) string, family, chain string) []string {
	var rules []string
	for _, line := range strings.Split(run("list", "chain", family, kubeProxyTable, chain), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "table ") || strings.HasPrefix(line, "chain ") || line == "}" || strings.HasPrefix(line, "comment ") {
			continue
		}
		rules = append(rules, listedRuleRegexp.ReplaceAllString(line, "$1"))
	}
	return rules
}

// checkServiceChainsMatch checks that every non-empty service chain of the reference fake's table
// holds, in the kernel, exactly the same rules (empty ones are stale chains, which the two may
// have deleted at different times), and that the kernel's service-ips map has the same elements.
func checkServiceChainsMatch(t *testing.T, ref *knftables.Fake, run func(args ...string) string, family string) {
	t.Helper()
	checked := 0
	for name, ch := range ref.Table.Chains {
		if !strings.HasPrefix(name, "service-") || !strings.Contains(name, "/") || len(ch.Rules) == 0 {
			continue
		}
		var want []string
		for _, r := range ch.Rules {
			want = append(want, listedForm(r.Rule))
		}
		// The kernel's rules may name the shared affinity set by its size (a kernel that keeps
		// set sizes), the fake's by clientAffinitySet.
		if got := kernelChainRules(run, family, name); unsizedAffinityRefs(strings.Join(got, "\n")) != strings.Join(want, "\n") {
			t.Errorf("kernel chain %s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("the reference has no service chains")
	}
	elems := run("list", "map", family, kubeProxyTable, serviceIPsMap)
	for _, e := range ref.Table.Maps[serviceIPsMap].Elements {
		if want := strings.Join(e.Key, " . ") + " : " + strings.Join(e.Value, " "); !strings.Contains(elems, want) {
			t.Errorf("kernel map %s lacks %q:\n%s", serviceIPsMap, want, elems)
		}
	}
}

func TestRealKernelSplitSetFreeSyncs(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	_, fp := NewFakeProxier(v1.IPv4Protocol)
	fp.nftables = real
	frozenClock(fp)
	linkKernel(t, fp, real)
	fp.maxTransactionOps = 7
	refFake, ref := NewFakeProxier(v1.IPv4Protocol)

	for generation := 1; generation <= 2; generation++ {
		setSplitTestCluster(fp, generation)
		setSplitTestCluster(ref, generation)
		if err := fp.syncProxyRules(); err != nil {
			t.Fatalf("generation %d: sync on the real kernel failed: %v", generation, err)
		}
		if err := ref.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
		checkServiceChainsMatch(t, refFake, run, "ip")
	}
	if listed := run("list", "table", "ip", kubeProxyTable); strings.Contains(listed, "map {") || strings.Contains(listed, "vmap {") {
		t.Errorf("the kernel table holds anonymous maps:\n%s", listed)
	}

	// Generation 2 replaced the endpoint chains of the services that have them: the old ones
	// are stale. Upstream deletes a stale chain a second after it was last flushed; age them
	// instead of waiting, so that the next sync deletes them first.
	if len(fp.staleChains) == 0 {
		t.Fatal("generation 2 left no stale endpoint chains")
	}
	for chain := range fp.staleChains {
		if !strings.Contains(chain, "__10.180.1.") {
			t.Errorf("stale chain %s is not an endpoint chain of generation 1", chain)
		}
		fp.staleChains[chain] = fp.now().Add(-time.Minute)
	}

	// Delete a Service in a partial sync: its chains are flushed, then deleted once stale.
	svc := splitTestService(5)
	fp.OnServiceDelete(svc)
	ref.OnServiceDelete(svc)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("partial sync deleting a service: %v", err)
	}
	if listed := run("list", "chains", "ip"); strings.Contains(listed, "__10.180.1.") {
		t.Errorf("generation 1's endpoint chains are still in the kernel:\n%s", listed)
	}
	if len(fp.staleChains) != 2 {
		t.Fatalf("stale chains %v, want svc5's two", fp.staleChains)
	}
	for chain := range fp.staleChains {
		if rules := kernelChainRules(run, "ip", chain); len(rules) != 0 {
			t.Errorf("stale chain %s still has rules %v", chain, rules)
		}
		fp.staleChains[chain] = fp.now().Add(-time.Minute)
	}
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("sync deleting stale chains: %v", err)
	}
	if listed := run("list", "table", "ip", kubeProxyTable); strings.Contains(listed, "ns/svc5/") {
		t.Errorf("svc5's chains are still in the kernel:\n%s", listed)
	}
	if err := ref.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	checkServiceChainsMatch(t, refFake, run, "ip")
}

func TestRealKernelSetFreeShapesIPv6AndAffinity(t *testing.T) {
	for _, affinity := range []bool{false, true} {
		t.Run(fmt.Sprintf("affinity=%v", affinity), func(t *testing.T) {
			real, run := realNFT(t, knftables.IPv6Family)
			refFake, _ := shapeTestProxier(t, v1.IPv6Protocol, 5, affinity, false)
			_, fp := NewFakeProxier(v1.IPv6Protocol)
			fp.nftables = real
			frozenClock(fp)
			setShapeTestService(t, fp, v1.IPv6Protocol, 5, affinity)
			checkServiceChainsMatch(t, refFake, run, "ip6")
		})
	}
}

var ruleHandleRegexp = regexp.MustCompile(`# handle (\d+)`)

func TestRealKernelDriftRepair(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	rec, fp, refFake, ref := linkedProxier(t, real, 50)
	setSplitTestCluster(fp, 1)
	setSplitTestCluster(ref, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if err := ref.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	checkServiceChainsMatch(t, refFake, run, "ip")

	// Nothing drifted: the periodic full sync re-writes no service-port chain.
	n := len(rec.texts)
	periodicFullSync(t, fp)
	if written := rec.writtenServiceChains(n); len(written) != 0 {
		t.Errorf("a periodic full sync with nothing drifted re-wrote %d service-port chains", len(written))
	}

	// Damage behind kube-proxy's back, with nft itself: delete one rule of svc4's TCP
	// chain, flush svc9's UDP chain, and delete svc12's TCP element from the service map.
	chainOf := func(svc, proto string) string {
		for name := range refFake.Table.Chains {
			if strings.HasPrefix(name, "service-") && strings.HasSuffix(name, "ns/"+svc+"/"+proto) {
				return name
			}
		}
		t.Fatalf("no chain for %s/%s", svc, proto)
		return ""
	}
	deleted, flushed := chainOf("svc4", "tcp/a"), chainOf("svc9", "udp/b")
	// The first handle listed is the chain's own; the next is its first rule's.
	m := ruleHandleRegexp.FindAllStringSubmatch(run("-a", "list", "chain", "ip", kubeProxyTable, deleted), -1)
	if len(m) < 2 {
		t.Fatalf("no rule handle in %s", deleted)
	}
	run("delete", "rule", "ip", kubeProxyTable, deleted, "handle", m[1][1])
	run("flush", "chain", "ip", kubeProxyTable, flushed)
	run("delete", "element", "ip", kubeProxyTable, serviceIPsMap, "{", "172.30.1.12", ".", "tcp", ".", "80", "}")
	// An affinity set that no Service uses (as a crashed kube-proxy could leave one): the
	// drift-checked full sync finds it in its own listing and deletes it.
	leftover := "affinity-ZZZZZZZZ-ns/gone/tcp/a__10.0.0.9/80"
	run("add", "set", "ip", kubeProxyTable, leftover, "{", "type", "ipv4_addr", ";", "}")

	n = len(rec.texts)
	periodicFullSync(t, fp)
	written := rec.writtenServiceChains(n)
	if !written[deleted] || !written[flushed] || len(written) != 2 {
		t.Errorf("the repairing full sync re-wrote %v, want exactly %s and %s", written, deleted, flushed)
	}
	if sets := run("list", "sets", "ip"); strings.Contains(sets, leftover) {
		t.Errorf("the stale affinity set %s survived the periodic full sync", leftover)
	}
	checkServiceChainsMatch(t, refFake, run, "ip")
	// Every drift check read the table over netlink: the damaged chains had baselines from
	// kube-proxy's own writes, so none needed nft's text listing.
	if n := textListings(t, real); n != 0 {
		t.Errorf("the drift checks listed the table as text %d times, want 0", n)
	}
}

func TestRealKernelRestartRewritesNothing(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	_, first := NewFakeProxier(v1.IPv4Protocol)
	first.nftables = real
	frozenClock(first)
	linkKernel(t, first, real)
	first.maxTransactionOps = 50
	setSplitTestCluster(first, 1)
	if err := first.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	refFake, ref := NewFakeProxier(v1.IPv4Protocol)
	setSplitTestCluster(ref, 1)
	if err := ref.syncProxyRules(); err != nil {
		t.Fatal(err)
	}

	// A restarted kube-proxy lists the kernel's table at start-up and leaves every chain
	// that is already as it would write it.
	rec := &txText{Interface: real}
	_, restarted := NewFakeProxier(v1.IPv4Protocol)
	restarted.nftables = rec
	frozenClock(restarted)
	linkKernel(t, restarted, real)
	restarted.maxTransactionOps = 50
	setSplitTestCluster(restarted, 1)
	if err := restarted.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if written := rec.writtenServiceChains(0); len(written) != 0 {
		t.Errorf("the start-up full sync over the kernel's intact table re-wrote %d service-port chains", len(written))
	}
	checkServiceChainsMatch(t, refFake, run, "ip")
	// The restarted proxier had no baselines: its first drift check listed the table as text.
	if n := textListings(t, real); n != 1 {
		t.Errorf("the restarted proxier listed the table as text %d times, want 1", n)
	}
}

func TestRealKernelUpgradeListsNoText(t *testing.T) {
	// Upstream's rule shapes wrote the table: every service chain balances with an anonymous
	// vmap. The set-free proxier that takes it over has no baselines, but the netlink dump
	// shows that each service port's chains differ (another number of rules, an anonymous set
	// where it writes none), so it re-writes them all without listing the table as text.
	real, run := realNFT(t, knftables.IPv4Family)
	writeUpstreamShapes(t, real)
	if !strings.Contains(run("list", "table", "ip", kubeProxyTable), "vmap {") {
		t.Fatal("upstream's shapes wrote no anonymous vmap")
	}
	listings := textListings(t, real) // the old proxier's own, without a link

	rec, fp, refFake, ref := linkedProxier(t, real, 50)
	setSplitTestCluster(fp, 1)
	setSplitTestCluster(ref, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("taking over upstream's table: %v", err)
	}
	if err := ref.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	checkServiceChainsMatch(t, refFake, run, "ip")
	if strings.Contains(run("list", "table", "ip", kubeProxyTable), "vmap {") {
		t.Error("an anonymous vmap survived the upgrade")
	}
	if n := textListings(t, real) - listings; n != 0 {
		t.Errorf("the upgrade listed the table as text %d times, want 0", n)
	}
	if len(rec.texts) < 2 {
		t.Errorf("the upgrade ran %d transactions, want it split", len(rec.texts))
	}
	// The upgrade's dump counted upstream's sets, which weighed its transactions (one
	// anonymous vmap per service port, and the maps and sets of the table), and its own
	// commits, which freed the vmaps, kept the count true.
	checkSetCount(t, fp)

	// Its own writes are its baselines: the next full sync neither lists nor re-writes.
	n := len(rec.texts)
	periodicFullSync(t, fp)
	if written := rec.writtenServiceChains(n); len(written) != 0 {
		t.Errorf("the full sync after the upgrade re-wrote %d service-port chains", len(written))
	}
	if n := textListings(t, real) - listings; n != 0 {
		t.Errorf("the full sync after the upgrade listed the table as text %d times, want 0", n)
	}
}

func TestRealKernelMapShapeRewritesNothing(t *testing.T) {
	// Service ports above maxSetFreeEndpoints keep upstream's numgen map, which the kernel lists
	// in its own canonical form; a full sync over them must still find them intact.
	n := maxSetFreeEndpoints + 2
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		for _, affinity := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/affinity=%v", family, affinity), func(t *testing.T) {
				nftFamily, listFamily := kernelFamily(family)
				real, run := realNFT(t, nftFamily)
				_, first := NewFakeProxier(family)
				first.nftables = real
				frozenClock(first)
				linkKernel(t, first, real)
				setShapeTestService(t, first, family, n, affinity)
				refFake, _ := shapeTestProxier(t, family, n, affinity, false)
				checkServiceChainsMatch(t, refFake, run, listFamily)
				if listed := run("list", "table", listFamily, kubeProxyTable); !strings.Contains(listed, "map {") {
					t.Fatalf("a service port with %d endpoints has no numgen map in the kernel:\n%s", n, listed)
				}

				rec := &txText{Interface: real}
				_, restarted := NewFakeProxier(family)
				restarted.nftables = rec
				frozenClock(restarted)
				linkKernel(t, restarted, real)
				setShapeTestService(t, restarted, family, n, affinity)
				if written := rec.writtenServiceChains(0); len(written) != 0 {
					t.Errorf("the start-up full sync over the kernel's intact table re-wrote %v", written)
				}
			})
		}
	}
}

// TestRealKernelSweepsLeftoverNetns: a namespace left by a test process that is gone is
// removed; one of a live process, and one that the tests did not create, stay.
func TestRealKernelSweepsLeftoverNetns(t *testing.T) {
	_, _, _ = realNFTNetns(t, knftables.IPv4Family) // root, ip and nft, or skip
	// A pid that is not running: past the kernel's pid_max.
	dead := fmt.Sprintf("kpo-test-%d-1", 1<<22+1)
	live := fmt.Sprintf("kpo-test-%d-999999", os.Getpid())
	other := fmt.Sprintf("kpo-other-%d", os.Getpid())
	for _, name := range []string{dead, live, other} {
		if err := netns.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{dead, live, other} {
			_ = netns.Delete(name)
		}
	})
	sweepTestNetns(t)
	for name, want := range map[string]bool{dead: false, live: true, other: true} {
		_, err := os.Stat(filepath.Join(netns.Dir, name))
		if got := err == nil; got != want {
			t.Errorf("namespace %s present after the sweep: %v, want %v", name, got, want)
		}
	}
}
