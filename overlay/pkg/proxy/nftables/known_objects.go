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
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/proxy"
	"sigs.k8s.io/knftables"
)

// What kube-proxy knows it created.
//
// A sync needs to know which service and endpoint chains, affinity sets and map elements exist,
// to flush or delete the ones no Service uses any more. Upstream lists the whole table for that
// on every sync (nft --json list table) and walks every service port, which costs seconds on a
// large table and is added to the programming latency of every Service change. kube-proxy
// creates all of those objects itself, so after a successful sync it knows them, per service
// port. A partial sync regenerates only the changed service ports and compares their new objects
// with their old ones. A full sync (at start-up, after any failure, and periodically) still
// lists the table and walks every service port, so objects created or left behind by anything
// else are found there.

// knownObjects are the objects that the last successful sync left, per service port.
type knownObjects struct {
	ports     map[proxy.ServicePortName]*portObjects
	byService map[types.NamespacedName]sets.Set[proxy.ServicePortName]
	// claims are, for each map or set element, the first service port that uses it, and
	// moreClaims the others of an element that several use (the ports of a Service share its
	// ClusterIP, and Services that select the same pods share hairpin elements). Each points
	// into its port's objects (portObjects.elements), which are never changed once built:
	// the map holds a pointer where it held a copy of a claim (bench/RESULTS.md, "Known
	// objects in memory").
	claims     map[elementKey]*elementClaim
	moreClaims map[elementKey][]*elementClaim
	// chains and affinitySets are all the service ports' chains and affinity sets.
	chains, affinitySets sets.Set[string]
	// affinitySize is the size with which the shared affinity set was last written (0:
	// not known), so that a sync whose size differs writes it again (affinitySetSize).
	// affinitySet is its name ("": no service port keeps the set), which a partial sync
	// keeps (planClientAffinity).
	affinitySize uint64
	affinitySet  string
	// affinity is, for each service port with ClientIP affinity and endpoints, how many
	// endpoints it has, and affinityTotal their sum (countAffinityEndpoints); nil until a
	// sync has counted them.
	affinity      map[proxy.ServicePortName]int
	affinityTotal int
	// Totals over the service ports, for the sync's log line and metrics.
	endpoints, noLocalInternal, noLocalExternal int
	// order is every service port, sorted, or nil when ports came or went since it was.
	order []proxy.ServicePortName
}

// portObjects are one service port's objects.
type portObjects struct {
	// name is the service port's name, which its element claims point to.
	name                             proxy.ServicePortName
	elements                         []elementClaim
	chains, affinitySets             []string
	endpoints                        int
	noLocalInternal, noLocalExternal bool
}

// elementKey names an element: its container and its joined key.
type elementKey struct {
	storage *nftElementStorage
	key     string
}

// elementClaim is a service port's use of an element: the element of elementKey with value
// (joined, as nftElementStorage keeps it; "" in a set) and comment. port points to the name in
// the port's objects, which all its claims share (a copy in each claim cost 56 bytes more,
// several times per port).
type elementClaim struct {
	elementKey
	port    *proxy.ServicePortName
	value   string
	comment *string
}

// element returns the element that c claims, as the service port wrote it. The key and value
// are split again from their joined form, as deleteElement does, rather than kept as the
// generated element, which would hold each one's text twice.
func (c *elementClaim) element() *knftables.Element {
	e := containerElement(c.storage, c.key)
	if c.value != "" {
		e.Value = splitNFTSlice(c.value)
	}
	e.Comment = c.comment
	return e
}

// containerElement returns the element of storage s with the joined key key, with no value.
func containerElement(s *nftElementStorage, key string) *knftables.Element {
	e := &knftables.Element{Key: splitNFTSlice(key)}
	if s.containerType == "set" {
		e.Set = s.containerName
	} else {
		e.Map = s.containerName
	}
	return e
}

func newKnownObjects() *knownObjects {
	return &knownObjects{
		ports:        map[proxy.ServicePortName]*portObjects{},
		byService:    map[types.NamespacedName]sets.Set[proxy.ServicePortName]{},
		claims:       map[elementKey]*elementClaim{},
		moreClaims:   map[elementKey][]*elementClaim{},
		chains:       sets.New[string](),
		affinitySets: sets.New[string](),
	}
}

// sortedPorts returns the service ports of svcPortMap, sorted. It reuses the order of the
// last sync when the same ports are there, which costs a lookup per port instead of a sort.
// The caller must not modify the result.
func (k *knownObjects) sortedPorts(svcPortMap proxy.ServicePortMap) []proxy.ServicePortName {
	if k.order != nil && len(k.order) == len(svcPortMap) {
		same := true
		for _, name := range k.order {
			if _, ok := svcPortMap[name]; !ok {
				same = false
				break
			}
		}
		if same {
			return k.order
		}
	}
	ports := make([]proxy.ServicePortName, 0, len(svcPortMap))
	for name := range svcPortMap {
		ports = append(ports, name)
	}
	slices.SortFunc(ports, compareServicePortNames)
	k.order = ports
	return ports
}

