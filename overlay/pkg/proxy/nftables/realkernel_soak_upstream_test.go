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
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"
)

// upstreamKubeProxyEnv names the test binary that holds upstream's own nftables proxier: the
// pristine package, compiled with build/soak/upstream_sync_test.go added (build/lib.sh,
// upstream_soak_test). make test and make soak set it; without it the soak hands nothing over.
const upstreamKubeProxyEnv = "KUBE_PROXY_OVERLAY_SOAK_UPSTREAM"

// upstreamKubeProxy runs upstream's proxier, unpatched, for one cluster state in a network
// namespace: a rollback of the node to upstream's kube-proxy.
type upstreamKubeProxy struct {
	binary string // the pristine package's test binary
	ip     string // ip (iproute2), to enter the namespace
	path   string // PATH for the binary: the real nft's directory first, no test shims
	dir    string // where cluster states are written
}

// newUpstreamKubeProxy returns the upstream kube-proxy that upstreamKubeProxyEnv names, or nil
// when it is unset. A binary that is named but missing fails the test.
func newUpstreamKubeProxy(t *testing.T) *upstreamKubeProxy {
	t.Helper()
	binary := os.Getenv(upstreamKubeProxyEnv)
	if binary == "" {
		return nil
	}
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("%s: %v", upstreamKubeProxyEnv, err)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("the upstream hand-over needs ip: %v", err)
	}
	nft, err := lookPathNFT()
	if err != nil {
		t.Fatalf("the upstream hand-over needs nft: %v", err)
	}
	return &upstreamKubeProxy{binary: binary, ip: ip, path: filepath.Dir(nft) + ":/usr/sbin:/usr/bin:/sbin:/bin", dir: t.TempDir()}
}

// sync runs upstream's proxier on cluster c's Services and endpoint slices in network namespace
// netns: a first (full) sync, then, with its stale chains aged, a second one that deletes them,
// as a running upstream kube-proxy would a second later. It returns the binary's output on
// failure.
func (u *upstreamKubeProxy) sync(c *soakCluster, netns string) error {
	state := struct {
		Family   v1.IPFamily
		Services []*v1.Service
		Slices   []*discovery.EndpointSlice
	}{Family: c.family}
	for _, name := range slices.Sorted(maps.Keys(c.services)) {
		state.Services = append(state.Services, c.services[name])
		state.Slices = append(state.Slices, c.slices[name])
	}
	data, err := json.Marshal(state)
	if err != nil {
		return err
	}
	file := filepath.Join(u.dir, "cluster.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(u.ip, "netns", "exec", netns, u.binary, "-test.run", "^TestSoakUpstreamSync$", "-test.count=1", "-test.v")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+u.path, "KUBE_PROXY_OVERLAY_SOAK_STATE="+file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	// A binary built without the test exits 0 having run nothing.
	if !strings.Contains(string(out), "--- PASS: TestSoakUpstreamSync") {
		return fmt.Errorf("%s ran no TestSoakUpstreamSync: %s", u.binary, out)
	}
	return nil
}

// handover rolls the node back to upstream's kube-proxy, which takes the soaked table over;
// the caller then starts the patched kube-proxy again on upstream's table (an upgrade). After
// upstream's syncs the table routes as the model says, and it is exactly the table that
// upstream writes from nothing: nothing that only the patched kube-proxy writes is left.
func (s *soak) handover(u *upstreamKubeProxy, netns string, refReal knftables.Interface, refNetns string, refRun func(args ...string) string) {
	s.t.Helper()
	s.handovers++
	if err := u.sync(s.cluster, netns); err != nil {
		s.violation("upstream's kube-proxy failed on the table that the patched one left: %v", err)
		return
	}
	s.commits++
	s.checkRouting(readKernelTable(s.t, s.run, s.family))
	deleteTable(s.t, refReal)
	if err := u.sync(s.cluster, refNetns); err != nil {
		s.t.Fatalf("soak seed %d step %d: upstream's kube-proxy failed on an empty table: %v", s.seed, s.step, err)
	}
	if d := tableDiff(tableObjects(s.t, refRun, s.family), tableObjects(s.t, s.run, s.family)); d != "" {
		s.violation("after the rollback, the table differs from the one upstream's kube-proxy writes:\n%s", d)
	}
	s.damaged = false
	s.synced()
}
