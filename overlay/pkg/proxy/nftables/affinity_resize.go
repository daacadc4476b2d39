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
	"context"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// How the shared affinity set changes size.
//
// Adding a set that exists with another size resizes it on recent kernels (6.12, 6.18), but
// older ones (6.1, which EKS AL2023 nodes for Kubernetes 1.32 and older run) accept the
// operation and keep the old size. The proxier probes which behaviour the kernel has, once in
// its lifetime (probeAffinityResize), the first time a sync has Services with ClientIP
// affinity:
//
//   - resizeInPlace: the set is clientAffinitySet, re-added with each new size
//     (resizeClientAffinity), and keeps its elements.
//   - resizeByReplacing: the set's name carries its size (sizedAffinitySetName), so that
//     another size is another set. A full sync that needs another size writes every rule with
//     the new name, which adds the new set in the first transaction that uses it, and its
//     clean-up deletes the old one after every rule that named it is re-written or flushed.
//     Clients' affinity starts afresh in the new set. A partial sync keeps the set it finds
//     and asks for a full sync (servicePortStage.commit).
//
// Either way the name starts with "affinity-", so upstream's kube-proxy deletes it after a
// rollback, and a fresh kube-proxy on the same kernel writes the same name and size.

// affinityResizing is how the kernel takes a new size for an existing set.
type affinityResizing int

const (
	// resizeInPlace: adding the set with a new size resizes it.
	resizeInPlace affinityResizing = iota + 1
	// resizeByReplacing: the kernel keeps the old size; a new size takes a new set.
	resizeByReplacing
)

// affinityProbeSet is the set with which probeAffinityResize probes the kernel, in the
// proxier's table, while the probe runs. Its name is one of upstream's "affinity-" names
// without a "/": if a probe that was cut short left it, the next probe deletes it, and so do a
// walkAll sync's clean-up (as a per-endpoint set that no service port keeps) and upstream's
// kube-proxy after a rollback.
const affinityProbeSet = "affinity-size-probe"

// affinityResizing returns how the kernel behind the proxier's nftables interface resizes the
// shared affinity set: probed on the proxier's first call, remembered in proxier.affinityResize
// after (its zero value: not probed yet; tests set it to choose the behaviour). When the probe
// fails, it logs and returns resizeByReplacing, which is correct on every kernel, and probed
// false: the next call probes again.
func (proxier *Proxier) affinityResizing() (r affinityResizing, probed bool) {
	if proxier.affinityResize != 0 {
		return proxier.affinityResize, true
	}
	r, err := proxier.probeAffinityResize(context.TODO())
	if err != nil {
		proxier.logger.Error(err, "Cannot probe whether the kernel resizes nftables sets; the session-affinity set gets a new name for each size until a full sync probes again")
		return resizeByReplacing, false
	}
	if r == resizeByReplacing {
		proxier.logger.Info("The kernel keeps a set's size when the set is added again: the session-affinity set is replaced when the size it needs changes")
	}
	proxier.affinityResize = r
	return r, true
}

