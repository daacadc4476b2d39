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
	"errors"
	"fmt"
	"time"

	"k8s.io/kubernetes/pkg/proxy/metrics"
	"sigs.k8s.io/knftables"
)

// The committer: the only code that writes to the kernel.
//
// A sync's operations reach the kernel only through txSplitter.run, which commits the
// transactions that the merge and the clean-up queued (transactions.go), and through
// Proxier.runTracked, for upstream's deletion of stale chains. Each commit goes through the
// kernel link, when there is one, so that the drift check knows what kube-proxy wrote
// (chain_baselines.go).

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
