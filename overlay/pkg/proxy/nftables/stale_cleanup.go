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
	"cmp"
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/proxy"
	"sigs.k8s.io/knftables"
)

// The clean-up after a sync's Services, in bounded transactions.
//
// What a sync no longer uses (stale service-port chains, map and set elements, affinity sets and
// the shared set's elements) is removed after the Services are written, and can be as large as
// the Services themselves: deleting a namespace with thousands of Services. So the clean-up is
// cut like the Services (transactions.go), in three stages, each after the one before:
//
//  1. per Service, the deletion of its stale elements with the flush of its stale chains, in
//     one transaction: a removed Service is either routed as before or gone, and no element
//     ever points to a chain flushed in an earlier commit;
//  2. stale elements of no Service that can be told (found by a full sync's read of the maps,
//     such as a hairpin pair), and stale chains of no Service;
//  3. set deletions and the prune of the shared affinity set, which come after every flush, so
//     a set is deleted only when no chain can still name it.
//
// Before all that, the stale objects of each Service that the sync writes go in the same
// transaction as its new ones (closeService): its ports that are gone, its elements that it no
// longer uses, and its chains that it no longer uses. A Service whose ports or type change is
// then never routed on a mix of its old and new ports.
//
// A Service's stale objects are found by name: a chain's owner is in its name (chainOwner), an
// element belongs to the Service whose chain its value names ("goto service-..."), whose service
// port its comment names (no-endpoint elements), or whose other stale elements have its address
// (a ClusterIP in cluster-ips), or to the service port whose claim the sync released.

// staleCleanup is one sync's clean-up, collected, and written by emit.
type staleCleanup struct {
	// services are stage 1, by Service ("namespace/name").
	services map[string]*cleanupOps
	// loose and sets are stages 2 and 3.
	loose, sets cleanupOps
	// prune, when set, reports the affinity IDs whose elements the shared affinity set must
	// lose. The prune lists the set only after every other transaction of the sync has
	// committed: by then no rule can record affinity for those IDs any more, so no element
	// added after the listing survives (upstream deletes a per-endpoint set, atomically).
	prune func(affinityID) bool
	// affinitySet and capacity are the shared affinity set's name and size in this sync, for
	// the prune and its fill metric.
	affinitySet string
	capacity    uint64
}

func newStaleCleanup() *staleCleanup {
	return &staleCleanup{services: map[string]*cleanupOps{}}
}

// service returns the stage-1 operations of the Service svc ("namespace/name"), or stage 2's
// when svc is "".
func (c *staleCleanup) service(svc string) *cleanupOps {
	if svc == "" {
		return &c.loose
	}
	ops := c.services[svc]
	if ops == nil {
		ops = &cleanupOps{}
		c.services[svc] = ops
	}
	return ops
}

// flushChain records the flush of a stale chain with its owner's other stale objects.
func (c *staleCleanup) flushChain(chain string) {
	c.service(serviceOfOwner(chainOwner(chain))).Flush(&knftables.Chain{Name: chain})
}