// probeAffinityResize finds out whether the kernel resizes an existing set: in the proxier's
// table (added first, as setupNFTables adds it, for a sync on a node that has none yet), it
// adds affinityProbeSet, like the shared affinity set, of size 1 (after deleting any that a
// probe cut short left), adds it again with size 2, and adds two elements. The kernel refuses
// the second element (the set is full) when it kept size 1. It deletes the set in the end. It
// commits three transactions (four when the kernel kept the size), through runTracked so that
// the drift check knows them for the proxier's own; each deletes something, so that it surely
// commits (certainlyCommits) and the drift check need not suspect someone else's commit.
func (proxier *Proxier) probeAffinityResize(ctx context.Context) (affinityResizing, error) {
	set := func(size uint64) *knftables.Set { return proxier.clientAffinitySetObject(affinityProbeSet, size) }
	addr := "192.0.2."
	if proxier.nftFamily() == "ip6" {
		addr = "2001:db8::"
	}
	elem := func(host string) *knftables.Element {
		return &knftables.Element{Set: affinityProbeSet, Key: []string{addr + host, "0", "0"}}
	}
	run := func(ops func(tx *knftables.Transaction)) error {
		tx := proxier.nftables.NewTransaction()
		ops(tx)
		return proxier.runTracked(ctx, tx)
	}
	dropSet := func(tx *knftables.Transaction) {
		tx.Add(set(1))
		tx.Delete(set(1))
	}
	err := run(func(tx *knftables.Transaction) {
		tx.Add(&knftables.Table{Comment: ptr.To("rules for kube-proxy")})
		dropSet(tx)
		tx.Add(set(1))
	})
	if err != nil {
		return 0, err
	}
	err = run(func(tx *knftables.Transaction) {
		tx.Add(set(2))
		tx.Add(elem("1"))
		tx.Delete(elem("1"))
	})
	if err != nil {
		run(dropSet) //nolint:errcheck // the probe's error is the one to report
		return 0, err
	}
	err = run(func(tx *knftables.Transaction) {
		tx.Add(elem("1"))
		tx.Add(elem("2"))
		tx.Delete(set(2))
	})
	if err == nil {
		return resizeInPlace, nil
	}
	proxier.logger.V(2).Info("A set of size 1, added again with size 2, refused its second element", "err", err)
	if err := run(dropSet); err != nil {
		return 0, err
	}
	return resizeByReplacing, nil
}

// sizedAffinitySetName returns the name of the shared affinity set of size elements on a kernel
// that keeps a set's size (resizeByReplacing): clientAffinitySet, a dash and the size.
func sizedAffinitySetName(size uint64) string {
	return clientAffinitySet + "-" + strconv.FormatUint(size, 10)
}

// isClientAffinitySetName reports whether a set of the table is a shared affinity set, under
// either of its names (clientAffinitySet or a sizedAffinitySetName), rather than one of
// upstream's per-endpoint sets (whose names all hold a "/").
func isClientAffinitySetName(name string) bool {
	if name == clientAffinitySet {
		return true
	}
	size, ok := strings.CutPrefix(name, clientAffinitySet+"-")
	if !ok {
		return false
	}
	_, err := strconv.ParseUint(size, 10, 64)
	return err == nil
}

// planClientAffinity sets the shared affinity set's name and size for the sync, whose service
// ports with ClientIP affinity have endpoints endpoints: what a fresh kube-proxy would write,
// except in a partial sync that finds the set under another name (on a kernel that replaces
// sets, or after a failed probe): that sync goes on with the set it finds, whose rules it
// cannot all re-write, and asks for a full sync (affinityReplaceDue). A sync whose probe
// failed asks for one too, which probes again.
func (st *servicePortStage) planClientAffinity(endpoints int) {
	proxier := st.proxier
	st.affinitySize, st.affinitySet = affinitySetSize(endpoints), clientAffinitySet
	if !proxier.sharedAffinity() || endpoints == 0 {
		st.keepKnownAffinitySet(false)
		return
	}
	resizing, probed := proxier.affinityResizing()
	if resizing == resizeByReplacing {
		st.affinitySet = sizedAffinitySetName(st.affinitySize)
	}
	st.affinityReplaceDue = !probed
	st.keepKnownAffinitySet(true)
}

// keepKnownAffinitySet makes a partial sync keep the shared set it knows when the set needs
// another name: the next sync, full, replaces it (due, when the sync has affinity endpoints).
func (st *servicePortStage) keepKnownAffinitySet(due bool) {
	known := st.state.affinitySet
	if st.walkAll || known == "" || known == st.affinitySet {
		return
	}
	st.affinitySet, st.affinitySize = known, st.state.affinitySize
	// Without affinity endpoints there is nothing to resize: the set goes with its last rule.
	st.affinityReplaceDue = st.affinityReplaceDue || due
}
