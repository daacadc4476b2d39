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
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// One shared session-affinity set.
//
// Upstream remembers session affinity in one named set per endpoint ("affinity-<endpoint
// chain>", client addresses with the Service's timeout). Adding a named set, or a rule that
// names one, makes the kernel scan every set in the table, so a table with N such endpoints
// costs the kernel O(N^2) to write, and a transaction that creates many of them holds the
// commit mutex for seconds.
//
// Here every endpoint's affinity lives in the one set clientAffinitySet, keyed by the client
// address and the endpoint's 62-bit affinity ID (affinityIDs: a hash of upstream's set name,
// which names the service port and the endpoint), with the Service's timeout on each element:
//
//	service chain:  ip saddr . numgen random mod 1 offset A . numgen random mod 1 offset B @affinity-clients goto endpoint-...
//	endpoint chain: update @affinity-clients { ip saddr . numgen random mod 1 offset A . numgen random mod 1 offset B timeout 3h }
//
// "numgen random mod 1 offset K" always evaluates to K: nft 1.0 refuses a literal in a lookup
// key's concatenation, but takes this expression, and lists it back in the same form. The set
// is added once per sync, in the first transaction that writes a rule using it
// (ensureClientAffinity), so the kernel's cost per Service stays flat, and a table without
// affinity has no such set. Its size follows the affinity endpoints (affinitySetSize): in place
// where the kernel resizes sets, by replacing it where the kernel keeps a set's size
// (affinity_resize.go).
//
// Semantics stay upstream's: a client is sent to the endpoint it used within the timeout,
// whichever service IP or port it came in on, and an endpoint that goes away takes its clients'
// affinity with it: the sync that removes it also deletes its elements (pruneClientAffinity),
// as upstream deletes the endpoint's set. --nftables-rule-shapes=Upstream keeps upstream's
// per-endpoint sets (and deletes the shared one).

const (
	// clientAffinitySet is the shared session-affinity set (or the start of its name, on
	// kernels that keep a set's size: sizedAffinitySetName). Its name starts with upstream's
	// "affinity-", so that upstream's kube-proxy, after a rollback, deletes it with the other
	// affinity sets that it does not use (after flushing the chains that name it), but has no
	// "/", as every per-endpoint set's name has.
	clientAffinitySet = "affinity-clients"
	// legacyClientAffinitySet is the shared set's name in earlier versions of this kube-proxy,
	// which upstream's never deletes. The clean-up deletes it when it finds it.
	legacyClientAffinitySet = "client-affinity"
	// minClientAffinitySetSize is the least size of the shared set, whose elements are
	// clients times the endpoints they stick to, over the whole node (affinitySetSize). When
	// the set is full, new affinity is not recorded (connections are still balanced), as with
	// upstream's per-endpoint sets when one is full.
	minClientAffinitySetSize = 1 << 20
	// upstreamAffinitySetSize is the size of each of upstream's per-endpoint affinity sets
	// (nft's default for a dynamic set).
	upstreamAffinitySetSize = 65535
	// maxClientAffinitySetSize bounds the shared set's size (the kernel's is 32 bits).
	maxClientAffinitySetSize = 1 << 31
	// sharedAffinityState prefixes the affinity names that service ports keep alive in the
	// shared shape, so that they never match a set name listed from the kernel.
	sharedAffinityState = "client-affinity:"
)

// sharedAffinity reports whether session affinity uses the shared set: unless
// --nftables-rule-shapes=Upstream asks for upstream's per-endpoint sets.
func (proxier *Proxier) sharedAffinity() bool {
	return !proxier.upstreamRuleShapes
}

// affinityIDs returns the two 31-bit halves of the affinity ID of the endpoint whose upstream
// affinity set is setName (FNV-1a, 62 bits of it).
func affinityIDs(setName string) (uint32, uint32) {
	h := fnvString(fnvOffset64, setName)
	return uint32(h>>33) & 0x7fffffff, uint32(h) & 0x7fffffff
}

// numgenConst returns an expression that evaluates to v, in the form nft lists it.
func numgenConst(v uint32) string {
	if v == 0 {
		return "numgen random mod 1"
	}
	return "numgen random mod 1 offset " + strconv.FormatUint(uint64(v), 10)
}

