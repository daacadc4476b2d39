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
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

func TestKnownObjectsSharedElementClaims(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, kubeProxyTable)
	port := func(name string) proxy.ServicePortName {
		return proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Port: "p80"}
	}
	a, b, c := port("a"), port("b"), port("c")
	ips := newNFTElementStorage("map", serviceIPsMap)
	cluster := newNFTElementStorage("set", clusterIPsSet)
	const key = "172.30.0.41 . tcp . 80"
	// objects returns a port's objects: its claim of the shared service-ips element, with
	// value, and of the ClusterIP.
	objects := func(name proxy.ServicePortName, value string, comment *string) *portObjects {
		objs := &portObjects{name: name}
		objs.elements = []elementClaim{
			{elementKey: elementKey{ips, key}, port: &objs.name, value: value, comment: comment},
			{elementKey: elementKey{cluster, "172.30.0.41"}, port: &objs.name},
		}
		return objs
	}
	k := newKnownObjects()
	// update makes objs the objects of port name, and returns what releasing the claims it
	// no longer makes wrote.
	update := func(name proxy.ServicePortName, objs *portObjects) string {
		tx := nft.NewTransaction()
		_, _, _, released := k.updatePorts([]proxy.ServicePortName{name}, []*portObjects{objs})
		for _, c := range released {
			k.release(tx, c.elementKey, *c.port)
		}
		return tx.String()
	}
	// want returns the text of a transaction of objs.
	want := func(objs ...func(tx *knftables.Transaction)) string {
		tx := nft.NewTransaction()
		for _, f := range objs {
			f(tx)
		}
		return tx.String()
	}
	deleteIPs := func(tx *knftables.Transaction) {
		tx.Delete(&knftables.Element{Map: serviceIPsMap, Key: []string{"172.30.0.41", "tcp", "80"}})
	}

	update(a, objects(a, "goto service-a", nil))
	update(b, objects(b, "goto service-b", ptr.To("ns/b:p80")))
	update(c, objects(c, "goto service-a", nil))
	ips.elements[key] = "goto service-a"
	cluster.elements["172.30.0.41"] = ""

	// a goes: c wants the value the map holds, and b and c the ClusterIP, so nothing is
	// written.
	if got := update(a, nil); got != "" {
		t.Errorf("releasing claims that other ports share wrote:\n%s", got)
	}
	// c goes: b's value is written back, with b's comment, as b generated it.
	wantB := want(deleteIPs, func(tx *knftables.Transaction) {
		tx.Add(&knftables.Element{Map: serviceIPsMap, Key: []string{"172.30.0.41", "tcp", "80"}, Value: []string{"goto service-b"}, Comment: ptr.To("ns/b:p80")})
	})
	if got := update(c, nil); got != wantB {
		t.Errorf("releasing the claim of the held value wrote:\n%s\nwant:\n%s", got, wantB)
	}
	if ips.elements[key] != "goto service-b" {
		t.Errorf("the map holds %q, want b's value", ips.elements[key])
	}
	// b's objects are replaced by equal ones (nothing released), then b goes: both elements
	// are deleted.
	if got := update(b, objects(b, "goto service-b", nil)); got != "" {
		t.Errorf("replacing a port's objects with equal ones wrote:\n%s", got)
	}
	wantDel := want(deleteIPs, func(tx *knftables.Transaction) {
		tx.Delete(&knftables.Element{Set: clusterIPsSet, Key: []string{"172.30.0.41"}})
	})
	if got := update(b, nil); got != wantDel {
		t.Errorf("releasing the last claims wrote:\n%s\nwant:\n%s", got, wantDel)
	}
	if len(k.claims) != 0 || len(k.moreClaims) != 0 {
		t.Errorf("claims left after every port went: %d first, %d more", len(k.claims), len(k.moreClaims))
	}

	// A claimed set element has no value.
	set := (&elementClaim{elementKey: elementKey{cluster, "172.30.0.41"}, port: &a}).element()
	if !reflect.DeepEqual(set, &knftables.Element{Set: clusterIPsSet, Key: []string{"172.30.0.41"}}) {
		t.Errorf("the claimed set element is %+v", set)
	}
}

// ensureJoined keeps the comment of the element it ensures, as a read of the storage would find
// it, so that a full sync that keeps the elements instead of reading them (keepElements) still
// tells whose a leftover element is.
func TestEnsureJoinedKeepsComments(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv6Family, kubeProxyTable)
	s := newNFTElementStorage("map", noEndpointServicesMap)
	const key = "fd00:172:30::3f . tcp . 80"
	elem := func(comment *string) *knftables.Element {
		return &knftables.Element{Map: noEndpointServicesMap, Key: []string{"fd00:172:30::3f", "tcp", "80"}, Value: []string{"drop"}, Comment: comment}
	}
	tx := nft.NewTransaction()
	s.ensureJoined(tx, elem(ptr.To("soak/svc63:a")), key, "drop")
	if s.comments[key] != "soak/svc63:a" || s.elements[key] != "drop" {
		t.Errorf("after writing the element: comment %q, value %q", s.comments[key], s.elements[key])
	}
	// Held with the same value, it is not written again, and its comment stays.
	tx = nft.NewTransaction()
	s.ensureJoined(tx, elem(nil), key, "drop")
	if tx.NumOperations() != 0 || s.comments[key] != "soak/svc63:a" {
		t.Errorf("ensuring a held element wrote %d operations, comment %q", tx.NumOperations(), s.comments[key])
	}
	// Its owner, for a sync that finds it a leftover.
	if got := serviceOfComment(s.comments[key]); got != "soak/svc63" {
		t.Errorf("the leftover element's Service is %q, want soak/svc63", got)
	}
}
