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
	"errors"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// The kernel link: kube-proxy's netlink view of a network namespace's nftables, shared by the
// proxiers of a process (one per IP family). It tracks kube-proxy's own commits (runTracked:
// the ruleset generation before and after each), reads tables over netlink (snapshot), and
// keeps, per table, the chain memory (chain_baselines.go) that turns a snapshot's kernel
// hashes into text hashes (resolve). It sits below the table reader (table_reader.go) and
// above the netlink socket (netlink_listing.go) and the log of its own commits
// (own_commits.go); see layers.go.

// kernelListing is what a drift check read from the kernel.
type kernelListing struct {
	// chains are the table's chains, each with the hash of its rules.
	chains map[string]uint64
	// sets are the table's named sets, when the listing shows them (nft's does, the
	// apiReader's listing is read for chains only): a full sync then needs no other listing.
	sets       []string
	listedSets bool
	// drifted are chains that changed behind kube-proxy's back since it last saw them; their
	// hashes are of what they held then.
	drifted map[string]bool
	// unknown are chains whose text the netlink dump could not resolve (they are not in
	// chains), each with its shape. text, when set, lists the table as text the first time it
	// is called, and returns that listing (nil if listing failed); see intact.
	unknown map[string]chainShape
	text    func() *kernelListing
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
	// keepPending, set by tests, turns settle off: writes then stay pending until a full sync.
	keepPending bool
	// own names the tables of the link's latest own commits, and keptAcrossCommits counts the
	// snapshots kept although the other family's commits moved the generation during them
	// (own_commits.go).
	own               ownCommitLog
	keptAcrossCommits uint64
	// snapshotPieceRead, when set (by tests), is each snapshot socket's pieceRead, and
	// perChainAbove each snapshot socket's perChainAbove (perChainDumpAbove).
	snapshotPieceRead func(family uint8, msg uint16, piece int)
	perChainAbove     int
}

