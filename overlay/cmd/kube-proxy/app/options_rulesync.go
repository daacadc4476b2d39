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
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/fullsync"
	"k8s.io/kubernetes/pkg/proxy/rulesync"
	"sigs.k8s.io/yaml"
)

// ruleSyncFlags names the flags of the ruleSync config section. Unlike upstream's other flags,
// each of them, when set explicitly, overrides the value from --config.
var ruleSyncFlags = []string{"full-sync-period", "full-sync-jitter", "sync-splay", "nftables-rule-shapes", "max-sync-transaction-size", "full-sync-rewrite-all", "sync-workers"}

// addRuleSyncFlags registers the ruleSync flags, bound to o.config.RuleSync. Each help text
// states the flag's unit, its default and what 0 means.
func (o *Options) addRuleSyncFlags(fs *pflag.FlagSet) {
	rs := &o.config.RuleSync
	fs.Var(&setDuration{d: &rs.FullSyncPeriod.Duration, set: &rs.FullSyncPeriodSet}, "full-sync-period",
		"How often the proxier re-writes all of its rules, rather than only the changed ones: a duration (e.g. '30m', '1h'). Default 1h, upstream's. 0 disables periodic full syncs; they still happen at start-up and after a failed sync. Periodic full syncs are anchored to the wall clock, not to process start. Applies to iptables and nftables mode; in iptables mode with more than 1,000 endpoints, where upstream skips periodic full syncs, they run only when this (or ruleSync.fullSyncPeriod) is set.")
	fs.Float64Var(&rs.FullSyncJitter, "full-sync-jitter", rs.FullSyncJitter,
		"Moves each periodic full sync away from its slot by a uniform random amount of up to half this fraction of --full-sync-period, to either side. A fraction in [0, 1). 0, the default, keeps every full sync on its slot, which with the default --sync-splay is the node's own; set it (e.g. 0.5) with --sync-splay=0.")
	fs.Var(&optionalDuration{p: &rs.SyncSplay}, "sync-splay",
		"The largest offset of this node's full-sync schedule: a duration (e.g. '1h'). The offset is derived from the node name with a stable hash and lies in [0, sync-splay), so that nodes that joined together do not full-sync together. Must be in [0, --full-sync-period]. Default: equal to --full-sync-period, so every node gets its own slot in the period. 0 puts every node on the same wall-clock slot, spread only by --full-sync-jitter.")
	fs.StringVar(&rs.NFTablesRuleShapes, "nftables-rule-shapes", rs.NFTablesRuleShapes,
		"How the nftables proxier writes its load-balancing rules: 'SetFree' (the default, also when empty: one rule per endpoint, no per-rule sets, and one session-affinity set for all endpoints, so the kernel's cost per Service stays flat; a Service port with more than 8 endpoints keeps upstream's map) or 'Upstream' (upstream's per-rule numgen maps and per-endpoint affinity sets, whose kernel cost grows faster than the square of the number of Services).")
	fs.Int32Var(&rs.MaxSyncTransactionSize, "max-sync-transaction-size", rs.MaxSyncTransactionSize,
		"The largest number of operations (nftables commands) the nftables proxier puts in one kernel transaction; a larger sync is split between Service ports into several transactions, so the kernel's commit lock is never held for long. 0 means one transaction per sync, as upstream does it.")
	fs.BoolVar(&rs.FullSyncRewriteAll, "full-sync-rewrite-all", rs.FullSyncRewriteAll,
		"Make the nftables proxier's periodic full syncs re-write every chain, as upstream does. By default (false) they compare the kernel's chains with what kube-proxy wrote and re-write only the Service ports that drifted.")
	fs.Int32Var(&rs.SyncWorkers, "sync-workers", rs.SyncWorkers,
		"The number of workers (goroutines) that generate the nftables proxier's rules for each Service port in parallel. 0, the default, means one per CPU the process may use (GOMAXPROCS); 1 generates them serially. The rules do not depend on it.")
}

// setDuration is a pflag.Value for a duration with a default, that records in *set that the
// flag was given.
type setDuration struct {
	d   *time.Duration
	set *bool
}

func (s *setDuration) String() string {
	if s.d == nil {
		return ""
	}
	return s.d.String()
}

func (s *setDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*s.d, *s.set = d, true
	return nil
}

