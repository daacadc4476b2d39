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
	"time"

	"sigs.k8s.io/knftables"
)

// Bounded transactions.
//
// The kernel holds the netns commit mutex for as long as one nftables transaction takes to
// commit, and RTNL, and with it every link operation on the machine, can wait behind it. So a
// sync's operations are cut into transactions of at most maxTransactionOps operations each.
// Cuts fall only between Services, never inside one, so that after every commit each Service
// is either as it was before the sync or as it is after it:
//   - a Service's chains, rules and map elements (of all its ports) change together, and each
//     chain is created and filled before (in the same transaction as) the elements that point
//     to it;
//   - the clean-up after the Services (stale_cleanup.go) is bounded too: a removed Service's stale
//     elements go in the same transaction as the flush of its chains, and a set is deleted only
//     in a transaction after (or the same as) the flush of every chain that could name it.
// If transaction k fails, transactions 1..k-1 stay applied: every Service has either its old
// rules or its new ones, never none. The sync then fails, and the next sync is a full one,
// which re-reads the maps and rewrites the rest; recovery.go changes strategy when that fails
// again.
//
// Operations are not all equal. The kernel finds a set by name by walking the table's list of
// sets, and to name a new anonymous set (a set or map literal in a rule, such as upstream's
// numgen vmap, which service ports with many endpoints keep) it reads the name of every set in
// the table. So an operation that names or creates a set, in a table of S sets, costs about S
// set visits, on top of itself, and counts as S/setScan operations more (bench/RESULTS.md,
// "Figures behind constants", has the measurements).

// defaultSetScan is how many sets the kernel visits, to find or name a set, in the time of one
// plain operation of a transaction (a Proxier's setScan of 0 means it).
const defaultSetScan = 100

// txSplitter queues the transactions of one sync.
type txSplitter struct {
	committer
	max    int
	queued []*knftables.Transaction
	// sets estimates how many sets the table holds: from countSets (the link's count; nil:
	// none), read once when the sync first needs it, plus those the sync has created since,
	// less those it has deleted or freed. anon, read with it, is how many anonymous sets each
	// chain's rules hold in the kernel: flushing the chain frees them.
	sets        int
	anon        map[string]int
	setsCounted bool
	countSets   func() (int, map[string]int)
	// surcharge is the weight, beyond one per operation, of the current transaction's
	// operations that name or create sets; setScan is defaultSetScan unless set.
	surcharge int
	setScan   int
	// mode is the sync's strategy (recovery.go). cleanupFrom is the index, in the sync's
	// transactions, of the first one that holds clean-up (set by beginCleanup).
	mode        fallback
	cleanupFrom int
	inCleanup   bool
	// after run, once every transaction has committed, in order (afterCommit).
	after   []func(ctx context.Context, s *txSplitter)
	proxier *Proxier
}

// newTxSplitter returns the splitter for one sync. With maxTransactionOps 0 (the proxier's zero
// value) a sync is one transaction, as upstream does it.
//
// It also plans the sync's strategy (planFallback): it must be called after setupNFTables.
func (proxier *Proxier) newTxSplitter() *txSplitter {
	s := &txSplitter{committer: committer{nft: proxier.nftables, ipFamily: string(proxier.ipFamily)},
		max: proxier.maxTransactionOps, proxier: proxier, setScan: proxier.setScan}
	s.mode = proxier.planFallback()
	if s.mode == fallbackWhole {
		s.max = 0
	}
	if link := proxier.kernelLink; link != nil {
		table := linkTableName(proxier.ipFamily)
		s.countSets = func() (int, map[string]int) { return link.setCounts(table) }
		s.link, s.table = proxier.trackingLink()
	}
	return s
}

// cut is called where the sync may start a new transaction: before a Service's operations, and
// between the clean-up's groups. It returns tx when tx has room (its operations, weighted, are
// fewer than max) or splitting is off; otherwise it queues tx to run first and returns a new,
// empty transaction. When isolating, it cuts wherever tx holds anything, until the clean-up.
func (s *txSplitter) cut(tx *knftables.Transaction) *knftables.Transaction {
	switch {
	case s.mode == fallbackIsolate && !s.inCleanup:
		if tx.NumOperations() == 0 {
			return tx
		}
	case s.max <= 0 || tx.NumOperations()+s.surcharge < s.max:
		return tx
	}
	s.queued = append(s.queued, tx)
	s.surcharge = 0
	return s.nft.NewTransaction()
}

