package kpconformance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// caseTimeout bounds how long a case waits for kube-proxy to make the traffic right. kube-proxy
// syncs within about a second of a change, but upstream's syncs, which list the whole table,
// were seen taking 20s on this shared 2-core machine under load.
const caseTimeout = 45 * time.Second

// target is where probes go: from a namespace (and source address), to host:port over proto.
type target struct {
	from  string
	src   string
	proto string
	host  string
	port  int
}

func (t target) String() string {
	return fmt.Sprintf("%s %s->[%s]:%d/%s", t.from, t.src, t.host, t.port, t.proto)
}

// expectPods polls until n probes in a row to t all succeed, are answered only by pods in
// allowed, on targetPort, and between them reach every pod in mustSee. check, if not nil, is
// applied to every reply too (source preservation, masquerade).
func expectPods(ctx context.Context, t target, n, targetPort int, allowed, mustSee []pod, check func(reply) error) error {
	ok := map[string]bool{}
	for _, p := range allowed {
		ok[p.name] = true
	}
	return poll(ctx, caseTimeout, func() error {
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			r, err := probe(t.from, t.proto, t.src, t.host, t.port)
			if err != nil {
				return fmt.Errorf("%v: %w", t, err)
			}
			if !ok[r.pod] {
				return fmt.Errorf("%v: answered by %s, want one of %v", t, r.pod, names(allowed))
			}
			if r.port != targetPort {
				return fmt.Errorf("%v: reached port %d, want %d", t, r.port, targetPort)
			}
			if check != nil {
				if err := check(r); err != nil {
					return fmt.Errorf("%v: %w", t, err)
				}
			}
			seen[r.pod] = true
		}
		for _, p := range mustSee {
			if !seen[p.name] {
				return fmt.Errorf("%v: %d probes never reached %s (saw %v)", t, n, p.name, slices.Sorted(maps.Keys(seen)))
			}
		}
		return nil
	})
}

// expectSticky polls until n probes to t all succeed and are all answered by one pod.
func expectSticky(ctx context.Context, t target, n int) error {
	return poll(ctx, caseTimeout, func() error {
		first := ""
		for i := 0; i < n; i++ {
			r, err := probe(t.from, t.proto, t.src, t.host, t.port)
			if err != nil {
				return fmt.Errorf("%v: %w", t, err)
			}
			if first == "" {
				first = r.pod
			} else if r.pod != first {
				return fmt.Errorf("%v: affinity broken: %s then %s", t, first, r.pod)
			}
		}
		return nil
	})
}

// expectRefused polls until a probe to t is actively refused (reject rule: RST or ICMP
// unreachable), not answered and not silently dropped.
func expectRefused(ctx context.Context, t target) error {
	return poll(ctx, caseTimeout, func() error {
		r, err := probe(t.from, t.proto, t.src, t.host, t.port)
		switch {
		case err == nil:
			return fmt.Errorf("%v: answered by %s, want refused", t, r.pod)
		case isRefused(err):
			return nil
		default:
			return fmt.Errorf("%v: %v, want refused", t, err)
		}
	})
}

// expectDropped polls until a probe to t times out (dropped), and is neither answered nor
// refused.
func expectDropped(ctx context.Context, t target) error {
	return poll(ctx, caseTimeout, func() error {
		r, err := probe(t.from, t.proto, t.src, t.host, t.port)
		switch {
		case err == nil:
			return fmt.Errorf("%v: answered by %s, want dropped", t, r.pod)
		case isTimeout(err):
			return nil
		default:
			return fmt.Errorf("%v: %v, want dropped (timeout)", t, err)
		}
	})
}

// expectFails polls until a probe to t fails in any way.
func expectFails(ctx context.Context, t target) error {
	return poll(ctx, caseTimeout, func() error {
		r, err := probe(t.from, t.proto, t.src, t.host, t.port)
		if err == nil {
			return fmt.Errorf("%v: answered by %s, want no answer", t, r.pod)
		}
		return nil
	})
}

// expectNoRulesFor polls until the node's kube-proxy table of family f no longer mentions ip.
func expectNoRulesFor(ctx context.Context, f family, ip string) error {
	return poll(ctx, caseTimeout, func() error {
		out, err := nsExec(nodeNS, "nft", "list", "table", nftFamily(f), "kube-proxy")
		if err != nil {
			return err
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, ip+" ") || strings.Contains(l, ip+",") || strings.HasSuffix(l, ip) {
				return fmt.Errorf("table %s kube-proxy still mentions %s: %s", nftFamily(f), ip, strings.TrimSpace(l))
			}
		}
		return nil
	})
}

// nftFamily is the nftables family of kube-proxy's table for f.
func nftFamily(f family) string {
	if f.v6 {
		return "ip6"
	}
	return "ip"
}

func names(ps []pod) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.name)
	}
	return s
}
