package e2e

import (
	"fmt"
	"net/netip"
)

// Service types of the plan.
const (
	TypeClusterIP    = "ClusterIP"
	TypeNodePort     = "NodePort"
	TypeLoadBalancer = "LoadBalancer"
)

// MaxEndpointsPerSlice is how many endpoints one planned EndpointSlice holds at the most (the
// EndpointSlice controller's default).
const MaxEndpointsPerSlice = 100

// Port is one Service port and the endpoints' target port.
type Port struct {
	Name   string
	Proto  string // "TCP" or "UDP"
	Port   int32
	Target int32
}

// Slice is one planned EndpointSlice.
type Slice struct {
	Name      string
	Family    string // FamilyIPv4 or FamilyIPv6
	Addresses []string
}

// Service is one planned Service and its EndpointSlices.
type Service struct {
	Index    int
	Name     string
	Type     string
	Affinity bool     // ClientIP session affinity
	Families []string // FamilyIPv4 and/or FamilyIPv6, in the Service's order
	Ports    []Port
	Slices   []Slice
	LBIPs    []string // the LoadBalancer ingress IPs the benchmark writes to its status
}

// servicePorts are the six ports of every planned Service.
var servicePorts = []Port{
	{"http", "TCP", 80, 8080}, {"https", "TCP", 443, 8443}, {"dns", "UDP", 53, 5353},
	{"dns-tcp", "TCP", 53, 5353}, {"metrics", "TCP", 9090, 9090}, {"grpc", "TCP", 50051, 50051},
}

// familiesOf returns the address families of a cluster family.
func familiesOf(family string) []string {
	switch family {
	case FamilyIPv4:
		return []string{FamilyIPv4}
	case FamilyIPv6:
		return []string{FamilyIPv6}
	}
	return []string{FamilyIPv4, FamilyIPv6}
}

// Plan returns Service i (from 0) of the benchmark under p. The plan is a pure function of p
// and i, so that each size only adds Services to the ones before it: i%100 below
// AffinityPercent has ClientIP affinity; (i*37)%100 below NodePortPercent has node ports, a
// NodePort Service when that number is even and a LoadBalancer one when it is odd (the stride
// keeps affinity and type independent); every Service has p.Endpoints endpoints per family,
// with addresses that no other Service uses, in slices of at most MaxEndpointsPerSlice.
func Plan(p Params, i int) Service {
	s := Service{Index: i, Name: fmt.Sprintf("e2e-%05d", i), Type: TypeClusterIP, Families: familiesOf(p.Family), Ports: servicePorts}
	s.Affinity = i%100 < p.AffinityPercent
	if r := (i * 37) % 100; r < p.NodePortPercent {
		s.Type = TypeNodePort
		if r%2 == 1 {
			s.Type = TypeLoadBalancer
		}
	}
	for _, f := range s.Families {
		if s.Type == TypeLoadBalancer {
			s.LBIPs = append(s.LBIPs, nthAddr(f, lbBase, i))
		}
		for k := 0; k*MaxEndpointsPerSlice < p.Endpoints; k++ {
			sl := Slice{Name: fmt.Sprintf("%s-%s-%d", s.Name, f, k), Family: f}
			for j := k * MaxEndpointsPerSlice; j < min(p.Endpoints, (k+1)*MaxEndpointsPerSlice); j++ {
				sl.Addresses = append(sl.Addresses, nthAddr(f, endpointBase, i*p.Endpoints+j))
			}
			s.Slices = append(s.Slices, sl)
		}
	}
	return s
}

// Address bases: endpoints in 10.128.0.0/9 and fd00:244:0:0:1::/80 (inside kube-proxy's
// --cluster-cidr for IPv6), LoadBalancer ingress IPs in 172.20.0.0/14 and fd00:fd::/64.
var (
	endpointBase = map[string]netip.Addr{FamilyIPv4: netip.MustParseAddr("10.128.0.0"), FamilyIPv6: netip.MustParseAddr("fd00:244::1:0:0:0")}
	lbBase       = map[string]netip.Addr{FamilyIPv4: netip.MustParseAddr("172.20.0.0"), FamilyIPv6: netip.MustParseAddr("fd00:fd::")}
)

// nthAddr returns base[family] + 1 + n.
func nthAddr(family string, base map[string]netip.Addr, n int) string {
	b := base[family].As16()
	carry := uint64(n) + 1
	for k := 15; k >= 0 && carry > 0; k-- {
		v := uint64(b[k]) + carry&0xff
		b[k] = byte(v)
		carry = carry>>8 + v>>8
	}
	a := netip.AddrFrom16(b)
	if family == FamilyIPv4 {
		a = a.Unmap()
	}
	return a.String()
}
