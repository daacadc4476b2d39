package kpconformance

import (
	"fmt"
	"strings"

	"k8s.io/kubernetes/test/netns"
)

// The world's namespaces and addresses. Every namespace name starts with prefix. The link to the
// API server is the only one in the root namespace: its /30 is KPCONF_API_NET (default
// 192.168.251.0), so that two harness binaries can run side by side.
var (
	nodeNS   = prefix + "node"
	clientNS = prefix + "client"
	uplinkNS = prefix + "uplink" // the node's default route ends here, unanswered
	nodeName = prefix + "node"   // the Node object kube-proxy runs as
	farNode  = prefix + "other"  // a Node that exists only as endpoints' nodeName

	apiNet    = strings.TrimSuffix(envOr(envAPINet, "192.168.251.0"), ".0")
	apiRootV4 = apiNet + ".1" // root side of the node's link to the API server
	apiNodeV4 = apiNet + ".2" // node side: kube-proxy's healthz and metrics
)

const apiPort = 6443 // the forwarder's port on apiRootV4

// family holds one IP family's addresses.
type family struct {
	name       string // "ipv4" or "ipv6"
	v6         bool
	nodeIP     string // the node's address towards the client, its InternalIP
	clientIP   string // the client's first address
	clientIP2  string // the client's second address (outside LoadBalancer source ranges)
	clientPlen int
	podGW      string // the node's bridge address, the pods' gateway
	podPlen    int
	podCIDR    string
	lbIP       string // the LoadBalancer ingress IP the harness writes to status
	svcCIDR    string
}

var (
	v4 = family{name: "ipv4", nodeIP: "192.168.252.1", clientIP: "192.168.252.2", clientIP2: "192.168.252.3",
		clientPlen: 24, podGW: "10.244.0.1", podPlen: 24, podCIDR: "10.244.0.0/24", lbIP: "192.168.253.10",
		svcCIDR: "10.96.0.0/16"}
	v6 = family{name: "ipv6", v6: true, nodeIP: "fd00:fc::1", clientIP: "fd00:fc::2", clientIP2: "fd00:fc::3",
		clientPlen: 64, podGW: "fd00:244::1", podPlen: 64, podCIDR: "fd00:244::/64", lbIP: "fd00:fd::10",
		svcCIDR: "fd00:96::/112"}
)

// podIP returns pod i's address in family f.
func (f family) podIP(i int) string {
	if f.v6 {
		return fmt.Sprintf("fd00:244::%d", 10+i)
	}
	return fmt.Sprintf("10.244.0.%d", 10+i)
}

// pod is one pod network namespace with echo servers.
type pod struct {
	name  string // also the network namespace
	index int
	node  string // the nodeName its endpoints carry
}

// pods are the world's pods: pod1 and pod2 are local to the node under test, pod3 is, as far as
// kube-proxy knows, on another node (it is wired to the same bridge, so that it is reachable).
var pods = []pod{
	{name: prefix + "pod1", index: 1, node: nodeName},
	{name: prefix + "pod2", index: 2, node: nodeName},
	{name: prefix + "pod3", index: 3, node: farNode},
}

// worldNamespaces returns the names of the world's network namespaces.
func worldNamespaces() []string {
	names := []string{nodeNS, clientNS, uplinkNS}
	for _, p := range pods {
		names = append(names, p.name)
	}
	return names
}

