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

	"k8s.io/apimachinery/pkg/util/sets"
)

// Partial syncs without listing the table.
//
// A sync needs to know which service and endpoint chains and affinity sets exist, to flush or
// delete the ones no Service uses any more. Upstream lists the whole table for that on every
// sync (nft --json list table), which costs seconds on a large table and is added to the
// programming latency of every Service change. kube-proxy creates all of those objects itself, so
// after a successful sync it knows them: the chains and affinity sets that sync kept active,
// plus the stale chains it still has to delete (proxier.staleChains). A partial sync uses that.
// A full sync (at start-up, after any failure, and periodically) still lists the table, so
// objects created or left behind by anything else are found there.

// knownObjects are the objects that the last successful sync left active.
type knownObjects struct {
	chains       sets.Set[string]
	affinitySets sets.Set[string]
}

// listObjects returns the table's chains and sets in the shape of knftables' ListAll. A full
// sync, or any sync before kube-proxy knows its objects, lists the table; a partial sync answers
// from the known objects and the stale chains not yet deleted.
func (proxier *Proxier) listObjects(fullSync bool) (map[string][]string, error) {
	if fullSync || proxier.known == nil {
		return proxier.nftables.ListAll(context.TODO())
	}
	chains := proxier.known.chains.Clone()
	for chain := range proxier.staleChains {
		chains.Insert(chain)
	}
	return map[string][]string{
		"chain": sets.List(chains),
		"set":   sets.List(proxier.known.affinitySets),
	}, nil
}

// rememberObjects records, after a successful sync, the chains and affinity sets it kept active,
// and forgets what it wrote to chains that no longer exist.
func (proxier *Proxier) rememberObjects(activeChains, activeAffinitySets sets.Set[string]) {
	proxier.known = &knownObjects{chains: activeChains, affinitySets: activeAffinitySets}
	proxier.written.prune(activeChains, proxier.staleChains)
}
