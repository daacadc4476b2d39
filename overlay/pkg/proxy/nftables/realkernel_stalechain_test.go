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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	utilkernel "k8s.io/kubernetes/pkg/util/kernel"
	"sigs.k8s.io/knftables"
)

// The proxier flushes a stale service chain at once and deletes it only in a later sync, because
// with kernels before 6.2 a chain that a just-deleted verdict-map element pointed to stays
// referenced for a short while (see the stale-chain comment in proxier.go). This test shows what
// the running kernel does, with nft alone and a map of service-ips' type (address . protocol .
// port, a concatenation): it deletes a map element that jumps to a chain and the
// chain, in the same transaction or in the next one, and then retries the chain's deletion until
// it can go. On 6.2 and later both immediate deletions must succeed; on older kernels the result
// is logged (the next-transaction case is a race against the kernel), and the chain must be
// deletable within 10s (the proxier waits 1s; emulated machines are slow).
func TestRealKernelStaleChainDeletion(t *testing.T) {
	kernel, err := utilkernel.GetVersion()
	if err != nil {
		t.Fatal(err)
	}
	for _, sameTx := range []bool{true, false} {
		name := "next transaction"
		if sameTx {
			name = "same transaction"
		}
		t.Run(name, func(t *testing.T) {
			_, run, netns := realNFTNetns(t, knftables.IPv4Family)
			setup := filepath.Join(t.TempDir(), "setup.nft")
			if err := os.WriteFile(setup, []byte(strings.Join([]string{
				"add table ip kpo-probe",
				"add chain ip kpo-probe target",
				"add rule ip kpo-probe target counter",
				"add map ip kpo-probe m { type ipv4_addr . inet_proto . inet_service : verdict ; }",
				"add chain ip kpo-probe entry { type filter hook prerouting priority 0 ; }",
				"add rule ip kpo-probe entry ip daddr . meta l4proto . th dport vmap @m",
				"add element ip kpo-probe m { 10.0.0.1 . tcp . 80 : goto target }",
			}, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			run("-f", setup)
			ipPath, _ := exec.LookPath("ip")
			nftPath, _ := exec.LookPath("nft")
			nft := func(cmds ...string) error {
				file := filepath.Join(t.TempDir(), "tx.nft")
				if err := os.WriteFile(file, []byte(strings.Join(cmds, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(ipPath, "netns", "exec", netns, nftPath, "-f", file).CombinedOutput()
				if err != nil {
					return &nftError{err: err, out: strings.TrimSpace(string(out))}
				}
				return nil
			}
			const delElement, delChain = "delete element ip kpo-probe m { 10.0.0.1 . tcp . 80 }", "delete chain ip kpo-probe target"
			var immediate error
			if sameTx {
				immediate = nft(delElement, delChain)
				if immediate != nil {
					// The transaction failed as a whole: delete the element alone.
					if err := nft(delElement); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				if err := nft(delElement); err != nil {
					t.Fatal(err)
				}
				immediate = nft(delChain)
			}
			t.Logf("kernel %s: deleting the chain with its map element, %s: %s", kernel, name, errOrOK(immediate))
			if immediate == nil {
				return
			}
			if !kernel.LessThan(version.MustParseGeneric("6.2")) {
				t.Fatalf("kernel %s (6.2 or later) refused to delete an unreferenced chain: %v", kernel, immediate)
			}
			deadline := time.Now().Add(10 * time.Second)
			for tries := 1; ; tries++ {
				err := nft(delChain)
				if err == nil {
					t.Logf("kernel %s: the chain could be deleted on retry %d", kernel, tries)
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("kernel %s: the unreferenced chain still cannot be deleted after %d retries: %v", kernel, tries, err)
				}
			}
		})
	}
}

// nftError is a failed nft command with its output.
type nftError struct {
	err error
	out string
}

func (e *nftError) Error() string { return e.err.Error() + ": " + e.out }

// errOrOK prints err, or "ok" for nil.
func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
