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
	"iter"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// Rule text: the bottom layer of the overlay (layers.go). kube-proxy writes rules as nft text,
// and the kernel's listing gives them back as text; the drift check and the table reader hash
// both the same way, the kernel link and the chain memory read what a transaction's text
// writes, and the records count the sets a rule names. These functions only compute on
// strings.

// fnv64 constants (FNV-1a).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// fnvString extends the FNV-1a hash h with the bytes of s.
func fnvString[T string | []byte](h uint64, s T) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// hashRule extends the hash h of a chain's rules with rule, in its listed form.
func hashRule(h uint64, rule string) uint64 {
	return fnvString(fnvString(h, listedForm(rule)), "\n")
}

// hashAddedRule is hashRule(h, ruleText(r)), and whether that text holds a brace, without
// building the text: a full sync hashes every rule it generates.
func hashAddedRule(h uint64, r *knftables.Rule) (hash uint64, braces bool) {
	braces = strings.IndexByte(r.Rule, '{') >= 0 || r.Comment != nil && strings.IndexByte(*r.Comment, '{') >= 0
	if braces {
		// listedForm may change the text.
		return hashRule(h, ruleText(r)), true
	}
	h = fnvString(h, r.Rule)
	if r.Comment != nil {
		var buf [128]byte
		h = fnvString(h, " comment ")
		h = fnvString(h, strconv.AppendQuote(buf[:0], *r.Comment))
	}
	return fnvString(h, "\n"), false
}

// listedForm returns rule as nft 1.0 lists it, where kube-proxy's text is known to differ:
// upstream's numgen map rules (kept for service ports above maxSetFreeEndpoints) separate
// elements with " , " where nft lists ", ", and say "dnat ip addr . port to" where nft lists
// "dnat ip to". Rule text already in listed form comes back unchanged. A difference not covered
// here only costs a re-write of that service port at each full sync.
func listedForm(rule string) string {
	if strings.IndexByte(rule, '{') < 0 {
		return rule
	}
	rule = strings.ReplaceAll(rule, " , ", ", ")
	rule = strings.Replace(rule, "dnat ip addr . port to ", "dnat ip to ", 1)
	return strings.Replace(rule, "dnat ip6 addr . port to ", "dnat ip6 to ", 1)
}

// ruleText returns the text that knftables writes after the chain name for an added rule: the
// rule, then its comment, quoted. The kernel's listing of the rule is hashed against it.
func ruleText(r *knftables.Rule) string {
	if r.Comment == nil {
		return r.Rule
	}
	return r.Rule + " comment " + strconv.Quote(*r.Comment)
}

// nftCommands yields each line of nft command text split into at most six fields,
// "<verb> <type> <family> <table> <name>[ <rest>]", the last keeping its spaces.
func nftCommands(text string) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		sc := bufio.NewScanner(strings.NewReader(text))
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			if !yield(strings.SplitN(sc.Text(), " ", 6)) {
				return
			}
		}
	}
}

// setReferences counts the sets that a rule's text names ("@set") and the set and map literals
// ("{ ... }") in it, each of which the kernel keeps as an anonymous set. Braces after a set's
// name ("update @set { ip saddr }") are a key expression, not a literal; and nft turns a set
// literal of one element ("ip saddr != { 10.0.0.0/8 }") into a plain comparison, so only a
// map literal ("map { ... }", "vmap { ... }") or a literal with a comma in it is a set.
func setReferences(rule string) (named, literals int) {
	if !strings.ContainsAny(rule, "@{") {
		return 0, 0 // most rules: not worth splitting
	}
	fields := strings.Fields(rule)
	for i, f := range fields {
		switch {
		case strings.HasPrefix(f, "@"):
			named++
		case strings.HasPrefix(f, "{") && (i == 0 || !strings.HasPrefix(fields[i-1], "@")):
			if i > 0 && (fields[i-1] == "map" || fields[i-1] == "vmap") || literalHasComma(fields[i:]) {
				literals++
			}
		}
	}
	return named, literals
}

// literalHasComma reports whether the literal that fields start with ("{" ... "}") has more
// than one element.
func literalHasComma(fields []string) bool {
	for _, f := range fields {
		if before, _, closed := strings.Cut(f, "}"); closed {
			return strings.Contains(before, ",")
		}
		if strings.Contains(f, ",") {
			return true
		}
	}
	return false
}
