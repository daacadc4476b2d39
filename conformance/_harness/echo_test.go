package kpconformance

import (
	"fmt"
	"net"
	"strconv"

	"k8s.io/kubernetes/test/netns"
)

// Ports every pod's echo servers listen on (TCP and UDP, both families).
var echoPorts = []int{8080, 8081}

// echoReply is what an echo server answers: who it is, which port was hit, and the peer address
// it saw (so that source-preservation and masquerade can be checked).
func echoReply(podName string, port int, peer string) string {
	return fmt.Sprintf("pod=%s port=%d peer=%s\n", podName, port, peer)
}

// startEchoServers starts TCP and UDP echo servers on echoPorts inside pod p's network namespace.
// They answer until the namespace is deleted; the listeners are closed by closeAll.
func startEchoServers(p pod) (closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range closers {
			c()
		}
	}
	err = netns.Do(p.name, func() error {
		for _, port := range echoPorts {
			l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
			if err != nil {
				return err
			}
			closers = append(closers, func() { l.Close() })
			go serveTCP(l, p.name, port)
			u, err := net.ListenPacket("udp", ":"+strconv.Itoa(port))
			if err != nil {
				return err
			}
			closers = append(closers, func() { u.Close() })
			go serveUDP(u, p.name, port)
		}
		return nil
	})
	if err != nil {
		closeAll()
	}
	return closeAll, err
}

// serveTCP answers each accepted connection with one echoReply line, then keeps echoing what the
// peer sends (the load check's long connections) until it closes.
func serveTCP(l net.Listener, podName string, port int) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			if _, err := c.Write([]byte(echoReply(podName, port, host))); err != nil {
				return
			}
			buf := make([]byte, 512)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

// serveUDP answers each datagram with one echoReply.
func serveUDP(u net.PacketConn, podName string, port int) {
	buf := make([]byte, 512)
	for {
		_, addr, err := u.ReadFrom(buf)
		if err != nil {
			return
		}
		host, _, _ := net.SplitHostPort(addr.String())
		_, _ = u.WriteTo([]byte(echoReply(podName, port, host)), addr)
	}
}
