package kpconformance

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/kubernetes/test/netns"
)

// reply is a parsed echoReply.
type reply struct {
	pod  string
	port int
	peer string
}

// parseReply parses one echoReply line.
func parseReply(s string) (reply, error) {
	var r reply
	for _, kv := range strings.Fields(s) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "pod":
			r.pod = v
		case "port":
			r.port, _ = strconv.Atoi(v)
		case "peer":
			r.peer = v
		}
	}
	if r.pod == "" {
		return r, fmt.Errorf("not an echo reply: %q", s)
	}
	return r, nil
}

// probeTimeout bounds one connection attempt; a blackholed packet shows up as a timeout.
const probeTimeout = 1500 * time.Millisecond

// dialFrom opens a connection from network namespace ns (and source address src, if set) to
// host:port, in that namespace.
func dialFrom(ns, proto, src, host string, port int) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(ns, func() error {
		d := net.Dialer{Timeout: probeTimeout}
		if src != "" {
			switch proto {
			case "tcp":
				d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
			case "udp":
				d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(src)}
			}
		}
		var err error
		c, err = d.Dial(proto, net.JoinHostPort(host, strconv.Itoa(port)))
		return err
	})
	return c, err
}

// probe makes one request from ns (source src, optional) to host:port over proto and returns the
// echo server's reply. Errors keep the kernel's answer visible: see isRefused and isTimeout.
func probe(ns, proto, src, host string, port int) (reply, error) {
	c, err := dialFrom(ns, proto, src, host, port)
	if err != nil {
		return reply{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeTimeout))
	if proto == "udp" {
		if _, err := c.Write([]byte("?")); err != nil {
			return reply{}, err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	return parseReply(line)
}

// isRefused reports whether err is the kernel's active refusal (RST or ICMP unreachable), as
// opposed to silence.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// isTimeout reports whether err is a timeout (packets dropped).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isReset reports whether err is a connection reset by the peer or an unexpected EOF.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || strings.Contains(fmt.Sprint(err), "EOF")
}
