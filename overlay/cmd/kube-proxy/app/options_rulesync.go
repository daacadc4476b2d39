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
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kubernetes/pkg/features"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/fullsync"
	"k8s.io/kubernetes/pkg/proxy/rulesync"
	"sigs.k8s.io/yaml"
)

// ruleSyncFlags are the flags of the full-sync schedule (the ruleSync section) and of how the
// nftables proxier writes a sync (fields of the nftables section), each with how it copies its
// value from one configuration to another. Unlike upstream's other flags, each of them, when set
// explicitly, overrides the value from --config.
var ruleSyncFlags = map[string]func(from, to *kubeproxyconfig.KubeProxyConfiguration){
	"full-sync-period": func(from, to *kubeproxyconfig.KubeProxyConfiguration) {
		to.RuleSync.FullSyncPeriod, to.RuleSync.FullSyncPeriodSet = from.RuleSync.FullSyncPeriod, true
	},
	"full-sync-jitter-percent": copyJitter,
	"full-sync-jitter":         copyJitter,
	"sync-splay": func(from, to *kubeproxyconfig.KubeProxyConfiguration) {
		to.RuleSync.SyncSplay = from.RuleSync.SyncSplay
	},
	"nftables-rule-shapes": func(from, to *kubeproxyconfig.KubeProxyConfiguration) {
		to.NFTables.RuleShapes = from.NFTables.RuleShapes
	},
	"max-sync-transaction-size": func(from, to *kubeproxyconfig.KubeProxyConfiguration) {
		to.NFTables.MaxSyncTransactionSize = from.NFTables.MaxSyncTransactionSize
	},
	"full-sync-rewrite-all": func(from, to *kubeproxyconfig.KubeProxyConfiguration) {
		to.NFTables.FullSyncRewriteAll = from.NFTables.FullSyncRewriteAll
	},
	"sync-workers": func(from, to *kubeproxyconfig.KubeProxyConfiguration) {
		to.NFTables.SyncWorkers = from.NFTables.SyncWorkers
	},
}

func copyJitter(from, to *kubeproxyconfig.KubeProxyConfiguration) {
	to.RuleSync.FullSyncJitterPercent = from.RuleSync.FullSyncJitterPercent
}

// addRuleSyncFlags registers the flags of ruleSyncFlags, bound to o.config. Each help text
// states the flag's unit, its default and what 0 means.
func (o *Options) addRuleSyncFlags(fs *pflag.FlagSet) {
	rs, nft := &o.config.RuleSync, &o.config.NFTables
	fs.Var(&setDuration{d: &rs.FullSyncPeriod.Duration, set: &rs.FullSyncPeriodSet}, "full-sync-period",
		"How often the proxier re-writes all of its rules, rather than only the changed ones: a duration (e.g. '30m', '1h'). Default 1h, upstream's. 0 disables periodic full syncs; they still happen at start-up and after a failed sync. Periodic full syncs are anchored to the wall clock, not to process start. Applies to iptables and nftables mode; in iptables mode with more than 1,000 endpoints, where upstream skips periodic full syncs, they run only when this (or ruleSync.fullSyncPeriod) is set.")
	fs.Int32Var(&rs.FullSyncJitterPercent, "full-sync-jitter-percent", rs.FullSyncJitterPercent,
		"Moves each periodic full sync away from its slot by a uniform random amount of up to half this percentage of --full-sync-period, to either side. An integer in [0, 100). 0, the default, keeps every full sync on its slot, which with the default --sync-splay is the node's own; set it (e.g. 50) with --sync-splay=0.")
	fs.Var(&jitterFraction{percent: &rs.FullSyncJitterPercent}, "full-sync-jitter",
		"The jitter as a fraction in [0, 1): 0.5 is --full-sync-jitter-percent=50.")
	_ = fs.MarkDeprecated("full-sync-jitter", "use --full-sync-jitter-percent; --full-sync-jitter will be removed in the next release")
	fs.Var(&optionalDuration{p: &rs.SyncSplay}, "sync-splay",
		"The largest offset of this node's full-sync schedule: a duration (e.g. '1h'). The offset is derived from the node name with a stable hash and lies in [0, sync-splay), so that nodes that joined together do not full-sync together. Must be in [0, --full-sync-period]. Default: equal to --full-sync-period, so every node gets its own slot in the period. 0 puts every node on the same wall-clock slot, spread only by --full-sync-jitter-percent.")
	fs.StringVar(&nft.RuleShapes, "nftables-rule-shapes", nft.RuleShapes,
		"How the nftables proxier writes its load-balancing rules: 'SetFree' (the default, also when empty: one rule per endpoint, no per-rule sets, and one session-affinity set for all endpoints, so the kernel's cost per Service stays flat; a Service port with more than 8 endpoints keeps upstream's map) or 'PerRuleMaps' (upstream's per-rule numgen maps and per-endpoint affinity sets, whose kernel cost grows faster than the square of the number of Services; 'Upstream' is its old name).")
	fs.Int32Var(&nft.MaxSyncTransactionSize, "max-sync-transaction-size", nft.MaxSyncTransactionSize,
		"The largest number of operations (nftables commands) the nftables proxier puts in one kernel transaction; a larger sync is split between Services into several transactions, so the kernel's commit lock is never held for long. Default 5000. 0 means one transaction per sync, as upstream does it.")
	fs.BoolVar(&nft.FullSyncRewriteAll, "full-sync-rewrite-all", nft.FullSyncRewriteAll,
		"Make the nftables proxier's periodic full syncs re-write every chain, as upstream does. By default (false) they compare the kernel's chains with what kube-proxy wrote and re-write only the Service ports that drifted.")
	fs.Int32Var(&nft.SyncWorkers, "sync-workers", nft.SyncWorkers,
		"The number of workers (goroutines) that generate the nftables proxier's rules for each Service port in parallel. 0, the default, means one per CPU the process may use (GOMAXPROCS); 1 generates them serially. The rules do not depend on it.")
}

