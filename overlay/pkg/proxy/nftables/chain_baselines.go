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
	"maps"
	"slices"
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
//   - from a text listing and a netlink snapshot that saw the same table: the same ruleset
//     generation, or one moved only by the other family's commits (own_commits.go); or
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
// kube-proxy share one link, so each one's commits are not "someone else's" to the other, and
// a snapshot that the other family's commits overlapped stands (own_commits.go).

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
	// maxConfirmNow is the most pending writes that confirmNow confirms at once
	// (maxConfirmedAtOnce; 0 turns it off).
	maxConfirmNow int
	// own names the tables of the link's latest own commits, and keptAcrossCommits counts the
	// snapshots kept although the other family's commits moved the generation during them
	// (own_commits.go).
	own               ownCommitLog
	keptAcrossCommits uint64
	// snapshotPieceRead, when set (by tests), is each snapshot socket's pieceRead.
	snapshotPieceRead func(family uint8, msg uint16, piece int)
}

// newNFTLink returns a link whose sockets dial opens.
func newNFTLink(dial func() (int, error)) *nftLink {
	return &nftLink{dial: dial, seed: maphash.MakeSeed(), tables: map[string]*chainMemory{}, maxConfirmNow: maxConfirmedAtOnce}
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
	if runErr != nil {
		if after != before {
			l.newEpoch(after)
		}
		return runErr
	}
	text := txText()
	switch {
	case after == before || after == before+1 && certainlyCommits(text):
		// If after == before, nothing was committed: the transaction only added objects that
		// exist or flushed empty chains, which is what they hold, and no one else committed.
		if after != before {
			family, _ := splitLinkTable(table)
			l.own.note(after, family)
		}
		m := l.memory(table)
		m.noteWrites(text, l.epoch, false)
		l.confirmNow(c, table, m, after)
	default:
		// Someone else committed too, or may have: a transaction that changes nothing
		// commits nothing, so one commit may have been someone else's.
		l.newEpoch(after)
		l.memory(table).noteWrites(text, l.epoch, true)
	}
	return nil
}

// maxConfirmedAtOnce bounds how many chains a transaction may leave pending for confirmNow to
// confirm them at once, one small dump each; more wait for the next full sync's snapshot.
const maxConfirmedAtOnce = 512

// confirmNow turns m's pending writes into baselines at once, right after kube-proxy's own
// commit that left the ruleset at generation gen, when they are few (a partial sync's): it
// dumps each written chain by name, and keeps what it read if the generation is still gen
// then, so that no one else can have committed in between. Confirmed writes do not depend on
// the next full sync, and with no write left pending that sync can use the remembered table
// (quiet). On any failure the writes stay pending. The caller holds l.mu.
func (l *nftLink) confirmNow(c *nftNetlink, table string, m *chainMemory, gen uint32) {
	if len(m.pending) == 0 || len(m.pending) > l.maxConfirmNow {
		return
	}
	family, name := splitLinkTable(table)
	sets, _, err := c.tableSets(family, name)
	if err != nil {
		return
	}
	hashes := make(map[string]uint64, len(m.pending))
	for chain, p := range m.pending {
		if p.unsure || p.epoch != l.epoch {
			return
		}
		if hashes[chain], err = c.chainHash(family, name, chain, l.seed, sets); err != nil {
			return
		}
	}
	if now, err := c.generation(); err != nil || now != gen {
		return
	}
	for chain, kh := range hashes {
		m.baselines[chain] = chainBaseline{kernel: kh, text: m.pending[chain].text}
	}
	clear(m.pending)
}

// splitLinkTable returns the netlink family and the name of a table named as in the link's
// memory ("<family> <table>").
func splitLinkTable(table string) (uint8, string) {
	family, name, _ := strings.Cut(table, " ")
	if family == "ip6" {
		return nfprotoIPv6, name
	}
	return nfprotoIPv4, name
}

