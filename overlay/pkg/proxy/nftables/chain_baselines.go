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
	"hash/maphash"
	"strings"
	"sync"
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
//   - from a text listing and a netlink snapshot that saw the same ruleset generation; or
//   - from kube-proxy's own writes. A transaction that flushed a chain and added its rules
//     leaves the chain with the text of those rules: a pending write. The next full sync's
//     snapshot turns it into a baseline if no one else has committed since. To know that, the
//     link reads the ruleset generation before and after each of kube-proxy's transactions:
//     the kernel adds one per commit, for any table in the network namespace.
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
// kube-proxy share one link, so each one's commits are not "someone else's" to the other.

// chainBaseline pairs a chain's kernel hash with the text hash of the same rules.
type chainBaseline struct {
	kernel, text uint64
}

// pendingWrite is what kube-proxy wrote to a chain since the last snapshot.
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
}

// nftLink is kube-proxy's netlink view of the nftables of one network namespace.
type nftLink struct {
	// dial opens a NETLINK_NETFILTER socket in the namespace where knftables runs nft.
	dial func() (int, error)
	seed maphash.Seed

	mu sync.Mutex
	// gen is the ruleset generation after the last commit or snapshot that the link saw,
	// when genKnown.
	gen      uint32
	genKnown bool
	// epoch goes up each time the link finds that someone else has committed. Every commit
	// from generation epochStart to gen was one of kube-proxy's own tracked transactions.
	epoch      uint64
	epochStart uint32
	tables     map[string]*chainMemory
}

// newNFTLink returns a link whose sockets dial opens.
func newNFTLink(dial func() (int, error)) *nftLink {
	return &nftLink{dial: dial, seed: maphash.MakeSeed(), tables: map[string]*chainMemory{}}
}

var (
	processLinkOnce sync.Once
	processLink     *nftLink
)

// processNFTLink returns the link of the process's own network namespace, which every proxier
// of the process shares.
func processNFTLink() *nftLink {
	processLinkOnce.Do(func() { processLink = newNFTLink(openNetfilterSocket) })
	return processLink
}

// memory returns the chain memory of table (as "<family> <table>"). The caller holds l.mu.
func (l *nftLink) memory(table string) *chainMemory {
	m := l.tables[table]
	if m == nil {
		m = &chainMemory{baselines: map[string]chainBaseline{}, pending: map[string]pendingWrite{}}
		l.tables[table] = m
	}
	return m
}

// open opens a socket; the caller closes it.
func (l *nftLink) open() (*nftNetlink, error) {
	fd, err := l.dial()
	if err != nil {
		return nil, err
	}
	return newNFTNetlink(fd), nil
}

// runTracked runs one of kube-proxy's transactions on table (run) with text txText, and notes
// what it wrote: the generation before and after tell whether anyone else committed since the
// link last looked, or during the transaction. Only one tracked transaction runs at a time in a
// link. It returns run's error.
func (l *nftLink) runTracked(table string, txText func() string, run func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var before, after uint32
	c, errGen := l.open()
	if errGen == nil {
		defer c.close()
		before, errGen = c.generation()
	}
	runErr := run()
	if errGen == nil {
		after, errGen = c.generation()
	}
	if errGen != nil {
		// Without the generations nothing is known of what happened around the commit.
		l.lost()
		if runErr == nil {
			l.memory(table).noteWrites(txText(), l.epoch, true)
		}
		return runErr
	}
	if !l.genKnown || before != l.gen {
		l.newEpoch(before)
	}
	l.gen = after
	switch {
	case runErr != nil:
		if after != before {
			l.newEpoch(after)
		}
	case after == before+1:
		l.memory(table).noteWrites(txText(), l.epoch, false)
	default:
		l.newEpoch(after)
		l.memory(table).noteWrites(txText(), l.epoch, true)
	}
	return runErr
}

// newEpoch notes that someone else committed before generation gen. The caller holds l.mu.
func (l *nftLink) newEpoch(gen uint32) {
	l.epoch++
	l.epochStart, l.gen, l.genKnown = gen, gen, true
}

// lost forgets the generation: no pending write made before can be confirmed. The caller
// holds l.mu.
func (l *nftLink) lost() {
	l.genKnown = false
	l.epoch++
}