// affinityKey returns the shared set's key expression for the endpoint whose upstream affinity
// set is setName: the client address and the endpoint's affinity ID.
func (proxier *Proxier) affinityKey(setName string) string {
	a, b := affinityIDs(setName)
	return proxier.nftFamily() + " saddr . " + numgenConst(a) + " . " + numgenConst(b)
}

// affinityMatchRule returns the service chain's rule that sends a client with affinity for
// epInfo to its endpoint chain, naming the sync's shared set (r.affinitySet).
func (r *servicePortRecorder) affinityMatchRule(epInfo *endpointInfo) string {
	proxier := r.proxier
	if !proxier.sharedAffinity() {
		return proxier.nftFamily() + " saddr @" + epInfo.affinitySetName + " goto " + epInfo.chainName
	}
	return proxier.affinityKey(epInfo.affinitySetName) + " @" + r.affinitySet + " goto " + epInfo.chainName
}

// affinityUpdateRule returns the endpoint chain's rule that records (or refreshes) the client's
// affinity for epInfo, for the timeout of svcInfo, in the sync's shared set (r.affinitySet).
func (r *servicePortRecorder) affinityUpdateRule(svcInfo *servicePortInfo, epInfo *endpointInfo) string {
	proxier := r.proxier
	if !proxier.sharedAffinity() {
		return "update @" + epInfo.affinitySetName + " { " + proxier.nftFamily() + " saddr }"
	}
	return "update @" + r.affinitySet + " { " + proxier.affinityKey(epInfo.affinitySetName) +
		" timeout " + nftTimeout(svcInfo.StickyMaxAgeSeconds()) + " }"
}

// nftTimeout returns a timeout of seconds in the form nft lists it ("3h", "1d1h1m1s"), so that
// drift checks find the rule unchanged. Kubernetes validates affinity timeouts to 1..86400 s.
func nftTimeout(seconds int) string {
	if seconds <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		secs int
		unit string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if n := seconds / u.secs; n > 0 {
			b.WriteString(strconv.Itoa(n))
			b.WriteString(u.unit)
			seconds -= n * u.secs
		}
	}
	return b.String()
}

// affinitySetSize returns the size of the shared affinity set for a node whose Services with
// ClientIP affinity have endpoints endpoints in all: what upstream's per-endpoint sets hold
// together (65535 each), rounded up to a power of two so that the size changes rarely, and at
// least minClientAffinitySetSize. Stickiness is then never weaker than upstream's on the same
// node. Elements take memory only when clients add them; the size is a bound.
func affinitySetSize(endpoints int) uint64 {
	want := uint64(endpoints) * upstreamAffinitySetSize
	size := uint64(minClientAffinitySetSize)
	for size < want && size < maxClientAffinitySetSize {
		size <<= 1
	}
	return size
}

// affinityEndpointsOf returns the number of endpoints of service port name if it has ClientIP
// affinity (those that upstream gives a set each), and 0 otherwise or if it is gone.
func (proxier *Proxier) affinityEndpointsOf(name proxy.ServicePortName) int {
	svc, ok := proxier.svcPortMap[name]
	if !ok {
		return 0
	}
	return proxier.affinityEndpoints(name, svc)
}

// affinityEndpoints is affinityEndpointsOf for service port name whose ServicePort is svc.
func (proxier *Proxier) affinityEndpoints(name proxy.ServicePortName, svc proxy.ServicePort) int {
	if svc.SessionAffinityType() != v1.ServiceAffinityClientIP {
		return 0
	}
	return len(proxier.endpointsMap[name])
}

