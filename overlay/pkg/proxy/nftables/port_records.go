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
	"slices"
	"sync"

	"sigs.k8s.io/knftables"
)

// A sync's records: what each service port's generation (servicePortRecorder) and the
// clean-up (cleanupOps) would write, as structured values, queued in order. The stage merges
// them into the sync's transactions; the lower layers' inputs are derived from them here, so
// that nothing re-parses a transaction's text to learn them: the drift check's chain hashes
// (chainWritesOf) and the planner's set counts (countSetOps, freedSets).

// stageVerb is what the merge does with a recorded entry.
type stageVerb uint8

const (
	stageAdd     stageVerb = iota // tx.Add(obj)
	stageFlush                    // tx.Flush(obj)
	stageElement                  // ensure obj, an element, in storage
	stageDelete                   // tx.Delete(obj) (the clean-up's)
)

// stageEntry is one recorded operation of a service port.
type stageEntry struct {
	obj  knftables.Object
	verb stageVerb
	elem int32 // stageElement: the index of the element's elemEntry
}

// elemEntry is an element that a service port needs.
type elemEntry struct {
	storage    *nftElementStorage // the map or set that holds the element
	key, value string             // the element's joined key and value
}

// servicePortRecorder collects one service port's output of the stage: its operations, in
// order, and the chains, affinity sets and map elements that it keeps alive. A recorder is
// written by one worker only.
type servicePortRecorder struct {
	proxier      *Proxier
	entries      []stageEntry
	elems        []elemEntry
	chains       []string
	affinitySets []string
	// affinitySet is the name of the sync's shared affinity set, which affinity rules name.
	affinitySet string
	// endpoints counts the service port's endpoints, for the sync's log line.
	endpoints int
	// noLocalInternal and noLocalExternal report a Local traffic policy without local
	// endpoints, for the sync_proxy_rules_no_local_endpoints_total metric.
	noLocalInternal, noLocalExternal bool
}

// recorders recycles recorders: a full sync records every service port, and the recorders'
// slices were a sixth of what it allocated (bench/RESULTS.md, "Rule generation in Go").
var recorders = sync.Pool{New: func() any { return &servicePortRecorder{entries: make([]stageEntry, 0, 12)} }}

// newRecorder returns an empty recorder for a service port of proxier's sync, whose shared
// affinity set is affinitySet. Give it back with release. A recycled recorder is emptied here,
// on the worker that takes it, rather than on the sync's goroutine that gives it back.
func newRecorder(proxier *Proxier, affinitySet string) *servicePortRecorder {
	r := recorders.Get().(*servicePortRecorder)
	clear(r.entries[:cap(r.entries)])
	clear(r.elems[:cap(r.elems)])
	clear(r.chains[:cap(r.chains)])
	clear(r.affinitySets[:cap(r.affinitySets)])
	*r = servicePortRecorder{proxier: proxier, affinitySet: affinitySet,
		entries: r.entries[:0], elems: r.elems[:0], chains: r.chains[:0], affinitySets: r.affinitySets[:0]}
	return r
}

// release recycles r; r must not be used after it. Nothing that outlives the sync may hold r's
// slices: objectsOf copies the ones it keeps.
func (r *servicePortRecorder) release() {
	recorders.Put(r)
}

// Add records an "add" of obj, as knftables.Transaction.Add would queue it.
func (r *servicePortRecorder) Add(obj knftables.Object) {
	r.entries = append(r.entries, stageEntry{verb: stageAdd, obj: obj})
}

// ensureChain notes that the service port keeps chain alive and, unless skipCreation is set,
// records creating it empty (an add and a flush). A chain is recorded once per service port.
func (r *servicePortRecorder) ensureChain(chain string, skipCreation bool) {
	if slices.Contains(r.chains, chain) {
		return
	}
	r.chains = append(r.chains, chain)
	if skipCreation {
		return
	}
	// One object serves both operations: knftables only reads it.
	obj := &knftables.Chain{Name: chain}
	r.entries = append(r.entries, stageEntry{verb: stageAdd, obj: obj}, stageEntry{verb: stageFlush, obj: obj})
}

// ensureElem records that the service port needs elem in storage. The merge adds it if storage
// lacks it or holds another value for its key.
func (r *servicePortRecorder) ensureElem(storage *nftElementStorage, elem *knftables.Element) {
	r.entries = append(r.entries, stageEntry{verb: stageElement, obj: elem, elem: int32(len(r.elems))})
	r.elems = append(r.elems, elemEntry{storage: storage, key: joinNFTSlice(elem.Key), value: joinNFTSlice(elem.Value)})
}

// dropIntactChains leaves the service port's chains alone when the kernel, as the sync's drift
// check k (nil: none) read it, holds them exactly as r records them (see drift.go): it drops the
// recorded chain and rule operations, keeping the elements, sets and names. It returns how
// many of the port's chains it checked, and how many of those it did not drop.
func (r *servicePortRecorder) dropIntactChains(k *kernelListing) (checked, rewritten int) {
	if k == nil {
		return 0, 0
	}
	written := chainWritesOf(r)
	if len(written) == 0 {
		return 0, 0
	}
	if !k.intact(written) {
		return len(written), len(written)
	}
	kept := r.entries[:0]
	for _, e := range r.entries {
		switch e.obj.(type) {
		case *knftables.Chain, *knftables.Rule:
			continue
		}
		kept = append(kept, e)
	}
	r.entries = kept
	return len(written), 0
}

