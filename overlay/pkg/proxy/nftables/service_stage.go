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
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/util/workerpool"
	"sigs.k8s.io/knftables"
)

// The per-service-port stage of a sync.
//
// syncProxyRules generates each service port's chains, rules and map elements with a pure
// function of the service port, its endpoints and the proxier's settings (the generate closure
// there). Its output goes to a servicePortRecorder, never to shared state, so service ports are
// generated on a bounded pool of workers (--sync-workers). The sync's goroutine then merges the
// recorders in service-port-name order into the sync's transactions, and only there touches the
// element storages, the active chains and sets, the counters and the metrics. The order, and so
// the transactions, do not depend on the number of workers.
//
// A full sync generates every service port. A partial sync generates only the service ports of
// the Services whose Service or EndpointSlices changed, and works out what to remove from what
// the last successful sync generated for those ports (knownObjects): its Go cost is
// O(changed), not O(cluster).

// minParallelServicePorts is the fewest service ports for which the stage starts workers (a
// Proxier's minParallelPorts of 0 means it); below it, generation runs on the sync's goroutine.
// Starting and joining a worker costs about as much as generating one or two service ports, so
// a partial sync of a few Services stays serial (bench/RESULTS.md, "Figures behind constants").
const minParallelServicePorts = 32

// keepAffinitySet notes that the service port keeps alive the affinity of the endpoint whose
// upstream affinity set is name: that set, or its elements of the shared set (see
// affinity_shape.go).
func (r *servicePortRecorder) keepAffinitySet(name string) {
	r.affinitySets = append(r.affinitySets, r.proxier.affinityStateName(name))
}

// portDerived is what a worker derives from a service port's recorder for the merge: how many
// of its chains the drift check compared and re-writes, and what its operations do to sets.
type portDerived struct {
	checked, rewritten int
	setOps             portSetOps
}

// servicePortStage is one sync's per-service-port stage.
type servicePortStage struct {
	proxier *Proxier
	start   time.Time
	// kernel is the sync's drift check (startDriftCheck); nil: the sync re-writes everything.
	kernel *kernelListing
	// walkAll is set when the stage generates every service port, as upstream does: in a
	// full sync, and in any sync that has no state from a successful sync to start from.
	walkAll bool
	// state is what the last successful sync generated, updated as this sync goes; it
	// becomes the proxier's only when the sync succeeds (commit).
	state *knownObjects
	// ports are the service ports to generate, sorted; results are their recorders (each
	// dropped once its Service is closed), objects the objects that each keeps alive, and
	// derived what the workers derived from each for the merge.
	ports   []proxy.ServicePortName
	results []*servicePortRecorder
	objects []*portObjects
	derived []portDerived
	// removed (partial syncs) are service ports that the last sync generated and that are
	// gone now.
	removed []proxy.ServicePortName
	// staleBefore (partial syncs) are the stale chains left from before this sync.
	staleBefore []string
	// unchanged[i] is set when ports[i] keeps exactly the objects it had; known[i] when it
	// had any (the workers look that up, so that the merge need not).
	unchanged, known []bool
	// existingChains and existingAffinitySets (walkAll) are the ones listed in the table;
	// sharedListed are the listed shared affinity sets (isClientAffinitySetName).
	existingChains, existingAffinitySets, sharedListed sets.Set[string]
	// chainsListed is set when existingChains is the table's (the listing succeeded).
	chainsListed bool
	// legacyAffinityListed is set when the listing holds the shared affinity set under the
	// name earlier versions gave it.
	legacyAffinityListed bool
	// clientAffinityAdded is set once the sync has added the shared affinity set, named
	// affinitySet, of affinitySize elements (planClientAffinity). affinityReplaceDue is set
	// when the set needs another name that this sync cannot give it: the next sync is full.
	clientAffinityAdded bool
	affinitySet         string
	affinitySize        uint64
	affinityReplaceDue  bool
	// chainsByOwner and chainsByService index existingChains by service port (chainOwner)
	// and by Service, once needed (indexChains).
	chainsByOwner, chainsByService map[string][]string
	// closed (partial syncs) are the Services whose known objects closeService has updated;
	// flushedEarly (walkAll) are the stale chains that it has flushed; droppedSets (partial)
	// are the affinity names that it found no port keeps any more.
	closed       sets.Set[types.NamespacedName]
	flushedEarly sets.Set[string]
	droppedSets  []string
	// staleElements (walkAll) indexes the listed elements that no port had ensured by the
	// Service they belong to (indexStaleElements), once needed.
	staleElements map[string][]elementKey

	// endpoints, noLocalInternal and noLocalExternal are the whole table's totals after
	// this sync, for its log line and metrics.
	endpoints, noLocalInternal, noLocalExternal int
}