// certainlyCommits reports whether a transaction (its nft text) that succeeds is sure to
// commit, so that it moves the ruleset generation: it adds a rule, or deletes or creates an
// object (either fails if it cannot change anything). Adding an object that exists, or
// flushing an empty chain, changes nothing, and a transaction of only such operations commits
// nothing.
func certainlyCommits(text string) bool {
	for f := range nftCommands(text) {
		switch {
		case len(f) < 2:
		case f[0] == "delete" || f[0] == "create" || f[0] == "insert" || f[0] == "replace":
			return true
		case f[0] == "add" && f[1] == "rule":
			return true
		}
	}
	return false
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

// onlyOwnCommitsSince reports whether every commit after generation gen that the link knows
// of was one of kube-proxy's own tracked transactions. The caller holds l.mu.
func (l *nftLink) onlyOwnCommitsSince(gen uint32) bool {
	return l.genKnown && !genAfter(l.epochStart, gen)
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
			clear(m.pending)
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
// of chain names, from one sync's writes to the next full sync's snapshot and beyond, in its
// baselines.
func ownName(name string) string {
	return strings.Clone(name)
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
	m.countSets(snap.allNamed, snap.shapes)
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
	m.heldValid = false
	if len(k.unknown) == 0 && len(k.drifted) == 0 && l.onlyOwnCommitsSince(snap.gen) {
		m.hold(k.chains, snap.sets, l.epoch)
	}
	return k
}

// rebaseline records, after a text listing of table, a baseline for every chain that the
// snapshot and the listing both hold, if the table was as at the snapshot's generation when the
// listing ended (gen, known): the ruleset was still at that generation, or only the link's own
// commits to tables of other families moved it (own_commits.go). Otherwise (and then listing
// may be nil) it forgets the table, so that the next full sync lists it as text again.
func (l *nftLink) rebaseline(table string, snap *tableSnapshot, listing *kernelListing, gen uint32, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.memory(table)
	clear(m.pending)
	clear(m.baselines)
	m.heldValid = false
	family, _ := splitLinkTable(table)
	if !known || !l.own.onlyOtherFamilies(family, snap.gen, gen) {
		return
	}
	for chain, kh := range snap.chains {
		if text, ok := listing.chains[chain]; ok {
			m.baselines[chain] = chainBaseline{kernel: kh, text: text}
		}
	}
	if l.onlyOwnCommitsSince(snap.gen) {
		m.hold(listing.chains, snap.sets, l.epoch)
	}
}

// quiet returns, when nothing can have changed table since the link last read or wrote it,
// what the kernel holds, with no dump: the ruleset generation is the one after the last commit
// the link saw, every commit since the table's last complete read was one of kube-proxy's own,
// and each of them wrote chains whose rules it knows. A commit is the only way to change a
// chain, and each one moves the generation, so the table is then exactly as remembered. It
// returns nil otherwise, and while a write is pending (the caller reads a snapshot).
func (l *nftLink) quiet(table string) *kernelListing {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.tables[table]
	if m == nil || !m.heldValid || m.heldEpoch != l.epoch || !l.genKnown || len(m.pending) > 0 {
		// A pending write needs the snapshot to be confirmed; see confirmNow.
		return nil
	}
	c, err := l.open()
	if err != nil {
		return nil
	}
	defer c.close()
	if gen, err := c.generation(); err != nil || gen != l.gen {
		return nil
	}
	return &kernelListing{chains: maps.Clone(m.held), sets: slices.Sorted(maps.Keys(m.heldSets)), listedSets: true, drifted: map[string]bool{}}
}

// setCounts returns how many sets (anonymous ones included) table holds, as the link's last
// dump of it found them and kube-proxy's own commits since changed them, and a copy of how
// many anonymous sets each of its chains' rules hold; 0 and nil if it has not dumped the table.
func (l *nftLink) setCounts(table string) (int, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.tables[table]; m != nil {
		return m.setTotal(), maps.Clone(m.anon)
	}
	return 0, nil
}
