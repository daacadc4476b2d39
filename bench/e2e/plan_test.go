package e2e

import (
	"net/netip"
	"testing"
)

func TestPlanMix(t *testing.T) {
	p := Params{Family: FamilyIPv6, Endpoints: 4, AffinityPercent: 10, NodePortPercent: 20}
	types := map[string]int{}
	aff := 0
	for i := 0; i < 1000; i++ {
		s := Plan(p, i)
		types[s.Type]++
		if s.Affinity {
			aff++
		}
		if len(s.Ports) != PortsPerService {
			t.Fatalf("service %d has %d ports", i, len(s.Ports))
		}
		if (s.Type == TypeLoadBalancer) != (len(s.LBIPs) == 1) {
			t.Fatalf("service %d: type %s with LB IPs %v", i, s.Type, s.LBIPs)
		}
	}
	if aff != 100 || types[TypeNodePort] != 100 || types[TypeLoadBalancer] != 100 || types[TypeClusterIP] != 800 {
		t.Errorf("affinity %d, types %v; want 100 affinity, 100 NodePort, 100 LoadBalancer, 800 ClusterIP", aff, types)
	}
	// The stride makes affinity and node ports independent: some Services have both.
	both := 0
	for i := 0; i < 1000; i++ {
		if s := Plan(p, i); s.Affinity && s.Type != TypeClusterIP {
			both++
		}
	}
	if both == 0 || both == 100 {
		t.Errorf("%d Services with both affinity and node ports", both)
	}
}

func TestPlanEndpointsUniqueAndSliced(t *testing.T) {
	p := Params{Family: FamilyDual, Endpoints: 250}
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		s := Plan(p, i)
		if len(s.Families) != 2 || len(s.Slices) != 6 {
			t.Fatalf("service %d: families %v, %d slices; want 2 families of 3 slices", i, s.Families, len(s.Slices))
		}
		for _, sl := range s.Slices {
			if len(sl.Addresses) > MaxEndpointsPerSlice {
				t.Fatalf("slice %s has %d endpoints", sl.Name, len(sl.Addresses))
			}
			for _, a := range sl.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || ip.Is6() != (sl.Family == FamilyIPv6) {
					t.Fatalf("slice %s (%s): address %q", sl.Name, sl.Family, a)
				}
				if seen[a] {
					t.Fatalf("address %s used twice", a)
				}
				seen[a] = true
			}
		}
	}
	if len(seen) != 20*250*2 {
		t.Errorf("%d addresses, want %d", len(seen), 20*250*2)
	}
}

func TestNthAddrCarries(t *testing.T) {
	for _, c := range []struct {
		fam  string
		n    int
		want string
	}{
		{FamilyIPv4, 0, "10.128.0.1"},
		{FamilyIPv4, 254, "10.128.0.255"},
		{FamilyIPv4, 255, "10.128.1.0"},
		{FamilyIPv4, 65535, "10.129.0.0"},
		{FamilyIPv6, 0, "fd00:244::1:0:0:1"},
		{FamilyIPv6, 65535, "fd00:244::1:0:1:0"},
	} {
		if got := nthAddr(c.fam, endpointBase, c.n); got != c.want {
			t.Errorf("nthAddr(%s, %d) = %s, want %s", c.fam, c.n, got, c.want)
		}
	}
}

func TestPlanIsStable(t *testing.T) {
	p := Params{Family: FamilyIPv4, Endpoints: 3, AffinityPercent: 50, NodePortPercent: 50}
	a, b := Plan(p, 1234), Plan(p, 1234)
	if a.Name != b.Name || a.Type != b.Type || a.Slices[0].Addresses[2] != b.Slices[0].Addresses[2] {
		t.Errorf("two plans of one index differ: %+v %+v", a, b)
	}
	if a.Name != "e2e-01234" {
		t.Errorf("name %s", a.Name)
	}
}
