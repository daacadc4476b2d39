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

package app

import (
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

// This build's defaults for the feature gates of the sync changes (carried, not upstream).
//
// Upstream registers the gates as alpha, off by default. This build exists to run those changes,
// so kube-proxy turns each of them on unless --feature-gates (or the config file's
// featureGates) sets it: `--feature-gates=NFTablesBoundedTransactions=false` turns one off.

// syncGates are the feature gates that this build turns on by default.
var syncGates = []featuregate.Feature{
	features.KubeProxyFullSyncSchedule,
	features.NFTablesBoundedTransactions,
	features.NFTablesDriftOnlyFullSync,
	features.NFTablesSetFreeRuleShapes,
}

// enableSyncGates turns on, in gates, each of syncGates that explicit (the configured
// featureGates, flag and file merged) does not set. It leaves the configuration alone, so that
// --write-config-to and /configz show what the user set. It must run before explicit is applied
// (gates.SetFromMap), so that an explicit value wins.
func enableSyncGates(gates featuregate.MutableFeatureGate, explicit map[string]bool) error {
	defaults := map[string]bool{}
	for _, gate := range syncGates {
		if _, set := explicit[string(gate)]; !set {
			defaults[string(gate)] = true
		}
	}
	return gates.SetFromMap(defaults)
}
