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
	"maps"
	"strings"
)

// Chain baselines: which kernel hash stands for which rule text.
//
// The drift check compares each chain's rules, hashed as text, with what the sync generates.
// The kernel's netlink dump (netlink_listing.go) is cheap but gives no text. A baseline of a
// chain pairs the two hashes, (kernel hash K, text hash T), and it says: when the kernel's
// rules for the chain hash to K, they are the rules whose text hashes to T. Equal netlink
// bytes are equal rules, so a baseline stays true for as long as the chain's kernel hash is K,
// whoever wrote it. A baseline is recorded only when K and T are known to describe the same
// rules:
//
//   - from a text listing and a netlink snapshot that saw the same table: the same ruleset
//     generation, or one moved only by the other family's commits (own_commits.go); or
//   - from kube-proxy's own writes. A transaction that flushed a chain and added its rules
//     leaves the chain with the text of those rules: a pending write. The end of the sync
//     (nftLink.settle), or else the next full sync's snapshot, turns it into a baseline if no
//     one else has committed since. To know that, the link reads the ruleset generation before
//     and after each of kube-proxy's transactions: the kernel adds one per commit, for any
//     table in the network namespace.
//
// A full sync reads a snapshot and, for each chain of the table:
//   - a pending write that nothing else can have overwritten gives its text hash;
//   - else a baseline whose kernel hash still matches gives its text hash;
//   - else, if the chain has a baseline and kube-proxy has not written it since, the chain
//     changed behind kube-proxy's back: it is drifted, and its service port is re-written;
//   - else (a chain kube-proxy never saw, or wrote when someone else was committing too) its
//     text is unknown. If the dump shows that it differs from what the sync writes (another
//     number of rules, or anonymous sets where the sync writes no set literal), its service
//     port is re-written. Otherwise the full sync lists the table as text, as it did before,
//     and records a baseline for every chain from that listing.
//
// So the text listing runs at start-up, unless every service port's chains differ (an upgrade
// from upstream's rule shapes), and after commits by others that raced kube-proxy's own;
// every other full sync reads only the netlink dump. The two proxiers of a dual-stack
// kube-proxy share one link, so each one's commits are not "someone else's" to the other, and
// a snapshot that the other family's commits overlapped stands (own_commits.go).
//
// This file holds the chain memory, the bookkeeping of baselines and pending writes; the link
// (kernel_link.go) reads the generations, takes the snapshots and resolves them through it.

// chainBaseline pairs a chain's kernel hash with the text hash of the same rules.
type chainBaseline struct {
	kernel, text uint64
}

// pendingWrite is what kube-proxy wrote to a chain and has not yet confirmed.
type pendingWrite struct {
	text  uint64
	epoch uint64
	// unsure marks a write whose result is unknown: a chain changed without being flushed, or
	// written while someone else committed too.
	unsure bool
}

// chainMemory is what the link knows of one table's chains.
type chainMemory struct {
	baselines map[string]chainBaseline
	pending   map[string]pendingWrite
	// held is, while heldValid, the text hash of each of the table's chains as the kernel
	// holds it, and heldSets its named sets: set by a drift read that resolved every chain
	// with nothing drifted, and kept through kube-proxy's own confirmed commits since. Any
	// commit by someone else (a new epoch after heldEpoch) or an unsure write ends it.
	held      map[string]uint64
	heldSets  map[string]bool
	heldValid bool
	heldEpoch uint64
	// named are the table's named sets and maps, and anon the number of anonymous sets that
	// each chain's rules hold: from the last dump, then kept up to date with kube-proxy's own
	// commits (noteSets). Together they are every set of the table (setTotal).
	named map[string]bool
	anon  map[string]int
	// elementsRead is set once a full sync has read the table's maps and sets back
	// (upstream's readOrReset), and elementsEpoch is the link's epoch when that read started
	// (nftLink.elementsUnchanged).
	elementsRead  bool
	elementsEpoch uint64
}

// confirmed turns the pending write of each chain in hashes into a baseline, with the kernel
// hash given there, and forgets those writes.
func (m *chainMemory) confirmed(hashes map[string]uint64) {
	for chain, kh := range hashes {
		m.baselines[chain] = chainBaseline{kernel: kh, text: m.pending[chain].text}
		delete(m.pending, chain)
	}
	if len(m.pending) == 0 {
		m.dropPending()
	}
}

// dropPending forgets every pending write. It starts a new map rather than clearing the old
// one: a cleared map keeps its buckets, and the first sync after start-up fills it with every
// chain of the table, so clearing it would hold that memory for as long as the process runs.
func (m *chainMemory) dropPending() {
	m.pending = map[string]pendingWrite{}
}

// countSets records what a dump found of table's sets: every named set and map (named), and
// the anonymous sets of each chain (shapes).
func (m *chainMemory) countSets(named []string, shapes map[string]chainShape) {
	m.named = make(map[string]bool, len(named))
	for _, name := range named {
		m.named[name] = true
	}
	m.anon = make(map[string]int)
	for chain, shape := range shapes {
		if shape.anonRefs > 0 {
			m.anon[chain] = shape.anonRefs
		}
	}
}

