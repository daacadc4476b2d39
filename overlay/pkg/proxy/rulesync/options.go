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

// Package rulesync holds the settings of the ruleSync config section that the proxiers use:
// the full-sync schedule, and how the nftables proxier shapes and commits its rules.
package rulesync

import (
	"k8s.io/kubernetes/pkg/proxy/fullsync"
)

// Options are a proxier's rule-sync settings. The zero value is valid: no full-sync schedule
// settings (periodic full syncs disabled when passed to NewProxier) and set-free rule shapes.
type Options struct {
	// Schedule plans the periodic full syncs.
	Schedule fullsync.Config
	// UpstreamRuleShapes makes the nftables proxier write upstream's rule shapes: one
	// anonymous "numgen random mod N" map per service rule. The kernel's cost for those
	// grows faster than the square of the number of services. By default (false) it writes
	// set-free shapes that balance load the same way.
	UpstreamRuleShapes bool
	// MaxTransactionSize is the largest number of operations the nftables proxier puts in
	// one transaction; a sync with more is split between Service ports. 0 (the zero value)
	// means one transaction per sync.
	MaxTransactionSize int
	// FullSyncRewriteAll makes the nftables proxier's periodic full syncs re-write every
	// chain, as upstream does. By default (false) they re-write only the service ports whose
	// chains drifted from what kube-proxy wrote.
	FullSyncRewriteAll bool
	// SyncWorkers is the number of workers that generate the nftables proxier's rules in
	// parallel. 0 (the zero value) means GOMAXPROCS; 1 means serial generation.
	SyncWorkers int
}
