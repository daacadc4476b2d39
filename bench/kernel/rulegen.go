package main

// Generated rulesets for the rule-shape probe: the same synthetic services written in
// different rule shapes, as one `nft -f` transaction each (knftables' command style). Pure.

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Variants of the rule shape.
const (
	// V0 is upstream's shape: per service port a chain whose last rule is
	// "dnat ... to numgen random mod K map { ... }" (one anonymous set per rule).
	V0 = "v0"
	// V4 is one rule per endpoint, "numgen random mod (K-i) 0 dnat to IP:PORT" for endpoint
	// i < K-1 and a plain dnat for the last: endpoint i is taken with probability 1/K overall.
	V4 = "v4"
	// A0 is upstream's affinity shape: per endpoint a chain and a named dynamic set of
	// client addresses; the service chain tries each set, then a numgen vmap.
	A0 = "a0"
)

// Variants lists the variants in report order. Two losing variants were removed once measured
// (a map shared by all services, and a shared affinity map keyed by client and service); their
// figures are in bench/RESULTS.md, "Rule-shape probe".
var Variants = []string{V0, V4, A0}

// IsAffinityVariant reports whether v is written for session-affinity services.
func IsAffinityVariant(v string) bool { return v == A0 }

// RuleSpec is the synthetic cluster of a generated ruleset.
type RuleSpec struct {
	Family          string // FamIPv4 or FamIPv6
	ServicePorts    int    // total service ports; services = ServicePorts / PortsPerService
	PortsPerService int
	Endpoints       int // per service
	AffinitySeconds int // client-IP affinity timeout for A0
	Table           string
}

// Services returns the number of services (rounded up).
func (s RuleSpec) Services() int {
	return (s.ServicePorts + s.PortsPerService - 1) / s.PortsPerService
}

// ProbeSpec is the probe's default cluster: 6 TCP ports and 2 endpoints per service.
func ProbeSpec(fam string, servicePorts int) RuleSpec {
	return RuleSpec{Family: fam, ServicePorts: servicePorts, PortsPerService: 6, Endpoints: 2, AffinitySeconds: 10800, Table: "kube-proxy"}
}

