package main

import (
	"bytes"
	"strings"
	"testing"
)

func genRules(t *testing.T, v string, s RuleSpec, reload bool) string {
	t.Helper()
	var b bytes.Buffer
	if err := GenerateRuleset(&b, v, s, reload); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func count(s, sub string) int { return strings.Count(s, sub) }

func TestGenerateRulesetCounts(t *testing.T) {
	spec := ProbeSpec(FamIPv4, 12) // 2 services x 6 ports, 2 endpoints each
	for _, tc := range []struct {
		v                      string
		numgenMaps, dnatRules  int
		sets, chainsPerService int
	}{
		{V0, 12, 12, 0, 1},
		{V4, 0, 24, 0, 1},
		{A0, 0, 24, 24, 3},
	} {
		out := genRules(t, tc.v, spec, false)
		if got := count(out, "numgen random mod 2 map {"); got != tc.numgenMaps {
			t.Errorf("%s: %d anonymous numgen maps, want %d", tc.v, got, tc.numgenMaps)
		}
		if got := count(out, " dnat ip "); got != tc.dnatRules {
			t.Errorf("%s: %d dnat rules, want %d", tc.v, got, tc.dnatRules)
		}
		if got := count(out, "add set ip kube-proxy affinity-"); got != tc.sets {
			t.Errorf("%s: %d affinity sets, want %d", tc.v, got, tc.sets)
		}
		if got := count(out, "add chain ip kube-proxy service-") + count(out, "add chain ip kube-proxy endpoint-"); got != 12*tc.chainsPerService {
			t.Errorf("%s: %d service/endpoint chains, want %d", tc.v, got, 12*tc.chainsPerService)
		}
		if got := count(out, "add element ip kube-proxy service-ips {"); got != 12 {
			t.Errorf("%s: %d service-ips elements, want 12", tc.v, got)
		}
		if strings.Contains(out, "flush table") {
			t.Errorf("%s: cold load flushes the table", tc.v)
		}
		if !strings.HasPrefix(genRules(t, tc.v, spec, true), "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\nflush table ip kube-proxy\n") {
			t.Errorf("%s: reload does not start with add+flush table", tc.v)
		}
	}
}

func TestGenerateRulesetV4Probabilities(t *testing.T) {
	spec := ProbeSpec(FamIPv4, 1)
	spec.Endpoints = 4
	out := genRules(t, V4, spec, false)
	for _, want := range []string{
		"numgen random mod 4 0 meta l4proto tcp dnat ip to 10.1.0.1:8080",
		"numgen random mod 3 0 meta l4proto tcp dnat ip to 10.1.0.2:8080",
		"numgen random mod 2 0 meta l4proto tcp dnat ip to 10.1.0.3:8080",
		" meta l4proto tcp dnat ip to 10.1.0.4:8080\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("v4 ruleset lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "mod 1 ") {
		t.Error("v4: the last endpoint needs no numgen match")
	}
	if count(out, "add rule ip kube-proxy service-") != 5 { // masquerade + 4 endpoints
		t.Errorf("v4: %d service rules, want 5", count(out, "add rule ip kube-proxy service-"))
	}
}

func TestGenerateRulesetIPv6(t *testing.T) {
	out := genRules(t, V4, ProbeSpec(FamIPv6, 6), false)
	for _, want := range []string{
		"add table ip6 kube-proxy",
		"type ipv6_addr . inet_proto . inet_service : verdict",
		"ip6 daddr fd00:30::1 tcp dport 80 ip6 saddr != fd00:10::/64 jump mark-for-masquerade",
		"dnat ip6 to [fd00:10::0:1]:8080",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ipv6 ruleset lacks %q", want)
		}
	}
	if strings.Contains(out, " ip daddr") || strings.Contains(out, "table ip kube-proxy") {
		t.Error("ipv6 ruleset mentions ipv4")
	}
}

func TestGenerateRulesetAffinity(t *testing.T) {
	a0 := genRules(t, A0, ProbeSpec(FamIPv4, 6), false)
	if !strings.Contains(a0, "flags dynamic,timeout ; timeout 10800s") || count(a0, "update @affinity-") != 12 {
		t.Error("a0: per-endpoint dynamic sets with updates missing")
	}
}

