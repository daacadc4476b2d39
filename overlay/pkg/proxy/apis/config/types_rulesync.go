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

package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeProxyRuleSyncConfiguration holds the settings for how kube-proxy re-writes its rules,
// for every proxy mode that performs periodic full syncs (iptables and nftables). Defaults
// are applied in the versioned API; see v1alpha1.KubeProxyRuleSyncConfiguration.
type KubeProxyRuleSyncConfiguration struct {
	// FullSyncPeriod is the interval between periodic full syncs; 0 disables them.
	FullSyncPeriod metav1.Duration
	// FullSyncPeriodSet is set when the user set FullSyncPeriod, with --full-sync-period or
	// in the configuration file, rather than leaving upstream's default. It has no field in
	// the versioned API: the options set it from the flag and from the file's ruleSync
	// section. In iptables mode's large-cluster mode, where upstream skips periodic full
	// syncs, a period that the user set is followed.
	FullSyncPeriodSet bool
	// FullSyncJitter is the fraction of FullSyncPeriod, in [0, 1), by which each periodic
	// full sync moves randomly around its slot (half of it to each side).
	FullSyncJitter float64
	// SyncSplay is the largest per-node offset of the full-sync schedule, derived from the
	// node name; at most FullSyncPeriod. nil means equal to FullSyncPeriod (see
	// EffectiveSyncSplay); 0 puts every node on the same slot.
	SyncSplay *metav1.Duration
	// NFTablesRuleShapes is RuleShapesSetFree or RuleShapesUpstream; empty means
	// RuleShapesSetFree.
	NFTablesRuleShapes string
	// MaxSyncTransactionSize is the largest number of operations in one nftables
	// transaction; 0 means one transaction per sync.
	MaxSyncTransactionSize int32
	// FullSyncRewriteAll makes periodic full syncs re-write every chain rather than only
	// the drifted ones.
	FullSyncRewriteAll bool
	// SyncWorkers is the number of workers that generate the nftables proxier's rules in
	// parallel; 0 means GOMAXPROCS, 1 means serial generation.
	SyncWorkers int32
}

// EffectiveSyncSplay returns the splay that the full-sync schedule uses: SyncSplay when it is
// set, otherwise FullSyncPeriod, so that an unset splay gives every node its own slot in the
// period, whatever the period.
func (c *KubeProxyRuleSyncConfiguration) EffectiveSyncSplay() time.Duration {
	if c.SyncSplay != nil {
		return c.SyncSplay.Duration
	}
	return c.FullSyncPeriod.Duration
}

// DeepCopyInto copies the receiver into out, with its own copy of SyncSplay. in must be
// non-nil.
func (in *KubeProxyRuleSyncConfiguration) DeepCopyInto(out *KubeProxyRuleSyncConfiguration) {
	*out = *in
	if in.SyncSplay != nil {
		out.SyncSplay = &metav1.Duration{Duration: in.SyncSplay.Duration}
	}
}

const (
	// RuleShapesSetFree makes the nftables proxier balance load with one rule per endpoint
	// and no per-rule sets, and keep session affinity in one shared set.
	RuleShapesSetFree = "SetFree"
	// RuleShapesUpstream makes the nftables proxier write upstream's per-rule numgen maps.
	RuleShapesUpstream = "Upstream"
)