// GenerateRuleset writes the ruleset of variant v for spec s to w, as a cold load: the table
// is created and every object added in one transaction. With reload, the table is flushed
// first and everything written again, as a full re-sync does.
func GenerateRuleset(w io.Writer, v string, s RuleSpec, reload bool) error {
	switch v {
	case V0, V4, A0:
	default:
		return fmt.Errorf("unknown rule-shape variant %q", v)
	}
	if s.PortsPerService <= 0 || s.Endpoints <= 0 || s.ServicePorts <= 0 {
		return fmt.Errorf("invalid spec %+v", s)
	}
	if s.Table == "" {
		s.Table = "kube-proxy"
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	g := &gen{w: bw, fam: nftFamily(s.Family), table: s.Table, spec: s}
	ipX, addrType := "ip", "ipv4_addr"
	if s.Family == FamIPv6 {
		ipX, addrType = "ip6", "ipv6_addr"
	}
	podCIDR := PodCIDRv4
	if s.Family == FamIPv6 {
		podCIDR = PodCIDRv6
	}

	g.cmd("add table %s %s { comment \"rules for kube-proxy\" ; }", g.fam, g.table)
	if reload {
		g.cmd("flush table %s %s", g.fam, g.table)
	}
	g.obj("chain", "mark-for-masquerade", "")
	g.rule("mark-for-masquerade", "mark set mark or 0x4000")
	g.obj("chain", "masquerading", "")
	g.rule("masquerading", "mark and 0x4000 == 0 return")
	g.rule("masquerading", "mark set mark xor 0x4000")
	g.rule("masquerading", "masquerade fully-random")
	g.obj("chain", "services", "")
	g.obj("chain", "nat-output", "{ type nat hook output priority -100 ; }")
	g.rule("nat-output", "jump services")
	g.obj("chain", "nat-prerouting", "{ type nat hook prerouting priority -100 ; }")
	g.rule("nat-prerouting", "jump services")
	g.obj("chain", "nat-postrouting", "{ type nat hook postrouting priority 100 ; }")
	g.rule("nat-postrouting", "jump masquerading")
	g.obj("map", "service-ips", fmt.Sprintf("{ type %s . inet_proto . inet_service : verdict ; comment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\" ; }", addrType))
	g.rule("services", fmt.Sprintf("%s daddr . meta l4proto . th dport vmap @service-ips", ipX))

	ep := 0
	for svc := 0; svc < s.Services(); svc++ {
		cip := ClusterIP(s.Family, svc)
		eps := make([]string, s.Endpoints)
		for e := range eps {
			eps[e] = EndpointIP(s.Family, ep)
			ep++
		}
		for p := 0; p < s.PortsPerService && svc*s.PortsPerService+p < s.ServicePorts; p++ {
			port, tport := 80+p, 8080+p
			spn := fmt.Sprintf("bench/svc-%05d/tcp/p%d", svc, port)
			chain := "service-" + shortHash(spn) + "-" + spn
			g.obj("chain", chain, "")
			g.rule(chain, fmt.Sprintf("%s daddr %s tcp dport %d %s saddr != %s jump mark-for-masquerade", ipX, cip, port, ipX, podCIDR))
			g.cmd("add element %s %s service-ips { %s . tcp . %d : goto %s }", g.fam, g.table, cip, port, chain)
			k := len(eps)
			switch v {
			case V0:
				var elems []string
				for i, e := range eps {
					elems = append(elems, fmt.Sprintf("%d : %s . %d", i, e, tport))
				}
				g.rule(chain, fmt.Sprintf("meta l4proto tcp dnat %s addr . port to numgen random mod %d map { %s }", ipX, k, strings.Join(elems, " , ")))
			case V4:
				for i, e := range eps {
					g.rule(chain, numgenPrefix(i, k)+fmt.Sprintf("meta l4proto tcp dnat %s to %s", ipX, hostPort(e, tport)))
				}
			case A0:
				var vmap []string
				for i, e := range eps {
					epn := fmt.Sprintf("%s__%s/%d", spn, e, tport)
					epChain := "endpoint-" + shortHash(epn) + "-" + epn
					set := "affinity-" + shortHash(epn) + "-" + epn
					g.obj("set", set, fmt.Sprintf("{ type %s ; flags dynamic,timeout ; timeout %ds ; }", addrType, s.AffinitySeconds))
					g.obj("chain", epChain, "")
					g.rule(epChain, fmt.Sprintf("%s saddr %s jump mark-for-masquerade", ipX, e))
					g.rule(epChain, fmt.Sprintf("update @%s { %s saddr }", set, ipX))
					g.rule(epChain, fmt.Sprintf("meta l4proto tcp dnat %s to %s", ipX, hostPort(e, tport)))
					g.rule(chain, fmt.Sprintf("%s saddr @%s goto %s", ipX, set, epChain))
					vmap = append(vmap, fmt.Sprintf("%d : goto %s", i, epChain))
				}
				g.rule(chain, fmt.Sprintf("numgen random mod %d vmap { %s }", k, strings.Join(vmap, " , ")))
			}
		}
	}
	if g.err != nil {
		return g.err
	}
	return bw.Flush()
}

// numgenPrefix is the match that takes endpoint i of k with conditional probability 1/(k-i);
// the last endpoint needs none.
func numgenPrefix(i, k int) string {
	if i >= k-1 {
		return ""
	}
	return fmt.Sprintf("numgen random mod %d 0 ", k-i)
}

type gen struct {
	w     *bufio.Writer
	fam   string
	table string
	spec  RuleSpec
	err   error
}

func (g *gen) cmd(format string, args ...any) {
	if g.err != nil {
		return
	}
	_, g.err = fmt.Fprintf(g.w, format+"\n", args...)
}

func (g *gen) obj(kind, name, body string) {
	if body == "" {
		g.cmd("add %s %s %s %s", kind, g.fam, g.table, name)
		return
	}
	g.cmd("add %s %s %s %s %s", kind, g.fam, g.table, name, body)
}

func (g *gen) rule(chain, rule string) {
	g.cmd("add rule %s %s %s %s", g.fam, g.table, chain, rule)
}

// PacketRuleset is the ruleset of the per-packet probe: a service VIP:port (TCP and UDP) whose
// traffic from local processes is DNATed to one of eps (all on epPort) with variant v
// (V0: one numgen map rule; V4: one rule per endpoint), or nothing when v is "none".
func PacketRuleset(v, fam, vip string, port int, eps []string, epPort int) (string, error) {
	var b strings.Builder
	ipX := "ip"
	if fam == FamIPv6 {
		ipX = "ip6"
	}
	t := nftFamily(fam) + " bkpkt"
	fmt.Fprintf(&b, "add table %s\nflush table %s\n", t, t)
	if v == "none" {
		return b.String(), nil
	}
	fmt.Fprintf(&b, "add chain %s out { type nat hook output priority -100 ; }\n", t)
	fmt.Fprintf(&b, "add chain %s svc\n", t)
	fmt.Fprintf(&b, "add rule %s out %s daddr %s th dport %d jump svc\n", t, ipX, vip, port)
	k := len(eps)
	switch v {
	case V0:
		var elems []string
		for i, e := range eps {
			elems = append(elems, fmt.Sprintf("%d : %s . %d", i, e, epPort))
		}
		fmt.Fprintf(&b, "add rule %s svc meta l4proto { tcp, udp } dnat %s addr . port to numgen random mod %d map { %s }\n", t, ipX, k, strings.Join(elems, " , "))
	case V4:
		for i, e := range eps {
			fmt.Fprintf(&b, "add rule %s svc %smeta l4proto { tcp, udp } dnat %s to %s\n", t, numgenPrefix(i, k), ipX, hostPort(e, epPort))
		}
	default:
		return "", fmt.Errorf("packet ruleset: unknown variant %q", v)
	}
	return b.String(), nil
}

// EvalRuleset is the ruleset of the rule-evaluation probe: every UDP packet that a local
// process sends to dst:port traverses a chain that picks one of k "endpoints" the way variant
// v does (V4: k rules "numgen random mod (k-i) 0 accept"; V0: one numgen vmap of k accepts), in
// the filter output hook, so that the cost is paid per packet rather than per connection.
func EvalRuleset(v string, k int, dst string, port int) (string, error) {
	var b strings.Builder
	t := "ip bkeval"
	fmt.Fprintf(&b, "add table %s\nflush table %s\n", t, t)
	fmt.Fprintf(&b, "add chain %s out { type filter hook output priority 0 ; }\n", t)
	fmt.Fprintf(&b, "add chain %s svc\n", t)
	fmt.Fprintf(&b, "add rule %s out ip daddr %s udp dport %d jump svc\n", t, dst, port)
	switch v {
	case V4:
		for i := 0; i < k; i++ {
			fmt.Fprintf(&b, "add rule %s svc %saccept\n", t, numgenPrefix(i, k))
		}
	case V0:
		var elems []string
		for i := 0; i < k; i++ {
			elems = append(elems, fmt.Sprintf("%d : accept", i))
		}
		fmt.Fprintf(&b, "add rule %s svc numgen random mod %d vmap { %s }\n", t, k, strings.Join(elems, " , "))
	default:
		return "", fmt.Errorf("eval ruleset: unknown variant %q", v)
	}
	return b.String(), nil
}