func (s *setDuration) Type() string { return "duration" }

// optionalDuration is a pflag.Value for a duration that may be unset: it stays nil until the
// flag is given, and then holds the parsed duration (which may be 0).
type optionalDuration struct {
	p **metav1.Duration
}

// String returns the duration, or "" while it is unset (so --help prints no default).
func (d *optionalDuration) String() string {
	if d.p == nil || *d.p == nil {
		return ""
	}
	return (*d.p).Duration.String()
}

// Set parses s as a Go duration (e.g. "30m") and stores it; a malformed s is an error.
func (d *optionalDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d.p = &metav1.Duration{Duration: v}
	return nil
}

// Type names the value's type in --help.
func (d *optionalDuration) Type() string { return "duration" }

// applyRuleSyncFlags copies the ruleSync flags that were set explicitly on the command line from
// o.config into loaded, the configuration read from --config, so that those flags win over the
// file. Flags left at their defaults do not touch the file's values.
func (o *Options) applyRuleSyncFlags(fs *pflag.FlagSet, loaded *kubeproxyconfig.KubeProxyConfiguration) {
	if fs == nil {
		return
	}
	from, to := &o.config.RuleSync, &loaded.RuleSync
	for _, name := range ruleSyncFlags {
		if !fs.Changed(name) {
			continue
		}
		switch name {
		case "full-sync-period":
			to.FullSyncPeriod, to.FullSyncPeriodSet = from.FullSyncPeriod, true
		case "full-sync-jitter":
			to.FullSyncJitter = from.FullSyncJitter
		case "sync-splay":
			to.SyncSplay = from.SyncSplay
		case "nftables-rule-shapes":
			to.NFTablesRuleShapes = from.NFTablesRuleShapes
		case "max-sync-transaction-size":
			to.MaxSyncTransactionSize = from.MaxSyncTransactionSize
		case "full-sync-rewrite-all":
			to.FullSyncRewriteAll = from.FullSyncRewriteAll
		case "sync-workers":
			to.SyncWorkers = from.SyncWorkers
		}
	}
}

// readRuleSyncSection decodes the ruleSync section of a serialized KubeProxyConfiguration
// strictly, and returns an error naming the problem when it holds an unknown or misspelled
// field or a value of the wrong type. Upstream falls back to lenient decoding for the rest of the
// file, which would silently ignore a typo such as "fullSyncPeriode"; this section is new, so no
// older file depends on leniency there. A file without the section is accepted. It also notes
// in into, the configuration decoded from data, whether the file sets fullSyncPeriod (the
// versioned API's defaulting hides that).
func readRuleSyncSection(data []byte, into *kubeproxyconfig.KubeProxyConfiguration) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("failed to decode: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return fmt.Errorf("failed to decode: %w", err)
	}
	section, ok := top["ruleSync"]
	if !ok || bytes.Equal(section, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(section))
	dec.DisallowUnknownFields()
	var rs kubeproxyconfigv1alpha1.KubeProxyRuleSyncConfiguration
	if err := dec.Decode(&rs); err != nil {
		return fmt.Errorf("invalid ruleSync section in the configuration file: %w", err)
	}
	into.RuleSync.FullSyncPeriodSet = rs.FullSyncPeriod != nil
	return nil
}

// ruleSyncConfig returns the rule-sync settings that the proxiers of node nodeName get from the
// completed configuration c.
func ruleSyncConfig(c *kubeproxyconfig.KubeProxyConfiguration, nodeName string) rulesync.Options {
	return rulesync.Options{
		Schedule: fullsync.Config{
			Period:    c.RuleSync.FullSyncPeriod.Duration,
			Jitter:    c.RuleSync.FullSyncJitter,
			Splay:     c.RuleSync.EffectiveSyncSplay(),
			NodeName:  nodeName,
			PeriodSet: c.RuleSync.FullSyncPeriodSet,
		},
		UpstreamRuleShapes: c.RuleSync.NFTablesRuleShapes == kubeproxyconfig.RuleShapesUpstream,
		MaxTransactionSize: int(c.RuleSync.MaxSyncTransactionSize),
		FullSyncRewriteAll: c.RuleSync.FullSyncRewriteAll,
		SyncWorkers:        int(c.RuleSync.SyncWorkers),
	}
}
