//go:build soakupstream

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

// This file is not part of this repository's module. build/lib.sh (upstream_soak_test) adds it
// to upstream's pristine pkg/proxy/nftables through a Go overlay, so that the soak
// (realkernel_soak_test.go in the patched tree) can hand its table to upstream's own proxier.

package nftables

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"
)

// TestSoakUpstreamSync reads a cluster state (JSON: Family, Services, Slices) from the file
// that $KUBE_PROXY_OVERLAY_SOAK_STATE names and runs upstream's proxier on it against the real
// nft, in the network namespace it runs in: one sync, then, with the stale chains that the sync
// found aged past upstream's delay, a second that deletes them. It skips when the variable is
// unset, so that upstream's own test runs are unchanged.
func TestSoakUpstreamSync(t *testing.T) {
	path := os.Getenv("KUBE_PROXY_OVERLAY_SOAK_STATE")
	if path == "" {
		t.Skip("KUBE_PROXY_OVERLAY_SOAK_STATE is not set: run by the soak only")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Family   v1.IPFamily
		Services []*v1.Service
		Slices   []*discovery.EndpointSlice
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	family := knftables.IPv4Family
	if state.Family == v1.IPv6Protocol {
		family = knftables.IPv6Family
	}
	_, fp := NewFakeProxier(state.Family)
	if fp.nftables, err = knftables.New(family, kubeProxyTable); err != nil {
		t.Fatalf("knftables.New: %v", err)
	}
	makeServiceMap(fp, state.Services...)
	populateEndpointSlices(fp, state.Slices...)
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("upstream's first sync: %v", err)
	}
	for chain := range fp.staleChains {
		fp.staleChains[chain] = time.Time{}
	}
	if err := fp.syncProxyRules(); err != nil {
		t.Fatalf("upstream's second sync: %v", err)
	}
}
