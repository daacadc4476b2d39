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
	"strings"
)

// Full syncs that write only what differs.
//
// Upstream's full sync re-writes every chain of every Service. Here a full sync re-writes only
// the service ports whose chains in the kernel differ from what the sync generates for them:
// changed or deleted behind kube-proxy's back, written by another version, or never written.
// How:
//
//   - The full sync reads each chain's rules from the kernel, hashed as text: over netlink, with
//     the chain baselines of chain_baselines.go, or, when they do not cover every chain (at
//     start-up, or after someone else's commit raced kube-proxy's writes), as nft lists the table
//     (`nft -t list table`). Both are reads: no commit lock.
//   - Each service port's chains, as the sync generates them, are hashed the same way, from
//     the rule objects (chainWritesOf), on the stage's workers. A service port whose every
//     chain is in the kernel with the same hash is left alone: its chain operations are
//     dropped. Any other is re-written, as a full sync always did. The kernel lists rules in a
//     canonical form; where that differs from what kube-proxy writes, the hashes differ and the
//     port is re-written: a wasted write, never a missed repair.
//   - Map and set elements are repaired as before: a full sync re-reads every map and set and
//     adds back missing elements; chains and sets that no service port uses are found in the
//     same listing and removed. Base chains are re-written on every full sync.
//   - Since the comparison is with what the sync generates, not with anything remembered, it
//     also holds for the full sync at start-up (a restart over the rules already in place
//     re-writes nothing) and after a failure. With --full-sync-rewrite-all, or when listing
//     fails, every full sync re-writes everything, as upstream does.

// nftFamily returns the proxier's table family as nft writes it (nftFamilyOf).
func (proxier *Proxier) nftFamily() string {
	return nftFamilyOf(proxier.ipFamily)
}

// chainOwner returns the service port ("ns/svc/proto/port") that a service-port chain belongs
// to, or "" for kube-proxy's other chains. Service-port chain names are
// "<prefix>-<hash>-<ns>/<svc>/<proto>/<port>", with "__<endpoint>" after it for endpoint chains.
func chainOwner(chain string) string {
	if !isServiceChainName(chain) {
		return ""
	}
	_, rest, _ := strings.Cut(chain, "-")
	_, rest, _ = strings.Cut(rest, "-")
	owner, _, _ := strings.Cut(rest, "__")
	return owner
}

// chainWrite is what a service port's operations write to one of its chains: the hash of the
// chain's rules after them, or unknown when they change the chain in a way that is not hashed.
type chainWrite struct {
	chain   string
	hash    uint64
	unknown bool
	// rules counts the chain's rules after the operations; braces is set when one of them has
	// a "{" (only such a rule can hold a set or map literal, which the kernel makes an
	// anonymous set).
	rules  int
	braces bool
}

// differsFrom reports whether the kernel's chain, of the given shape, certainly holds other
// rules than w writes: another number of rules, or anonymous sets where w writes none. It
// never reports a difference that a text listing could show to be none. w is not unknown.
func (w chainWrite) differsFrom(shape chainShape) bool {
	return shape.rules != w.rules || shape.anonRefs > 0 && !w.braces
}

// listingResult is the outcome of a listing that ran on its own goroutine.
type listingResult struct {
	kernel *kernelListing
	err    error
}

// prefetchDriftListing starts, at the start of a full sync that will check for drift, the
// listing of the table on a goroutine of its own, so that nft lists the table (seconds on a
// large one) while setupNFTables reads kube-proxy's maps and sets; the sync hands what it
// returns to startDriftCheck, which collects the listing. Both only read the kernel, and the
// sync writes nothing before startDriftCheck. It returns nil, and starts nothing, when the sync
// will not check for drift or the proxier has no driftReader (startDriftCheck then reads
// through knftables itself, apiReader).
func (proxier *Proxier) prefetchDriftListing(fullSync bool) <-chan listingResult {
	reader := proxier.driftReader
	if !fullSync || proxier.rewriteAllOnFullSync || reader == nil {
		return nil
	}
	pending := make(chan listingResult, 1)
	go func() {
		kernel, err := reader.readTable(context.TODO())
		pending <- listingResult{kernel, err}
	}()
	return pending
}

