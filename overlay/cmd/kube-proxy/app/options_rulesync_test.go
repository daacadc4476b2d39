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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
)

const ruleSyncBaseConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
`

// completeWith runs kube-proxy's real option parsing: flags registered by AddFlags, parsed from
// args, then Complete and Validate.
func completeWith(t *testing.T, config string, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	o.AddFlags(fs)
	if config != "" {
		file := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config="+file)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.Complete(fs); err != nil {
		return o, err
	}
	return o, o.Validate()
}

func TestRuleSyncDefaults(t *testing.T) {
	for name, config := range map[string]string{"flags only": "", "config file without the section": ruleSyncBaseConfig} {
		t.Run(name, func(t *testing.T) {
			o, err := completeWith(t, config)
			if err != nil {
				t.Fatal(err)
			}
			rs, nft := o.config.RuleSync, o.config.NFTables
			if rs.FullSyncPeriod.Duration != time.Hour || rs.FullSyncJitterPercent != 0 || rs.SyncSplay != nil {
				t.Errorf("ruleSync defaults = %+v, want period 1h, jitter 0, splay unset", rs)
			}
			if nft.MaxSyncTransactionSize != 5000 || nft.SyncWorkers != 0 || nft.FullSyncRewriteAll || kubeproxyconfig.PerRuleMaps(nft.RuleShapes) {
				t.Errorf("nftables defaults = %+v, want set-free shapes, 5000 operations per transaction, 0 (GOMAXPROCS) sync workers, drift-only full syncs", nft)
			}
			if got := ruleSyncSettings(o.config, "n").Schedule.Splay; got != time.Hour {
				t.Errorf("schedule splay = %v, want the period (1h) for an unset splay", got)
			}
		})
	}
}

func TestRuleSyncFlags(t *testing.T) {
	for _, shapes := range []string{"PerRuleMaps", "Upstream"} {
		o, err := completeWith(t, "", "--full-sync-period=20m", "--full-sync-jitter-percent=20", "--sync-splay=15m", "--nftables-rule-shapes="+shapes, "--max-sync-transaction-size=0", "--full-sync-rewrite-all", "--sync-workers=3")
		if err != nil {
			t.Fatal(err)
		}
		rs := o.config.RuleSync
		if rs.FullSyncPeriod.Duration != 20*time.Minute || rs.FullSyncJitterPercent != 20 || rs.SyncSplay == nil || rs.SyncSplay.Duration != 15*time.Minute || o.config.NFTables.RuleShapes != shapes {
			t.Errorf("got %+v, %+v, want the flag values", rs, o.config.NFTables)
		}
		opts := ruleSyncSettings(o.config, "n")
		if !opts.UpstreamRuleShapes || opts.MaxTransactionSize != 0 || !opts.FullSyncRewriteAll || opts.SyncWorkers != 3 || opts.Schedule.Jitter != 0.2 {
			t.Errorf("the flags did not reach the proxier options: %+v", opts)
		}
	}
}

// TestDeprecatedJitterFlag: --full-sync-jitter, a fraction, still sets the jitter for one
// release, as the nearest percentage, and is checked for its own range.
func TestDeprecatedJitterFlag(t *testing.T) {
	o, err := completeWith(t, "", "--full-sync-jitter=0.25")
	if err != nil {
		t.Fatal(err)
	}
	if got := o.config.RuleSync.FullSyncJitterPercent; got != 25 {
		t.Errorf("jitter = %d%%, want 25%% from --full-sync-jitter=0.25", got)
	}
	if _, err := completeWith(t, "", "--full-sync-jitter=1"); err == nil || !strings.Contains(err.Error(), "must be in the range [0, 1)") {
		t.Errorf("--full-sync-jitter=1: error = %v, want the range [0, 1)", err)
	}
}

// TestRuleSyncSplayFollowsPeriod checks that an unset splay is equal to the period wherever the
// period comes from, and that an explicit 0 (flag or file) is kept as 0.
func TestRuleSyncSplayFollowsPeriod(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		args         []string
		want         time.Duration
	}{
		{name: "period flag only", args: []string{"--full-sync-period=20m"}, want: 20 * time.Minute},
		{name: "period in the file only", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncPeriod: 45m\n", want: 45 * time.Minute},
		{name: "period flag over a file without splay", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncPeriod: 45m\n", args: []string{"--full-sync-period=10m"}, want: 10 * time.Minute},
		{name: "periodic full syncs disabled", args: []string{"--full-sync-period=0"}, want: 0},
		{name: "explicit 0 flag", args: []string{"--sync-splay=0"}, want: 0},
		{name: "explicit 0 in the file", config: ruleSyncBaseConfig + "ruleSync:\n  syncSplay: 0s\n", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := completeWith(t, tc.config, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := ruleSyncSettings(o.config, "n").Schedule.Splay; got != tc.want {
				t.Errorf("schedule splay = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRuleSyncConfigFile(t *testing.T) {
	config := ruleSyncBaseConfig + `ruleSync:
  fullSyncPeriod: 30m
  fullSyncJitterPercent: 25
  syncSplay: 30m