// jitterFraction is the pflag.Value of the deprecated --full-sync-jitter: a fraction in [0, 1),
// stored as the nearest whole percentage.
type jitterFraction struct {
	percent *int32
}

func (j *jitterFraction) String() string {
	if j.percent == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*j.percent)/100, 'g', -1, 64)
}

// Set parses v as a fraction in [0, 1); anything else is an error.
func (j *jitterFraction) Set(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return err
	}
	p, err := jitterPercent(f)
	if err != nil {
		return err
	}
	*j.percent = p
	return nil
}

func (j *jitterFraction) Type() string { return "float" }

// jitterPercent converts a jitter fraction in [0, 1) to the nearest whole percentage.
func jitterPercent(f float64) (int32, error) {
	if math.IsNaN(f) || f < 0 || f >= 1 {
		return 0, fmt.Errorf("a full-sync jitter fraction must be in the range [0, 1), got %v", f)
	}
	return int32(math.Round(f * 100)), nil
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

// applyRuleSyncFlags copies the flags of ruleSyncFlags that were set explicitly on the command
// line from o.config into loaded, the configuration read from --config, so that those flags win
// over the file. Flags left at their defaults do not touch the file's values.
func (o *Options) applyRuleSyncFlags(fs *pflag.FlagSet, loaded *kubeproxyconfig.KubeProxyConfiguration) {
	if fs == nil {
		return
	}
	for name, copyFlag := range ruleSyncFlags {
		if fs.Changed(name) {
			copyFlag(o.config, loaded)
		}
	}
}

// movedRuleSyncFields are the fields that earlier releases of this kube-proxy read in the
// ruleSync section and that now live in the nftables section, under these names.
var movedRuleSyncFields = []struct{ old, now string }{
	{"nftablesRuleShapes", "ruleShapes"},
	{"maxSyncTransactionSize", "maxSyncTransactionSize"},
	{"fullSyncRewriteAll", "fullSyncRewriteAll"},
	{"syncWorkers", "syncWorkers"},
}

// renameRuleSyncFields rewrites the fields of data, a serialized KubeProxyConfiguration, that
// earlier releases read under other names, and logs each as deprecated:
// ruleSync.fullSyncJitter (a fraction in [0, 1)) becomes ruleSync.fullSyncJitterPercent, and the
// nftables-only fields of ruleSync move to the nftables section. Old names are read for one
// release. A file that sets an old field and its new name to different values, or an old
// jitter out of range, is an error. data without old fields is returned unchanged; otherwise the
// result is the same configuration as JSON.
func (o *Options) renameRuleSyncFields(data []byte) ([]byte, error) {
	var top map[string]any
	js, err := yaml.YAMLToJSON(data)
	if err != nil || json.Unmarshal(js, &top) != nil {
		return data, nil // not a YAML or JSON object: the decoder reports it
	}
	ruleSync, _ := top["ruleSync"].(map[string]any)
	if ruleSync == nil {
		return data, nil
	}
	renamed := false
	rename := func(from map[string]any, old string, to map[string]any, now string, value any) error {
		if prev, ok := to[now]; ok && fmt.Sprint(prev) != fmt.Sprint(value) {
			return fmt.Errorf("the configuration sets both ruleSync.%s (deprecated) and its new name %s, to different values", old, now)
		}
		delete(from, old)
		to[now] = value
		renamed = true
		o.logger.Info("Deprecated configuration field: it is read for one more release", "field", "ruleSync."+old, "use", now)
		return nil
	}
	if v, ok := ruleSync["fullSyncJitter"]; ok {
		f, isNumber := v.(float64)
		if !isNumber {
			return nil, fmt.Errorf("invalid ruleSync section in the configuration file: fullSyncJitter must be a number, got %v", v)
		}
		p, err := jitterPercent(f)
		if err != nil {
			return nil, fmt.Errorf("invalid ruleSync section in the configuration file: %w", err)
		}
		if err := rename(ruleSync, "fullSyncJitter", ruleSync, "fullSyncJitterPercent", float64(p)); err != nil {
			return nil, err
		}
	}
	for _, f := range movedRuleSyncFields {
		v, ok := ruleSync[f.old]
		if !ok {
			continue
		}
		nft, _ := top["nftables"].(map[string]any)
		if nft == nil {
			nft = map[string]any{}
			top["nftables"] = nft
		}
		if err := rename(ruleSync, f.old, nft, f.now, v); err != nil {
			return nil, err
		}
	}
	if !renamed {
		return data, nil
	}
	return json.Marshal(top)
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
// completed configuration c. A setting whose feature gate is off is upstream's, whatever c says:
// NFTablesSetFreeRuleShapes off gives PerRuleMaps, NFTablesBoundedTransactions off one
// transaction per sync, and NFTablesDriftOnlyFullSync off full syncs that re-write every chain.
// (KubeProxyFullSyncSchedule is read where the schedule is made: fullsync.NewProxierSchedule.)
func ruleSyncConfig(c *kubeproxyconfig.KubeProxyConfiguration, nodeName string) rulesync.Options {
	o := ruleSyncSettings(c, nodeName)
	gates := utilfeature.DefaultFeatureGate
	if !gates.Enabled(features.NFTablesSetFreeRuleShapes) {
		o.UpstreamRuleShapes = true
	}
	if !gates.Enabled(features.NFTablesBoundedTransactions) {
		o.MaxTransactionSize = 0
	}
	if !gates.Enabled(features.NFTablesDriftOnlyFullSync) {
		o.FullSyncRewriteAll = true
	}
	return o
}

// ruleSyncSettings returns the rule-sync settings of the completed configuration c, for the
// proxiers of node nodeName, as c gives them.
func ruleSyncSettings(c *kubeproxyconfig.KubeProxyConfiguration, nodeName string) rulesync.Options {
	return rulesync.Options{
		Schedule: fullsync.Config{
			Period:    c.RuleSync.FullSyncPeriod.Duration,
			Jitter:    float64(c.RuleSync.FullSyncJitterPercent) / 100,
			Splay:     c.RuleSync.EffectiveSyncSplay(),
			NodeName:  nodeName,
			PeriodSet: c.RuleSync.FullSyncPeriodSet,
		},
		UpstreamRuleShapes: kubeproxyconfig.PerRuleMaps(c.NFTables.RuleShapes),
		MaxTransactionSize: int(c.NFTables.MaxSyncTransactionSize),
		FullSyncRewriteAll: c.NFTables.FullSyncRewriteAll,
		SyncWorkers:        int(c.NFTables.SyncWorkers),
	}
}
