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
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"sigs.k8s.io/knftables"
)

// Reading kube-proxy's table for a drift check.
//
// A drift check needs each chain's rules, hashed as text (drift.go). A tableReader gets them.
// NewProxier gives every proxier a kernelReader: the netlink dump and chain baselines when the
// proxier has a kernel link, `nft -t list table` otherwise. A proxier without a reader (the
// zero value) reads through knftables' own listing calls (apiReader).

// tableReader reads kube-proxy's table for a full sync's drift check.
type tableReader interface {
	// readTable lists the table's chains, each with the hash of its rules (see kernelListing).
	// A table that does not exist lists as empty. It only reads, so it may run while the sync
	// reads the table's maps and sets.
	readTable(ctx context.Context) (*kernelListing, error)
}

// apiReader reads the table through knftables' listing calls (List and ListRules). Its hashes
// are exact where ListRules returns each rule's text, as knftables' Fake does. Where it returns
// none (knftables' real implementation), every chain with rules differs from what the sync
// writes and is re-written, as upstream's full sync does.
type apiReader struct {
	nft knftables.Interface
}

// readTable implements tableReader.
func (r apiReader) readTable(ctx context.Context) (*kernelListing, error) {
	k := &kernelListing{chains: map[string]uint64{}}
	chains, err := r.nft.List(ctx, "chain")
	if knftables.IsNotFound(err) {
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	for _, chain := range chains {
		k.chains[chain] = fnvOffset64
	}
	rules, err := r.nft.ListRules(ctx, "")
	if err != nil && !knftables.IsNotFound(err) {
		return nil, err
	}
	for _, rule := range rules {
		if h, ok := k.chains[rule.Chain]; ok {
			k.chains[rule.Chain] = hashRule(h, ruleText(rule))
		}
	}
	return k, nil
}

// kernelReader reads the table from the kernel: over netlink through link, or, without a link
// or when the dump fails, as text with the nft on PATH.
type kernelReader struct {
	family v1.IPFamily
	link   *nftLink
	logger klog.Logger
}

// newKernelReader returns the reader of the table of family, over link (nil: text only).
func newKernelReader(family v1.IPFamily, link *nftLink, logger klog.Logger) *kernelReader {
	return &kernelReader{family: family, link: link, logger: logger}
}

// readTable implements tableReader. Without a kernel link it lists the table as text
// (readText). With one, when no one else has committed since the link last read the whole table
// and every commit since was kube-proxy's own, it returns the remembered table (nftLink.quiet)
// with no dump. Otherwise it reads the table over netlink and resolves the chains' text hashes
// from their baselines (chain_baselines.go). Chains left unknown are returned with their
// shapes, and with a text listing that runs only if intact needs it: it records baselines
// for every chain. A chain that certainly differs from what the sync writes needs no text (an
// upgrade from another rule shape re-writes every service port without listing the table as
// text).
func (r *kernelReader) readTable(ctx context.Context) (*kernelListing, error) {
	link := r.link
	if link == nil {
		return r.readText(ctx)
	}
	table := linkTableName(r.family)
	start := time.Now()
	if k := link.quiet(table); k != nil {
		r.observe("generation", start)
		r.logger.V(4).Info("Nothing has committed since kube-proxy's own writes; the table is as remembered", "chains", len(k.chains))
		return k, nil
	}
	snap, err := link.snapshot(nfprotoOf(r.family), kubeProxyTable)
	r.observe("netlink", start)
	if err != nil {
		r.logger.V(2).Info("Cannot read the table over netlink; listing it as text", "err", err)
		metrics.NFTablesSyncFallbacksTotal.WithLabelValues(string(r.family), driftDumpFailed).Inc()
		return r.readText(ctx)
	}
	k := link.resolve(table, snap)
	r.logger.V(4).Info("Read the table over netlink", "chains", len(snap.chains), "drifted", len(k.drifted), "unknown", len(k.unknown), "elapsed", time.Since(start))
	if len(k.unknown) > 0 {
		k.text = sync.OnceValue(func() *kernelListing {
			textStart := time.Now()
			text, err := r.readText(ctx)
			if err != nil {
				link.rebaseline(table, snap, nil, 0, false)
				r.logger.Error(err, "Cannot list the table as text; re-writing the service ports whose chains are unknown")
				return nil
			}
			gen, genErr := link.generation()
			link.rebaseline(table, snap, text, gen, genErr == nil)
			r.logger.V(2).Info("Listed the table as text to record chain baselines", "chains", len(snap.chains), "unknown", len(k.unknown), "elapsed", time.Since(textStart))
			return text
		})
	}
	return k, nil
}

// driftDumpFailed is the reason, in kubeproxy_sync_proxy_rules_nftables_fallbacks_total, of a
// drift check that could not read the table over netlink and listed it as text.
const driftDumpFailed = "drift_dump_failed"

// observe records how long a drift check's read from source took, since start.
func (r *kernelReader) observe(source string, start time.Time) {
	took := time.Since(start).Seconds()
	metrics.SyncFullProxyRulesDriftReadSeconds.WithLabelValues(string(r.family), source).Observe(took)
	metrics.OldSyncFullProxyRulesDriftReadSeconds.WithLabelValues(string(r.family), source).Observe(took)
}

// readText lists the table with `nft -t list table` and hashes each chain's rules. knftables'
// real ListRules returns no rule text, so this runs nft itself (the same nft that knftables
// finds on PATH; -t leaves out the elements of named sets, which the check does not use). A
// table that does not exist lists as empty.
func (r *kernelReader) readText(ctx context.Context) (*kernelListing, error) {
	family := nftFamilyOf(r.family)
	start := time.Now()
	out, err := exec.CommandContext(ctx, "nft", "-t", "list", "table", family, kubeProxyTable).Output()
	r.observe("text", start)
	var exit *exec.ExitError
	if errors.As(err, &exit) && strings.Contains(string(exit.Stderr), "No such file or directory") {
		return &kernelListing{chains: map[string]uint64{}, listedSets: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing table %s %s: %w", family, kubeProxyTable, err)
	}
	return parseListing(string(out)), nil
}

// parseListing reads `nft [-t] list table` output: it hashes the rules of each chain and
// collects the names of the named sets. The names it keeps are copies: a part of listing would
// keep all of it alive for as long as the listing, or a chain memory's held table copied from
// it, is kept.
func parseListing(listing string) *kernelListing {
	k := &kernelListing{chains: map[string]uint64{}, listedSets: true}
	chain := ""
	for _, line := range strings.Split(listing, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case chain == "" && strings.HasPrefix(trimmed, "chain ") && strings.HasSuffix(trimmed, " {"):
			chain = strings.TrimSuffix(strings.TrimPrefix(trimmed, "chain "), " {")
			chain = strings.Clone(strings.Trim(chain, `"`))
			k.chains[chain] = fnvOffset64
		case chain == "" && strings.HasPrefix(trimmed, "set ") && strings.HasSuffix(trimmed, " {"):
			k.sets = append(k.sets, strings.Clone(strings.Trim(strings.TrimSuffix(strings.TrimPrefix(trimmed, "set "), " {"), `"`)))
		case chain != "" && trimmed == "}":
			chain = ""
		case chain != "" && trimmed != "":
			k.chains[chain] = hashRule(k.chains[chain], trimmed)
		}
	}
	return k
}
