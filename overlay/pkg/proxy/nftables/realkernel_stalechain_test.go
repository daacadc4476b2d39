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
// the running kernel does, with nft alone: it deletes a map element that jumps to a chain, then
// at once tries to delete the chain, and then retries until the chain can go. On 6.2 and later
// the immediate deletion must succeed; on older kernels the result is logged (it is a race
// against the kernel), and the chain must be deletable within the proxier's grace period's order
// of magnitude (10s here, for emulated machines).
func TestRealKernelStaleChainDeletion(t *testing.T) {
	_, run, netns := realNFTNetns(t, knftables.IPv4Family)
	kernel, err := utilkernel.GetVersion()
	if err != nil {
		t.Fatal(err)
	}
	setup := filepath.Join(t.TempDir(), "setup.nft")
	if err := os.WriteFile(setup, []byte(strings.Join([]string{
		"add table ip kpo-probe",
		"add chain ip kpo-probe target",
		"add rule ip kpo-probe target counter",
		"add map ip kpo-probe m { type ipv4_addr : verdict ; }",
		"add chain ip kpo-probe entry { type filter hook prerouting priority 0 ; }",
		"add rule ip kpo-probe entry ip daddr vmap @m",
		"add element ip kpo-probe m { 10.0.0.1 : goto target }",
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-f", setup)
	run("delete", "element", "ip", "kpo-probe", "m", "{", "10.0.0.1", "}")

	deleteChain := func() error {
		ipPath, _ := exec.LookPath("ip")
		nftPath, _ := exec.LookPath("nft")
		out, err := exec.Command(ipPath, "netns", "exec", netns, nftPath, "delete", "chain", "ip", "kpo-probe", "target").CombinedOutput()
		if err != nil {
			return &nftError{err: err, out: strings.TrimSpace(string(out))}
		}
		return nil
	}
	immediate := deleteChain()
	t.Logf("kernel %s: deleting the chain right after its map element: %v", kernel, errOrOK(immediate))
	if immediate == nil {
		return
	}
	if !kernel.LessThan(version.MustParseGeneric("6.2")) {
		t.Fatalf("kernel %s (6.2 or later) refused to delete an unreferenced chain: %v", kernel, immediate)
	}
	deadline := time.Now().Add(10 * time.Second)
	tries := 1
	for {
		err := deleteChain()
		tries++
		if err == nil {
			t.Logf("kernel %s: the chain could be deleted after %d tries", kernel, tries)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernel %s: the unreferenced chain still cannot be deleted after %d tries: %v", kernel, tries, err)
		}
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
