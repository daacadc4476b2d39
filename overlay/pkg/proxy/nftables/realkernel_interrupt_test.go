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

package nftables

import (
	"fmt"
	"testing"

	"sigs.k8s.io/knftables"
)

// Syncs cut off between their transactions, on the real kernel.

func TestRealKernelInterruptedSyncRecovers(t *testing.T) {
	// The table a clean kube-proxy writes for the changed cluster.
	refReal, refRun := realNFT(t, knftables.IPv4Family)
	settle(t, newDamageTestProxier(t, refReal, true))
	want := tableObjects(t, refRun, "ip")

	// A sync of the change is cut off before each of its transactions in turn. The
	// transactions before stand; the same proxier's next sync, or a restarted kube-proxy's
	// first, must then write exactly the clean table.
	for failAt := 1; ; failAt++ {
		interrupted := false
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("transaction %d, restart=%v", failAt, restart), func(t *testing.T) {
				real, run := realNFT(t, knftables.IPv4Family)
				fp := newDamageTestProxier(t, real)
				failing := &checkedNFT{Interface: real, refuse: func(n int, _ *knftables.Transaction) error {
					if n == failAt {
						return fmt.Errorf("injected failure of transaction %d", n)
					}
					return nil
				}}
				useKernel(fp, failing)
				fp.maxTransactionOps = 5
				changeDamageTestCluster(fp)
				if err := fp.syncProxyRules(); err == nil {
					if failing.runs >= failAt {
						t.Fatalf("the sync succeeded although transaction %d failed", failAt)
					}
					return // the sync has fewer transactions: all cases ran
				}
				interrupted = true
				checkEveryServiceRouted(t, run, "172.30.3.1", "172.30.3.2", "172.30.3.3", "172.30.3.6")
				if restart {
					// A new kube-proxy starts on the changed cluster.
					fp = newDamageTestProxier(t, real, true)
				} else {
					useKernel(fp, real)
					if err := fp.syncProxyRules(); err != nil {
						t.Fatalf("the recovering sync failed: %v", err)
					}
				}
				settle(t, fp)
				if diff := tableDiff(want, tableObjects(t, run, "ip")); diff != "" {
					t.Errorf("after the interrupted sync and a recovering one, the table differs from a clean one:\n%s", diff)
				}
				checkSetCount(t, fp)
			})
		}
		if !interrupted {
			if failAt <= 3 {
				t.Fatalf("the change's sync ran %d transactions, want it split into several", failAt-1)
			}
			break
		}
	}
}

// checkEveryServiceRouted checks that the kernel's service-ips map sends each of ips somewhere,
// and that every chain it sends anything to has rules: every Service has working rules, old or
// new.
func checkEveryServiceRouted(t *testing.T, run func(args ...string) string, ips ...string) {
	t.Helper()
	routed := routedPorts(t, run)
	for _, ip := range ips {
		if routed[ip] == "" {
			t.Errorf("no service-ips element sends %s anywhere", ip)
		}
	}
}
