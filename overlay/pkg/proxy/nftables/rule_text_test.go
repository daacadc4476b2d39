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
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// TestHashAddedRuleMatchesText checks that hashing a generated rule in pieces gives the hash of
// its text, as the kernel's listing of it is hashed, for rules with and without comments, with
// characters that nft quotes, and with braces (which take the listed-form path).
func TestHashAddedRuleMatchesText(t *testing.T) {
	for _, r := range []*knftables.Rule{
		{Chain: "c", Rule: "meta l4proto tcp dnat to 10.0.0.1:80"},
		{Chain: "c", Rule: "ip daddr 10.0.0.1 drop", Comment: ptr.To("ns/svc:p")},
		{Chain: "c", Rule: "counter", Comment: ptr.To(`say "hi"\ there`)},
		{Chain: "c", Rule: "counter", Comment: ptr.To("")},
		{Chain: "c", Rule: "numgen random mod 2 vmap { 0 : goto a , 1 : goto b }"},
		{Chain: "c", Rule: "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }", Comment: ptr.To("x")},
		{Chain: "c", Rule: "counter", Comment: ptr.To("a { , } b")},
	} {
		text := ruleText(r)
		want := hashRule(fnvOffset64, text)
		got, braces := hashAddedRule(fnvOffset64, r)
		if got != want {
			t.Errorf("hashAddedRule(%q) = %x, want the hash of %q, %x", r.Rule, got, text, want)
		}
		if wantBraces := strings.Contains(text, "{"); braces != wantBraces {
			t.Errorf("hashAddedRule(%q) braces = %v, want %v", text, braces, wantBraces)
		}
	}
}
