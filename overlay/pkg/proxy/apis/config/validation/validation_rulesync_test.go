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
	type rs = kubeproxyconfig.KubeProxyRuleSyncConfiguration
	type nft = kubeproxyconfig.KubeProxyNFTablesConfiguration
	setFree := nft{RuleShapes: "SetFree", MaxSyncTransactionSize: 5000}
	for _, tc := range []struct {
		name  string
		rs    rs
		nft   nft
		wants []string // substrings of the errors, in order; none for a valid config
	}{
		{name: "defaults", rs: rs{FullSyncPeriod: d(time.Hour)}, nft: setFree},
		{name: "internal zero values", nft: nft{}},
		{name: "jitter with splay 0", rs: rs{FullSyncPeriod: d(time.Hour), FullSyncJitterPercent: 50, SyncSplay: sp(0)}, nft: setFree},
		{name: "unset splay with a short period", rs: rs{FullSyncPeriod: d(time.Minute)}, nft: setFree},
		{name: "explicit zero splay", rs: rs{FullSyncPeriod: d(time.Hour), SyncSplay: sp(0)}, nft: setFree},
		{name: "disabled, per-rule maps, one transaction", nft: nft{RuleShapes: "PerRuleMaps"}},
		{name: "the old name of per-rule maps", nft: nft{RuleShapes: "Upstream"}},
		{name: "splay equal to period", rs: rs{FullSyncPeriod: d(time.Hour), SyncSplay: sp(time.Hour), FullSyncJitterPercent: 99}, nft: setFree},
		{name: "unknown rule shapes", rs: rs{FullSyncPeriod: d(time.Hour)}, nft: nft{RuleShapes: "setfree"},
			wants: []string{`nftables.ruleShapes: Unsupported value: "setfree": supported values: "SetFree", "PerRuleMaps"`}},
		{name: "negative period", rs: rs{FullSyncPeriod: d(-time.Second)}, nft: setFree,
			wants: []string{"ruleSync.fullSyncPeriod: Invalid value: \"-1s\": --full-sync-period must be 0"}},
		{name: "jitter of 100%", rs: rs{FullSyncPeriod: d(time.Hour), FullSyncJitterPercent: 100}, nft: setFree,
			wants: []string{"ruleSync.fullSyncJitterPercent: Invalid value: 100: --full-sync-jitter-percent must be in the range [0, 100)"}},
		{name: "negative jitter", rs: rs{FullSyncPeriod: d(time.Hour), FullSyncJitterPercent: -1}, nft: setFree,
			wants: []string{"--full-sync-jitter-percent must be in the range [0, 100)"}},
		{name: "splay above period", rs: rs{FullSyncPeriod: d(time.Hour), SyncSplay: sp(2 * time.Hour)}, nft: setFree,
			wants: []string{"ruleSync.syncSplay: Invalid value: \"2h0m0s\": --sync-splay must be in the range [0, --full-sync-period] = [0, 1h0m0s]"}},
		{name: "splay with periodic syncs disabled", rs: rs{SyncSplay: sp(time.Minute)}, nft: setFree,
			wants: []string{"--sync-splay must be in the range [0, --full-sync-period] = [0, 0s]"}},
		{name: "negative splay", rs: rs{FullSyncPeriod: d(time.Hour), SyncSplay: sp(-time.Minute)}, nft: setFree,
			wants: []string{"--sync-splay must be in the range [0, --full-sync-period]"}},
		{name: "negative transaction size", rs: rs{FullSyncPeriod: d(time.Hour)}, nft: nft{MaxSyncTransactionSize: -1},
			wants: []string{"nftables.maxSyncTransactionSize: Invalid value: -1: --max-sync-transaction-size must be 0"}},
		{name: "negative workers", rs: rs{FullSyncPeriod: d(time.Hour)}, nft: nft{SyncWorkers: -1},
			wants: []string{"nftables.syncWorkers: Invalid value: -1: --sync-workers must be 0"}},
		{name: "everything wrong", rs: rs{FullSyncPeriod: d(-time.Hour), FullSyncJitterPercent: 200, SyncSplay: sp(-time.Hour)}, nft: nft{RuleShapes: "x", MaxSyncTransactionSize: -1, SyncWorkers: -1},
			wants: []string{"--full-sync-period", "--full-sync-jitter-percent", "--sync-splay", "--max-sync-transaction-size", "--sync-workers", "nftables.ruleShapes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &kubeproxyconfig.KubeProxyConfiguration{RuleSync: tc.rs, NFTables: tc.nft}
			errs := validateRuleSync(c, field.NewPath("KubeProxyConfiguration"))
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