// chainWritesOf returns what the operations of rec write to its chains, as nft would list them
// after the operations: a created chain (added and flushed) starts empty, and
// each added rule extends its chain's hash. A rule for a chain that rec did not create, or one
// placed by index or handle, leaves that chain unknown. It only reads rec.
func chainWritesOf(rec *servicePortRecorder) []chainWrite {
	var writes []chainWrite
	if n := len(rec.chains); n > 0 {
		writes = make([]chainWrite, 0, n)
	}
	find := func(chain string) int {
		for i := len(writes) - 1; i >= 0; i-- {
			if writes[i].chain == chain {
				return i
			}
		}
		return -1
	}
	for _, e := range rec.entries {
		switch obj := e.obj.(type) {
		case *knftables.Chain:
			if e.verb != stageFlush {
				continue
			}
			if i := find(obj.Name); i >= 0 {
				writes[i] = chainWrite{chain: obj.Name, hash: fnvOffset64}
			} else {
				writes = append(writes, chainWrite{chain: obj.Name, hash: fnvOffset64})
			}
		case *knftables.Rule:
			i := find(obj.Chain)
			switch {
			case i < 0:
				writes = append(writes, chainWrite{chain: obj.Chain, unknown: true})
			case obj.Index != nil || obj.Handle != nil:
				writes[i].unknown = true
			case !writes[i].unknown:
				hash, braces := hashAddedRule(writes[i].hash, obj)
				writes[i].hash = hash
				writes[i].rules++
				writes[i].braces = writes[i].braces || braces
			}
		}
	}
	return writes
}

// freedSets returns how many anonymous sets the chains that rec flushes hold in the kernel:
// the sync frees them, and forgets them. It returns 0 when the splitter does not weigh sets.
func freedSets(s *txSplitter, rec *servicePortRecorder) int {
	freed := 0
	for _, e := range rec.entries {
		if chain, ok := e.obj.(*knftables.Chain); ok && e.verb == stageFlush {
			freed += s.freedByFlush(chain.Name)
		}
	}
	return freed
}

// countSetOps counts what rec's entries do to sets. Rules of chains that the drift check found
// intact are no longer in rec.
func countSetOps(rec *servicePortRecorder) portSetOps {
	var c portSetOps
	for _, e := range rec.entries {
		if e.verb != stageAdd && e.verb != stageFlush {
			continue
		}
		switch obj := e.obj.(type) {
		case *knftables.Chain:
			c.chainRuleOps++
		case *knftables.Rule:
			c.chainRuleOps++
			if e.verb == stageAdd {
				named, literals := setReferences(obj.Rule)
				c.ruleLookups += named + literals
				c.created += literals
			}
		case *knftables.Set, *knftables.Map:
			if e.verb == stageAdd {
				c.created++
			}
		}
	}
	return c
}

// cleanupOp is one operation of the clean-up.
type cleanupOp struct {
	verb stageVerb // stageAdd, stageFlush, or stageDelete
	obj  knftables.Object
}

// cleanupOps collects operations as a transaction would queue them (it is a txWriter), in
// units that a cut never splits: consecutive operations on the same object (an element added
// and deleted, or deleted and added with a new value) form one unit.
type cleanupOps struct {
	ops   []cleanupOp
	units []int // the index in ops where each unit starts
}

// record appends one operation, in a new unit unless it is on the previous operation's object.
func (c *cleanupOps) record(verb stageVerb, obj knftables.Object) {
	if n := len(c.ops); n == 0 || c.ops[n-1].obj != obj {
		c.units = append(c.units, len(c.ops))
	}
	c.ops = append(c.ops, cleanupOp{verb: verb, obj: obj})
}

// Add records tx.Add(obj).
func (c *cleanupOps) Add(obj knftables.Object) { c.record(stageAdd, obj) }

// Flush records tx.Flush(obj).
func (c *cleanupOps) Flush(obj knftables.Object) { c.record(stageFlush, obj) }

// Delete records tx.Delete(obj).
func (c *cleanupOps) Delete(obj knftables.Object) { c.record(stageDelete, obj) }

// eachUnit calls f with the operations of each unit, in order.
func (c *cleanupOps) eachUnit(f func(ops []cleanupOp)) {
	for i, start := range c.units {
		end := len(c.ops)
		if i+1 < len(c.units) {
			end = c.units[i+1]
		}
		f(c.ops[start:end])
	}
}

// txWriter is what writes a sync's operations: its transaction, or a clean-up stage.
type txWriter interface {
	Add(obj knftables.Object)
	Flush(obj knftables.Object)
	Delete(obj knftables.Object)
}