// newNFTLink returns a link whose sockets dial opens.
func newNFTLink(dial func() (int, error)) *nftLink {
	return &nftLink{dial: dial, seed: maphash.MakeSeed(), tables: map[string]*chainMemory{},
		perChainAbove: perChainDumpAbove}
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

// runTracked runs one of kube-proxy's transactions on table (run) with text text (from
// committingText, so that it certainly commits if it succeeds and holds anything), and notes
// what it wrote: the generation before and after tell whether anyone else committed since the
// link last looked, or during the transaction. Only one tracked transaction runs at a time in a
// link. It returns run's error.
func (l *nftLink) runTracked(table string, text string, run func() error) error {
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
			l.memory(table).noteWrites(text, l.epoch, true)
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
	switch {
	case after == before || after == before+1 && certainlyCommits(text):
		// If after == before, nothing was committed: the transaction only added objects that
		// exist or flushed empty chains, which is what they hold, and no one else committed.
		if after != before {
			family, _ := splitLinkTable(table)
			l.own.note(after, family)
		}
		l.memory(table).noteWrites(text, l.epoch, false)
	default:
		// Someone else committed too, or may have: a transaction that changes nothing
		// commits nothing, so one commit may have been someone else's.
		l.newEpoch(after)
		l.memory(table).noteWrites(text, l.epoch, true)
	}
	return nil
}

// confirm turns m's pending writes into baselines, each by a dump of its chain by name: those
// of chains (all of them when chains is nil) that are sure and of the link's epoch, if the
// ruleset is at generation gen, the one after kube-proxy's last commit, once they are read: no
// one else can then have committed since the writes. Other writes stay pending, and on any
// failure all of them do. It reports whether it read what it needed (false: a failure). The
// caller holds l.mu.
func (l *nftLink) confirm(c *nftNetlink, table string, m *chainMemory, gen uint32, chains []string) bool {
	if chains == nil {
		chains = slices.Collect(maps.Keys(m.pending))
	}
	var sure []string
	for _, chain := range chains {
		if p, ok := m.pending[chain]; ok && !p.unsure && p.epoch == l.epoch {
			sure = append(sure, chain)
		}
	}
	if len(sure) == 0 {
		return true
	}
	family, name := splitLinkTable(table)
	sets, _, err := c.tableSets(family, name)
	if err != nil {
		return false
	}
	hashes := make(map[string]uint64, len(sure))
	for _, chain := range sure {
		if hashes[chain], err = c.chainHash(family, name, chain, l.seed, sets); err != nil {
			return false
		}
	}
	if now, err := c.generation(); err != nil || now != gen {
		return false
	}
	m.confirmed(hashes)
	return true
}

// confirmBatch is how many pending writes settle confirms while it holds the link's lock, which
// the other family's commits and snapshots wait for.
const confirmBatch = 512

// settle confirms table's pending writes (confirm), at the end of a sync: each written chain is
// dumped by name (about 14 µs, whatever the table's size; bench/RESULTS.md), so the cost grows
// with what the sync wrote, and the first sync after start-up, which writes every chain, pays
// about what one snapshot of the table costs. It confirms confirmBatch writes at a time and lets
// the link's lock go in between. Confirmed writes do not depend on the next full sync: left
// pending, they could be confirmed only if no one else committed before it, and that full sync
// would otherwise list the whole table as text. It returns how many writes were pending and
// whether none is left. The caller does not hold l.mu.
func (l *nftLink) settle(table string) (pending int, confirmed bool) {
	l.mu.Lock()
	m := l.tables[table]
	if m == nil || len(m.pending) == 0 || l.keepPending {
		l.mu.Unlock()
		return 0, false
	}
	pending = len(m.pending)
	chains := slices.Collect(maps.Keys(m.pending))
	l.mu.Unlock()
	for len(chains) > 0 {
		batch := chains[:min(confirmBatch, len(chains))]
		chains = chains[len(batch):]
		if !l.confirmBatch(table, m, batch) {
			break
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return pending, len(m.pending) == 0
}

// confirmBatch confirms the pending writes of chains (confirm) at the generation of the link's
// last commit, through a socket of its own. It reports whether it could read them.
func (l *nftLink) confirmBatch(table string, m *chainMemory, chains []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.genKnown {
		return false
	}
	c, err := l.open()
	if err != nil {
		return false
	}
	defer c.close()
	return l.confirm(c, table, m, l.gen, chains)
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

// snapshot reads table (of netlink family) through a socket of its own. A reading during which
// the ruleset changed stands if every commit in between was one of the link's own to a table of
// another family (own_commits.go); otherwise snapshot tries again, up to three times in all, and
// then fails with errTableChanged.
func (l *nftLink) snapshot(family uint8, table string) (*tableSnapshot, error) {
	c, err := l.open()
	if err != nil {
		return nil, err
	}
	defer c.close()
	c.pieceRead, c.perChainAbove = l.snapshotPieceRead, l.perChainAbove
	for try := 1; ; try++ {
		snap, err := c.read(family, table, l.seed)
		if err == nil && !l.keep(family, snap) {
			snap, err = nil, errTableChanged
		}
		if err == nil || !errors.Is(err, errTableChanged) || try == 3 {
			return snap, err
		}
	}
}

// keep reports whether snap, a reading of a table of netlink family, holds what the table held
// at the end of the reading, and then sets snap.gen to that generation: when the ruleset did not
// change during the reading, or changed only by the link's own commits to tables of other
// families.
func (l *nftLink) keep(family uint8, snap *tableSnapshot) bool {
	if snap.end == snap.gen {
		return !snap.interrupted
	}
	// runTracked holds l.mu from before each of its commits until it has noted it, so once
	// snapshot holds it every tracked commit up to snap.end is in the log.
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.own.onlyOtherFamilies(family, snap.gen, snap.end) {
		return false
	}
	l.keptAcrossCommits++
	snap.gen = snap.end
	return true
}

// generation reads the ruleset generation through a socket of its own.
func (l *nftLink) generation() (uint32, error) {
	c, err := l.open()
	if err != nil {
		return 0, err
	}
	defer c.close()
	return c.generation()
}

// resolve turns a snapshot of table into a listing of text hashes, as described in
// chain_baselines.go. A chain whose text is unknown is in the listing's unknown chains instead,
// with its shape; the caller may then list the table as text and call rebaseline. Pending
// writes are used up either way: one that this snapshot cannot confirm, no later one can.
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
	m.dropPending()
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
	m.dropPending()
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
// what the kernel holds, with no dump of the table: the ruleset generation is the one after the
// last commit the link saw, every commit since the table's last complete read was one of
// kube-proxy's own, and each of them wrote chains whose rules it knows. A commit is the only
// way to change a chain, and each one moves the generation, so the table is then exactly as
// remembered. Writes still pending (when settle could not confirm them) are confirmed first,
// each by a dump of its chain: that keeps their baselines for a later snapshot, at a cost that
// grows with the writes, not with the table. It returns nil otherwise (the caller reads a
// snapshot).
func (l *nftLink) quiet(table string) *kernelListing {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.tables[table]
	if m == nil || !m.heldValid || m.heldEpoch != l.epoch || !l.genKnown {
		return nil
	}
	c, err := l.open()
	if err != nil {
		return nil
	}
	defer c.close()
	if gen, err := c.generation(); err != nil || gen != l.gen || !l.confirm(c, table, m, gen, nil) || len(m.pending) > 0 {
		return nil
	}
	return &kernelListing{chains: maps.Clone(m.held), sets: slices.Sorted(maps.Keys(m.heldSets)), listedSets: true, drifted: map[string]bool{}}
}

// noteElementRead records that a full sync starts to read table's maps and sets back from the
// kernel (upstream's readOrReset), and in which epoch: if the ruleset has moved since the
// link's last commit, someone else committed, and a new epoch starts first (so that noticing
// that commit later does not take the read for an older one). Without the generation it
// records nothing, and the next full sync reads them again.
func (l *nftLink) noteElementRead(table string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.memory(table)
	m.elementsRead = false
	gen, err := l.generation()
	if err != nil {
		return
	}
	if !l.genKnown || gen != l.gen {
		l.newEpoch(gen)
	}
	m.elementsRead, m.elementsEpoch = true, l.epoch
}

// elementsUnchanged reports whether table's maps and sets hold exactly what kube-proxy wrote to
// them since a full sync last read them (noteElementRead): the link's epoch is the same as
// then, so every commit in the network namespace since then that the link has seen was one of
// kube-proxy's own tracked transactions, and the ruleset is still at the generation after the
// last of them, so no commit came after it. A commit is the only way to change an element.
func (l *nftLink) elementsUnchanged(table string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.tables[table]
	if m == nil || !m.elementsRead || m.elementsEpoch != l.epoch || !l.genKnown {
		return false
	}
	gen, err := l.generation()
	return err == nil && gen == l.gen
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

// linkTableName names the table of family in a kernel link's memory.
func linkTableName(family v1.IPFamily) string {
	return nftFamilyOf(family) + " " + kubeProxyTable
}

// nfprotoOf returns the netlink family of the table of family.
func nfprotoOf(family v1.IPFamily) uint8 {
	if family == v1.IPv6Protocol {
		return nfprotoIPv6
	}
	return nfprotoIPv4
}

// nftFamilyOf returns the table family of family as nft writes it, which is also the protocol
// name of its address matches ("ip saddr", "ip6 saddr").
func nftFamilyOf(family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return "ip6"
	}
	return "ip"
}
