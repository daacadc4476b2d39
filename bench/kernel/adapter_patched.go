//go:build benchkernel

package main

// The adapter for the patched tree: the only file that knows the patched NewProxier
// signature (today an extra rulesync.Options) and the ruleSync configuration. The options
// are the production defaults of the ruleSync config section (so the benchmark measures the
// rule shapes and transaction bound kube-proxy would use), except the full-sync schedule,
// which is set for the measurement. build/bench-kernel.sh copies this file into the patched
// bench tree only.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kubernetes/pkg/proxy"
	proxyconfigapi "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigv1alpha1 "k8s.io/kubernetes/pkg/proxy/apis/config/v1alpha1"
	"k8s.io/kubernetes/pkg/proxy/fullsync"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/nftables"
	"k8s.io/kubernetes/pkg/proxy/rulesync"
)

const adapterTree = TreePatched

// periodicBySchedule is true: the patched proxier plans its periodic full syncs on a
// wall-clock schedule, which the benchmark sets to a short period (a.slot) with no jitter
// and no splay, then waits for the scheduled sync.
const periodicBySchedule = true

// ruleSyncOptions returns the production defaults of the ruleSync section, mapped as
// cmd/kube-proxy/app does, with the schedule replaced: a periodic full sync every slot, no
// jitter, no splay; slot 0 disables periodic full syncs. BENCHKERNEL_MAX_TX overrides the
// transaction bound, BENCHKERNEL_UPSTREAM_SHAPES=1 selects upstream's rule shapes,
// BENCHKERNEL_REWRITE_ALL=1 makes periodic full syncs re-write everything.
func ruleSyncOptions(a proxierArgs) (rulesync.Options, error) {
	var ext kubeproxyconfigv1alpha1.KubeProxyConfiguration
	proxyconfigv1alpha1.SetDefaults_KubeProxyConfiguration(&ext)
	var c proxyconfigapi.KubeProxyNFTablesConfiguration
	if err := proxyconfigv1alpha1.Convert_v1alpha1_KubeProxyNFTablesConfiguration_To_config_KubeProxyNFTablesConfiguration(&ext.NFTables, &c, nil); err != nil {
		return rulesync.Options{}, err
	}
	o := rulesync.Options{
		Schedule:           fullsync.Config{Period: a.slot, NodeName: a.nodeName},
		UpstreamRuleShapes: proxyconfigapi.PerRuleMaps(c.RuleShapes),
		MaxTransactionSize: int(c.MaxSyncTransactionSize),
		FullSyncRewriteAll: c.FullSyncRewriteAll,
	}
	if v := os.Getenv("BENCHKERNEL_MAX_TX"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return o, fmt.Errorf("BENCHKERNEL_MAX_TX: %w", err)
		}
		o.MaxTransactionSize = n
	}
	if os.Getenv("BENCHKERNEL_UPSTREAM_SHAPES") == "1" {
		o.UpstreamRuleShapes = true
	}
	if os.Getenv("BENCHKERNEL_REWRITE_ALL") == "1" {
		o.FullSyncRewriteAll = true
	}
	return o, nil
}

func newSingleStack(ctx context.Context, family v1.IPFamily, a proxierArgs) (proxy.Provider, error) {
	o, err := ruleSyncOptions(a)
	if err != nil {
		return nil, err
	}
	return nftables.NewProxier(ctx, family, a.syncPeriod, a.minSyncPeriod, a.masqueradeAll, a.masqueradeBit,
		a.localDetector, a.nodeName, a.nodeIP, a.recorder, a.healthz, a.nodePortAddresses, false, o)
}

// describeOptions is printed in the child's log.
func describeOptions(a proxierArgs) string {
	o, err := ruleSyncOptions(a)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", o)
}

// netlinkReadSeconds returns the summed time the proxier's drift checks have spent reading the
// table over netlink so far.
func netlinkReadSeconds(family v1.IPFamily) float64 {
	v, _ := testutil.GetHistogramMetricValue(metrics.SyncFullProxyRulesDriftReadSeconds.WithLabelValues(string(family), "netlink"))
	return v
}

// plannedFullSync reads the proxier's plan from its next-full-sync gauge.
func plannedFullSync(family v1.IPFamily) (time.Time, bool) {
	v, err := testutil.GetGaugeMetricValue(metrics.SyncFullProxyRulesNextTimestamp.WithLabelValues(string(family)))
	if err != nil || v <= 0 {
		return time.Time{}, false
	}
	sec := int64(v)
	return time.Unix(sec, int64((v-float64(sec))*1e9)), true
}