// keepElements reports, in a full sync about to read every map and set of the table back from
// the kernel (upstream's readOrReset, in setupNFTables), whether it may keep the elements that
// the proxier last wrote instead, as a partial sync does: the sync is periodic (nothing forced
// it, and the last sync did not fail, so every element the proxier recorded was committed), its
// drift check reads the table, and the kernel link shows that no one else has committed since
// the last such read (nftLink.elementsUnchanged). The storages are then left as a read would
// leave them: every element a leftover until the sync ensures it, so that the full sync still
// deletes the elements that no service port has any more. Otherwise the caller reads them, and
// the link notes when. At 36,000 service ports the read of service-ips alone takes over a
// second of nft's time (bench/RESULTS.md).
func (proxier *Proxier) keepElements() bool {
	link := proxier.kernelLink
	if link == nil {
		return false
	}
	table := linkTableName(proxier.ipFamily)
	forced := proxier.needFullSync || proxier.recovery.failures > 0 || proxier.recovery.rewriteAll
	if !forced && !proxier.rewriteAllOnFullSync && link.elementsUnchanged(table) {
		for _, s := range proxier.elementStorages() {
			s.flushed = false
			s.resetLeftoverKeys()
		}
		proxier.logger.V(4).Info("Nothing but kube-proxy's own commits since the maps and sets were read; keeping their elements")
		return true
	}
	link.noteElementRead(table)
	return false
}

// tableReader returns the proxier's driftReader or, without one, an apiReader of its nftables.
func (proxier *Proxier) tableReader() tableReader {
	if proxier.driftReader != nil {
		return proxier.driftReader
	}
	return apiReader{nft: proxier.nftables}
}

// startDriftCheck returns this sync's drift check: what a full sync, unless
// --full-sync-rewrite-all is set or the sync must re-write everything (recovery.go), read of
// the kernel's chains, or the listing that prefetchDriftListing started (prefetched; nil:
// none). It returns nil, and the sync writes everything it covers, otherwise, or if listing
// fails. The listing belongs to the sync: it is dropped when the sync ends.
func (proxier *Proxier) startDriftCheck(prefetched <-chan listingResult, fullSync bool) *kernelListing {
	if !fullSync || proxier.rewriteAllOnFullSync || proxier.recovery.rewriteAll {
		if prefetched != nil {
			<-prefetched // let the prefetch's goroutine end
		}
		return nil
	}
	var kernel *kernelListing
	var err error
	if prefetched != nil {
		r := <-prefetched
		kernel, err = r.kernel, r.err
	} else {
		kernel, err = proxier.tableReader().readTable(context.TODO())
	}
	if err != nil {
		proxier.logger.Error(err, "Cannot check the chains for drift; re-writing all of them")
		return nil
	}
	return kernel
}

// intact reports whether the kernel, as k (nil: not read) lists it, holds every chain of writes
// with the same rules, so that the sync can leave them alone. The stage's workers call it
// concurrently.
//
// A chain whose text the netlink dump left unknown (kernelListing.unknown) does not need it
// when its shape already shows that it differs. Only when every chain of writes is intact or
// unknown, with no shape that differs, does the check list the table as text (once per sync,
// through kernelListing.text) and compare the unknown chains with that listing.
func (k *kernelListing) intact(writes []chainWrite) bool {
	if k == nil || len(writes) == 0 {
		return false
	}
	undecided := false
	for _, w := range writes {
		if w.unknown || k.drifted[w.chain] {
			return false
		}
		if shape, unknown := k.unknown[w.chain]; unknown {
			if w.differsFrom(shape) {
				return false
			}
			undecided = true
			continue
		}
		if got, present := k.chains[w.chain]; !present || got != w.hash {
			return false
		}
	}
	if !undecided {
		return true
	}
	var text *kernelListing
	if k.text != nil {
		text = k.text()
	}
	if text == nil {
		return false
	}
	for _, w := range writes {
		if _, unknown := k.unknown[w.chain]; !unknown {
			continue
		}
		if got, present := text.chains[w.chain]; !present || got != w.hash {
			return false
		}
	}
	return true
}