// setTotal returns how many sets the table holds, anonymous ones included.
func (m *chainMemory) setTotal() int {
	n := len(m.named)
	for _, anon := range m.anon {
		n += anon
	}
	return n
}

// noteSets updates the sets with one command of a committed transaction, split by
// nftCommands (each name it keeps is a copy: see ownName): a named set or map that is created
// or deleted; the set and map literals of an added rule, each an anonymous set that its chain
// now holds; and a chain that is flushed or deleted, which frees its anonymous sets. Deleting or
// flushing the table frees them all (and deleting it, its named sets).
func (m *chainMemory) noteSets(f []string) {
	if len(f) < 4 {
		return
	}
	verb, typ := f[0], f[1]
	switch {
	case typ == "table" && verb != "add" && verb != "create":
		clear(m.anon)
		if verb == "delete" || verb == "destroy" {
			clear(m.named)
		}
	case len(f) < 5:
	case typ == "set" || typ == "map":
		name := f[4]
		switch {
		case verb == "add" || verb == "create":
			if m.named == nil {
				m.named = map[string]bool{}
			}
			m.named[ownName(name)] = true
		case verb == "delete" || verb == "destroy":
			delete(m.named, name)
		}
	case typ == "chain" && (verb == "flush" || verb == "delete" || verb == "destroy"):
		delete(m.anon, f[4])
	case typ == "rule" && verb == "add" && len(f) == 6:
		if _, literals := setReferences(f[5]); literals > 0 {
			if m.anon == nil {
				m.anon = map[string]int{}
			}
			m.anon[ownName(f[4])] += literals
		}
	}
}

// hold records chains (text hashes) and sets as what the kernel holds in epoch.
func (m *chainMemory) hold(chains map[string]uint64, sets []string, epoch uint64) {
	m.held = maps.Clone(chains)
	m.heldSets = map[string]bool{}
	for _, set := range sets {
		m.heldSets[set] = true
	}
	m.heldValid, m.heldEpoch = true, epoch
}

// noteWrites notes the chain writes of a committed transaction's nft text (knftables' format,
// one command per line) as pending writes of epoch: a flushed chain holds the rules added to it
// after the flush, and so does a chain with a pending write of the same epoch (an earlier
// transaction of the sync flushed it) to which rules are added. Any other change to a chain's
// rules makes the write unsure; a deleted chain, or a deleted or flushed table, is forgotten.
func (m *chainMemory) noteWrites(text string, epoch uint64, unsure bool) {
	writes := map[string]pendingWrite{}
	if unsure {
		m.heldValid = false
	}
	for f := range nftCommands(text) {
		m.noteSets(f)
		if len(f) < 4 {
			continue
		}
		verb, typ := f[0], f[1]
		if typ == "table" && verb != "add" && verb != "create" {
			clear(writes)
			m.dropPending()
			clear(m.baselines)
			m.heldValid = false
			continue
		}
		if typ == "set" && len(f) >= 5 {
			switch {
			case !m.heldValid:
			case verb == "add" || verb == "create":
				m.heldSets[ownName(f[4])] = true
			case verb == "delete" || verb == "destroy":
				delete(m.heldSets, f[4])
			}
			continue
		}
		if len(f) < 5 || typ != "chain" && typ != "rule" {
			continue
		}
		chain := f[4]
		w, seen := writes[chain]
		if p, ok := m.pending[chain]; !seen && ok && !p.unsure && !unsure && p.epoch == epoch {
			// Written earlier, with no commit by anyone else since: the kernel holds p.
			w, seen = p, true
		}
		switch {
		case typ == "chain" && verb == "flush":
			writes[chain] = pendingWrite{text: fnvOffset64, epoch: epoch, unsure: unsure}
		case typ == "chain" && (verb == "delete" || verb == "destroy"):
			delete(writes, chain)
			delete(m.pending, chain)
			delete(m.baselines, chain)
			delete(m.held, chain)
		case typ == "chain":
			// add/create: the chain exists, its rules are unchanged (none, if it is new).
			if _, ok := m.held[chain]; !ok && m.heldValid {
				m.held[ownName(chain)] = fnvOffset64
			}
		case verb == "add" && len(f) == 6 && seen && !w.unsure && !placedRule(f[5]):
			w.text = hashRule(w.text, f[5])
			writes[chain] = w
		default:
			writes[chain] = pendingWrite{epoch: epoch, unsure: true}
		}
	}
	for chain, w := range writes {
		chain = ownName(chain)
		m.pending[chain] = w
		if w.unsure {
			m.heldValid = false
		} else if m.heldValid {
			m.held[chain] = w.text
		}
	}
}

// ownName returns a copy of name, a field of a command that nftCommands split: the fields are
// parts of the command's line, and a map key that is one keeps the whole line alive (assigning
// to a map, even to a key it has, stores the key given). A chain memory keeps tens of thousands
// of chain names, as pending writes and then in its baselines.
func ownName(name string) string {
	return strings.Clone(name)
}

// placedRule reports whether the text of an added rule places it by index, handle or position
// rather than at the end of its chain.
func placedRule(rest string) bool {
	return strings.HasPrefix(rest, "index ") || strings.HasPrefix(rest, "handle ") || strings.HasPrefix(rest, "position ")
}
