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
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestAffinityResizeProbe: the probe tells a kernel that resizes a set in place (resizingFake)
// from one that keeps the old size (keptSizeFake), leaves no probe set behind, and runs once
// per proxier.
func TestAffinityResizeProbe(t *testing.T) {
	for _, c := range []struct {
		name string
		kept bool
		want affinityResizing
	}{{"resizes in place", false, resizeInPlace}, {"keeps the size", true, resizeByReplacing}} {
		t.Run(c.name, func(t *testing.T) {
			nft, fp := NewFakeProxier(v1.IPv4Protocol)
			kept := &keptSizeFake{Fake: nft}
			if c.kept {
				fp.nftables = kept
			} else {
				fp.nftables = resizingFake{nft}
			}
			if got, probed := fp.affinityResizing(); got != c.want || !probed {
				t.Errorf("probe: %d (probed %v), want %d", got, probed, c.want)
			}
			if nft.Table == nil || nft.Table.Comment == nil {
				t.Error("the probe did not add kube-proxy's table as setupNFTables does")
			} else if set := nft.Table.Sets[affinityProbeSet]; set != nil {
				t.Errorf("the probe left its set behind: %v", set)
			}
			if c.kept {
				runs := kept.runs
				if runs != 4 {
					t.Errorf("the probe committed %d transactions, want 4", runs)
				}
				if got, _ := fp.affinityResizing(); got != c.want || kept.runs != runs {
					t.Errorf("second call: %d after %d more transactions, want %d and none", got, kept.runs-runs, c.want)
				}
			}
		})
	}
}

// keptSizeProxier returns a proxier over a keptSizeFake, with transactions of at most maxOps
// operations, and the fake.
func keptSizeProxier(t *testing.T, maxOps int) (*keptSizeFake, *Proxier) {
	t.Helper()
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	kept := &keptSizeFake{Fake: nft}
	fp.nftables = kept
	fp.maxTransactionOps = maxOps
	return kept, fp
}

// sharedSets returns the shared affinity sets in nft's table, with their sizes.
func sharedSets(nft *keptSizeFake) map[string]uint64 {
	nft.RLock()
	defer nft.RUnlock()
	out := map[string]uint64{}
	for name, set := range nft.Table.Sets {
		if isClientAffinitySetName(name) {
			out[name] = *set.Size
		}
	}
	return out
}

var affinityRuleSet = regexp.MustCompile(`@(affinity-clients\S*)`)

// sizedAffinityRef finds a reference to the shared affinity set under a sized name.
var sizedAffinityRef = regexp.MustCompile(`@` + clientAffinitySet + `-[0-9]+\b`)

// unsizedAffinityRefs returns text with every reference to the shared affinity set under a
// sized name made one to clientAffinitySet: which name the set has is the proxier's choice for
// the kernel (affinity_resize.go), so tests that compare a kernel's rules with those that a
// fake-backed kube-proxy wrote compare them so.
func unsizedAffinityRefs(text string) string {
	return sizedAffinityRef.ReplaceAllString(text, "@"+clientAffinitySet)
}

// checkSharedSet checks that nft's table holds the one shared affinity set want, of the size
// its name carries, that every affinity rule names it, and that no commit so far left a rule
// naming a set that was not there.
func checkSharedSet(t *testing.T, nft *keptSizeFake, want string, size uint64, when string) {
	t.Helper()
	if got := sharedSets(nft); len(got) != 1 || got[want] != size {
		t.Errorf("%s: shared sets %v, want only %s of size %d", when, got, want, size)
	}
	nft.RLock()
	for _, chain := range nft.Table.Chains {
		for _, rule := range chain.Rules {
			if m := affinityRuleSet.FindStringSubmatch(rule.Rule); m != nil && m[1] != want {
				t.Errorf("%s: chain %s names %s: %s", when, chain.Name, m[1], rule.Rule)
			}
		}
	}
	nft.RUnlock()
	if len(nft.dangling) > 0 {
		t.Errorf("%s: commits left rules naming missing sets:\n%s", when, strings.Join(nft.dangling, "\n"))
	}
}

