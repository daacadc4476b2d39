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
	"fmt"
	"time"

	"k8s.io/kubernetes/pkg/proxy/metrics"
	"sigs.k8s.io/knftables"
)

// Bounded transactions.
//
// The kernel holds the netns commit mutex for as long as one nftables transaction takes to
// commit, and RTNL, and with it every link operation on the machine, can wait behind it. So a
// sync's operations are cut into transactions of at most maxTransactionOps operations each.
// Cuts fall only between service ports, so that:
//   - a service port's chains, rules and map elements always change together, and each chain
//     is created and filled before (in the same transaction as) the elements that point to it;
//   - the stale-object cleanup at the end of the sync (flushing stale chains, removing stale map
//     elements) stays in the last transaction, so elements always go no later than their chains.
// If transaction k fails, transactions 1..k-1 stay applied: every service port has either its
// old rules or its new ones, never none. The sync then fails, and the next sync is a full one,
// which re-reads the maps and rewrites the rest.

// txSplitter queues the transactions of one sync.
type txSplitter struct {
	nft      knftables.Interface
	max      int
	queued   []*knftables.Transaction
	ipFamily string
	// link, when set, notes what each transaction wrote to table, for the drift check.
	link  *nftLink
	table string
}

// newTxSplitter returns the splitter for one sync. With maxTransactionOps 0 (the proxier's zero
// value) a sync is one transaction, as upstream does it.
func (proxier *Proxier) newTxSplitter() *txSplitter {
	s := &txSplitter{nft: proxier.nftables, max: proxier.maxTransactionOps, ipFamily: string(proxier.ipFamily)}
	if !proxier.rewriteAllOnFullSync {
		s.link, s.table = proxier.kernelLink, proxier.linkTable()
	}
	return s
}

// cut is called where the sync may start a new transaction, before a service port's operations.
// It returns tx when tx has room (fewer than max operations) or splitting is off; otherwise it
// queues tx to run first and returns a new, empty transaction.
func (s *txSplitter) cut(tx *knftables.Transaction) *knftables.Transaction {
	if s.max <= 0 || tx.NumOperations() < s.max {
		return tx
	}
	s.queued = append(s.queued, tx)
	return s.nft.NewTransaction()
}

// run runs the queued transactions and then last, in order, and records their sizes and the
// longest one's duration. It stops at the first failure and returns the failed transaction with
// an error that says which one it was; otherwise it returns last and nil.
func (s *txSplitter) run(ctx context.Context, last *knftables.Transaction) (*knftables.Transaction, error) {
	all := append(s.queued, last)
	s.queued = nil
	var longest time.Duration
	defer func() {
		metrics.NFTablesTransactionsPerSync.WithLabelValues(s.ipFamily).Observe(float64(len(all)))
		metrics.NFTablesLongestTransactionSeconds.WithLabelValues(s.ipFamily).Observe(longest.Seconds())
	}()
	for i, tx := range all {
		metrics.NFTablesTransactionOperations.WithLabelValues(s.ipFamily).Observe(float64(tx.NumOperations()))
		commit := func() error {
			start := time.Now()
			err := s.nft.Run(ctx, tx)
			longest = max(longest, time.Since(start))
			return err
		}
		var err error
		if s.link != nil {
			err = s.link.runTracked(s.table, tx.String, commit)
		} else {
			err = commit()
		}
		if err != nil {
			if len(all) == 1 {
				return tx, err
			}
			return tx, fmt.Errorf("transaction %d of %d failed (the %d before it were applied): %w", i+1, len(all), i, err)
		}
	}
	return last, nil
}

// runTracked runs tx, a transaction of the proxier's own outside the sync's splitter (upstream's
// deletion of stale chains), and notes its writes for the drift check as the splitter does.
func (proxier *Proxier) runTracked(ctx context.Context, tx *knftables.Transaction) error {
	if s := proxier.newTxSplitter(); s.link != nil {
		return s.link.runTracked(s.table, tx.String, func() error { return proxier.nftables.Run(ctx, tx) })
	}
	return proxier.nftables.Run(ctx, tx)
}