// newServicePortStage plans the stage of a sync that started at start, with the sync's drift
// check kernel (nil: none). fullSync syncs are walkAll; otherwise the stage covers the service ports of updatedServices and
// updatedEndpoints (the Services whose Service or EndpointSlices changed). The proxier's
// known objects move into the stage and come back only with commit, so that a failed sync
// leaves none and the next one is walkAll.
func (proxier *Proxier) newServicePortStage(start time.Time, fullSync bool, kernel *kernelListing, updatedServices, updatedEndpoints sets.Set[types.NamespacedName]) *servicePortStage {
	st := &servicePortStage{proxier: proxier, start: start, kernel: kernel, state: proxier.known}
	proxier.known = nil
	if fullSync || st.state == nil {
		st.walkAll = true
		if st.state == nil {
			st.state = newKnownObjects()
		}
		st.planClientAffinity(st.countAffinityEndpoints())
		st.ports = st.state.sortedPorts(proxier.svcPortMap)
		st.listExisting()
		return st
	}
	// A Service whose Service object changed may have other ports now: find them in
	// svcPortMap. One whose EndpointSlices alone changed has the ports that the last
	// successful sync generated for it (a failed sync leaves no known objects).
	if len(updatedServices) > 0 {
		st.ports = proxier.portsOf(updatedServices)
	}
	for svc := range updatedEndpoints {
		if updatedServices.Has(svc) {
			continue
		}
		for name := range st.state.byService[svc] {
			if _, ok := proxier.svcPortMap[name]; ok {
				st.ports = append(st.ports, name)
			}
		}
	}
	for svc := range updatedServices.Union(updatedEndpoints) {
		for name := range st.state.byService[svc] {
			if _, ok := proxier.svcPortMap[name]; !ok {
				st.removed = append(st.removed, name)
			}
		}
	}
	slices.SortFunc(st.ports, compareServicePortNames)
	slices.SortFunc(st.removed, compareServicePortNames)
	st.planClientAffinity(st.countAffinityEndpoints(st.ports, st.removed))
	for chain := range proxier.staleChains {
		st.staleBefore = append(st.staleBefore, chain)
	}
	slices.Sort(st.staleBefore)
	return st
}

// portsOf returns the service ports of services in svcPortMap. It scans svcPortMap, comparing
// names without hashing when there is one Service, the usual case.
func (proxier *Proxier) portsOf(services sets.Set[types.NamespacedName]) []proxy.ServicePortName {
	var ports []proxy.ServicePortName
	if len(services) == 1 {
		only := services.UnsortedList()[0]
		for name := range proxier.svcPortMap {
			if name.Name == only.Name && name.Namespace == only.Namespace {
				ports = append(ports, name)
			}
		}
		return ports
	}
	for name := range proxier.svcPortMap {
		if services.Has(name.NamespacedName) {
			ports = append(ports, name)
		}
	}
	return ports
}

// listExisting lists the table's chains and affinity sets for a walkAll sync. If listing
// fails, the sync goes on without them, as upstream's does: nothing is found stale.
func (st *servicePortStage) listExisting() {
	st.existingChains, st.existingAffinitySets, st.sharedListed = sets.New[string](), sets.New[string](), sets.New[string]()
	// A drift-checked full sync has just listed the table: no second listing.
	if k := st.kernel; k != nil && k.listedSets {
		for chain := range k.chains {
			st.existingChains.Insert(chain)
		}
		for chain := range k.unknown {
			st.existingChains.Insert(chain)
		}
		st.noteListedSets(k.sets)
		st.chainsListed = true
		return
	}
	all, err := st.proxier.nftables.ListAll(context.TODO())
	if err != nil {
		st.proxier.logger.Error(err, "Failed to list existing nftables objects")
		return
	}
	st.existingChains.Insert(all["chain"]...)
	st.noteListedSets(all["set"])
	st.chainsListed = true
}

// noteListedSets notes, of the table's listed named sets, the per-endpoint affinity sets, the
// shared affinity sets, and whether the shared set is there under the name earlier versions
// gave it.
func (st *servicePortStage) noteListedSets(names []string) {
	for _, set := range names {
		switch {
		case isClientAffinitySetName(set):
			st.sharedListed.Insert(set)
		case set == legacyClientAffinitySet:
			st.legacyAffinityListed = true
		case isAffinitySetName(set):
			st.existingAffinitySets.Insert(set)
		}
	}
}

