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
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
)

// TestSyncGatesAreUpstreamAlpha: upstream's registry has each gate of the sync changes as alpha,
// off by default; only this build's enableSyncGates turns them on.
func TestSyncGatesAreUpstreamAlpha(t *testing.T) {
	specs := utilfeature.DefaultFeatureGate.DeepCopy().GetAll()
	for _, gate := range syncGates {
		spec, ok := specs[gate]
		if !ok {
			t.Errorf("%s is not registered", gate)
			continue
		}
		if spec.PreRelease != featuregate.Alpha || spec.Default {
			t.Errorf("%s is %s, default %v; want alpha, off by default", gate, spec.PreRelease, spec.Default)
		}
	}
}

// TestEnableSyncGates: this build turns every sync gate on, unless the configuration sets it;
// an explicit false wins.
func TestEnableSyncGates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		explicit map[string]bool
		off      featuregate.Feature
	}{
		{name: "none set"},
		{name: "one turned off", explicit: map[string]bool{string(features.NFTablesBoundedTransactions): false}, off: features.NFTablesBoundedTransactions},
		{name: "schedule turned off", explicit: map[string]bool{string(features.KubeProxyFullSyncSchedule): false}, off: features.KubeProxyFullSyncSchedule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gates := utilfeature.DefaultFeatureGate.DeepCopy()
			if err := enableSyncGates(gates, tc.explicit); err != nil {
				t.Fatal(err)
			}
			if err := gates.SetFromMap(tc.explicit); err != nil {
				t.Fatal(err)
			}
			for _, gate := range syncGates {
				if got, want := gates.Enabled(gate), gate != tc.off; got != want {
					t.Errorf("%s enabled = %v, want %v", gate, got, want)
				}
			}
		})
	}
}

// TestRuleSyncConfigFollowsGates: a setting whose gate is off reaches the proxiers as upstream's,
// whatever the configuration says; with the gates on, the configuration's.
func TestRuleSyncConfigFollowsGates(t *testing.T) {
	c := &kubeproxyconfig.KubeProxyConfiguration{}
	c.NFTables.RuleShapes = kubeproxyconfig.RuleShapesSetFree
	c.NFTables.MaxSyncTransactionSize = 300
	c.NFTables.FullSyncRewriteAll = false
	for _, on := range []bool{false, true} {
		for _, gate := range syncGates {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, gate, on)
		}
		o := ruleSyncConfig(c, "n")
		if on && (o.UpstreamRuleShapes || o.MaxTransactionSize != 300 || o.FullSyncRewriteAll) {
			t.Errorf("gates on: %+v, want the configuration's settings", o)
		}
		if !on && (!o.UpstreamRuleShapes || o.MaxTransactionSize != 0 || !o.FullSyncRewriteAll) {
			t.Errorf("gates off: %+v, want upstream's: per-rule maps, one transaction, every chain re-written", o)
		}
	}
}
