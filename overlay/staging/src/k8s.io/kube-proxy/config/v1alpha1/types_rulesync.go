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

// KubeProxyRuleSyncConfiguration holds the full-sync schedule: when kube-proxy re-writes all of
// its rules rather than only the changed ones. It applies to every proxy mode that performs
// periodic full syncs (iptables and nftables); the nftables-only settings of how a sync is
// written are in KubeProxyNFTablesConfiguration.
//
// The section is decoded strictly: an unknown field in it is an error, even when the rest of
// the file is decoded leniently.
type KubeProxyRuleSyncConfiguration struct {
	// fullSyncPeriod is the interval between periodic full syncs, in which the proxier
	// re-writes every Service's rules instead of only the changed ones (e.g. '30m', '1h').
	// 0 disables periodic full syncs; full syncs still happen at start-up, after a failed
	// sync, and whenever the proxier needs one. Defaults to 1h, upstream's fixed period.
	// +optional
	FullSyncPeriod *metav1.Duration `json:"fullSyncPeriod,omitempty"`
	// fullSyncJitterPercent moves each periodic full sync away from its slot by a uniform
	// random amount of up to half this percentage of fullSyncPeriod, to either side. An
	// integer in [0, 100); 0 keeps every full sync on its slot. Defaults to 0: with the
	// default syncSplay every node has its own slot already. Set it (e.g. 50) with
	// syncSplay 0.
	// +optional
	FullSyncJitterPercent *int32 `json:"fullSyncJitterPercent,omitempty"`
	// syncSplay is the largest offset of this node's full-sync schedule (a duration, e.g.
	// '1h'). The offset is derived from the node name with a stable hash and lies in
	// [0, syncSplay), so nodes keep their slots across restarts and spread evenly over
	// [0, syncSplay). Must be in [0, fullSyncPeriod]. When unset it is equal to
	// fullSyncPeriod, whatever that is set to, so every node gets its own slot in the
	// period. 0 puts every node on the same wall-clock slot, spread only by
	// fullSyncJitterPercent.
	// +optional
	SyncSplay *metav1.Duration `json:"syncSplay,omitempty"`
}
