//go:build benchkernel

package main

// The RTNL probe: a loop that times link operations that need the RTNL lock, in netns the
// benchmark created: a veth pair made in the probe's own netns, one end moved into the
// kube-proxy netns and deleted there, and an unrelated veth add+delete in the probe's netns.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

type nsHandle struct {
	name string
	ns   netns.NsHandle
	h    *netlink.Handle
}

func openNS(name string) (*nsHandle, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink handle in %s: %w", name, err)
	}
	return &nsHandle{name: name, ns: ns, h: h}, nil
}

func (n *nsHandle) Close() {
	if n == nil {
		return
	}
	n.h.Close()
	n.ns.Close()
}

type prober struct {
	own    *nsHandle
	target atomic.Pointer[nsHandle]
	every  time.Duration
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	samples []Sample
}

func newProber(own *nsHandle, every time.Duration) *prober {
	return &prober{own: own, every: every, stop: make(chan struct{}), done: make(chan struct{})}
}

func (p *prober) setTarget(t *nsHandle) { p.target.Store(t) }

func (p *prober) start() { go p.loop() }

// finish stops the loop and returns all samples.
func (p *prober) finish() []Sample {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.samples
}

func (p *prober) record(op string, start time.Time, err error) {
	s := Sample{Op: op, StartNS: start.UnixNano(), EndNS: time.Now().UnixNano()}
	if err != nil {
		s.Err = err.Error()
	}
	p.mu.Lock()
	p.samples = append(p.samples, s)
	p.mu.Unlock()
}

func (p *prober) loop() {
	defer close(p.done)
	const a, b, u0, u1 = "bkpa", "bkpb", "bkpu0", "bkpu1"
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		t := p.target.Load()
		// Leftovers of an interrupted round.
		for _, n := range []string{a, u0} {
			if l, err := p.own.h.LinkByName(n); err == nil {
				_ = p.own.h.LinkDel(l)
			}
		}
		if t != nil {
			if l, err := t.h.LinkByName(b); err == nil {
				_ = t.h.LinkDel(l)
			}
			s := time.Now()
			err := p.own.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b})
			p.record("add", s, err)
			if err == nil {
				s = time.Now()
				l, err := p.own.h.LinkByName(b)
				if err == nil {
					err = p.own.h.LinkSetNsFd(l, int(t.ns))
				}
				p.record("move", s, err)
				if err == nil {
					s = time.Now()
					l, err := t.h.LinkByName(b)
					if err == nil {
						err = t.h.LinkDel(l)
					}
					p.record("del", s, err)
				}
			}
		}
		s := time.Now()
		err := p.own.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: u0}, PeerName: u1})
		if err == nil {
			var l netlink.Link
			if l, err = p.own.h.LinkByName(u0); err == nil {
				err = p.own.h.LinkDel(l)
			}
		}
		p.record("unrelated", s, err)
		select {
		case <-p.stop:
			return
		case <-time.After(p.every):
		}
	}
}
