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
// A sync's operations reach the kernel only through a committer, which commits the
// transactions that the merge and the clean-up queued on the sync's splitter (transactions.go),
// and through Proxier.runTracked, for upstream's deletion of stale chains. Each commit goes
// through the kernel link, when there is one, so that the drift check knows what kube-proxy
// wrote (kernel_link.go).

// committer writes one sync's transactions to the kernel.
type committer struct {
	nft      knftables.Interface
	ipFamily string
	// link, when set, notes what each transaction wrote to table, for the drift check.
	link  *nftLink
	table string
}

// runAll runs txs in order and records their sizes, their number and the longest one's
// duration. It stops at the first failure and returns the failed transaction with an error that
// says which one it was; otherwise it returns nil and nil. When isolating, it goes on past a
// failed transaction before cleanupFrom (a Service's), runs none from cleanupFrom on (the
// clean-up) after one, and returns the first failed transaction with an error that counts them.
// An empty transaction is skipped, unless it is the only one.
func (c *committer) runAll(ctx context.Context, txs []*knftables.Transaction, cleanupFrom int, isolating bool) (*knftables.Transaction, error) {
	var longest time.Duration
	var firstFailed *knftables.Transaction
	var errs []error
	defer func() {
		metrics.NFTablesTransactionsPerSync.WithLabelValues(c.ipFamily).Observe(float64(len(txs)))
		metrics.NFTablesLongestTransactionSeconds.WithLabelValues(c.ipFamily).Observe(longest.Seconds())
		metrics.OldNFTablesLongestTransactionSeconds.WithLabelValues(c.ipFamily).Observe(longest.Seconds())
	}()
	for i, tx := range txs {
		if firstFailed != nil && i >= cleanupFrom {
			break // isolating: no clean-up after a failed Service
		}
		if tx.NumOperations() == 0 && len(txs) > 1 {
			continue // a cut before the clean-up, with nothing to clean up
		}
		start := time.Now()
		err := c.commit(ctx, tx)
		longest = max(longest, time.Since(start))
		switch {
		case err == nil:
		case len(txs) == 1:
			return tx, err
		case isolating:
			if firstFailed == nil {
				firstFailed = tx
			}
			errs = append(errs, fmt.Errorf("transaction %d of %d: %w", i+1, len(txs), err))
		default:
			return tx, fmt.Errorf("transaction %d of %d failed (the %d before it were applied): %w", i+1, len(txs), i, err)
		}
	}
	if firstFailed != nil {
		return firstFailed, fmt.Errorf("%d of %d transactions failed, each a Service's own (the others were applied, the clean-up was not): %w",
			len(errs), len(txs), errors.Join(errs...))
	}
	return nil, nil
}

// commit runs tx, tracked by the kernel link when there is one, and records its size.
func (c *committer) commit(ctx context.Context, tx *knftables.Transaction) error {
	metrics.NFTablesTransactionOperations.WithLabelValues(c.ipFamily).Observe(float64(tx.NumOperations()))
	run := func() error { return c.nft.Run(ctx, tx) }
	if c.link != nil {
		return c.link.runTracked(c.table, committingText(tx), run)
	}
	return run()
}

// commitMarker names the chain that committingText adds to a transaction and deletes again.
const commitMarker = "commit-marker"

// committingText returns the text of tx, a transaction for the kernel link to track, after
// making sure that tx commits if it succeeds and holds anything. When none of its operations is
// sure to commit (certainlyCommits: a Service with no endpoints adds only map elements, and the
// kernel commits nothing for an element that exists), it adds the chain commitMarker and deletes
// it again, which always commits and leaves the table as it was. The link then tells its own
// commit from someone else's by the generation alone: a transaction that might commit nothing
// leaves a one-step move of the generation unexplained, and the link must then assume that
// someone else committed (a new epoch), which leaves every write still pending unconfirmable
// and makes the next full sync list the table as text.
func committingText(tx *knftables.Transaction) string {
	text := tx.String()
	if text == "" || certainlyCommits(text) {
		return text
	}
	tx.Add(&knftables.Chain{Name: commitMarker})
	tx.Delete(&knftables.Chain{Name: commitMarker})
	return tx.String()
}

// runTracked runs tx, a transaction of the proxier's own outside the sync's splitter (upstream's
// deletion of stale chains, the affinity set's resize), and notes its writes for the drift check
// as the splitter does.
func (proxier *Proxier) runTracked(ctx context.Context, tx *knftables.Transaction) error {
	if link, table := proxier.trackingLink(); link != nil {
		return link.runTracked(table, committingText(tx), func() error { return proxier.nftables.Run(ctx, tx) })
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
