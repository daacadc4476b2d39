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
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/kubernetes/test/netns"
)

// The packet tests wire three network namespaces together with veth pairs:
//
//	client (192.168.99.2, fd00:99::2)
//	  |
//	node (kube-proxy's table; 192.168.99.1 / 10.1.0.1, fd00:99::1 / fd00:10::1; forwarding on)
//	  |
//	backend (endpoints 10.1.0.11, 10.1.0.12, fd00:10::11, fd00:10::12 on port 8080;
//	         a "sink" on port 80 of every ClusterIP of NewFakeProxier's service CIDR)
//
// The node routes the service CIDR to the backend namespace, which holds the whole CIDR as local
// addresses. So a connection to a ClusterIP that kube-proxy does not handle at all (before its
// first sync) reaches the sink and reads "sink", which shows that the wiring works and that a
// later answer from an endpoint came through kube-proxy's DNAT. A connection either reads a name
// (an endpoint's address, or "sink") or is refused (kube-proxy's reject), with no timeout to wait
// for; only kube-proxy's drop of an unallocated ClusterIP has no answer at all.

// packetEndpointPort is the port the endpoints listen on; Services map port 80 to it.
const packetEndpointPort = 8080

// packetNet holds the addresses of one IP family of the packet-test topology.
type packetNet struct {
	client, nodeClientSide, nodeBackendSide, sinkAddr string
	endpoints                                         []string
	serviceCIDR                                       string
	bits                                              int // prefix length of the veth subnets
	ipFlag                                            string
}

var packetNets = map[bool]packetNet{
	false: {
		client: "192.168.99.2", nodeClientSide: "192.168.99.1",
		nodeBackendSide: "10.1.0.1", sinkAddr: "10.1.0.2",
		endpoints:   []string{"10.1.0.11", "10.1.0.12"},
		serviceCIDR: "172.30.0.0/16", bits: 24, ipFlag: "-4",
	},
	true: {
		client: "fd00:99::2", nodeClientSide: "fd00:99::1",
		nodeBackendSide: "fd00:10::1", sinkAddr: "fd00:10::2",
		endpoints:   []string{"fd00:10::11", "fd00:10::12"},
		serviceCIDR: "fd00:10:96::/112", bits: 64, ipFlag: "-6",
	},
}

// packetTopology is the wired namespaces of one test.
type packetTopology struct {
	ipPath                string
	node, client, backend string
}

// newPacketTopology creates the client and backend namespaces next to the node namespace (made by
// realNFTNetns), wires and addresses them for both families, and starts the endpoints' and the
// sink's servers. Everything is removed when the test ends.
func newPacketTopology(t *testing.T, node string) *packetTopology {
	t.Helper()
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.TrimPrefix(node, "kpo-test-")
	top := &packetTopology{ipPath: ipPath, node: node, client: "kpo-cl-" + suffix, backend: "kpo-be-" + suffix}
	for _, ns := range []string{top.client, top.backend} {
		addTestNetns(t, ns)
	}
	// No duplicate address detection, so that IPv6 addresses are usable at once. (Every
	// namespace's loopback is up: netns.Add.)
	for _, ns := range []string{top.node, top.client, top.backend} {
		top.sysctl(t, ns, "net/ipv6/conf/all/accept_dad", "0")
		top.sysctl(t, ns, "net/ipv6/conf/default/accept_dad", "0")
	}
	top.sysctl(t, top.node, "net/ipv4/ip_forward", "1")
	top.sysctl(t, top.node, "net/ipv6/conf/all/forwarding", "1")
	top.ip(t, "-n", top.node, "link", "add", "to-client", "type", "veth", "peer", "name", "eth0", "netns", top.client)
	top.ip(t, "-n", top.node, "link", "add", "to-backend", "type", "veth", "peer", "name", "eth0", "netns", top.backend)
	for _, link := range [][2]string{{top.node, "to-client"}, {top.node, "to-backend"}, {top.client, "eth0"}, {top.backend, "eth0"}} {
		top.ip(t, "-n", link[0], "link", "set", link[1], "up")
	}
	for _, ipv6 := range []bool{false, true} {
		n := packetNets[ipv6]
		addr := func(ns, dev, a string) {
			top.ip(t, "-n", ns, "addr", "add", fmt.Sprintf("%s/%d", a, n.bits), "dev", dev, "nodad")
		}
		addr(top.client, "eth0", n.client)
		addr(top.node, "to-client", n.nodeClientSide)
		addr(top.node, "to-backend", n.nodeBackendSide)
		addr(top.backend, "eth0", n.sinkAddr)
		for _, ep := range n.endpoints {
			addr(top.backend, "eth0", ep)
		}
		top.ip(t, "-n", top.client, n.ipFlag, "route", "add", "default", "via", n.nodeClientSide)
		top.ip(t, "-n", top.backend, n.ipFlag, "route", "add", "default", "via", n.nodeBackendSide)
		top.ip(t, "-n", top.node, n.ipFlag, "route", "add", n.serviceCIDR, "via", n.sinkAddr)
		top.ip(t, "-n", top.backend, n.ipFlag, "route", "add", "local", n.serviceCIDR, "dev", "lo")
		for _, ep := range n.endpoints {
			top.serve(t, net.JoinHostPort(ep, fmt.Sprint(packetEndpointPort)), ep)
		}
	}
	// One dual-stack listener answers for every ClusterIP of both families.
	top.serve(t, ":80", "sink")
	return top
}

// ip runs the ip command and fails the test if it fails.
func (top *packetTopology) ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(top.ipPath, args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// sysctl sets /proc/sys/<key> inside namespace ns.
func (top *packetTopology) sysctl(t *testing.T, ns, key, value string) {
	t.Helper()
	if err := netns.Do(ns, func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644) }); err != nil {
		t.Fatalf("sysctl %s=%s in %s: %v", key, value, ns, err)
	}
}

// serve listens on addr inside the backend namespace and answers every connection with name.
func (top *packetTopology) serve(t *testing.T, addr, name string) {
	t.Helper()
	var l net.Listener
	if err := netns.Do(top.backend, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, top.backend, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, name)
			_ = c.Close()
		}
	}()
}

// dial connects from the client namespace to ip:port and returns what the server answered, or
// the error of the connection (a rejected one gives ECONNREFUSED), waiting at most timeout to
// connect and as long again for the answer.
func (top *packetTopology) dial(ip string, port int, timeout time.Duration) (string, error) {
	var answer string
	err := netns.Do(top.client, func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(port)), timeout)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		b, err := io.ReadAll(c)
		answer = string(b)
		return err
	})
	return answer, err
}
