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

// The other family's commits during a read of a table.
//
// The ruleset generation counts the commits to every table of the network namespace. The two
// proxiers of a dual-stack kube-proxy share one link (processNFTLink), so each one's commits
// move the generation that the other's drift check watches. On a large table the netlink dump
// takes long enough (over a minute on a loaded node at 36,000 IPv6 service ports,
// bench/RESULTS.md) that the other family's commits land in nearly every dump, which the kernel
// then marks as interrupted (NLM_F_DUMP_INTR); a retry takes as long and is interrupted again,
// and the check fell back to the text listing.
//
// The link knows which generations were its own commits. runTracked holds the link's lock
// from before it reads the generation until it has noted the transaction, and when the
// generation moved by exactly one around a transaction that certainly commits, that generation
// was the transaction's commit. knftables writes a transaction to one table, of its own family,
// and that is the table runTracked names. A read of the table of family F that saw the
// generation go from a to b keeps what it read when every generation in (a, b] is a commit of
// the link's own to a table of another family:
//
//   - nothing else committed during the read, and only a commit changes a table, so the table
//     of family F held at every generation from a to b what it held at a;
//   - each dump of the read names family F, and the kernel walks only the tables of that family
//     and resumes each piece of the answer at an index counted over their objects: a commit to
//     a table of another family neither changes what the dump returns nor shifts where the
//     next piece starts. The flag the kernel sets on those pieces says only that the
//     generation moved.
//
// A commit to another table of the same family would shift the chain dump, which the kernel
// does not filter by table, so such a commit is not accepted even when it is the link's own
// (kube-proxy writes one table per family, so it never needs that). Any generation the link
// cannot account for leaves the read as changed: someone else's commit, a transaction whose
// generations could not be read or around which the generation moved by more than one, one
// that may have committed nothing, or more commits than the log holds. The read is then retried,
// and after that the check lists the table as text, as before.

// ownCommitSlots is how many of the latest generations the log can name, a power of two.
const ownCommitSlots = 1024

// ownCommit is one generation that a tracked transaction of the link committed.
type ownCommit struct {
	gen uint32
	// family is the netlink family of the table that the transaction wrote; 0 is none.
	family uint8
}

// ownCommitLog names the tables of the link's own latest commits, each in slot gen modulo
// ownCommitSlots. The link's lock guards it.
type ownCommitLog [ownCommitSlots]ownCommit

// note records that generation gen was the commit of a tracked transaction that wrote a table
// of netlink family family.
func (g *ownCommitLog) note(gen uint32, family uint8) {
	g[gen%ownCommitSlots] = ownCommit{gen: gen, family: family}
}

// onlyOtherFamilies reports whether every generation after from, up to and including to, was
// a commit of the link's own to a table whose netlink family is not family: then the tables of
// family are at to as they were at from. It is true when to is from, and false when to is not
// after from or is too far after it for the log to tell.
func (g *ownCommitLog) onlyOtherFamilies(family uint8, from, to uint32) bool {
	if n := to - from; n > ownCommitSlots {
		return false
	}
	for gen := from + 1; gen != to+1; gen++ {
		c := g[gen%ownCommitSlots]
		if c.gen != gen || c.family == 0 || c.family == family {
			return false
		}
	}
	return true
}