nftables:
  syncWorkers: 4
`
	t.Run("file values take effect", func(t *testing.T) {
		o, err := completeWith(t, config)
		if err != nil {
			t.Fatal(err)
		}
		rs := o.config.RuleSync
		if rs.FullSyncPeriod.Duration != 30*time.Minute || rs.FullSyncJitterPercent != 25 || rs.SyncSplay == nil || rs.SyncSplay.Duration != 30*time.Minute || o.config.NFTables.SyncWorkers != 4 {
			t.Errorf("got %+v, want the file's values", rs)
		}
	})
	t.Run("explicit flags override the file", func(t *testing.T) {
		o, err := completeWith(t, config, "--full-sync-period=2h", "--sync-splay=1h")
		if err != nil {
			t.Fatal(err)
		}
		rs := o.config.RuleSync
		if rs.FullSyncPeriod.Duration != 2*time.Hour || rs.SyncSplay == nil || rs.SyncSplay.Duration != time.Hour {
			t.Errorf("got %+v, want period and splay from the flags", rs)
		}
		if rs.FullSyncJitterPercent != 25 || o.config.NFTables.SyncWorkers != 4 {
			t.Errorf("jitter = %d%%, workers = %d, want the file's 25%% and 4 (the flags were not set)", rs.FullSyncJitterPercent, o.config.NFTables.SyncWorkers)
		}
	})
	t.Run("an explicit zero in the file disables periodic full syncs", func(t *testing.T) {
		o, err := completeWith(t, ruleSyncBaseConfig+"ruleSync:\n  fullSyncPeriod: 0s\n  fullSyncJitterPercent: 0\n")
		if err != nil {
			t.Fatal(err)
		}
		if rs := o.config.RuleSync; rs.FullSyncPeriod.Duration != 0 || rs.FullSyncJitterPercent != 0 {
			t.Errorf("got %+v, want an explicit zero period and jitter kept", rs)
		}
	})
}

func TestRuleSyncRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		args         []string
		want         string
	}{
		{name: "misspelled field in the section", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncPeriode: 30m\n",
			want: `invalid ruleSync section in the configuration file: json: unknown field "fullSyncPeriode"`},
		{name: "wrong type in the section", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncJitterPercent: lots\n",
			want: "fullSyncJitterPercent of type int32"},
		{name: "old jitter of the wrong type", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncJitter: lots\n",
			want: "fullSyncJitter must be a number"},
		{name: "old jitter out of range", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncJitter: 1.5\n",
			want: "must be in the range [0, 1), got 1.5"},
		{name: "old and new name, different values", config: ruleSyncBaseConfig + "ruleSync:\n  syncWorkers: 2\nnftables:\n  syncWorkers: 3\n",
			want: "both ruleSync.syncWorkers (deprecated) and its new name syncWorkers"},
		{name: "jitter flag out of range", args: []string{"--full-sync-jitter-percent=100"},
			want: "--full-sync-jitter-percent must be in the range [0, 100)"},
		{name: "splay above the period", args: []string{"--full-sync-period=10m", "--sync-splay=1h"},
			want: "--sync-splay must be in the range [0, --full-sync-period] = [0, 10m0s]"},
		{name: "negative period in the file", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncPeriod: -1m\n",
			want: "--full-sync-period must be 0 (no periodic full syncs) or greater"},
		{name: "negative transaction size", args: []string{"--max-sync-transaction-size=-1"},
			want: "--max-sync-transaction-size must be 0 (one transaction per sync) or greater"},
		{name: "negative sync workers in the file", config: ruleSyncBaseConfig + "nftables:\n  syncWorkers: -2\n",
			want: "--sync-workers must be 0 (one per CPU) or greater"},
		{name: "unknown rule shapes", args: []string{"--nftables-rule-shapes=fast"},
			want: `nftables.ruleShapes: Unsupported value: "fast"`},
		{name: "flag that is not a duration", args: []string{"--sync-splay=soon"},
			want: `invalid argument "soon" for "--sync-splay"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := completeWith(t, tc.config, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestReadRuleSyncSectionAcceptsJSONAndMissingSection(t *testing.T) {
	for _, data := range []string{
		`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration"}`,
		`{"kind":"KubeProxyConfiguration","ruleSync":{"fullSyncPeriod":"1h","syncSplay":"1h"}}`,
		ruleSyncBaseConfig + "ruleSync: null\n",
	} {
		if err := readRuleSyncSection([]byte(data), &kubeproxyconfig.KubeProxyConfiguration{}); err != nil {
			t.Errorf("readRuleSyncSection(%s) = %v, want nil", data, err)
		}
	}
}

// TestRuleSyncPeriodSet: whether the user set the full-sync period (which iptables mode's
// large-cluster mode follows instead of skipping periodic full syncs) comes from the flag or
// from the file's ruleSync section; a default period, even one written out by defaulting, is
// not set. An explicit value equal to the default is.
func TestRuleSyncPeriodSet(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		args         []string
		want         bool
	}{
		{name: "flags only, none given"},
		{name: "flag", args: []string{"--full-sync-period=20m"}, want: true},
		{name: "flag at the default value", args: []string{"--full-sync-period=1h"}, want: true},
		{name: "file without the section", config: ruleSyncBaseConfig},
		{name: "file with the section, without the period", config: ruleSyncBaseConfig + "ruleSync:\n  syncSplay: 20m\n"},
		{name: "file with the period", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncPeriod: 2h\n", want: true},
		{name: "file without it, flag with it", config: ruleSyncBaseConfig, args: []string{"--full-sync-period=20m"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := completeWith(t, tc.config, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := ruleSyncSettings(o.config, "n").Schedule.PeriodSet; got != tc.want {
				t.Errorf("PeriodSet = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRuleSyncOldFieldNames: a configuration file of the previous release, with the jitter as a
// fraction and the nftables-only fields in ruleSync, loads for one more release with the same
// meaning; the same values under the new names give the same configuration.
func TestRuleSyncOldFieldNames(t *testing.T) {
	old := ruleSyncBaseConfig + `ruleSync:
  fullSyncPeriod: 30m
  fullSyncJitter: 0.5
  syncSplay: 0s
  nftablesRuleShapes: Upstream
  maxSyncTransactionSize: 300
  fullSyncRewriteAll: true
  syncWorkers: 2
`
	renamed := ruleSyncBaseConfig + `ruleSync:
  fullSyncPeriod: 30m
  fullSyncJitterPercent: 50
  syncSplay: 0s
nftables:
  ruleShapes: Upstream
  maxSyncTransactionSize: 300
  fullSyncRewriteAll: true
  syncWorkers: 2
`
	o, err := completeWith(t, old)
	if err != nil {
		t.Fatal(err)
	}
	n, err := completeWith(t, renamed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ruleSyncSettings(o.config, "n"), ruleSyncSettings(n.config, "n"); got != want {
		t.Errorf("old names give %+v, new names %+v", got, want)
	}
	if opts := ruleSyncSettings(o.config, "n"); opts.Schedule.Jitter != 0.5 || !opts.UpstreamRuleShapes || opts.MaxTransactionSize != 300 || !opts.FullSyncRewriteAll || opts.SyncWorkers != 2 {
		t.Errorf("old names: %+v, want the file's values", opts)
	}
	// The same value under both names is not a conflict.
	if _, err := completeWith(t, ruleSyncBaseConfig+"ruleSync:\n  syncWorkers: 2\nnftables:\n  syncWorkers: 2\n"); err != nil {
		t.Errorf("the same value under both names: %v", err)
	}
}
