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
	"math"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
)

// validateRuleSync checks the ruleSync section. Each message names the command-line flag that
// sets the field and the allowed range, because most operators meet these options as flags.
func validateRuleSync(c kubeproxyconfig.KubeProxyRuleSyncConfiguration, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	period, splay := c.FullSyncPeriod.Duration, c.EffectiveSyncSplay()
	if period < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("fullSyncPeriod"), c.FullSyncPeriod.Duration.String(),
			"--full-sync-period must be 0 (no periodic full syncs) or greater"))
	}
	if math.IsNaN(c.FullSyncJitter) || c.FullSyncJitter < 0 || c.FullSyncJitter >= 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("fullSyncJitter"), c.FullSyncJitter,
			"--full-sync-jitter must be in the range [0, 1)"))
	}
	switch {
	case c.SyncSplay == nil:
		// Unset: equal to the period, valid for every valid period.
	case splay < 0:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("syncSplay"), splay.String(),
			"--sync-splay must be in the range [0, --full-sync-period]"))
	case period >= 0 && splay > period:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("syncSplay"), splay.String(),
			fmt.Sprintf("--sync-splay must be in the range [0, --full-sync-period] = [0, %v]", period)))
	}
	if c.MaxSyncTransactionSize < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("maxSyncTransactionSize"), c.MaxSyncTransactionSize,
			"--max-sync-transaction-size must be 0 (one transaction per sync) or greater"))
	}
	if c.SyncWorkers < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("syncWorkers"), c.SyncWorkers,
			"--sync-workers must be 0 (one per CPU) or greater"))
	}
	// The empty value (an internal config built without defaulting) means the default.
	switch c.NFTablesRuleShapes {
	case "", kubeproxyconfig.RuleShapesSetFree, kubeproxyconfig.RuleShapesUpstream:
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("nftablesRuleShapes"), c.NFTablesRuleShapes,
			[]string{kubeproxyconfig.RuleShapesSetFree, kubeproxyconfig.RuleShapesUpstream}))
	}
	return allErrs
}
