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

// KubeProxyRuleSyncConfiguration holds the full-sync schedule, for every proxy mode that
// performs periodic full syncs (iptables and nftables). Defaults are applied in the versioned
// API; see v1alpha1.KubeProxyRuleSyncConfiguration.
type KubeProxyRuleSyncConfiguration struct {
	// FullSyncPeriod is the interval between periodic full syncs; 0 disables them.
	FullSyncPeriod metav1.Duration
	// FullSyncPeriodSet is set when the user set FullSyncPeriod, with --full-sync-period or
	// in the configuration file, rather than leaving upstream's default. It has no field in
	// the versioned API: the options set it from the flag and from the file's ruleSync
	// section. In iptables mode's large-cluster mode, where upstream skips periodic full
	// syncs, a period that the user set is followed.
	FullSyncPeriodSet bool
	// FullSyncJitterPercent is the percentage of FullSyncPeriod, in [0, 100), by which each
	// periodic full sync moves randomly around its slot (half of it to each side).
	FullSyncJitterPercent int32
	// SyncSplay is the largest per-node offset of the full-sync schedule, derived from the
	// node name; at most FullSyncPeriod. nil means equal to FullSyncPeriod (see
	// EffectiveSyncSplay); 0 puts every node on the same slot.
	SyncSplay *metav1.Duration
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

// The values of KubeProxyNFTablesConfiguration.RuleShapes.
const (
	// RuleShapesSetFree makes the nftables proxier balance load with one rule per endpoint
	// and no per-rule sets, and keep session affinity in one shared set.
	RuleShapesSetFree = "SetFree"
	// RuleShapesPerRuleMaps makes the nftables proxier write upstream's shapes: an anonymous
	// numgen map per load-balancing rule and a session-affinity set per endpoint.
	RuleShapesPerRuleMaps = "PerRuleMaps"
	// RuleShapesUpstream is the old name of RuleShapesPerRuleMaps, accepted for one release.
	//
	// Deprecated: use RuleShapesPerRuleMaps.
	RuleShapesUpstream = "Upstream"
)

// PerRuleMaps reports whether shapes, a value of KubeProxyNFTablesConfiguration.RuleShapes,
// selects upstream's per-rule maps (under its current or its old name).
func PerRuleMaps(shapes string) bool {
	return shapes == RuleShapesPerRuleMaps || shapes == RuleShapesUpstream
}
