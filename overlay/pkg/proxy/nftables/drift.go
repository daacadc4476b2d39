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
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"
)

// Drift-only periodic full syncs.
//
// Upstream's periodic full sync re-writes every chain of every Service. Here it re-writes only
// the service ports whose chains changed since kube-proxy wrote them: changed or deleted behind
// kube-proxy's back, or never verified. How:
//
//   - kube-proxy remembers, for every service-port chain (service-, local-, external-,
//     firewall-, endpoint-), a hash of the rules it last wrote there, taken from the
//     transactions that it ran successfully.
//   - A periodic full sync lists the table as text (`nft list table`, a read: no commit lock)
//     and hashes each chain's rules the same way. A service port whose every remembered chain is
//     present with the same hash is left alone; any other is re-written, as a full sync always
//     did. The kernel lists rules in a canonical form; where that differs from what kube-proxy
//     wrote, the hashes differ and the port is re-written: a wasted write, never a missed repair.
//   - Map and set elements are repaired as before: a full sync re-reads every map and set and
//     adds back missing elements. Base chains are re-written on every full sync.
//   - Full syncs at start-up and after a failure, and every full sync with
//     --full-sync-rewrite-all, re-write everything, as upstream does.

// fnv64 constants (FNV-1a).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// hashRule extends the hash h of a chain's rules with rule.
func hashRule(h uint64, rule string) uint64 {
	for i := 0; i < len(rule); i++ {
		h ^= uint64(rule[i])
		h *= fnvPrime64
	}
	h ^= '\n'
	h *= fnvPrime64
	return h
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

// writtenChains is what kube-proxy last wrote to its service-port chains.
type writtenChains struct {
	hashes map[string]uint64          // chain -> hash of its rules
	owned  map[string]map[string]bool // service port -> its chains
}

// chainWrite is what a transaction writes to one service-port chain: the hash of the chain's
// rules after it (a flushed chain's is the empty hash), or unknown when the transaction changes
// the chain in a way that is not hashed.
type chainWrite struct {
	chain   string
	hash    uint64
	unknown bool
}

// ruleText returns the text that knftables writes after the chain name for an added rule: the
// rule, then its comment, quoted. The kernel's listing of the rule is hashed against it.
func ruleText(r *knftables.Rule) string {
	if r.Comment == nil {
		return r.Rule
	}
	return r.Rule + " comment " + strconv.Quote(*r.Comment)
}

// chainWritesOf returns what the operations of rec write to its chains, as recordText would
// find them in the operations' nft text: a created chain (added and flushed) starts empty, and
// each added rule extends its chain's hash. A rule for a chain that rec did not create, or one
// placed by index or handle, leaves that chain unknown. It only reads rec.
func chainWritesOf(rec *servicePortRecorder) []chainWrite {
	var writes []chainWrite
	find := func(chain string) int {
		for i := len(writes) - 1; i >= 0; i-- {
			if writes[i].chain == chain {
				return i
			}
		}
		return -1
	}
	for _, e := range rec.entries {
		switch obj := e.obj.(type) {
		case *knftables.Chain:
			if e.verb != stageFlush {
				continue
			}
			if i := find(obj.Name); i >= 0 {
				writes[i] = chainWrite{chain: obj.Name, hash: fnvOffset64}
			} else {
				writes = append(writes, chainWrite{chain: obj.Name, hash: fnvOffset64})
			}
		case *knftables.Rule:
			i := find(obj.Chain)
			switch {
			case i < 0:
				writes = append(writes, chainWrite{chain: obj.Chain, unknown: true})
			case obj.Index != nil || obj.Handle != nil:
				writes[i].unknown = true
			case !writes[i].unknown:
				writes[i].hash = hashRule(writes[i].hash, ruleText(obj))
			}
		}
	}
	return writes
}

// apply updates w with the writes of one applied transaction.
func (w *writtenChains) apply(writes []chainWrite) {
	if w.hashes == nil {
		w.hashes, w.owned = map[string]uint64{}, map[string]map[string]bool{}
	}
	for _, wr := range writes {
		owner := chainOwner(wr.chain)
		if owner == "" {
			continue
		}
		if wr.unknown {
			delete(w.hashes, wr.chain)
			continue
		}
		w.hashes[wr.chain] = wr.hash
		if w.owned[owner] == nil {
			w.owned[owner] = map[string]bool{}
		}
		w.owned[owner][wr.chain] = true
	}
}

// recordText updates w from nft command text: "add chain" starts an unknown chain empty,
// "flush chain" empties a chain, "add rule" appends to it, "delete chain" forgets it.
func (w *writtenChains) recordText(text string) {
	if w.hashes == nil {
		w.hashes, w.owned = map[string]uint64{}, map[string]map[string]bool{}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		// "<verb> <type> <family> <table> <name>[ <rest>]"
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) < 5 || f[1] != "chain" && f[1] != "rule" {
			continue
		}
		chain := f[4]
		owner := chainOwner(chain)
		if owner == "" {
			continue
		}
		switch {
		case f[1] == "chain" && (f[0] == "add" || f[0] == "flush"):
			if _, ok := w.hashes[chain]; !ok || f[0] == "flush" {
				w.hashes[chain] = fnvOffset64
			}
			if w.owned[owner] == nil {
				w.owned[owner] = map[string]bool{}
			}
			w.owned[owner][chain] = true
		case f[1] == "chain" && (f[0] == "delete" || f[0] == "destroy"):
			delete(w.hashes, chain)
			delete(w.owned[owner], chain)
			if len(w.owned[owner]) == 0 {
				delete(w.owned, owner)
			}
		case f[1] == "rule" && f[0] == "add" && len(f) == 6:
			if h, ok := w.hashes[chain]; ok {
				w.hashes[chain] = hashRule(h, f[5])
			}
		case f[1] == "rule":
			// Any other rule operation (insert, replace, delete by handle) leaves the
			// chain's content unknown, so it will be re-written.
			delete(w.hashes, chain)
		}
	}
}