// serviceOfOwner returns the Service ("namespace/name") of a service port ("ns/svc/proto/port"),
// or "" for "".
func serviceOfOwner(owner string) string {
	ns, rest, ok := strings.Cut(owner, "/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return ns + "/" + name
}

// serviceOfValue returns the Service whose chain an element's value names ("goto <chain>"),
// or "" when it names none.
func serviceOfValue(value string) string {
	for _, verdict := range []string{"goto ", "jump "} {
		if chain, ok := strings.CutPrefix(value, verdict); ok {
			return serviceOfOwner(chainOwner(chain))
		}
	}
	return ""
}

// emit writes the clean-up after the Services' operations, starting in tx, with a cut before
// each unit (every Service's stage-1 operations are one unit), and returns the transaction it
// ended in. Each operation is weighed as the merge weighs the Services' (transactions.go).
func (c *staleCleanup) emit(tx *knftables.Transaction, splitter *txSplitter) *knftables.Transaction {
	tx = splitter.beginCleanup(tx)
	for _, svc := range sets.List(sets.KeySet(c.services)) {
		ops := c.services[svc]
		tx = splitter.cut(tx)
		splitter.write(tx, ops.ops)
	}
	for _, stage := range []*cleanupOps{&c.loose, &c.sets} {
		stage.eachUnit(func(ops []cleanupOp) {
			tx = splitter.cut(tx)
			splitter.write(tx, ops)
		})
	}
	if c.prune != nil {
		splitter.afterCommit(splitter.proxier.pruneAfterCommit(c.affinitySet, c.prune, c.capacity))
	}
	return tx
}

// write adds ops to tx and weighs them: an operation on a set or element names a set, a set's
// deletion frees one, and a chain's flush frees its anonymous sets.
func (s *txSplitter) write(tx *knftables.Transaction, ops []cleanupOp) {
	lookups, delta := 0, 0
	for _, op := range ops {
		switch op.verb {
		case stageAdd:
			tx.Add(op.obj)
		case stageFlush:
			tx.Flush(op.obj)
		case stageDelete:
			tx.Delete(op.obj)
		}
		switch obj := op.obj.(type) {
		case *knftables.Chain:
			if op.verb == stageFlush {
				delta -= s.freedByFlush(obj.Name)
			}
		case *knftables.Set, *knftables.Map:
			lookups++
			if op.verb == stageDelete {
				delta--
			}
		case *knftables.Element:
			lookups++
		}
	}
	s.weighSets(lookups, delta)
}

// cleanupAll collects the clean-up of a walkAll sync: whatever the table holds and this sync
// did not generate is stale. A stale chain that the listing does not show (the table was
// deleted or replaced behind kube-proxy's back) is forgotten: a later sync must not flush or
// delete a chain that is not there, which would fail its whole transaction.
func (st *servicePortStage) cleanupAll(c *staleCleanup) {
	proxier := st.proxier
	if st.chainsListed {
		for chain := range proxier.staleChains {
			if !st.existingChains.Has(chain) {
				delete(proxier.staleChains, chain)
			}
		}
	}
	for _, chain := range sets.List(st.existingChains) {
		if !isServiceChainName(chain) {
			continue
		}
		if st.state.chains.Has(chain) {
			delete(proxier.staleChains, chain)
			continue
		}
		if !st.flushedEarly.Has(chain) {
			c.flushChain(chain)
		}
		proxier.staleChains[chain] = st.start
	}
	st.cleanupAllAffinity(c)
	st.indexStaleElements()
	for _, svc := range sets.List(sets.KeySet(st.staleElements)) {
		for _, key := range st.elementsOfService(svc) {
			deleteElement(c.service(svc), key)
		}
	}
}

// cleanupChanged collects the clean-up of a partial sync: what the changed and removed service
// ports used before and do not use now is stale, unless another service port still uses it.
func (st *servicePortStage) cleanupChanged(c *staleCleanup) {
	proxier := st.proxier
	var names []proxy.ServicePortName
	for _, name := range st.removed {
		if !st.closed.Has(name.NamespacedName) {
			names = append(names, name)
		}
	}
	dropped := st.retirePorts(names, make([]*portObjects, len(names)), c.flushChain,
		func(port proxy.ServicePortName) txWriter { return c.service(port.NamespacedName.String()) })
	// Chains that were already stale, and are not in use again, are flushed again, as a
	// sync that lists the table would find and flush them.
	for _, chain := range st.staleBefore {
		if _, stillStale := proxier.staleChains[chain]; stillStale && !st.state.chains.Has(chain) && !slices.Contains(dropped, chain) {
			c.flushChain(chain)
			proxier.staleChains[chain] = st.start
		}
	}
	st.dropAffinity(c, st.droppedSets)
}

// retirePorts makes objs (nil: none) the known objects of the service ports names, and writes
// the removal of what those ports no longer use and no other port does: flush(chain) for each
// chain, which it notes as stale, and each element's deletion (or its new value, when another
// port holds it) through writer(port). It notes the affinity names dropped in st.droppedSets and
// returns the chains dropped.
func (st *servicePortStage) retirePorts(names []proxy.ServicePortName, objs []*portObjects, flush func(chain string), writer func(proxy.ServicePortName) txWriter) []string {
	proxier := st.proxier
	dropped, used, droppedSets, released := st.state.updatePorts(names, objs)
	for _, chain := range used {
		delete(proxier.staleChains, chain)
	}
	for _, chain := range dropped {
		flush(chain)
		proxier.staleChains[chain] = st.start
	}
	st.droppedSets = append(st.droppedSets, droppedSets...)
	for _, claim := range released {
		st.state.release(writer(*claim.port), claim.elementKey, *claim.port)
	}
	return dropped
}

// closeService writes into tx, after the operations of the Service whose ports are
// st.ports[from:to], the removal of that Service's stale objects: in a partial sync, what its
// ports (and its ports that are gone) no longer use, from the known objects; in a walkAll sync,
// its listed chains that no port generated and the listed elements that lead to its chains and
// that no port has ensured so far. Stale affinity is left to the clean-up's last stage.
func (st *servicePortStage) closeService(tx *knftables.Transaction, from, to int) {
	svc := st.ports[from].NamespacedName
	if st.walkAll {
		recs := st.results[from:to]
		kept := func(chain string) bool {
			return slices.ContainsFunc(recs, func(rec *servicePortRecorder) bool { return slices.Contains(rec.chains, chain) })
		}
		st.indexChains()
		if st.flushedEarly == nil {
			st.flushedEarly = sets.New[string]()
		}
		name := svc.String()
		for _, chain := range st.chainsByService[name] {
			if !kept(chain) && !st.flushedEarly.Has(chain) {
				tx.Flush(&knftables.Chain{Name: chain})
				st.flushedEarly.Insert(chain)
			}
		}
		for _, key := range st.elementsOfService(name) {
			if key.storage.leftoverKeys.Has(key.key) {
				deleteElement(tx, key)
			}
		}
		return
	}
	names := slices.Clone(st.ports[from:to])
	objs := slices.Clone(st.objects[from:to])
	for _, name := range st.removed {
		if name.NamespacedName == svc {
			names, objs = append(names, name), append(objs, nil)
		}
	}
	st.retirePorts(names, objs, func(chain string) { tx.Flush(&knftables.Chain{Name: chain}) },
		func(proxy.ServicePortName) txWriter { return tx })
	if st.closed == nil {
		st.closed = sets.New[types.NamespacedName]()
	}
	st.closed.Insert(svc)
}

// indexChains indexes the listed service-port chains by service port (chainOwner) and by
// Service ("namespace/name"), once.
func (st *servicePortStage) indexChains() {
	if st.chainsByOwner != nil {
		return
	}
	st.chainsByOwner, st.chainsByService = map[string][]string{}, map[string][]string{}
	for chain := range st.existingChains {
		if o := chainOwner(chain); o != "" {
			st.chainsByOwner[o] = append(st.chainsByOwner[o], chain)
			svc := serviceOfOwner(o)
			st.chainsByService[svc] = append(st.chainsByService[svc], chain)
		}
	}
}

// elementsOfService returns, sorted (indexStaleElements), the listed elements of Service svc
// ("namespace/name"; "": of no Service that can be told) that no service port has ensured so
// far in this sync.
func (st *servicePortStage) elementsOfService(svc string) []elementKey {
	st.indexStaleElements()
	var keys []elementKey
	for _, key := range st.staleElements[svc] {
		if key.storage.leftoverKeys.Has(key.key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// indexStaleElements indexes, once per sync, the elements that the sync's read of the maps
// found and that no service port had ensured by then, by the Service they belong to: the one
// whose chain the element's value names ("goto <chain>"), or whose service port its comment
// names (upstream comments the elements of no-endpoint-services and no-endpoint-nodeports); a
// ClusterIP of cluster-ips, which has neither, belongs to the Service of the other stale
// elements for that address. A removed Service's elements are then all deleted in one
// transaction, whatever maps they are in; the rest are indexed under "". Each Service's
// elements are sorted by map (in elementStorages order), then by key.
func (st *servicePortStage) indexStaleElements() {
	if st.staleElements != nil {
		return
	}
	proxier := st.proxier
	st.staleElements = map[string][]elementKey{}
	byAddress := map[string]string{}
	for _, storage := range proxier.elementStorages() {
		if storage == proxier.clusterIPs {
			continue
		}
		addressKeyed := storage == proxier.serviceIPs || storage == proxier.firewallIPs || storage == proxier.noEndpointServices
		for key := range storage.leftoverKeys {
			owner := serviceOfValue(storage.elements[key])
			if owner == "" {
				owner = serviceOfComment(storage.comments[key])
			}
			if address, _, _ := strings.Cut(key, " . "); addressKeyed && owner != "" {
				byAddress[address] = owner
			}
			st.staleElements[owner] = append(st.staleElements[owner], elementKey{storage, key})
		}
	}
	for key := range proxier.clusterIPs.leftoverKeys {
		owner := byAddress[key]
		st.staleElements[owner] = append(st.staleElements[owner], elementKey{proxier.clusterIPs, key})
	}
	order := map[*nftElementStorage]int{}
	for i, storage := range proxier.elementStorages() {
		order[storage] = i
	}
	for _, keys := range st.staleElements {
		slices.SortFunc(keys, func(a, b elementKey) int {
			return cmp.Or(cmp.Compare(order[a.storage], order[b.storage]), strings.Compare(a.key, b.key))
		})
	}
}

// serviceOfComment returns the Service of the service port that an element's comment names
// ("namespace/name:port", or "namespace/name" for an unnamed port), or "" for any other comment.
func serviceOfComment(comment string) string {
	svc, _, _ := strings.Cut(comment, ":")
	if ns, name, ok := strings.Cut(svc, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return ""
	}
	return svc
}

// pruneAfterCommit returns the prune of the shared affinity set set (of size capacity) of the IDs
// that stale reports, to run after the sync's transactions have committed: it lists the set,
// and deletes those elements in transactions of at most the splitter's size. A failure is
// logged: the elements then time out, and the next full sync prunes again.
func (proxier *Proxier) pruneAfterCommit(set string, stale func(affinityID) bool, capacity uint64) func(ctx context.Context, s *txSplitter) {
	return func(ctx context.Context, s *txSplitter) {
		ops := &cleanupOps{}
		proxier.pruneClientAffinity(ops, set, stale, capacity)
		tx := proxier.nftables.NewTransaction()
		var err error
		commit := func() {
			if err == nil && tx.NumOperations() > 0 {
				err = s.commit(ctx, tx)
				tx = proxier.nftables.NewTransaction()
			}
		}
		ops.eachUnit(func(unit []cleanupOp) {
			if s.max > 0 && tx.NumOperations() >= s.max {
				commit()
			}
			if err == nil {
				s.write(tx, unit)
			}
		})
		commit()
		if err != nil {
			proxier.logger.Error(err, "Cannot prune the session-affinity set; the elements time out, and the next full sync prunes again")
		}
	}
}
