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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/utils/ptr"
)

const (
	// DefaultFullSyncPeriod is upstream's fixed full-sync period, kept as the default.
	DefaultFullSyncPeriod = time.Hour
	// DefaultFullSyncJitterPercent keeps each periodic full sync on its slot. With the default
	// splay (equal to the period) every node already has its own slot, fixed by its name, and
	// a jitter only re-draws the spread every period (bench/RESULTS.md, make bench-fleet: a
	// jitter of 50% is a few percent worse than upstream at the p95 peak for a fleet that
	// joined evenly over a day, and 0 no worse). A jitter is for a splay of 0, where every
	// node shares one slot.
	DefaultFullSyncJitterPercent = 0
	// DefaultMaxSyncTransactionSize bounds one nftables transaction, so that the kernel's
	// commit lock, and the RTNL stall behind it, stays short (bench/RESULTS.md,
	// make bench-kernel).
	DefaultMaxSyncTransactionSize = 5000
)

// defaultRuleSync fills in the unset fields of obj with their
// defaults. An explicit zero period or jitter is kept. syncSplay stays unset: unset means
// "equal to the period", which is resolved only when the schedule is built, after command-line
// flags have been applied, so that --full-sync-period alone moves the splay with it.
func defaultRuleSync(obj *kubeproxyconfigv1alpha1.KubeProxyRuleSyncConfiguration) {
	if obj.FullSyncPeriod == nil {
		obj.FullSyncPeriod = &metav1.Duration{Duration: DefaultFullSyncPeriod}
	}
	if obj.FullSyncJitterPercent == nil {
		obj.FullSyncJitterPercent = ptr.To[int32](DefaultFullSyncJitterPercent)
	}
}

// defaultNFTablesRuleSync fills in the unset nftables rule-writing fields
// of obj: set-free rule shapes, transactions of at most DefaultMaxSyncTransactionSize
// operations, drift-only full syncs and one generation worker per CPU. Explicit values,
// zeros included, are kept. SetDefaults_KubeProxyConfiguration calls both, as it defaults
// its other sections inline; the names keep defaulter-gen from calling them a second time.
func defaultNFTablesRuleSync(obj *kubeproxyconfigv1alpha1.KubeProxyNFTablesConfiguration) {
	if obj.RuleShapes == "" {
		obj.RuleShapes = config.RuleShapesSetFree
	}
	if obj.MaxSyncTransactionSize == nil {
		obj.MaxSyncTransactionSize = ptr.To[int32](DefaultMaxSyncTransactionSize)
	}
	if obj.FullSyncRewriteAll == nil {
		obj.FullSyncRewriteAll = ptr.To(false)
	}
	if obj.SyncWorkers == nil {
		obj.SyncWorkers = ptr.To[int32](0)
	}
}

// Convert_config_KubeProxyRuleSyncConfiguration_To_v1alpha1_KubeProxyRuleSyncConfiguration
// converts the internal section to the versioned one. FullSyncPeriodSet has no versioned
// field: the options derive it from the flag and the file.
func Convert_config_KubeProxyRuleSyncConfiguration_To_v1alpha1_KubeProxyRuleSyncConfiguration(in *config.KubeProxyRuleSyncConfiguration, out *kubeproxyconfigv1alpha1.KubeProxyRuleSyncConfiguration, s conversion.Scope) error {
	return autoConvert_config_KubeProxyRuleSyncConfiguration_To_v1alpha1_KubeProxyRuleSyncConfiguration(in, out, s)
}
