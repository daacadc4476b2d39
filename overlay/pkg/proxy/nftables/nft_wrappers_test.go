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
	"fmt"
	"regexp"
	"strconv"

	"sigs.k8s.io/knftables"
)

// Wrappers of knftables.Interface that the tests share: each runs transactions through another
// Interface (knftables' Fake or a real kernel's) and records, refuses or adjusts them.

// txText wraps any knftables.Interface and keeps the text of every transaction it runs.
type txText struct {
	knftables.Interface
	texts []string
}

func (r *txText) Run(ctx context.Context, tx *knftables.Transaction) error {
	r.texts = append(r.texts, tx.String())
	return r.Interface.Run(ctx, tx)
}

var serviceChainOpRegexp = regexp.MustCompile(`(?m)^(add|flush|delete) (chain|rule) ip6? kube-proxy (\S+/\S+)`)

// writtenServiceChains returns the service-port chains that the transactions since index from
// touched.
func (r *txText) writtenServiceChains(from int) map[string]bool {
	chains := map[string]bool{}
	for _, text := range r.texts[from:] {
		for _, m := range serviceChainOpRegexp.FindAllStringSubmatch(text, -1) {
			chains[m[3]] = true
		}
	}
	return chains
}

// recordingNFT wraps the fake to record each transaction's size, count listings, and fail the
// failAt-th Run (counting from 1; 0 never fails).
type recordingNFT struct {
	*knftables.Fake
	sizes    []int
	texts    []string
	runs     int
	failAt   int
	listAlls int
}

func (r *recordingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	r.runs++
	if r.runs == r.failAt {
		return fmt.Errorf("injected failure of run %d", r.runs)
	}
	r.sizes = append(r.sizes, tx.NumOperations())
	r.texts = append(r.texts, tx.String())
	return r.Fake.Run(ctx, tx)
}

func (r *recordingNFT) ListAll(ctx context.Context) (map[string][]string, error) {
	r.listAlls++
	return r.Fake.ListAll(ctx)
}

// resizingFake is knftables' fake with one behaviour of the kernel that the fake lacks: adding a
// set that exists, with another size, resizes it. Only the shared affinity set is resized so.
type resizingFake struct{ *knftables.Fake }

// affinitySizeOp finds the shared affinity set's size in an "add set" line of a transaction.
var affinitySizeOp = regexp.MustCompile(`(?m)^add set \S+ \S+ ` + clientAffinitySet + ` \{.* size ([0-9]+) ;`)

// Run runs tx on the fake and then applies the shared set's last size in tx, if any.
func (f resizingFake) Run(ctx context.Context, tx *knftables.Transaction) error {
	if err := f.Fake.Run(ctx, tx); err != nil {
		return err
	}
	m := affinitySizeOp.FindAllStringSubmatch(tx.String(), -1)
	if set := f.Table.Sets[clientAffinitySet]; set != nil && len(m) > 0 {
		size, _ := strconv.ParseUint(m[len(m)-1][1], 10, 64)
		set.Size = &size
	}
	return nil
}

// checkedNFT runs transactions through the real kernel. refuse, when set, is asked first about
// each transaction (numbered from 1) and refuses it, as the kernel would, by returning an error.
// after, when set, runs after each transaction that committed. A ListElements of the map or set
// failListing fails.
type checkedNFT struct {
	knftables.Interface
	runs        int
	refuse      func(n int, tx *knftables.Transaction) error
	after       func()
	failListing string
	// trace, when set, is shown each transaction before it runs, with its number.
	trace func(n int, tx *knftables.Transaction)
	// lastErr is the error of the last transaction that the kernel refused.
	lastErr error
}

func (c *checkedNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	c.runs++
	if c.trace != nil {
		c.trace(c.runs, tx)
	}
	if c.refuse != nil {
		if err := c.refuse(c.runs, tx); err != nil {
			return err
		}
	}
	if err := c.Interface.Run(ctx, tx); err != nil {
		c.lastErr = err
		return err
	}
	if c.after != nil {
		c.after()
	}
	return nil
}

func (c *checkedNFT) ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error) {
	if name != "" && name == c.failListing {
		return nil, fmt.Errorf("injected failure listing %s %s", objectType, name)
	}
	return c.Interface.ListElements(ctx, objectType, name)
}

// keptSizeFake is knftables' fake with the behaviour of kernels such as 6.1: adding a set that
// exists with another size keeps the old size (as the fake does), and a transaction that would
// put more elements into a set than its size fails, as the kernel's does when the set is full.
// It counts the elements that a transaction adds on top of those the set holds, ignoring
// deletions (enough for sets far from full, and for the resize probe's). After each commit it
// notes every rule that names a set or map that the table does not hold, in dangling.
type keptSizeFake struct {
	*knftables.Fake
	runs     int
	dangling []string
}

var elementAddOp = regexp.MustCompile(`(?m)^add element (\S+) (\S+) (\S+) \{`)

// setReference finds the sets and maps that a rule names.
var setReference = regexp.MustCompile(`@([^\s{}]+)`)

func (f *keptSizeFake) Run(ctx context.Context, tx *knftables.Transaction) error {
	f.runs++
	adds := map[[3]string]int{}
	for _, m := range elementAddOp.FindAllStringSubmatch(tx.String(), -1) {
		adds[[3]string{m[1], m[2], m[3]}]++
	}
	f.RLock()
	for k, n := range adds {
		set := f.Tables[knftables.Family(k[0])][k[1]].Sets[k[2]]
		if set != nil && set.Size != nil && uint64(len(set.Elements)+n) > *set.Size {
			f.RUnlock()
			return fmt.Errorf("could not process rule: set %s is full (size %d)", k[2], *set.Size)
		}
	}
	f.RUnlock()
	if err := f.Fake.Run(ctx, tx); err != nil {
		return err
	}
	f.RLock()
	defer f.RUnlock()
	for _, tables := range f.Tables {
		for _, table := range tables {
			for _, chain := range table.Chains {
				for _, rule := range chain.Rules {
					for _, m := range setReference.FindAllStringSubmatch(rule.Rule, -1) {
						if table.Sets[m[1]] == nil && table.Maps[m[1]] == nil {
							f.dangling = append(f.dangling, fmt.Sprintf("run %d: chain %s: %s", f.runs, chain.Name, rule.Rule))
						}
					}
				}
			}
		}
	}
	return nil
}
