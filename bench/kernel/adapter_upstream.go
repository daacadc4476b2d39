//go:build benchkernel

package main

// The adapter for pristine upstream: the only file that knows upstream's NewProxier
// signature. build/bench-kernel.sh copies it into the pristine bench tree only.

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/nftables"
)

const adapterTree = TreeUpstream

// periodicBySchedule is false: upstream's periodic full sync is a fixed hour after the last
// one and cannot be shortened, so the benchmark forces the same code path with
// OnTopologyChange (which, like the hourly timer, only makes the next sync a full one).
const periodicBySchedule = false

func newSingleStack(ctx context.Context, family v1.IPFamily, a proxierArgs) (proxy.Provider, error) {
	return nftables.NewProxier(ctx, family, a.syncPeriod, a.minSyncPeriod, a.masqueradeAll, a.masqueradeBit,
		a.localDetector, a.nodeName, a.nodeIP, a.recorder, a.healthz, a.nodePortAddresses, false)
}

func describeOptions(proxierArgs) string { return "upstream" }

// netlinkReadSeconds: upstream does not read the table over netlink.
func netlinkReadSeconds(v1.IPFamily) float64 { return 0 }

// plannedFullSync: upstream exposes no plan.
func plannedFullSync(v1.IPFamily) (time.Time, bool) { return time.Time{}, false }
