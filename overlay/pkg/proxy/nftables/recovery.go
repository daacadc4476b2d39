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
	"time"

	"k8s.io/kubernetes/pkg/proxy/metrics"
)

// Recovery: no sync fails for ever.
//
// A sync is cut into bounded transactions (transactions.go). If the kernel refuses one, the
// sync fails and the next one is a full sync, which re-reads the maps and writes the same
// transactions again: a refusal that comes from the cuts, or from one Service port, would then
// repeat for ever and leave every Service after it unprogrammed. So the proxier counts failed
// syncs in a row, and changes strategy:
//
//   - after two, the next sync is written the way upstream writes it: one transaction, every
//     chain re-written (no drift check), and every set deleted only after the chains that
//     could name it are flushed ("repeated_failure");
//   - after three or more, each Service that has anything to write gets a transaction of its
//     own, and the sync goes on past a refused one, so that a Service that the kernel refuses
//     blocks no other ("isolate"). The clean-up (stale chains, elements and sets) then runs
//     only if every Service was written; otherwise it waits for the next sync.
//
// Independently, a sync whose read of a map or set failed flushes that container in its first
// transaction and refills it Service by Service (upstream's readOrReset): it is written as one
// transaction, so the flush never commits ahead of the refill ("listing_failed").
//
// Each fallback is logged and counted in kubeproxy_sync_proxy_rules_nftables_fallbacks_total.

// fallback is a sync's strategy for its transactions.
type fallback uint8

const (
	// fallbackNone: bounded transactions, cut between Services.
	fallbackNone fallback = iota
	// fallbackWhole: one transaction.
	fallbackWhole
	// fallbackIsolate: a transaction per Service, past refused ones.
	fallbackIsolate
)

// syncRecovery is what the proxier remembers of its syncs' outcomes. Its zero value is a
// proxier with no failures.
type syncRecovery struct {
	// failures counts the syncs in a row that failed.
	failures int
	// rewriteAll is set, by planFallback, for a sync that must re-write every chain; the
	// sync's other choices live in its splitter.
	rewriteAll bool
}

// now returns the time on the proxier's clock: the real clock, unless a test injected one.
func (proxier *Proxier) now() time.Time {
	if proxier.clock == nil {
		return time.Now()
	}
	return proxier.clock.Now()
}

// noteSyncResult records the outcome of the sync that ends, and forgets its strategy.
func (proxier *Proxier) noteSyncResult(success bool) {
	r := &proxier.recovery
	if success {
		r.failures = 0
	} else {
		r.failures++
	}
	r.rewriteAll = false
	for _, s := range proxier.elementStorages() {
		s.flushed = false
	}
}

// planFallback chooses this sync's strategy, after setupNFTables has read (or failed to read)
// the maps and sets: see the comment at the top of this file. It logs and counts a fallback.
func (proxier *Proxier) planFallback() fallback {
	r := &proxier.recovery
	var mode fallback
	reason := ""
	switch {
	case proxier.anyStorageFlushed():
		mode, reason = fallbackWhole, "listing_failed"
	case r.failures == 2:
		mode, r.rewriteAll, reason = fallbackWhole, true, "repeated_failure"
	case r.failures > 2:
		mode, reason = fallbackIsolate, "isolate"
	default:
		return fallbackNone
	}
	proxier.logger.Info("Syncing with a fallback strategy", "reason", reason, "failedSyncsInARow", r.failures)
	metrics.NFTablesSyncFallbacksTotal.WithLabelValues(string(proxier.ipFamily), reason).Inc()
	return mode
}

// anyStorageFlushed reports whether this sync flushes one of the proxier's maps or sets
// because reading it failed.
func (proxier *Proxier) anyStorageFlushed() bool {
	for _, s := range proxier.elementStorages() {
		if s.flushed {
			return true
		}
	}
	return false
}

// elementStorages returns the proxier's map and set element storages.
func (proxier *Proxier) elementStorages() []*nftElementStorage {
	return []*nftElementStorage{
		proxier.clusterIPs, proxier.serviceIPs, proxier.firewallIPs, proxier.noEndpointServices,
		proxier.noEndpointNodePorts, proxier.serviceNodePorts, proxier.hairpinConnections,
	}
}