// workers returns how many workers generate n service ports.
func (st *servicePortStage) workers(n int) int {
	if n < cmp.Or(st.proxier.minParallelPorts, minParallelServicePorts) {
		return 1
	}
	return workerpool.Size(st.proxier.syncWorkers)
}

// run generates the stage's service ports with generate, on the pool, and merges them in
// order into tx, which splitter may cut between service ports. It returns the transaction the
// merge ended in.
func (st *servicePortStage) run(tx *knftables.Transaction, splitter *txSplitter, generate func(*servicePortRecorder, proxy.ServicePortName, proxy.ServicePort)) *knftables.Transaction {
	proxier := st.proxier
	began := time.Now()
	family := string(proxier.ipFamily)
	defer func() {
		took := time.Since(began).Seconds()
		metrics.SyncProxyRulesGeneratedServicePorts.WithLabelValues(family).Observe(float64(len(st.ports)))
		metrics.SyncProxyRulesGenerationSeconds.WithLabelValues(family).Observe(took)
		metrics.OldSyncProxyRulesGeneratedServicePorts.WithLabelValues(family).Observe(float64(len(st.ports)))
		metrics.OldSyncProxyRulesGenerationSeconds.WithLabelValues(family).Observe(took)
	}()
	st.results = make([]*servicePortRecorder, len(st.ports))
	st.objects = make([]*portObjects, len(st.ports))
	st.derived = make([]portDerived, len(st.ports))
	st.unchanged = make([]bool, len(st.ports))
	st.known = make([]bool, len(st.ports))
	// The merge changes the known objects Service by Service (closeService), while the
	// workers run ahead: they read the old objects looked up here.
	olds := make([]*portObjects, len(st.ports))
	for i, name := range st.ports {
		olds[i] = st.state.ports[name]
	}
	checked, rewritten, first := 0, 0, 0
	// Workers generate the service ports; the sync's goroutine merges each, in order, as
	// soon as it is ready, while the workers go on with the next ones.
	workerpool.RunOrdered(len(st.ports), st.workers(len(st.ports)), func(i int) {
		name := st.ports[i]
		rec := newRecorder(proxier, st.affinitySet)
		rec.endpoints = len(proxier.endpointsMap[name])
		generate(rec, name, proxier.svcPortMap[name])
		d := &st.derived[i]
		d.checked, d.rewritten = rec.dropIntactChains(st.kernel)
		d.setOps = countSetOps(rec)
		st.results[i] = rec
		old := olds[i]
		st.known[i] = old != nil
		if old != nil && old.matches(name, rec) {
			st.objects[i], st.unchanged[i] = old, true
		} else {
			st.objects[i] = objectsOf(name, rec)
		}
	}, func(i int) {
		rec := st.results[i]
		// Cuts fall between Services: their ports are consecutive in st.ports. A Service's
		// stale objects go in the transaction of its new ones.
		if i == 0 || st.ports[i].NamespacedName != st.ports[i-1].NamespacedName {
			if i > 0 {
				st.closeService(tx, first, i)
				st.releaseResults(first, i)
			}
			first = i
			tx = splitter.cut(tx)
			if splitter.isolating() {
				st.clientAffinityAdded = false // each Service's transaction stands alone
			}
		}
		before := tx.NumOperations()
		st.ensureClientAffinity(tx, rec)
		for _, e := range rec.entries {
			switch e.verb {
			case stageAdd:
				tx.Add(e.obj)
			case stageFlush:
				tx.Flush(e.obj)
			case stageElement:
				el := &rec.elems[e.elem]
				el.storage.ensureJoined(tx, e.obj.(*knftables.Element), el.key, el.value)
			}
		}
		st.dropShadowed(tx, rec)
		merged := tx.NumOperations()
		st.deleteReplacedAffinitySets(tx, rec, splitter.mode == fallbackWhole)
		deleted := tx.NumOperations() - merged
		d := &st.derived[i]
		lookups, created := d.setOps.operations(merged - before)
		splitter.weighSets(lookups+deleted, created-deleted-freedSets(splitter, rec))
		checked += d.checked
		rewritten += d.rewritten
	})
	if len(st.ports) > 0 {
		st.closeService(tx, first, len(st.ports))
		st.releaseResults(first, len(st.ports))
	}
	if st.walkAll {
		st.updateAll()
	}
	// After updateAll: on a sync that walks every port, the known affinity sets are this sync's.
	st.resizeClientAffinity(tx)
	if checked > 0 {
		metrics.SyncFullProxyRulesChainsCheckedTotal.WithLabelValues(family).Add(float64(checked))
		metrics.SyncFullProxyRulesChainsRewrittenTotal.WithLabelValues(family).Add(float64(rewritten))
		metrics.OldSyncFullProxyRulesChainsCheckedTotal.WithLabelValues(family).Add(float64(checked))
		metrics.OldSyncFullProxyRulesChainsRewrittenTotal.WithLabelValues(family).Add(float64(rewritten))
	}
	return tx
}

