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
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
)

func TestValidateRuleSync(t *testing.T) {
	d := func(x time.Duration) metav1.Duration { return metav1.Duration{Duration: x} }
	sp := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	for _, tc := range []struct {
		name  string
		cfg   kubeproxyconfig.KubeProxyRuleSyncConfiguration
		wants []string // substrings of the errors, in order; none for a valid config
	}{
		{name: "defaults", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), NFTablesRuleShapes: "SetFree"}},
		{name: "jitter with splay 0", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), FullSyncJitter: 0.5, SyncSplay: sp(0), NFTablesRuleShapes: "SetFree"}},
		{name: "unset splay with a short period", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Minute), NFTablesRuleShapes: "SetFree"}},
		{name: "explicit zero splay", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), SyncSplay: sp(0), NFTablesRuleShapes: "SetFree"}},
		{name: "disabled, upstream shapes", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{NFTablesRuleShapes: "Upstream"}},
		{name: "splay equal to period", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), SyncSplay: sp(time.Hour), FullSyncJitter: 0.99, NFTablesRuleShapes: "SetFree"}},
		{name: "unknown rule shapes", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), NFTablesRuleShapes: "setfree"},
			wants: []string{`ruleSync.nftablesRuleShapes: Unsupported value: "setfree": supported values: "SetFree", "Upstream"`}},
		{name: "negative period", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(-time.Second), NFTablesRuleShapes: "SetFree"},
			wants: []string{"ruleSync.fullSyncPeriod: Invalid value: \"-1s\": --full-sync-period must be 0"}},
		{name: "jitter of 1", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), FullSyncJitter: 1, NFTablesRuleShapes: "SetFree"},
			wants: []string{"ruleSync.fullSyncJitter: Invalid value: 1: --full-sync-jitter must be in the range [0, 1)"}},
		{name: "negative jitter", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), FullSyncJitter: -0.1, NFTablesRuleShapes: "SetFree"},
			wants: []string{"--full-sync-jitter must be in the range [0, 1)"}},
		{name: "NaN jitter", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), FullSyncJitter: math.NaN(), NFTablesRuleShapes: "SetFree"},
			wants: []string{"--full-sync-jitter must be in the range [0, 1)"}},
		{name: "splay above period", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), SyncSplay: sp(2 * time.Hour), NFTablesRuleShapes: "SetFree"},
			wants: []string{"ruleSync.syncSplay: Invalid value: \"2h0m0s\": --sync-splay must be in the range [0, --full-sync-period] = [0, 1h0m0s]"}},
		{name: "splay with periodic syncs disabled", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{SyncSplay: sp(time.Minute), NFTablesRuleShapes: "SetFree"},
			wants: []string{"--sync-splay must be in the range [0, --full-sync-period] = [0, 0s]"}},
		{name: "negative splay", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(time.Hour), SyncSplay: sp(-time.Minute), NFTablesRuleShapes: "SetFree"},
			wants: []string{"--sync-splay must be in the range [0, --full-sync-period]"}},
		{name: "everything wrong", cfg: kubeproxyconfig.KubeProxyRuleSyncConfiguration{FullSyncPeriod: d(-time.Hour), FullSyncJitter: 2, SyncSplay: sp(-time.Hour), NFTablesRuleShapes: "SetFree"},
			wants: []string{"--full-sync-period", "--full-sync-jitter", "--sync-splay"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateRuleSync(tc.cfg, field.NewPath("KubeProxyConfiguration").Child("ruleSync"))
			if len(errs) != len(tc.wants) {
				t.Fatalf("got %d errors %v, want %d", len(errs), errs, len(tc.wants))
			}
			for i, want := range tc.wants {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), want)
				}
			}
		})
	}
}
