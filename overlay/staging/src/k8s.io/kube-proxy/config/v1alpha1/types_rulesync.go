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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeProxyRuleSyncConfiguration holds the settings for how kube-proxy re-writes its rules.
// They apply to every proxy mode that performs periodic full syncs (iptables and nftables).
//
// The section is decoded strictly: an unknown field in it is an error, even when the rest of
// the file is decoded leniently.
type KubeProxyRuleSyncConfiguration struct {
	// fullSyncPeriod is the interval between periodic full syncs, in which the proxier
	// re-writes every Service's rules instead of only the changed ones (e.g. '30m', '1h').
	// 0 disables periodic full syncs; full syncs still happen at start-up, after a failed
	// sync, and whenever the proxier needs one. Defaults to 1h.
	// +optional
	FullSyncPeriod *metav1.Duration `json:"fullSyncPeriod,omitempty"`
	// fullSyncJitter moves each periodic full sync away from its slot by a uniform random
	// amount in [-jitter*fullSyncPeriod/2, +jitter*fullSyncPeriod/2]. It is a fraction in
	// [0, 1); 0 keeps every full sync on its slot. Defaults to 0: with the default syncSplay
	// every node has its own slot already. Set it (e.g. 0.5) with syncSplay 0.
	// +optional
	FullSyncJitter *float64 `json:"fullSyncJitter,omitempty"`
	// syncSplay is the largest offset of this node's full-sync schedule (a duration, e.g.
	// '1h'). The offset is derived from the node name with a stable hash and lies in
	// [0, syncSplay), so nodes keep their slots across restarts and spread evenly over
	// [0, syncSplay). Must be in [0, fullSyncPeriod]. When unset it is equal to
	// fullSyncPeriod, whatever that is set to, so every node gets its own slot in the
	// period. 0 puts every node on the same wall-clock slot, spread only by
	// fullSyncJitter.
	// +optional
	SyncSplay *metav1.Duration `json:"syncSplay,omitempty"`
	// nftablesRuleShapes selects how the nftables proxier writes its load-balancing rules:
	// "SetFree" (also when empty, the default) writes one rule per endpoint, each picking with the right
	// conditional probability, and keeps all session affinity in one set, so no rule creates
	// a set and the kernel's cost per Service stays flat; "Upstream" writes upstream's per-rule
	// anonymous numgen maps and per-endpoint affinity sets.
	// +optional
	NFTablesRuleShapes string `json:"nftablesRuleShapes,omitempty"`
	// maxSyncTransactionSize is the largest number of operations that the nftables proxier
	// puts in one kernel transaction; a sync with more is split, between Service ports, into
	// several transactions. The kernel holds its netns commit lock for the length of one
	// transaction. 0 means one transaction per sync, as upstream does it. Defaults to 5000.
	// +optional
	MaxSyncTransactionSize *int32 `json:"maxSyncTransactionSize,omitempty"`
	// fullSyncRewriteAll makes the nftables proxier's periodic full syncs re-write every
	// chain, as upstream does. By default they compare the kernel's chains with what
	// kube-proxy wrote (a read, which takes no commit lock) and re-write only the service
	// ports that drifted. Defaults to false.
	// +optional
	FullSyncRewriteAll bool `json:"fullSyncRewriteAll,omitempty"`
	// syncWorkers is the number of workers that generate the nftables proxier's rules for
	// each Service port in parallel during a sync. 0, the default, means one per CPU that
	// the process may use (GOMAXPROCS); 1 generates them serially, as upstream does. The
	// result does not depend on it.
	// +optional
	SyncWorkers int32 `json:"syncWorkers,omitempty"`
}

// DeepCopyInto copies the receiver into out. in must be non-nil.
func (in *KubeProxyRuleSyncConfiguration) DeepCopyInto(out *KubeProxyRuleSyncConfiguration) {
	*out = *in
	if in.FullSyncPeriod != nil {
		out.FullSyncPeriod = &metav1.Duration{Duration: in.FullSyncPeriod.Duration}
	}
	if in.FullSyncJitter != nil {
		j := *in.FullSyncJitter
		out.FullSyncJitter = &j
	}
	if in.SyncSplay != nil {
		out.SyncSplay = &metav1.Duration{Duration: in.SyncSplay.Duration}
	}
	if in.MaxSyncTransactionSize != nil {
		n := *in.MaxSyncTransactionSize
		out.MaxSyncTransactionSize = &n
	}
}

// DeepCopy returns a deep copy of the receiver, or nil for a nil receiver.
func (in *KubeProxyRuleSyncConfiguration) DeepCopy() *KubeProxyRuleSyncConfiguration {
	if in == nil {
		return nil
	}
	out := new(KubeProxyRuleSyncConfiguration)
	in.DeepCopyInto(out)
	return out
}
