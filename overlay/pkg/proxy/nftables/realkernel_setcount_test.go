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

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The count of the table's sets, which weighs transactions, on the real kernel.

func TestRealKernelSetCountFollowsOwnCommits(t *testing.T) {
	// Transactions are weighed by the table's sets (see txSplitter). After the dump at
	// start-up, kube-proxy's own commits keep that count: partial syncs and quiet full syncs
	// read no dump.
	_, _, fp := damageTestProxier(t)
	checkSetCount(t, fp)
	manySlice := func(first int) *discovery.EndpointSlice {
		return damageTestSlice("many", manyEndpoints("10.180.6.%d", first)...)
	}
	sync := func(what string) {
		t.Helper()
		if err := fp.syncProxyRules(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkSetCount(t, fp)
	}
	// New endpoints: the service chain's numgen map is replaced by another.
	fp.OnEndpointSliceUpdate(manySlice(1), manySlice(101))
	sync("partial sync replacing a numgen map")
	// The Service goes: its chain is flushed, and deleted a second later.
	many := makeTestService("ns", "many", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "172.30.3.6"
		svc.Spec.Ports = []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
	})
	fp.OnServiceDelete(many)
	fp.OnEndpointSliceDelete(manySlice(101))
	sync("partial sync removing the Service")
	settle(t, fp)
	checkSetCount(t, fp)
	// It comes back, and a quiet periodic full sync reads no dump.
	fp.OnServiceAdd(many)
	fp.OnEndpointSliceAdd(manySlice(201))
	sync("partial sync adding the Service back")
	periodicFullSync(t, fp)
	checkSetCount(t, fp)
}

// checkSetCount checks that fp's link counts as many sets in fp's table, and as many
// anonymous sets in each chain, as a new dump of the kernel finds.
func checkSetCount(t *testing.T, fp *Proxier) {
	t.Helper()
	table := linkTableName(fp.ipFamily)
	got, gotAnon := fp.kernelLink.setCounts(table)
	c, err := fp.kernelLink.open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	family, name := splitLinkTable(table)
	snap, err := c.snapshot(family, name, fp.kernelLink.seed)
	if err != nil {
		t.Fatal(err)
	}
	if got != snap.allSets {
		t.Errorf("the link counts %d sets in %s, the kernel holds %d", got, table, snap.allSets)
	}
	for chain, shape := range snap.shapes {
		if gotAnon[chain] != shape.anonRefs {
			t.Errorf("the link counts %d anonymous sets in chain %s, the kernel holds %d", gotAnon[chain], chain, shape.anonRefs)
		}
	}
	for chain, n := range gotAnon {
		if _, ok := snap.shapes[chain]; !ok {
			t.Errorf("the link counts %d anonymous sets in chain %s, which the kernel does not hold", n, chain)
		}
	}
}