// kernelListing is what a drift check read from the kernel.
type kernelListing struct {
	// chains are the table's chains, each with the hash of its rules.
	chains map[string]uint64
	// sets are the table's named sets, when the listing shows them (nft's does, the
	// fake's dump is read for chains only): a full sync then needs no other listing.
	sets       []string
	listedSets bool
}

// listKernel lists kube-proxy's table and hashes each chain's rules as recordText does.
// knftables' real ListRules returns no rule text, so this runs `nft -t list table` itself (the
// same nft that knftables finds on PATH; -t leaves out the elements of named sets, which the
// drift check does not use); for knftables' Fake it reads the fake's dump.
func (proxier *Proxier) listKernel(ctx context.Context) (*kernelListing, error) {
	family := "ip"
	if proxier.ipFamily == v1.IPv6Protocol {
		family = "ip6"
	}
	if fake, ok := proxier.nftables.(interface{ Dump() string }); ok {
		var w writtenChains
		w.recordText(fake.Dump())
		return &kernelListing{chains: w.hashes}, nil
	}
	out, err := exec.CommandContext(ctx, "nft", "-t", "list", "table", family, kubeProxyTable).Output()
	if err != nil {
		return nil, fmt.Errorf("listing table %s %s: %w", family, kubeProxyTable, err)
	}
	return parseListing(string(out)), nil
}

// parseListedChains hashes the rules of each chain in `nft list table` output.
func parseListedChains(listing string) map[string]uint64 {
	return parseListing(listing).chains
}

// parseListing reads `nft [-t] list table` output: it hashes the rules of each chain and
// collects the names of the named sets.
func parseListing(listing string) *kernelListing {
	k := &kernelListing{chains: map[string]uint64{}, listedSets: true}
	chain := ""
	for _, line := range strings.Split(listing, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case chain == "" && strings.HasPrefix(trimmed, "chain ") && strings.HasSuffix(trimmed, " {"):
			chain = strings.TrimSuffix(strings.TrimPrefix(trimmed, "chain "), " {")
			chain = strings.Trim(chain, `"`)
			k.chains[chain] = fnvOffset64
		case chain == "" && strings.HasPrefix(trimmed, "set ") && strings.HasSuffix(trimmed, " {"):
			k.sets = append(k.sets, strings.Trim(strings.TrimSuffix(strings.TrimPrefix(trimmed, "set "), " {"), `"`))
		case chain != "" && trimmed == "}":
			chain = ""
		case chain != "" && trimmed != "":
			k.chains[chain] = hashRule(k.chains[chain], trimmed)
		}
	}
	return k
}

// prune forgets the chains that are neither active nor stale after a successful sync (deleted
// since, or never kube-proxy's).
func (w *writtenChains) prune(activeChains sets.Set[string], staleChains map[string]time.Time) {
	for chain := range w.hashes {
		if _, stale := staleChains[chain]; !activeChains.Has(chain) && !stale {
			w.forget(chain)
		}
	}
}

// forget drops what kube-proxy wrote to chain, which no longer exists.
func (w *writtenChains) forget(chain string) {
	owner := chainOwner(chain)
	delete(w.hashes, chain)
	delete(w.owned[owner], chain)
	if len(w.owned[owner]) == 0 {
		delete(w.owned, owner)
	}
}

// startDriftCheck prepares this sync's drift check: for a periodic full sync (not one at
// start-up or after a failure, and not with --full-sync-rewrite-all) it lists the kernel's
// chains; otherwise, or if listing fails, the sync re-writes everything it covers.
func (proxier *Proxier) startDriftCheck(fullSync bool) {
	proxier.driftKernel = nil
	if !fullSync || proxier.needFullSync || proxier.rewriteAllOnFullSync || len(proxier.written.hashes) == 0 {
		return
	}
	kernel, err := proxier.listKernel(context.TODO())
	if err != nil {
		proxier.logger.Error(err, "Cannot check the chains for drift; re-writing all of them")
		return
	}
	proxier.driftKernel = kernel
}

// servicePortIntact reports whether this sync may leave the chains of svcInfo alone: it is a
// drift-checked full sync, and every chain kube-proxy last wrote for the service port is in the
// kernel with the same rules. It also returns how many chains it checked. It only reads the
// proxier, so the stage's workers may call it concurrently.
func (proxier *Proxier) servicePortIntact(svcInfo *servicePortInfo) (intact bool, checked int) {
	if proxier.driftKernel == nil {
		return false, 0
	}
	chains := proxier.written.owned[chainOwner(svcInfo.clusterPolicyChainName)]
	if len(chains) == 0 {
		return false, 0
	}
	for chain := range chains {
		want, known := proxier.written.hashes[chain]
		got, present := proxier.driftKernel.chains[chain]
		if !known || !present || got != want {
			return false, len(chains)
		}
	}
	return true, len(chains)
}
