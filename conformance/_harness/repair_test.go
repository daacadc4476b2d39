package kpconformance

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// repair damages a Service's rules behind kube-proxy's back, twice, and checks that traffic
// breaks and that the next full sync (for upstream: a restart) restores it: first the rules of
// the Service chain that pick endpoints are deleted, then the Service's element of the
// service-ips map.
func (r *runner) repair(ctx context.Context, f family) error {
	s, err := r.w.service(ctx, "repair", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[1])})
	defer r.w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	t := fromClient(f, "tcp", ip, 80)
	damages := []struct {
		what string
		do   func() error
	}{
		{"endpoint rules deleted from the service chain", func() error { return deleteEndpointRules(f, s.Name) }},
		{"service-ips map element deleted", func() error {
			_, err := nsExec(nodeNS, "nft", "delete", "element", nftFamily(f), "kube-proxy", "service-ips",
				fmt.Sprintf("{ %s . tcp . 80 }", ip))
			return err
		}},
	}
	for _, d := range damages {
		if err := expectPods(ctx, t, 10, 8080, pods[:2], pods[:2], nil); err != nil {
			return fmt.Errorf("before %s: %w", d.what, err)
		}
		if r.p.patched {
			// Damage right after a full sync, so that the next one is a whole period away.
			if err := waitFullSyncs(ctx, f, 1, fullSyncTimeout); err != nil {
				return err
			}
		}
		if err := d.do(); err != nil {
			return fmt.Errorf("%s: %w", d.what, err)
		}
		if err := expectFails(ctx, t); err != nil {
			return fmt.Errorf("%s did not break traffic: %w", d.what, err)
		}
		if err := r.fullSync(ctx, []family{f}); err != nil {
			return err
		}
		if err := expectPods(ctx, t, 10, 8080, pods[:2], pods[:2], nil); err != nil {
			return fmt.Errorf("after %s and a full sync: %w", d.what, err)
		}
	}
	return nil
}

// deleteEndpointRules deletes every rule of Service svc's port-80 chain that sends packets to an
// endpoint (to an endpoint chain, or a DNAT).
func deleteEndpointRules(f family, svc string) error {
	out, err := nsExec(nodeNS, "nft", "list", "table", nftFamily(f), "kube-proxy")
	if err != nil {
		return err
	}
	m := regexp.MustCompile(`chain (service-[A-Z0-9]+-` + ns + `/` + regexp.QuoteMeta(svc) + `/tcp/http) \{`).FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("no service chain for %s/%s in table %s kube-proxy", ns, svc, nftFamily(f))
	}
	chain := m[1]
	out, err = nsExec(nodeNS, "nft", "-a", "list", "chain", nftFamily(f), "kube-proxy", chain)
	if err != nil {
		return err
	}
	handle := regexp.MustCompile(`# handle (\d+)$`)
	deleted := 0
	for _, l := range strings.Split(out, "\n") {
		h := handle.FindStringSubmatch(strings.TrimSpace(l))
		// Upstream's shape jumps to per-endpoint chains; the patched SetFree shape DNATs in
		// the service chain itself.
		if h == nil || !(strings.Contains(l, "endpoint-") || strings.Contains(l, " dnat ")) {
			continue
		}
		if _, err := nsExec(nodeNS, "nft", "delete", "rule", nftFamily(f), "kube-proxy", chain, "handle", h[1]); err != nil {
			return err
		}
		deleted++
	}
	if deleted == 0 {
		return fmt.Errorf("no endpoint rule in chain %s:\n%s", chain, out)
	}
	return nil
}
