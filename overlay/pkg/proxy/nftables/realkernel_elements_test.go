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
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// elementListings returns how many times nft has listed the elements of one of fp's element
// storages (upstream's readOrReset, through knftables' ListElements) through real (from
// realNFT) so far.
func elementListings(t *testing.T, fp *Proxier, real knftables.Interface) int {
	t.Helper()
	b, err := os.ReadFile(kernelOf(t, real).invocations)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, s := range fp.elementStorages() {
		listed[fmt.Sprintf("--json list %s ip %s %s", s.containerType, kubeProxyTable, s.containerName)] = true
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if listed[line] {
			n++
		}
	}
	return n
}

// A periodic full sync after only kube-proxy's own commits keeps the elements that the proxier
// wrote; one after someone else's commit, a forced one, or one after a failed sync lists every
// map and set back, and restores an element deleted behind kube-proxy's back.
func TestRealKernelQuietFullSyncKeepsElements(t *testing.T) {
	real, run := realNFT(t, knftables.IPv4Family)
	_, fp, _, _ := linkedProxier(t, real, 50)
	storages := len(fp.elementStorages())
	setSplitTestCluster(fp, 1)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatal(err)
	}
	if got := elementListings(t, fp, real); got != storages {
		t.Fatalf("the first sync listed %d maps and sets, want %d", got, storages)
	}
	// check runs sync and checks how many element storages it listed: want, unless want is
	// negative.
	check := func(step string, sync func(), want int) {
		t.Helper()
		before := elementListings(t, fp, real)
		sync()
		if got := elementListings(t, fp, real) - before; want >= 0 && got != want {
			t.Errorf("%s: the sync listed %d maps and sets, want %d", step, got, want)
		}
	}
	periodic := func() { periodicFullSync(t, fp) }
	check("a periodic full sync after the first sync", periodic, 0)

	setSplitTestCluster(fp, 2)
	check("a partial sync", func() {
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
	}, 0)
	check("a periodic full sync after a partial sync", periodic, 0)

	// A Service deleted while the elements are kept: the full sync still deletes its elements,
	// which no service port ensures any more.
	fp.OnServiceDelete(splitTestService(3))
	check("a periodic full sync that deletes a Service", periodic, 0)
	if listed := run("list", "map", "ip", kubeProxyTable, serviceIPsMap); strings.Contains(listed, "172.30.1.3 . tcp . 80 :") {
		t.Errorf("a deleted Service's element is still in %s:\n%s", serviceIPsMap, listed)
	}

	const element = "172.30.1.1 . tcp . 80"
	run("delete", "element", "ip", kubeProxyTable, serviceIPsMap, "{", element, "}")
	check("a periodic full sync after someone else's commit", periodic, storages)
	if !strings.Contains(run("list", "map", "ip", kubeProxyTable, serviceIPsMap), element) {
		t.Errorf("the element %s deleted behind kube-proxy's back was not restored", element)
	}
	// The repair added an element and nothing else, which changes nothing when the element
	// is there: the link cannot tell that commit from someone else's, so the next full sync
	// may read the elements again. The one after keeps them.
	check("the next periodic full sync", periodic, -1)
	check("the periodic full sync after it", periodic, 0)

	fp.needFullSync = true
	check("a forced full sync", func() {
		if err := fp.syncProxyRules(); err != nil {
			t.Fatal(err)
		}
	}, storages)

	fp.recovery.failures = 1
	check("a periodic full sync after a failed sync", periodic, storages)
	check("a periodic full sync after a successful one", periodic, 0)
}
