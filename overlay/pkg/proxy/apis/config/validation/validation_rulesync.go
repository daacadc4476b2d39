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

package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
)

// validateRuleSync checks the full-sync schedule (the ruleSync section) and the nftables
// section's fields of how a sync is written. fldPath is the configuration's path. Each message
// names the command-line flag that sets the field and the allowed range, because most
// operators meet these options as flags.
func validateRuleSync(c *kubeproxyconfig.KubeProxyConfiguration, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	rs, rsPath := c.RuleSync, fldPath.Child("ruleSync")
	period, splay := rs.FullSyncPeriod.Duration, rs.EffectiveSyncSplay()
	if period < 0 {
		allErrs = append(allErrs, field.Invalid(rsPath.Child("fullSyncPeriod"), rs.FullSyncPeriod.Duration.String(),
			"--full-sync-period must be 0 (no periodic full syncs) or greater"))
	}
	if rs.FullSyncJitterPercent < 0 || rs.FullSyncJitterPercent >= 100 {
		allErrs = append(allErrs, field.Invalid(rsPath.Child("fullSyncJitterPercent"), rs.FullSyncJitterPercent,
			"--full-sync-jitter-percent must be in the range [0, 100)"))
	}
	switch {
	case rs.SyncSplay == nil:
		// Unset: equal to the period, valid for every valid period.
	case splay < 0:
		allErrs = append(allErrs, field.Invalid(rsPath.Child("syncSplay"), splay.String(),
			"--sync-splay must be in the range [0, --full-sync-period]"))
	case period >= 0 && splay > period:
		allErrs = append(allErrs, field.Invalid(rsPath.Child("syncSplay"), splay.String(),
			fmt.Sprintf("--sync-splay must be in the range [0, --full-sync-period] = [0, %v]", period)))
	}

	nft, nftPath := c.NFTables, fldPath.Child("nftables")
	if nft.MaxSyncTransactionSize < 0 {
		allErrs = append(allErrs, field.Invalid(nftPath.Child("maxSyncTransactionSize"), nft.MaxSyncTransactionSize,
			"--max-sync-transaction-size must be 0 (one transaction per sync) or greater"))
	}
	if nft.SyncWorkers < 0 {
		allErrs = append(allErrs, field.Invalid(nftPath.Child("syncWorkers"), nft.SyncWorkers,
			"--sync-workers must be 0 (one per CPU) or greater"))
	}
	// The empty value (an internal config built without defaulting) means the default.
	switch nft.RuleShapes {
	case "", kubeproxyconfig.RuleShapesSetFree, kubeproxyconfig.RuleShapesPerRuleMaps, kubeproxyconfig.RuleShapesUpstream:
	default:
		allErrs = append(allErrs, field.NotSupported(nftPath.Child("ruleShapes"), nft.RuleShapes,
			[]string{kubeproxyconfig.RuleShapesSetFree, kubeproxyconfig.RuleShapesPerRuleMaps}))
	}
	return allErrs
}
