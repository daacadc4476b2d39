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

package metrics

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// SyncFullProxyRulesNextTimestamp is when the proxier plans its next periodic full sync, as
// Unix seconds, per IP family; 0 when periodic full syncs are disabled.
var SyncFullProxyRulesNextTimestamp = metrics.NewGaugeVec(
	&metrics.GaugeOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_full_proxy_rules_next_timestamp_seconds",
		Help:           "The time of the next planned periodic full sync of proxy rules, in Unix seconds; 0 when periodic full syncs are disabled.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// NFTablesTransactionOperations is the number of operations in each nftables transaction
// that a sync runs.
var NFTablesTransactionOperations = metrics.NewHistogramVec(
	&metrics.HistogramOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_transaction_operations",
		Help:           "The number of operations in each nftables transaction that a sync runs.",
		Buckets:        metrics.ExponentialBuckets(1, 4, 10),
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// NFTablesTransactionsPerSync is the number of nftables transactions that one sync runs.
var NFTablesTransactionsPerSync = metrics.NewHistogramVec(
	&metrics.HistogramOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_transactions",
		Help:           "The number of nftables transactions that one sync runs.",
		Buckets:        metrics.ExponentialBuckets(1, 2, 12),
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// NFTablesLongestTransactionSeconds is, per sync, the longest time one nftables transaction
// took; the kernel holds the netns commit lock for about that long.
var NFTablesLongestTransactionSeconds = metrics.NewHistogramVec(
	&metrics.HistogramOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_longest_transaction_duration_seconds",
		Help:           "Per sync, the longest time one nftables transaction took (the kernel holds the netns commit lock for about that long).",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// NFTablesSyncFallbacksTotal counts the syncs that the nftables proxier ran with a fallback
// strategy instead of its bounded transactions, by reason: "listing_failed" (a map or set could
// not be read, so the sync writes it whole in one transaction), "repeated_failure" (two syncs
// in a row failed: one transaction, every chain re-written) and "isolate" (more failed: one
// transaction per changed Service, so that a Service the kernel refuses blocks no other); and
// "drift_dump_failed", a full sync whose drift check could not read the table over netlink (a
// failed dump, or commits by others during every try) and listed it as text instead.
var NFTablesSyncFallbacksTotal = metrics.NewCounterVec(
	&metrics.CounterOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_fallbacks_total",
		Help:           "Syncs that the nftables proxier ran with a fallback strategy, by reason.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family", "reason"},
)

// NFTablesAffinityElements is the number of elements (client and endpoint pairs) in the
// nftables proxier's shared session-affinity set when a sync last listed it (every full sync
// does), and NFTablesAffinityCapacity is the most it can hold. When they are equal, new clients
// of every Service with ClientIP affinity are balanced without stickiness until elements time
// out.
var NFTablesAffinityElements = metrics.NewGaugeVec(
	&metrics.GaugeOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_affinity_elements",
		Help:           "Elements in the nftables proxier's shared session-affinity set when last listed.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// NFTablesAffinityCapacity is the capacity of the shared session-affinity set.
var NFTablesAffinityCapacity = metrics.NewGaugeVec(
	&metrics.GaugeOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_affinity_capacity",
		Help:           "Most elements the nftables proxier's shared session-affinity set can hold.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// SyncFullProxyRulesChainsCheckedTotal counts the service-port chains that drift-checked
// periodic full syncs compared with the kernel.
var SyncFullProxyRulesChainsCheckedTotal = metrics.NewCounterVec(
	&metrics.CounterOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_full_proxy_rules_nftables_chains_checked_total",
		Help:           "Service-port chains that drift-checked periodic full syncs compared with the kernel.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// SyncFullProxyRulesChainsRewrittenTotal counts the checked chains that periodic full syncs
// re-wrote because the kernel's copy (of that chain or another of the same service port)
// differed from what kube-proxy had written.
var SyncFullProxyRulesChainsRewrittenTotal = metrics.NewCounterVec(
	&metrics.CounterOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_full_proxy_rules_nftables_chains_rewritten_total",
		Help:           "Checked service-port chains that periodic full syncs re-wrote because they had drifted.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// SyncProxyRulesGeneratedServicePorts is, per nftables sync, the number of service ports whose rules
// the sync generated: all of them in a full sync, the changed ones in a partial sync.
var SyncProxyRulesGeneratedServicePorts = metrics.NewHistogramVec(
	&metrics.HistogramOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_generated_service_ports",
		Help:           "Per sync, the number of service ports whose rules the sync generated (all in a full sync, the changed ones in a partial sync).",
		Buckets:        metrics.ExponentialBuckets(1, 4, 10),
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// SyncProxyRulesGenerationSeconds is, per sync, how long the per-service-port stage took:
// generating the service ports' rules on the workers and merging them into the sync's
// transactions.
var SyncProxyRulesGenerationSeconds = metrics.NewHistogramVec(
	&metrics.HistogramOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_proxy_rules_nftables_generation_duration_seconds",
		Help:           "Per sync, how long generating the service ports' rules and merging them into the sync's transactions took.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// SyncFullProxyRulesDriftReadSeconds is, per full sync, how long the drift check took to read
// kube-proxy's table from the kernel: source "generation" when the ruleset generation showed
// that nothing but kube-proxy has committed since its last complete read (no dump needed),
// "netlink" for the netlink dump, "text" for nft's text listing, which the check falls back to
// when the dump's chain baselines do not cover every chain (at start-up, or after another
// program's commit raced kube-proxy's writes).
var SyncFullProxyRulesDriftReadSeconds = metrics.NewHistogramVec(
	&metrics.HistogramOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_full_proxy_rules_nftables_drift_read_duration_seconds",
		Help:           "Per full sync, how long the drift check took to read the table from the kernel, by source (generation check only, netlink dump, or nft's text listing).",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family", "source"},
)

// SyncFullProxyRulesExtendedDuration is the duration of each full sync, like upstream's
// sync_full_proxy_rules_duration_seconds, whose top bucket (16.4 s) cannot tell a sync of a
// minute from one of twenty; these buckets reach 30 minutes.
var SyncFullProxyRulesExtendedDuration = metrics.NewHistogramVec(
	&metrics.HistogramOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_full_proxy_rules_extended_duration_seconds",
		Help:           "The duration of each full sync of proxy rules, in seconds, in buckets from 10 ms to 30 minutes.",
		Buckets:        []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 900, 1200, 1800},
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// oldNamesRemovedIn is the Kubernetes minor version from which the metrics' names before
// they said "nftables" and "_duration_seconds" are no longer served: the v1.36 line serves
// them beside the new names, the v1.37 line hides them (component-base hides an ALPHA metric
// from its DeprecatedVersion on, unless --show-hidden-metrics-for-version asks for it).
const oldNamesRemovedIn = "1.37.0"

// renamedHistogram returns a histogram with the buckets and labels of current under the old
// name oldName, to be observed beside current for one release.
func renamedHistogram(current *metrics.HistogramVec, oldName string, labels ...string) *metrics.HistogramVec {
	return metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:         kubeProxySubsystem,
		Name:              oldName,
		Help:              "Deprecated: the old name of " + kubeProxySubsystem + "_" + current.HistogramOpts.Name + ", served until v1.37.",
		Buckets:           current.HistogramOpts.Buckets,
		StabilityLevel:    metrics.ALPHA,
		DeprecatedVersion: oldNamesRemovedIn,
	}, labels)
}

// renamedCounter is renamedHistogram for a counter.
func renamedCounter(current *metrics.CounterVec, oldName string, labels ...string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:         kubeProxySubsystem,
		Name:              oldName,
		Help:              "Deprecated: the old name of " + kubeProxySubsystem + "_" + current.CounterOpts.Name + ", served until v1.37.",
		StabilityLevel:    metrics.ALPHA,
		DeprecatedVersion: oldNamesRemovedIn,
	}, labels)
}

// The metrics under their old names, observed beside the renamed ones (see oldNamesRemovedIn).
var (
	OldNFTablesLongestTransactionSeconds      = renamedHistogram(NFTablesLongestTransactionSeconds, "sync_proxy_rules_nftables_longest_transaction_seconds", "ip_family")
	OldSyncFullProxyRulesChainsCheckedTotal   = renamedCounter(SyncFullProxyRulesChainsCheckedTotal, "sync_full_proxy_rules_chains_checked_total", "ip_family")
	OldSyncFullProxyRulesChainsRewrittenTotal = renamedCounter(SyncFullProxyRulesChainsRewrittenTotal, "sync_full_proxy_rules_chains_rewritten_total", "ip_family")
	OldSyncProxyRulesGeneratedServicePorts    = renamedHistogram(SyncProxyRulesGeneratedServicePorts, "sync_proxy_rules_generated_service_ports", "ip_family")
	OldSyncProxyRulesGenerationSeconds        = renamedHistogram(SyncProxyRulesGenerationSeconds, "sync_proxy_rules_generation_duration_seconds", "ip_family")
	OldSyncFullProxyRulesDriftReadSeconds     = renamedHistogram(SyncFullProxyRulesDriftReadSeconds, "sync_full_proxy_rules_drift_read_duration_seconds", "ip_family", "source")
)

// registerRuleSyncMetrics registers the metrics of the full-sync schedule and of nftables
// transaction splitting; RegisterMetrics calls it.
func registerRuleSyncMetrics() {
	legacyregistry.MustRegister(SyncFullProxyRulesNextTimestamp)
	legacyregistry.MustRegister(NFTablesTransactionOperations)
	legacyregistry.MustRegister(NFTablesTransactionsPerSync)
	legacyregistry.MustRegister(NFTablesLongestTransactionSeconds)
	legacyregistry.MustRegister(SyncFullProxyRulesChainsCheckedTotal)
	legacyregistry.MustRegister(SyncProxyRulesGeneratedServicePorts)
	legacyregistry.MustRegister(SyncProxyRulesGenerationSeconds)
	legacyregistry.MustRegister(SyncFullProxyRulesChainsRewrittenTotal)
	legacyregistry.MustRegister(SyncFullProxyRulesDriftReadSeconds)
	legacyregistry.MustRegister(NFTablesSyncFallbacksTotal)
	legacyregistry.MustRegister(NFTablesAffinityElements)
	legacyregistry.MustRegister(NFTablesAffinityCapacity)
	legacyregistry.MustRegister(SyncFullProxyRulesExtendedDuration)
	legacyregistry.MustRegister(OldNFTablesLongestTransactionSeconds)
	legacyregistry.MustRegister(OldSyncFullProxyRulesChainsCheckedTotal)
	legacyregistry.MustRegister(OldSyncFullProxyRulesChainsRewrittenTotal)
	legacyregistry.MustRegister(OldSyncProxyRulesGeneratedServicePorts)
	legacyregistry.MustRegister(OldSyncProxyRulesGenerationSeconds)
	legacyregistry.MustRegister(OldSyncFullProxyRulesDriftReadSeconds)
}