// objectsOf returns the objects that rec, the recorder of service port name, keeps alive. An
// element that rec ensures more than once counts once, with the last value ensured. It only
// reads rec, and shares none of its slices (recorders are recycled), so the stage's workers
// call it for their own recorders.
func objectsOf(name proxy.ServicePortName, rec *servicePortRecorder) *portObjects {
	objs := &portObjects{name: name, chains: slices.Clone(rec.chains), affinitySets: slices.Clone(rec.affinitySets), endpoints: rec.endpoints,
		noLocalInternal: rec.noLocalInternal, noLocalExternal: rec.noLocalExternal,
		elements: make([]elementClaim, 0, len(rec.elems))}
	for _, e := range rec.entries {
		if e.verb != stageElement {
			continue
		}
		el := &rec.elems[e.elem]
		c := elementClaim{elementKey: elementKey{el.storage, el.key}, port: &objs.name, value: el.value, comment: e.obj.(*knftables.Element).Comment}
		// A service port has a handful of elements: a linear search beats a map.
		seen := false
		for i := range objs.elements {
			if objs.elements[i].elementKey == c.elementKey {
				objs.elements[i], seen = c, true
				break
			}
		}
		if !seen {
			objs.elements = append(objs.elements, c)
		}
	}
	return objs
}

// matches reports whether rec, the recorder of service port name, keeps alive exactly the
// objects o, so that o can stand for them without building them anew. (A recorder that ensures
// one element twice never matches; objectsOf handles it.)
func (o *portObjects) matches(name proxy.ServicePortName, rec *servicePortRecorder) bool {
	if o.endpoints != rec.endpoints || o.noLocalInternal != rec.noLocalInternal || o.noLocalExternal != rec.noLocalExternal ||
		len(o.elements) != len(rec.elems) || !slices.Equal(o.chains, rec.chains) || !slices.Equal(o.affinitySets, rec.affinitySets) {
		return false
	}
	for i := range rec.elems {
		c, el := &o.elements[i], &rec.elems[i]
		if c.storage != el.storage || c.key != el.key || c.value != el.value || *c.port != name {
			return false
		}
	}
	return true
}

// put records objs (nil: none) as the objects of service port name, replacing its old ones in
// the per-port index and the totals; it returns the old ones. Element claims, chains and sets
// are left to the caller.
func (k *knownObjects) put(name proxy.ServicePortName, objs *portObjects) *portObjects {
	old := k.ports[name]
	if (old == nil) != (objs == nil) {
		k.order = nil // a port comes or goes
	}
	if old != nil {
		k.count(old, -1)
	}
	if objs == nil {
		delete(k.ports, name)
		if ports := k.byService[name.NamespacedName]; ports != nil {
			ports.Delete(name)
			if ports.Len() == 0 {
				delete(k.byService, name.NamespacedName)
			}
		}
		return old
	}
	k.ports[name] = objs
	if k.byService[name.NamespacedName] == nil {
		k.byService[name.NamespacedName] = sets.New[proxy.ServicePortName]()
	}
	k.byService[name.NamespacedName].Insert(name)
	k.count(objs, 1)
	return old
}

// count adds sign (1 or -1) times the totals of o to k's.
func (k *knownObjects) count(o *portObjects, sign int) {
	k.endpoints += sign * o.endpoints
	if o.noLocalInternal {
		k.noLocalInternal += sign
	}
	if o.noLocalExternal {
		k.noLocalExternal += sign
	}
}

// claim records c, which stays unchanged for as long as k holds it, as a use of its element
// by c.port, replacing that port's earlier claim.
func (k *knownObjects) claim(c *elementClaim) {
	first, ok := k.claims[c.elementKey]
	if !ok || *first.port == *c.port {
		k.claims[c.elementKey] = c
		return
	}
	more := k.moreClaims[c.elementKey]
	for i := range more {
		if *more[i].port == *c.port {
			more[i] = c
			return
		}
	}
	k.moreClaims[c.elementKey] = append(more, c)
}

// release drops port's use of the element key. If no service port uses the element any more,
// it adds the element's deletion to tx; if others still do and the element holds a value that
// none of them wants, it writes the value of one of them.
func (k *knownObjects) release(tx txWriter, key elementKey, port proxy.ServicePortName) {
	k.forgetClaim(key, port)
	first, ok := k.claims[key]
	if !ok {
		deleteElement(tx, key)
		return
	}
	s := key.storage
	held := s.elements[key.key]
	if first.value == held {
		return
	}
	for _, c := range k.moreClaims[key] {
		if c.value == held {
			return
		}
	}
	s.ensureJoined(tx, first.element(), key.key, first.value)
}