// run commits the queued transactions and then last, in order (committer.runAll, isolating
// when the sync's strategy says so), and then runs what afterCommit added. Last, even after a
// failure (isolating, the others committed), it confirms what the sync wrote (nftLink.settle).
// It returns the failed transaction and the error, or last and nil.
func (s *txSplitter) run(ctx context.Context, last *knftables.Transaction) (*knftables.Transaction, error) {
	all := append(s.queued, last)
	s.queued = nil
	defer s.settle()
	if failed, err := s.runAll(ctx, all, s.cleanupFrom, s.isolating()); err != nil {
		return failed, err
	}
	for _, f := range s.after {
		f(ctx, s)
	}
	return last, nil
}

// settle confirms the sync's writes through the kernel link, if it tracks them.
func (s *txSplitter) settle() {
	if s.link == nil {
		return
	}
	start := time.Now()
	if pending, confirmed := s.link.settle(s.table); pending > 0 {
		s.proxier.logger.V(4).Info("Read back the sync's writes", "chains", pending, "confirmed", confirmed, "elapsed", time.Since(start))
	}
}

// afterCommit adds f to what run does after every transaction of the sync has committed.
func (s *txSplitter) afterCommit(f func(ctx context.Context, s *txSplitter)) {
	s.after = append(s.after, f)
}

// weighSets notes that operations just added to the current transaction name or create sets
// n times, and change the table's number of sets by delta: each of the n weighs as many
// operations more as the table has sets, divided by setScan.
func (s *txSplitter) weighSets(n, delta int) {
	if n == 0 && delta == 0 || s.max <= 0 {
		return
	}
	s.count()
	s.surcharge += n * (s.sets / cmp.Or(s.setScan, defaultSetScan))
	s.sets = max(0, s.sets+delta)
}

// count reads the table's sets, once per sync.
func (s *txSplitter) count() {
	if !s.setsCounted {
		if s.countSets != nil {
			s.sets, s.anon = s.countSets()
		}
		s.setsCounted = true
	}
}

// freedByFlush returns how many anonymous sets chain holds in the kernel, which its flush frees,
// and forgets them. It returns 0 when the splitter does not weigh sets.
func (s *txSplitter) freedByFlush(chain string) int {
	if s.max <= 0 {
		return 0
	}
	s.count()
	n := s.anon[chain]
	delete(s.anon, chain)
	return n
}

// beginCleanup is called after the last Service's operations, before the clean-up's. When
// isolating, the clean-up starts a transaction of its own (run skips it if a Service's
// transaction failed) and is then cut by size like any other; otherwise it is a cut like any
// other.
func (s *txSplitter) beginCleanup(tx *knftables.Transaction) *knftables.Transaction {
	tx = s.cut(tx)
	s.cleanupFrom, s.inCleanup = len(s.queued), true
	return tx
}

// isolating reports whether each Service gets a transaction of its own.
func (s *txSplitter) isolating() bool {
	return s.mode == fallbackIsolate
}

// portSetOps is what a service port's recorded chain and rule operations do to sets: counted
// from its recorder by the stage's worker (countSetOps), so that the merge only adds it up.
type portSetOps struct {
	// chainRuleOps counts the operations on the port's chains and rules.
	chainRuleOps int
	// ruleLookups counts the sets that the port's added rules name or create (see
	// setReferences).
	ruleLookups int
	// created counts the sets that the port's recorded operations create: literals in its
	// rules, and sets and maps it adds.
	created int
}

// operations returns how often the n operations that the merge added for a service port's
// chains, rules and elements, whose recorder c counts, name or create a set (lookups), and how
// many sets they create: every operation but those on its chains and rules (map and set
// elements, sets), and each set that an added rule names or creates.
func (c portSetOps) operations(n int) (lookups, created int) {
	return n - c.chainRuleOps + c.ruleLookups, c.created
}
