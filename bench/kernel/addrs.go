package main

// Address plan of the benchmark's synthetic cluster. Pure.

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Family of a synthetic object: "ipv4" or "ipv6".
const (
	FamIPv4 = "ipv4"
	FamIPv6 = "ipv6"
)

// Address plan.
const (
	ServiceCIDRv4 = "172.30.0.0/16"
	ServiceCIDRv6 = "fd00:30::/108"
	PodCIDRv4     = "10.0.0.0/8"
	PodCIDRv6     = "fd00:10::/64"
	NodeIPv4      = "192.168.255.1"
	NodeIPv6      = "fd00:ff::1"
)

// ClusterIP returns the cluster IP of service i (0-based) in family fam.
func ClusterIP(fam string, i int) string {
	n := i + 1
	if fam == FamIPv6 {
		return fmt.Sprintf("fd00:30::%x", n)
	}
	return fmt.Sprintf("172.30.%d.%d", (n>>8)&255, n&255)
}

// EndpointIP returns the address of endpoint n (0-based, counted across all services).
func EndpointIP(fam string, n int) string {
	n++
	if fam == FamIPv6 {
		return fmt.Sprintf("fd00:10::%x:%x", n>>16, n&0xffff)
	}
	return fmt.Sprintf("10.%d.%d.%d", 1+(n>>16), (n>>8)&255, n&255)
}

// nftFamily is the nftables table family for fam.
func nftFamily(fam string) string {
	if fam == FamIPv6 {
		return "ip6"
	}
	return "ip"
}

// hostPort formats an address and port for a dnat statement.
func hostPort(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

// shortHash returns 8 upper-case base-32-ish characters derived from s, like upstream's
// hashed chain-name prefixes (the exact hash does not matter, only the name lengths).
func shortHash(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	v := h.Sum64()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	var b [8]byte
	for i := range b {
		b[i] = alphabet[v&31]
		v >>= 5
	}
	return string(b[:])
}
