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
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/kubernetes/pkg/proxy/metrics"
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
	nft      knftables.Interface
	max      int
	queued   []*knftables.Transaction
	ipFamily string
	// link, when set, notes what each transaction wrote to table, for the drift check.
	link  *nftLink
	table string
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
	s := &txSplitter{nft: proxier.nftables, max: proxier.maxTransactionOps, ipFamily: string(proxier.ipFamily), proxier: proxier, setScan: proxier.setScan}
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

// freedSets returns how many anonymous sets the chains that rec flushes hold in the kernel:
// the sync frees them, and forgets them. It returns 0 when the splitter does not weigh sets.
func (s *txSplitter) freedSets(rec *servicePortRecorder) int {
	freed := 0
	for _, e := range rec.entries {
		if chain, ok := e.obj.(*knftables.Chain); ok && e.verb == stageFlush {
			freed += s.freedByFlush(chain.Name)
		}
	}
	return freed
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

// run runs the queued transactions and then last, in order, and records their sizes and the
// longest one's duration. It stops at the first failure and returns the failed transaction with
// an error that says which one it was; otherwise it returns last and nil. When isolating, it
// goes on past a failed transaction of a Service, runs no clean-up after one, and returns the
// first failed transaction with an error that counts them.
func (s *txSplitter) run(ctx context.Context, last *knftables.Transaction) (*knftables.Transaction, error) {
	all := append(s.queued, last)
	s.queued = nil
	var longest time.Duration
	var firstFailed *knftables.Transaction
	var errs []error
	defer func() {
		metrics.NFTablesTransactionsPerSync.WithLabelValues(s.ipFamily).Observe(float64(len(all)))
		metrics.NFTablesLongestTransactionSeconds.WithLabelValues(s.ipFamily).Observe(longest.Seconds())
		metrics.OldNFTablesLongestTransactionSeconds.WithLabelValues(s.ipFamily).Observe(longest.Seconds())
	}()
	for i, tx := range all {
		if firstFailed != nil && i >= s.cleanupFrom {
			break // isolating: no clean-up after a failed Service
		}
		if tx.NumOperations() == 0 && len(all) > 1 {
			continue // a cut before the clean-up, with nothing to clean up
		}
		start := time.Now()
		err := s.commit(ctx, tx)
		longest = max(longest, time.Since(start))
		switch {
		case err == nil:
		case len(all) == 1:
			return tx, err
		case s.isolating():
			if firstFailed == nil {
				firstFailed = tx
			}
			errs = append(errs, fmt.Errorf("transaction %d of %d: %w", i+1, len(all), err))
		default:
			return tx, fmt.Errorf("transaction %d of %d failed (the %d before it were applied): %w", i+1, len(all), i, err)
		}
	}
	if firstFailed != nil {
		return firstFailed, fmt.Errorf("%d of %d transactions failed, each a Service's own (the others were applied, the clean-up was not): %w",
			len(errs), len(all), errors.Join(errs...))
	}
	for _, f := range s.after {
		f(ctx, s)
	}
	return last, nil
}

// afterCommit adds f to what run does after every transaction of the sync has committed.
func (s *txSplitter) afterCommit(f func(ctx context.Context, s *txSplitter)) {
	s.after = append(s.after, f)
}

// commit runs tx, tracked by the kernel link when there is one, and records its size.
func (s *txSplitter) commit(ctx context.Context, tx *knftables.Transaction) error {
	metrics.NFTablesTransactionOperations.WithLabelValues(s.ipFamily).Observe(float64(tx.NumOperations()))
	run := func() error { return s.nft.Run(ctx, tx) }
	if s.link != nil {
		return s.link.runTracked(s.table, tx.String, run)
	}
	return run()
}

// runTracked runs tx, a transaction of the proxier's own outside the sync's splitter (upstream's
// deletion of stale chains), and notes its writes for the drift check as the splitter does.
func (proxier *Proxier) runTracked(ctx context.Context, tx *knftables.Transaction) error {
	if link, table := proxier.trackingLink(); link != nil {
		return link.runTracked(table, tx.String, func() error { return proxier.nftables.Run(ctx, tx) })
	}
	return proxier.nftables.Run(ctx, tx)
}

// trackingLink returns the kernel link that notes the proxier's writes for the drift check, and
// its table's name there; nil without a link or with --full-sync-rewrite-all (no drift check).
func (proxier *Proxier) trackingLink() (*nftLink, string) {
	if proxier.kernelLink == nil || proxier.rewriteAllOnFullSync {
		return nil, ""
	}
	return proxier.kernelLink, linkTableName(proxier.ipFamily)
}

// portSetOps is what a service port's recorded chain and rule operations do to sets: counted
// by the stage's worker (countSetOps), so that the merge only adds it up.
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

// countSetOps fills rec.setOps from rec's entries. Rules of chains that the drift check found
// intact are no longer in rec.
func (rec *servicePortRecorder) countSetOps() {
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
	rec.setOps = c
}

// setOperations returns how often the n operations that the merge added for rec's chains,
// rules and elements name or create a set (lookups), and how many sets they create: every
// operation but those on its chains and rules (map and set elements, sets), and each set that
// an added rule names or creates. rec.setOps must be counted.
func (rec *servicePortRecorder) setOperations(n int) (lookups, created int) {
	return n - rec.setOps.chainRuleOps + rec.setOps.ruleLookups, rec.setOps.created
}

// setReferences counts the sets that a rule's text names ("@set") and the set and map literals
// ("{ ... }") in it, each of which the kernel keeps as an anonymous set. Braces after a set's
// name ("update @set { ip saddr }") are a key expression, not a literal; and nft turns a set
// literal of one element ("ip saddr != { 10.0.0.0/8 }") into a plain comparison, so only a
// map literal ("map { ... }", "vmap { ... }") or a literal with a comma in it is a set.
func setReferences(rule string) (named, literals int) {
	if !strings.ContainsAny(rule, "@{") {
		return 0, 0 // most rules: not worth splitting
	}
	fields := strings.Fields(rule)
	for i, f := range fields {
		switch {
		case strings.HasPrefix(f, "@"):
			named++
		case strings.HasPrefix(f, "{") && (i == 0 || !strings.HasPrefix(fields[i-1], "@")):
			if i > 0 && (fields[i-1] == "map" || fields[i-1] == "vmap") || literalHasComma(fields[i:]) {
				literals++
			}
		}
	}
	return named, literals
}

// literalHasComma reports whether the literal that fields start with ("{" ... "}") has more
// than one element.
func literalHasComma(fields []string) bool {
	for _, f := range fields {
		if before, _, closed := strings.Cut(f, "}"); closed {
			return strings.Contains(before, ",")
		}
		if strings.Contains(f, ",") {
			return true
		}
	}
	return false
}