// buildTopology creates the namespaces, links, addresses and routes. It returns the first error;
// cleanLeftovers removes whatever was created.
func buildTopology() error {
	// Each namespace with its loopback up.
	for _, ns := range worldNamespaces() {
		if err := netns.Add(ns); err != nil {
			return err
		}
	}
	lines := []string{
		// root <-> node: the API server's forwarder, kube-proxy's healthz and metrics.
		"ip link add " + prefix + "api type veth peer name api0 netns " + nodeNS,
		"ip addr add " + apiRootV4 + "/30 dev " + prefix + "api",
		"ip link set " + prefix + "api up",
		"ip -n " + nodeNS + " addr add " + apiNodeV4 + "/30 dev api0",
		"ip -n " + nodeNS + " link set api0 up",
		"ip netns exec " + nodeNS + " sysctl -qw net.ipv4.ip_forward=1",
		"ip netns exec " + nodeNS + " sysctl -qw net.ipv6.conf.all.forwarding=1",
		"ip netns exec " + nodeNS + " sysctl -qw net.ipv6.conf.default.accept_dad=0",
		// node <-> client.
		"ip netns exec " + clientNS + " sysctl -qw net.ipv6.conf.default.accept_dad=0",
		"ip -n " + nodeNS + " link add cli0 type veth peer name eth0 netns " + clientNS,
		// the pods' bridge.
		"ip -n " + nodeNS + " link add br0 type bridge",
		"ip -n " + nodeNS + " link set br0 up",
	}
	for _, f := range []family{v4, v6} {
		nodad := ""
		if f.v6 {
			nodad = " nodad"
		}
		lines = append(lines,
			fmt.Sprintf("ip -n %s addr add %s/%d dev cli0%s", nodeNS, f.nodeIP, f.clientPlen, nodad),
			fmt.Sprintf("ip -n %s addr add %s/%d dev eth0%s", clientNS, f.clientIP, f.clientPlen, nodad),
			fmt.Sprintf("ip -n %s addr add %s/%d dev eth0%s", clientNS, f.clientIP2, f.clientPlen, nodad),
			fmt.Sprintf("ip -n %s addr add %s/%d dev br0%s", nodeNS, f.podGW, f.podPlen, nodad),
		)
	}
	lines = append(lines,
		"ip -n "+nodeNS+" link set cli0 up",
		"ip -n "+clientNS+" link set eth0 up",
		"ip -n "+clientNS+" route add default via "+v4.nodeIP,
		"ip -n "+clientNS+" -6 route add default via "+v6.nodeIP,
		// The node's uplink, to a namespace that does not forward: like a real node, the node
		// routes what is not local out of it, where it is lost without an answer. Service IPs
		// are routable, as on a real node, so that kube-proxy's forward-hook rules (reject) see
		// them. (A default route back out of the client's link would make the node send ICMP
		// redirects, which the client obeys.)
		"ip netns exec "+uplinkNS+" sysctl -qw net.ipv6.conf.default.accept_dad=0",
		"ip -n "+nodeNS+" link add up0 type veth peer name eth0 netns "+uplinkNS,
		"ip -n "+nodeNS+" addr add 192.168.254.1/24 dev up0",
		"ip -n "+nodeNS+" addr add fd00:fe::1/64 dev up0 nodad",
		"ip -n "+nodeNS+" link set up0 up",
		"ip -n "+uplinkNS+" addr add 192.168.254.2/24 dev eth0",
		"ip -n "+uplinkNS+" addr add fd00:fe::2/64 dev eth0 nodad",
		"ip -n "+uplinkNS+" link set eth0 up",
		"ip -n "+nodeNS+" route add default via 192.168.254.2",
		"ip -n "+nodeNS+" -6 route add default via fd00:fe::2",
		"ip netns exec "+nodeNS+" sysctl -qw net.ipv4.conf.all.send_redirects=0",
	)
	for _, p := range pods {
		lines = append(lines,
			"ip netns exec "+p.name+" sysctl -qw net.ipv6.conf.default.accept_dad=0",
			fmt.Sprintf("ip -n %s link add vpod%d type veth peer name eth0 netns %s", nodeNS, p.index, p.name),
			fmt.Sprintf("ip -n %s link set vpod%d master br0", nodeNS, p.index),
			// As the bridge CNI plugin does for kube-proxy's hairpin traffic: with br_netfilter,
			// a pod's packet to its own Service is DNATed while bridged, and must be allowed back
			// out of the port it came in on.
			fmt.Sprintf("ip -n %s link set vpod%d type bridge_slave hairpin on", nodeNS, p.index),
			fmt.Sprintf("ip -n %s link set vpod%d up", nodeNS, p.index),
		)
		for _, f := range []family{v4, v6} {
			nodad := ""
			if f.v6 {
				nodad = " nodad"
			}
			lines = append(lines, fmt.Sprintf("ip -n %s addr add %s/%d dev eth0%s", p.name, f.podIP(p.index), f.podPlen, nodad))
		}
		lines = append(lines,
			"ip -n "+p.name+" link set eth0 up",
			"ip -n "+p.name+" route add default via "+v4.podGW,
			"ip -n "+p.name+" -6 route add default via "+v6.podGW,
		)
	}
	return sh(lines...)
}