// TestAffinitySetReplacedWhenKernelKeepsSize: on a kernel that keeps a set's size, the shared set
// of each size has a name of its own. A partial sync that needs another size keeps the set it
// finds and asks for a full sync; the full sync writes every affinity rule with the new name
// and deletes the old set once nothing names it, in transactions cut small. A fresh kube-proxy
// on the same kernel writes the same table, and a restart that needs another size replaces the
// set it finds.
func TestAffinitySetReplacedWhenKernelKeepsSize(t *testing.T) {
	nft, fp := keptSizeProxier(t, 30)
	svcs, epSlices := affinityServices(3, 10)
	makeServiceMap(fp, svcs[:2]...)
	populateEndpointSlices(fp, epSlices[:2]...)
	sync := func(when string) {
		t.Helper()
		if err := fp.syncProxyRules(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	sync("two Services")
	checkSharedSet(t, nft, "affinity-clients-2097152", 1<<21, "20 affinity endpoints")

	// A third Service of 30 endpoints: 50 in all.
	big, bigSlice := affinityServices(3, 30)
	fp.OnServiceAdd(big[2])
	fp.OnEndpointSliceAdd(bigSlice[2])
	sync("the third Service")
	if !fp.needFullSync {
		t.Error("the partial sync that needs a larger set did not ask for a full sync")
	}
	checkSharedSet(t, nft, "affinity-clients-2097152", 1<<21, "the partial sync")
	sync("the full sync")
	checkSharedSet(t, nft, "affinity-clients-4194304", 1<<22, "50 affinity endpoints")
	if fp.needFullSync {
		t.Error("the full sync that replaced the set asked for another")
	}
	checkFreshTable(t, nft, big[2], bigSlice[2], svcs[0], epSlices[0], svcs[1], epSlices[1])

	// Two Services go while kube-proxy is down; the new one replaces the set in its first sync.
	_, restarted := NewFakeProxier(v1.IPv4Protocol)
	restarted.nftables = nft
	restarted.maxTransactionOps = 30
	makeServiceMap(restarted, svcs[0])
	populateEndpointSlices(restarted, epSlices[0])
	if err := restarted.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	checkSharedSet(t, nft, "affinity-clients-1048576", 1<<20, "after the restart, 10 affinity endpoints")

	// Rollback to upstream's shapes: no shared set is left.
	restarted.upstreamRuleShapes = true
	periodicFullSync(t, restarted)
	if got := sharedSets(nft); len(got) != 0 {
		t.Errorf("upstream's shapes kept shared sets %v", got)
	}
}

// checkFreshTable checks that a fresh kube-proxy on a kernel that keeps set sizes writes, for
// the Services and EndpointSlices in objs, the table that nft holds.
func checkFreshTable(t *testing.T, nft *keptSizeFake, objs ...any) {
	t.Helper()
	ref, fresh := keptSizeProxier(t, 0)
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			makeServiceMap(fresh, o)
		case *discovery.EndpointSlice:
			populateEndpointSlices(fresh, o)
		}
	}
	if err := fresh.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	sortedDump := func(f *keptSizeFake) []string {
		lines := strings.Split(f.Dump(), "\n")
		slices.Sort(lines)
		return lines
	}
	if got, want := sortedDump(nft), sortedDump(ref); !slices.Equal(got, want) {
		t.Errorf("the table differs from a fresh kube-proxy's:\n got: %s\nwant: %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAffinitySetUnderOldNameReplaced: a table whose shared set has the name that kernels
// that resize sets use (written by an earlier version of this kube-proxy, or before a failed
// probe) is taken over on a kernel that keeps sizes: the set is replaced by the sized one.
func TestAffinitySetUnderOldNameReplaced(t *testing.T) {
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	fp.affinityResize = resizeInPlace
	svcs, epSlices := affinityServices(1, 3)
	makeServiceMap(fp, svcs...)
	populateEndpointSlices(fp, epSlices...)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	kept := &keptSizeFake{Fake: nft}
	if got := sharedSets(kept); len(got) != 1 || got[clientAffinitySet] == 0 {
		t.Fatalf("the in-place kernel's sets: %v", got)
	}
	_, restarted := NewFakeProxier(v1.IPv4Protocol)
	restarted.nftables = kept
	makeServiceMap(restarted, svcs...)
	populateEndpointSlices(restarted, epSlices...)
	if err := restarted.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	checkSharedSet(t, kept, "affinity-clients-1048576", 1<<20, "the take-over")
}

// TestIsClientAffinitySetName tells the shared set's names from upstream's per-endpoint sets
// and the probe's set.
func TestIsClientAffinitySetName(t *testing.T) {
	for name, want := range map[string]bool{
		clientAffinitySet:                    true,
		sizedAffinitySetName(1 << 21):        true,
		"affinity-clients-":                  false,
		affinityProbeSet:                     false,
		legacyClientAffinitySet:              false,
		"affinity-XPGD46QRK7WJZT7O-ns1/svc1": false,
	} {
		if got := isClientAffinitySetName(name); got != want {
			t.Errorf("isClientAffinitySetName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestAffinityProbeFailure: when the probe's first commit fails, the sync goes on with the
// sized name, which is right on every kernel, and asks for a full sync; that sync probes again
// and, on a kernel that resizes sets, replaces the sized set with clientAffinitySet.
func TestAffinityProbeFailure(t *testing.T) {
	nft, fp := NewFakeProxier(v1.IPv4Protocol)
	fp.nftables = &recordingNFT{Fake: nft, failAt: 1}
	svcs, epSlices := affinityServices(1, 3)
	makeServiceMap(fp, svcs...)
	populateEndpointSlices(fp, epSlices...)
	kept := &keptSizeFake{Fake: nft}
	for _, want := range []string{"affinity-clients-1048576", clientAffinitySet} {
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
		checkSharedSet(t, kept, want, 1<<20, "sync with "+want)
		if dueAfter := want != clientAffinitySet; fp.needFullSync != dueAfter {
			t.Errorf("sync with %s: a full sync due: %v, want %v", want, fp.needFullSync, dueAfter)
		}
	}
}
