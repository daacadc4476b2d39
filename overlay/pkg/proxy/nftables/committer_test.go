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
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

func TestCommittingText(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, kubeProxyTable)
	setup := nft.NewTransaction()
	setup.Add(&knftables.Table{})
	setup.Add(&knftables.Chain{Name: "a"})
	setup.Add(&knftables.Map{Name: "m", Type: "ipv4_addr : verdict"})
	if err := nft.Run(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	marker := "add chain ip kube-proxy " + commitMarker + "\ndelete chain ip kube-proxy " + commitMarker + "\n"

	// Only elements: the kernel commits nothing for one that exists, so the marker goes in.
	tx := nft.NewTransaction()
	tx.Add(&knftables.Element{Map: "m", Key: []string{"10.0.0.1"}, Value: []string{"goto a"}})
	before := tx.String()
	text := committingText(tx)
	if text != before+marker || tx.String() != text {
		t.Errorf("an element-only transaction: text %q (transaction %q), want %q", text, tx.String(), before+marker)
	}
	if !certainlyCommits(text) {
		t.Errorf("the marked transaction is still not sure to commit: %q", text)
	}
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	if dump := nft.Dump(); strings.Contains(dump, commitMarker) || !strings.Contains(dump, "10.0.0.1") {
		t.Errorf("after the marked transaction the table holds:\n%s\nwant its element and no %s", dump, commitMarker)
	}

	// A rule commits: no marker. Nothing at all: no commit, no marker.
	tx = nft.NewTransaction()
	tx.Add(&knftables.Element{Map: "m", Key: []string{"10.0.0.2"}, Value: []string{"goto a"}})
	tx.Add(&knftables.Rule{Chain: "a", Rule: "counter"})
	if before, text := tx.String(), committingText(tx); text != before {
		t.Errorf("a transaction that adds a rule: text %q, want it unchanged %q", text, before)
	}
	tx = nft.NewTransaction()
	if text := committingText(tx); text != "" || tx.NumOperations() != 0 {
		t.Errorf("an empty transaction: text %q, %d operations, want none", text, tx.NumOperations())
	}
}
