package e2e

import (
	"fmt"
	"net/netip"
)

// The churn's changes are read in the kernel by asking it, over netlink, for each new
// Service's element of kube-proxy's service-ips map, the question `nft get element` asks.

// Protocol numbers of the L4 protocols that service-ips keys hold (inet_proto).
const (
	ProtoTCP = 6
	ProtoUDP = 17
)

// ServiceIPsKey returns the key of a service-ips element (ipvX_addr . inet_proto .
// inet_service) as the kernel stores it: each field of a concatenation in registers of 4 bytes,
// the address and port in network order and the protocol in the field's first byte, so 12 bytes
// for IPv4 and 24 for IPv6.
func ServiceIPsKey(ip string, proto uint8, port uint16) ([]byte, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, fmt.Errorf("service IP %q: %w", ip, err)
	}
	key := addr.Unmap().AsSlice()
	key = append(key, proto, 0, 0, 0)
	return append(key, byte(port>>8), byte(port), 0, 0), nil
}