// genAfter reports whether generation a is later than b (generations wrap around).
func genAfter(a, b uint32) bool {
	return int32(a-b) > 0
}

// noteWrites notes the chain writes of a committed transaction's nft text (knftables' format,
// one command per line) as pending writes of epoch: a flushed chain holds the rules added to it
// after the flush, and so does a chain with a pending write of the same epoch (an earlier
// transaction of the sync flushed it) to which rules are added. Any other change to a chain's
// rules makes the write unsure; a deleted chain, or a deleted or flushed table, is forgotten.
func (m *chainMemory) noteWrites(text string, epoch uint64, unsure bool) {
	writes := map[string]pendingWrite{}
	for f := range nftCommands(text) {
		if len(f) < 4 {
			continue
		}
		verb, typ := f[0], f[1]
		if typ == "table" && verb != "add" && verb != "create" {
			clear(writes)
			clear(m.pending)
			clear(m.baselines)
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
		case typ == "chain":
			// add/create: the chain exists, its rules are unchanged.
		case verb == "add" && len(f) == 6 && seen && !w.unsure && !placedRule(f[5]):
			w.text = hashRule(w.text, f[5])
			writes[chain] = w
		default:
			writes[chain] = pendingWrite{epoch: epoch, unsure: true}
		}
	}
	for chain, w := range writes {
		m.pending[chain] = w
	}
}

// placedRule reports whether the text of an added rule places it by index, handle or position
// rather than at the end of its chain.
func placedRule(rest string) bool {
	return strings.HasPrefix(rest, "index ") || strings.HasPrefix(rest, "handle ") || strings.HasPrefix(rest, "position ")
}

// resolve turns a snapshot of table into a listing of text hashes, as described at the top of
// this file. A chain whose text is unknown is in the listing's unknown chains instead, with its
// shape; the caller may then list the table as text and call rebaseline. Pending writes are
// used up either way: one that this snapshot cannot confirm, no later one can.
func (l *nftLink) resolve(table string, snap *tableSnapshot) *kernelListing {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A pending write of the epoch is confirmed if the snapshot is of a generation within the
	// epoch: every commit since the write was one of kube-proxy's. (Another table's proxier
	// may have committed since the snapshot; this table's own writes all came before it.)
	confirm := l.genKnown && !genAfter(snap.gen, l.gen) && !genAfter(l.epochStart, snap.gen)
	if !l.genKnown || genAfter(snap.gen, l.gen) {
		// Someone else committed since kube-proxy's last commit.
		l.newEpoch(snap.gen)
	}
	m := l.memory(table)
	k := &kernelListing{chains: make(map[string]uint64, len(snap.chains)), sets: snap.sets, listedSets: true, drifted: map[string]bool{}, unknown: map[string]chainShape{}}
	for chain, kh := range snap.chains {
		p, written := m.pending[chain]
		b, based := m.baselines[chain]
		switch {
		case written && confirm && !p.unsure && p.epoch == l.epoch:
			m.baselines[chain] = chainBaseline{kernel: kh, text: p.text}
			k.chains[chain] = p.text
		case based && b.kernel == kh:
			k.chains[chain] = b.text
		case based && !written:
			k.chains[chain] = b.text
			k.drifted[chain] = true
		default:
			k.unknown[chain] = snap.shapes[chain]
		}
	}
	for chain := range m.baselines {
		if _, ok := snap.chains[chain]; !ok {
			delete(m.baselines, chain)
		}
	}
	clear(m.pending)
	return k
}

// rebaseline records, after a text listing of table, a baseline for every chain that the
// snapshot and the listing both hold, if the ruleset was at the snapshot's generation when the
// listing ended (gen, known). Otherwise (and then listing may be nil) it forgets the table, so
// that the next full sync lists it as text again.
func (l *nftLink) rebaseline(table string, snap *tableSnapshot, listing *kernelListing, gen uint32, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.memory(table)
	clear(m.pending)
	clear(m.baselines)
	if !known || gen != snap.gen {
		return
	}
	for chain, kh := range snap.chains {
		if text, ok := listing.chains[chain]; ok {
			m.baselines[chain] = chainBaseline{kernel: kh, text: text}
		}
	}
}