// forgetClaim drops port's use of the element key, changing nothing in the table.
func (k *knownObjects) forgetClaim(key elementKey, port proxy.ServicePortName) {
	first, ok := k.claims[key]
	if !ok {
		return
	}
	more := k.moreClaims[key]
	if *first.port == port {
		if len(more) == 0 {
			delete(k.claims, key)
			return
		}
		k.claims[key] = more[len(more)-1]
		more[len(more)-1] = nil // let the claim's port objects go
		more = more[:len(more)-1]
	} else {
		i := 0
		for i < len(more) && *more[i].port != port {
			i++
		}
		if i == len(more) {
			return
		}
		more = append(more[:i:i], more[i+1:]...)
	}
	if len(more) == 0 {
		delete(k.moreClaims, key)
	} else {
		k.moreClaims[key] = more
	}
}

// deleteElement adds the deletion of the element key to tx, if its storage holds it, and
// removes it from the storage.
func deleteElement(tx txWriter, key elementKey) {
	s := key.storage
	if _, present := s.elements[key.key]; !present {
		return
	}
	tx.Delete(containerElement(s, key.key))
	delete(s.elements, key.key)
	delete(s.leftoverKeys, key.key)
	delete(s.comments, key.key)
}

// updatePorts replaces the objects of the service ports names with news (nil: the port is
// gone). It returns the chains and affinity sets that those ports no
// longer use, the chains they use now, and the element uses they dropped, for the caller to
// release once it has removed the rest (see release).
func (k *knownObjects) updatePorts(names []proxy.ServicePortName, news []*portObjects) (droppedChains, usedChains, droppedSets []string, released []elementClaim) {
	olds := make([]*portObjects, len(names))
	// Claim every new use first, so that an element that moves between two of these
	// ports is never deleted.
	for i, name := range names {
		if news[i] != nil {
			for j := range news[i].elements {
				k.claim(&news[i].elements[j])
			}
		}
		olds[i] = k.put(name, news[i])
	}
	for i := range names {
		old, cur := olds[i], news[i]
		if cur == nil {
			cur = &portObjects{}
		}
		if old == nil {
			old = &portObjects{}
		}
		keep := make(map[elementKey]bool, len(cur.elements))
		for _, c := range cur.elements {
			keep[c.elementKey] = true
		}
		for _, c := range old.elements {
			if !keep[c.elementKey] {
				released = append(released, c)
			}
		}
		for _, chain := range old.chains {
			if !slices.Contains(cur.chains, chain) {
				k.chains.Delete(chain)
				droppedChains = append(droppedChains, chain)
			}
		}
		k.chains.Insert(cur.chains...)
		usedChains = append(usedChains, cur.chains...)
		for _, set := range old.affinitySets {
			if !slices.Contains(cur.affinitySets, set) {
				k.affinitySets.Delete(set)
				droppedSets = append(droppedSets, set)
			}
		}
		k.affinitySets.Insert(cur.affinitySets...)
	}
	return droppedChains, usedChains, droppedSets, released
}

// compareServicePortNames orders service ports by namespace, name, port name and protocol.
func compareServicePortNames(a, b proxy.ServicePortName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
}

// ensureJoined is ensureElem for an element whose key and value are already joined: it adds
// elem to tx unless the storage holds it with the same value (replacing it if the value
// differs), and marks it as used in this sync. It keeps elem's comment, which names its
// service port, as a read would find it: a full sync that keeps the elements rather than
// reading them (keepElements) tells by it whose a leftover element is.
func (s *nftElementStorage) ensureJoined(tx txWriter, elem *knftables.Element, key, value string) {
	existing, exists := s.elements[key]
	switch {
	case !exists:
		tx.Add(elem)
		s.elements[key] = value
	case existing != value:
		tx.Delete(elem)
		tx.Add(elem)
		s.elements[key] = value
	}
	if c := elem.Comment; c != nil {
		if old, ok := s.comments[key]; !ok || old != *c {
			s.noteComment(key, c)
		}
	}
	delete(s.leftoverKeys, key)
}

// noteComment keeps the comment, if any, of the element of key that a read of the storage found
// or that kube-proxy wrote (ensureJoined).
func (s *nftElementStorage) noteComment(key string, comment *string) {
	if comment == nil {
		return
	}
	if s.comments == nil {
		s.comments = map[string]string{}
	}
	s.comments[key] = *comment
}

// noteAffinity records that service port name has n endpoints with ClientIP affinity (0: none,
// no affinity, or the port is gone), keeping affinityTotal their sum. affinity is not nil.
func (k *knownObjects) noteAffinity(name proxy.ServicePortName, n int) {
	k.affinityTotal += n - k.affinity[name]
	if n == 0 {
		delete(k.affinity, name)
		return
	}
	k.affinity[name] = n
}