// releaseResults recycles the recorders of st.ports[from:to], whose Service the merge has
// closed: nothing reads them after that.
func (st *servicePortStage) releaseResults(from, to int) {
	for i := from; i < to; i++ {
		st.results[i].release()
		st.results[i] = nil
	}
}

// cleanup writes, after the Services' operations that end in tx, the removal of what this
// sync no longer uses (stale_cleanup.go): it flushes stale service-port chains (and notes them in
// proxier.staleChains, to be deleted by a later sync), deletes stale affinity sets, and deletes
// stale map and set elements, in bounded transactions. It returns the transaction it ended in.
func (st *servicePortStage) cleanup(tx *knftables.Transaction, splitter *txSplitter) *knftables.Transaction {
	c := newStaleCleanup()
	if st.walkAll {
		st.cleanupAll(c)
	} else {
		st.cleanupChanged(c)
	}
	st.endpoints, st.noLocalInternal, st.noLocalExternal = st.state.endpoints, st.state.noLocalInternal, st.state.noLocalExternal
	return c.emit(tx, splitter)
}

// updateAll brings the known objects up to date after a walkAll sync's merge: the ports whose
// objects changed, and those that are gone, are updated; unchanged ones cost nothing. The
// uses of elements that ports dropped are forgotten: cleanupAll deletes stale elements by
// what the table holds.
func (st *servicePortStage) updateAll() {
	var names []proxy.ServicePortName
	var objs []*portObjects
	known := 0
	for i, name := range st.ports {
		if st.known[i] {
			known++
		}
		if !st.unchanged[i] {
			names, objs = append(names, name), append(objs, st.objects[i])
		}
	}
	if known < len(st.state.ports) {
		for name := range st.state.ports {
			if _, ok := st.proxier.svcPortMap[name]; !ok {
				names, objs = append(names, name), append(objs, nil)
			}
		}
	}
	_, _, _, released := st.state.updatePorts(names, objs)
	for _, c := range released {
		st.state.forgetClaim(c.elementKey, *c.port)
	}
	st.state.order = st.ports // every current port, sorted
}

// commit makes the stage's state the proxier's known objects, after the sync's transactions
// all succeeded. When the shared affinity set needs a name that the sync could not give it
// (affinityReplaceDue), it asks for a full sync, now.
func (st *servicePortStage) commit() {
	proxier := st.proxier
	proxier.known = st.state
	if st.affinityReplaceDue {
		proxier.logger.V(2).Info("The session-affinity set needs another size: the next sync is a full sync, which replaces it", "set", st.affinitySet)
		proxier.needFullSync = true
		if proxier.syncRunner != nil {
			proxier.syncRunner.Run()
		}
	}
}

// shadowOf returns, for a map whose elements send a service port's traffic somewhere, the map
// whose element of the same key would shadow it (nil for any other storage): a service port is
// in service-ips or no-endpoint-services (which rejects or drops, ahead of service-ips), never
// in both, and the same for node ports.
func (proxier *Proxier) shadowOf(s *nftElementStorage) *nftElementStorage {
	switch s {
	case proxier.serviceIPs:
		return proxier.noEndpointServices
	case proxier.noEndpointServices:
		return proxier.serviceIPs
	case proxier.serviceNodePorts:
		return proxier.noEndpointNodePorts
	case proxier.noEndpointNodePorts:
		return proxier.serviceNodePorts
	}
	return nil
}

// dropShadowed deletes, in the transaction that writes rec's elements, the elements of the
// same keys that the other map of their pair holds (shadowOf) and rec does not keep: a Service
// that gains endpoints leaves no-endpoint-services in the same commit that adds it to
// service-ips, instead of being rejected until the clean-up's commit, and the other way round.
func (st *servicePortStage) dropShadowed(tx txWriter, rec *servicePortRecorder) {
	for i := range rec.elems {
		el := &rec.elems[i]
		other := st.proxier.shadowOf(el.storage)
		if other == nil {
			continue
		}
		if _, held := other.elements[el.key]; !held || slices.ContainsFunc(rec.elems, func(e elemEntry) bool { return e.storage == other && e.key == el.key }) {
			continue
		}
		deleteElement(tx, elementKey{other, el.key})
	}
}
