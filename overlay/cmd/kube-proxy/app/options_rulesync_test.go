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
			rs := o.config.RuleSync
			if rs.FullSyncPeriod.Duration != time.Hour || rs.FullSyncJitter != 0 || rs.SyncSplay != nil || rs.NFTablesRuleShapes != "" || rs.MaxSyncTransactionSize != 5000 || rs.SyncWorkers != 0 {
				t.Errorf("defaults = %+v, want period 1h, jitter 0, splay unset, default (empty: SetFree) shapes, 5000 operations per transaction, 0 (GOMAXPROCS) sync workers", rs)
			}
			if got := ruleSyncConfig(o.config, "n").Schedule.Splay; got != time.Hour {
				t.Errorf("schedule splay = %v, want the period (1h) for an unset splay", got)
			}
		})
	}
}

func TestRuleSyncFlags(t *testing.T) {
	o, err := completeWith(t, "", "--full-sync-period=20m", "--full-sync-jitter=0.2", "--sync-splay=15m", "--nftables-rule-shapes=Upstream", "--max-sync-transaction-size=0", "--full-sync-rewrite-all", "--sync-workers=3")
	if err != nil {
		t.Fatal(err)
	}
	rs := o.config.RuleSync
	if rs.FullSyncPeriod.Duration != 20*time.Minute || rs.FullSyncJitter != 0.2 || rs.SyncSplay == nil || rs.SyncSplay.Duration != 15*time.Minute || rs.NFTablesRuleShapes != "Upstream" {
		t.Errorf("got %+v, want the flag values", rs)
	}
	if opts := ruleSyncConfig(o.config, "n"); !opts.UpstreamRuleShapes || opts.MaxTransactionSize != 0 || !opts.FullSyncRewriteAll || opts.SyncWorkers != 3 {
		t.Errorf("the flags did not reach the proxier options: %+v", opts)
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
			if got := ruleSyncConfig(o.config, "n").Schedule.Splay; got != tc.want {
				t.Errorf("schedule splay = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRuleSyncConfigFile(t *testing.T) {
	config := ruleSyncBaseConfig + `ruleSync:
  fullSyncPeriod: 30m
  fullSyncJitter: 0.25
  syncSplay: 30m
  syncWorkers: 4
`
	t.Run("file values take effect", func(t *testing.T) {
		o, err := completeWith(t, config)
		if err != nil {
			t.Fatal(err)
		}
		rs := o.config.RuleSync
		if rs.FullSyncPeriod.Duration != 30*time.Minute || rs.FullSyncJitter != 0.25 || rs.SyncSplay == nil || rs.SyncSplay.Duration != 30*time.Minute {
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
		if rs.FullSyncJitter != 0.25 || rs.SyncWorkers != 4 {
			t.Errorf("jitter = %v, workers = %d, want the file's 0.25 and 4 (the flags were not set)", rs.FullSyncJitter, rs.SyncWorkers)
		}
	})
	t.Run("an explicit zero in the file disables periodic full syncs", func(t *testing.T) {
		o, err := completeWith(t, ruleSyncBaseConfig+"ruleSync:\n  fullSyncPeriod: 0s\n  fullSyncJitter: 0\n")
		if err != nil {
			t.Fatal(err)
		}
		if rs := o.config.RuleSync; rs.FullSyncPeriod.Duration != 0 || rs.FullSyncJitter != 0 {
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
		{name: "wrong type in the section", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncJitter: lots\n",
			want: "fullSyncJitter of type float64"},
		{name: "jitter flag out of range", args: []string{"--full-sync-jitter=1"},
			want: "--full-sync-jitter must be in the range [0, 1)"},
		{name: "splay above the period", args: []string{"--full-sync-period=10m", "--sync-splay=1h"},
			want: "--sync-splay must be in the range [0, --full-sync-period] = [0, 10m0s]"},
		{name: "negative period in the file", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncPeriod: -1m\n",
			want: "--full-sync-period must be 0 (no periodic full syncs) or greater"},
		{name: "negative transaction size", args: []string{"--max-sync-transaction-size=-1"},
			want: "--max-sync-transaction-size must be 0 (one transaction per sync) or greater"},
		{name: "negative sync workers in the file", config: ruleSyncBaseConfig + "ruleSync:\n  syncWorkers: -2\n",
			want: "--sync-workers must be 0 (one per CPU) or greater"},
		{name: "unknown rule shapes", args: []string{"--nftables-rule-shapes=fast"},
			want: `ruleSync.nftablesRuleShapes: Unsupported value: "fast"`},
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
		{name: "file with the section, without the period", config: ruleSyncBaseConfig + "ruleSync:\n  syncWorkers: 2\n"},
		{name: "file with the period", config: ruleSyncBaseConfig + "ruleSync:\n  fullSyncPeriod: 2h\n", want: true},
		{name: "file without it, flag with it", config: ruleSyncBaseConfig, args: []string{"--full-sync-period=20m"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := completeWith(t, tc.config, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := ruleSyncConfig(o.config, "n").Schedule.PeriodSet; got != tc.want {
				t.Errorf("PeriodSet = %v, want %v", got, tc.want)
			}
		})
	}
}
