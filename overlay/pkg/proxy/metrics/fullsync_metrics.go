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

package metrics

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// SyncFullProxyRulesNextTimestamp is when the proxier plans its next periodic full sync, as
// Unix seconds, per IP family; 0 when periodic full syncs are disabled.
var SyncFullProxyRulesNextTimestamp = metrics.NewGaugeVec(
	&metrics.GaugeOpts{
		Subsystem:      kubeProxySubsystem,
		Name:           "sync_full_proxy_rules_next_timestamp_seconds",
		Help:           "The time of the next planned periodic full sync of proxy rules, in Unix seconds; 0 when periodic full syncs are disabled.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ip_family"},
)

// registerFullSyncMetrics registers the full-sync schedule metrics; RegisterMetrics calls it.
func registerFullSyncMetrics() {
	legacyregistry.MustRegister(SyncFullProxyRulesNextTimestamp)
}