// countAffinityEndpoints returns the number of endpoints of all the service ports with ClientIP
// affinity, which sizes the shared affinity set. A walkAll sync counts every service port; any
// other recounts only the ports of changed (those it generates or removes), from the counts
// that the known objects kept from the last sync (knownObjects.noteAffinity), so that a
// partial sync does not walk every Service.
func (st *servicePortStage) countAffinityEndpoints(changed ...[]proxy.ServicePortName) int {
	k, proxier := st.state, st.proxier
	if st.walkAll || k.affinity == nil {
		// One pass over the service ports, touching the map only for those with affinity.
		k.affinity, k.affinityTotal = map[proxy.ServicePortName]int{}, 0
		for name, svc := range proxier.svcPortMap {
			if n := proxier.affinityEndpoints(name, svc); n > 0 {
				k.affinity[name] = n
				k.affinityTotal += n
			}
		}
		return k.affinityTotal
	}
	for _, names := range changed {
		for _, name := range names {
			k.noteAffinity(name, proxier.affinityEndpointsOf(name))
		}
	}
	return k.affinityTotal
}

// clientAffinitySetObject returns the shared affinity set of the proxier's family, named name,
// of size elements. Adding it where it exists with another size resizes it, on kernels that do
// (affinity_resize.go).
func (proxier *Proxier) clientAffinitySetObject(name string, size uint64) *knftables.Set {
	return &knftables.Set{
		Name:   name,
		TypeOf: proxier.nftFamily() + " saddr . numgen random mod 2147483648 . numgen random mod 2147483648",
		// "dynamic": the packet path adds elements. Elements carry their own timeouts.
		Flags: []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		Size:  ptr.To(size),
	}
}

// ensureClientAffinity adds the shared affinity set to tx, in front of the operations of rec,
// if rec writes rules that use it and this sync has not added the set yet. Adding a set that
// exists with the same definition changes nothing. The transaction that adds it runs before,
// or is, the one with the rules; a sync stops at its first failed transaction.
func (st *servicePortStage) ensureClientAffinity(tx *knftables.Transaction, rec *servicePortRecorder) {
	if st.clientAffinityAdded || len(rec.affinitySets) == 0 || !st.proxier.sharedAffinity() {
		return
	}
	for _, e := range rec.entries {
		if _, ok := e.obj.(*knftables.Rule); ok {
			tx.Add(st.proxier.clientAffinitySetObject(st.affinitySet, st.affinitySize))
			st.clientAffinityAdded = true
			st.state.affinitySet, st.state.affinitySize = st.affinitySet, st.affinitySize
			return
		}
	}
}

// resizeClientAffinity adds the shared affinity set to tx again, with this sync's size, when no
// rule of this sync added it and service ports still use it with a size that this sync's
// affinity endpoints change (they came or went with Services that kept their rules, or that
// were removed), or with a size this proxier has not written (0: it started on a table whose
// affinity rules were intact, and the set may have another kube-proxy's size). The table then
// holds the size that a fresh kube-proxy would write; adding a set as it is changes nothing
// (on a kernel that keeps a set's size, the name carries the size: planClientAffinity). A
// walkAll sync then knows the set's name from its own rules.
func (st *servicePortStage) resizeClientAffinity(tx *knftables.Transaction) {
	keeps := st.state.keepsSharedAffinity()
	if st.walkAll {
		st.state.affinitySet = ""
		if keeps {
			st.state.affinitySet = st.affinitySet
		}
	}
	known := st.state.affinitySize
	if st.clientAffinityAdded || known == st.affinitySize || !keeps {
		return
	}
	tx.Add(st.proxier.clientAffinitySetObject(st.affinitySet, st.affinitySize))
	st.state.affinitySize = st.affinitySize
}

// affinityStateName returns the name under which a service port keeps the affinity of the
// endpoint whose upstream set is setName alive: the set's own name with upstream's per-endpoint
// sets, a name that no kernel set has with the shared set.
func (proxier *Proxier) affinityStateName(setName string) string {
	if proxier == nil || !proxier.sharedAffinity() {
		return setName
	}
	return sharedAffinityState + setName
}

// sharedAffinityIDs returns the affinity IDs behind a name from affinityStateName, and whether
// it names shared-set affinity.
func sharedAffinityIDs(stateName string) (affinityID, bool) {
	setName, ok := strings.CutPrefix(stateName, sharedAffinityState)
	if !ok {
		return affinityID{}, false
	}
	a, b := affinityIDs(setName)
	return affinityID{a, b}, true
}

// affinityID is an endpoint's affinity ID, as the shared set's key holds it.
type affinityID struct{ a, b uint32 }