func TestGenerateRulesetErrors(t *testing.T) {
	var b bytes.Buffer
	if err := GenerateRuleset(&b, "v9", ProbeSpec(FamIPv4, 6), false); err == nil {
		t.Error("unknown variant: no error")
	}
	if err := GenerateRuleset(&b, V0, RuleSpec{Family: FamIPv4}, false); err == nil {
		t.Error("empty spec: no error")
	}
}

func TestPartialServices(t *testing.T) {
	// 8 ports: one full service and one with 2 ports.
	out := genRules(t, V0, ProbeSpec(FamIPv4, 8), false)
	if got := count(out, "add element ip kube-proxy service-ips {"); got != 8 {
		t.Errorf("%d service ports, want 8", got)
	}
}

func TestPacketRuleset(t *testing.T) {
	eps := []string{"10.99.1.1", "10.99.1.2", "10.99.1.3"}
	v4, err := PacketRuleset(V4, FamIPv4, "172.30.0.1", 80, eps, 9000)
	if err != nil {
		t.Fatal(err)
	}
	if count(v4, "dnat ip to 10.99.1.") != 3 || !strings.Contains(v4, "numgen random mod 3 0 meta l4proto { tcp, udp } dnat ip to 10.99.1.1:9000") {
		t.Errorf("v4 packet ruleset:\n%s", v4)
	}
	v0, _ := PacketRuleset(V0, FamIPv4, "172.30.0.1", 80, eps, 9000)
	if !strings.Contains(v0, "numgen random mod 3 map { 0 : 10.99.1.1 . 9000 , 1 : 10.99.1.2 . 9000 , 2 : 10.99.1.3 . 9000 }") {
		t.Errorf("v0 packet ruleset:\n%s", v0)
	}
	none, _ := PacketRuleset("none", FamIPv4, "172.30.0.1", 80, eps, 9000)
	if strings.Contains(none, "dnat") {
		t.Error("none: no dnat expected")
	}
	if _, err := PacketRuleset(A0, FamIPv4, "172.30.0.1", 80, eps, 9000); err == nil {
		t.Error("a0 packet ruleset: no error")
	}
}

func TestAddrs(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{ClusterIP(FamIPv4, 0), "172.30.0.1"},
		{ClusterIP(FamIPv4, 5999), "172.30.23.112"},
		{ClusterIP(FamIPv6, 255), "fd00:30::100"},
		{EndpointIP(FamIPv4, 0), "10.1.0.1"},
		{EndpointIP(FamIPv4, 65535), "10.2.0.0"},
		{EndpointIP(FamIPv4, 299999), "10.5.147.224"},
		{EndpointIP(FamIPv6, 65536), "fd00:10::1:1"},
		{hostPort("fd00::1", 80), "[fd00::1]:80"},
		{hostPort("10.0.0.1", 80), "10.0.0.1:80"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	seen := map[string]bool{}
	for i := 0; i < 6000; i++ {
		ip := ClusterIP(FamIPv4, i)
		if seen[ip] {
			t.Fatalf("cluster IP %s repeats", ip)
		}
		seen[ip] = true
	}
	if len(shortHash("x")) != 8 || shortHash("a") == shortHash("b") {
		t.Error("shortHash")
	}
}

func TestEvalRuleset(t *testing.T) {
	v4, err := EvalRuleset(V4, 3, "10.98.0.2", 9999)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"add chain ip bkeval out { type filter hook output priority 0 ; }\n",
		"add rule ip bkeval out ip daddr 10.98.0.2 udp dport 9999 jump svc\n",
		"add rule ip bkeval svc numgen random mod 3 0 accept\n",
		"add rule ip bkeval svc numgen random mod 2 0 accept\n",
		"add rule ip bkeval svc accept\n",
	} {
		if !strings.Contains(v4, want) {
			t.Errorf("v4 eval ruleset lacks %q:\n%s", want, v4)
		}
	}
	v0, _ := EvalRuleset(V0, 2, "10.98.0.2", 9999)
	if !strings.Contains(v0, "numgen random mod 2 vmap { 0 : accept , 1 : accept }") {
		t.Errorf("v0 eval ruleset:\n%s", v0)
	}
	if _, err := EvalRuleset(A0, 2, "10.98.0.2", 9999); err == nil {
		t.Error("a0: no error")
	}
}