// elementAffinityID returns the affinity ID in a listed element of the shared set, whose key
// is the client address and the two halves of the ID.
func elementAffinityID(elem *knftables.Element) (affinityID, bool) {
	if len(elem.Key) != 3 {
		return affinityID{}, false
	}
	a, errA := strconv.ParseUint(elem.Key[1], 10, 32)
	b, errB := strconv.ParseUint(elem.Key[2], 10, 32)
	if errA != nil || errB != nil {
		return affinityID{}, false
	}
	return affinityID{uint32(a), uint32(b)}, true
}

// pruneClientAffinity adds to tx the deletion of every element of the shared affinity set set
// whose affinity ID stale reports stale, so that an endpoint that went away takes its clients'
// affinity with it. It lists the set (a read: no commit lock). Each element is added before it
// is deleted, in the same transaction: an element that times out between the listing and the
// commit is then deleted all the same, rather than failing the transaction. If listing fails,
// it logs and deletes nothing; the next full sync prunes again.
func (proxier *Proxier) pruneClientAffinity(tx txWriter, set string, stale func(affinityID) bool, capacity uint64) {
	elems, err := proxier.nftables.ListElements(context.TODO(), "set", set)
	if err != nil {
		if !knftables.IsNotFound(err) {
			proxier.logger.Error(err, "Cannot list the session-affinity set; affinity of removed endpoints stays until it times out or the next full sync")
		}
		return
	}
	proxier.noteAffinityFill(set, len(elems), capacity)
	pruned := 0
	for _, elem := range elems {
		id, ok := elementAffinityID(elem)
		if !ok || !stale(id) {
			continue
		}
		el := &knftables.Element{Set: set, Key: elem.Key}
		tx.Add(el)
		tx.Delete(el)
		pruned++
	}
	if pruned > 0 {
		proxier.logger.V(2).Info("Deleting the session affinity of removed endpoints", "elements", pruned)
	}
}

// cleanupAllAffinity is the affinity part of a walkAll sync's clean-up, after the stale chains
// are flushed: it deletes the per-endpoint sets that no service port keeps (with the shared set,
// all of them: they are upstream's, left by an upgrade), and the listed shared sets of other
// names than this sync's (replaced: every rule that named one is re-written or flushed by
// now), and then either prunes the sync's shared set of the endpoints that no service port
// keeps, or, with upstream's shapes, deletes it; either only if the listing found it (a set this
// sync adds is empty).
func (st *servicePortStage) cleanupAllAffinity(c *staleCleanup) {
	tx := &c.sets
	for _, set := range sets.List(st.existingAffinitySets) {
		if !st.state.affinitySets.Has(set) {
			tx.Delete(&knftables.Set{Name: set})
		}
	}
	if st.legacyAffinityListed {
		tx.Delete(&knftables.Set{Name: legacyClientAffinitySet})
	}
	proxier := st.proxier
	for _, set := range sets.List(st.sharedListed) {
		if set != st.affinitySet || !proxier.sharedAffinity() {
			tx.Delete(&knftables.Set{Name: set})
		}
	}
	if !proxier.sharedAffinity() {
		return
	}
	active := make(map[affinityID]bool, st.state.affinitySets.Len())
	for name := range st.state.affinitySets {
		if id, ok := sharedAffinityIDs(name); ok {
			active[id] = true
		}
	}
	switch {
	case !st.sharedListed.Has(st.affinitySet):
	case len(active) == 0 && !st.clientAffinityAdded:
		// No rule uses it any more (those that did are re-written or flushed by now).
		tx.Delete(&knftables.Set{Name: st.affinitySet})
	default:
		c.prune = func(id affinityID) bool { return !active[id] }
		c.affinitySet, c.capacity = st.affinitySet, st.affinitySize
	}
}

// dropAffinity is the affinity part of a partial sync's clean-up: names are the affinity names
// that the changed service ports no longer keep and no other port does. Per-endpoint sets are
// deleted; shared-set affinity is pruned from the shared set.
func (st *servicePortStage) dropAffinity(c *staleCleanup, names []string) {
	tx := &c.sets
	stale := map[affinityID]bool{}
	for _, name := range names {
		if id, ok := sharedAffinityIDs(name); ok {
			stale[id] = true
		} else {
			tx.Delete(&knftables.Set{Name: name})
		}
	}
	if len(stale) == 0 {
		return
	}
	if !st.clientAffinityAdded && !st.state.keepsSharedAffinity() {
		// The last Service port with affinity is gone: so is the set, as a fresh
		// kube-proxy would not write it.
		tx.Delete(&knftables.Set{Name: st.affinitySet})
		st.state.affinitySet = ""
		return
	}
	c.prune = func(id affinityID) bool { return stale[id] }
	c.affinitySet, c.capacity = st.affinitySet, st.affinitySize
}

// keepsSharedAffinity reports whether any known service port keeps affinity in the shared set.
func (k *knownObjects) keepsSharedAffinity() bool {
	for name := range k.affinitySets {
		if _, ok := sharedAffinityIDs(name); ok {
			return true
		}
	}
	return false
}

// deleteReplacedAffinitySets adds to tx, right after the operations of rec in a walkAll sync,
// the deletion of the listed per-endpoint affinity sets of rec's endpoints that rec no longer
// keeps (an upgrade from upstream's shapes): rec re-creates those endpoint chains, and with them
// all of its chains, so once tx commits no rule names the sets. Deleting them port by port
// spreads an upgrade's set deletions over the sync's bounded transactions, and shrinks the set
// list that the kernel scans for every set it looks up, rather than piling them all into the
// clean-up. It deletes nothing when the table holds a chain of the same service port that rec
// does not flush (such as upstream's local-policy chain of a Service whose traffic policy became
// Cluster): that chain's rules may still name the sets, and the clean-up deletes them after it
// flushes the chain. Nor does it in a sync written as one transaction by recovery.go (wholeSync), whose
// clean-up deletes every set after every flush. Sets of endpoints that are gone wait for
// cleanupAllAffinity, after their stale chains are flushed.
func (st *servicePortStage) deleteReplacedAffinitySets(tx *knftables.Transaction, rec *servicePortRecorder, wholeSync bool) {
	if !st.walkAll || st.existingAffinitySets.Len() == 0 || wholeSync {
		return
	}
	flushed := sets.New[string]()
	for _, e := range rec.entries {
		if chain, ok := e.obj.(*knftables.Chain); ok && e.verb == stageFlush {
			flushed.Insert(chain.Name)
		}
	}
	checked := false
	for _, chain := range sets.List(flushed) {
		base, ok := strings.CutPrefix(chain, servicePortEndpointChainNamePrefix)
		if !ok {
			continue
		}
		set := servicePortEndpointAffinityNamePrefix + base
		if !st.existingAffinitySets.Has(set) || slices.Contains(rec.affinitySets, set) {
			continue
		}
		if !checked {
			if !st.flushesAllChainsOf(chainOwner(chain), flushed) {
				return
			}
			checked = true
		}
		tx.Delete(&knftables.Set{Name: set})
		st.existingAffinitySets.Delete(set)
	}
}

// flushesAllChainsOf reports whether flushed holds every listed chain of the service port owner.
func (st *servicePortStage) flushesAllChainsOf(owner string, flushed sets.Set[string]) bool {
	st.indexChains()
	for _, chain := range st.chainsByOwner[owner] {
		if !flushed.Has(chain) {
			return false
		}
	}
	return true
}

// noteAffinityFill records that the shared affinity set set, of size capacity, holds n
// elements: in the metrics, and, when it is full, in an error log line (new clients then get no
// stickiness until elements time out).
func (proxier *Proxier) noteAffinityFill(set string, n int, capacity uint64) {
	family := string(proxier.ipFamily)
	metrics.NFTablesAffinityElements.WithLabelValues(family).Set(float64(n))
	metrics.NFTablesAffinityCapacity.WithLabelValues(family).Set(float64(capacity))
	if uint64(n) >= capacity {
		proxier.logger.Error(nil, "The shared session-affinity set is full: new clients of Services with ClientIP affinity are not sticky until elements time out",
			"set", set, "elements", n, "capacity", capacity)
	}
}
