// Package rtnlprobe is the RTNL probe shared by the benchmarks (bench/kernel, bench/e2e): a loop
// that times link operations that need the RTNL lock, in network namespaces the benchmark
// created. Each round makes a veth pair in the probe's own namespace, moves one end into the
// target namespace (kube-proxy's) and deletes it there, and adds and deletes an unrelated veth
// pair in its own namespace. A kube-proxy that holds RTNL (an nft transaction holds the
// nfnetlink mutex, which link moves and deletions wait for) shows up as slow operations.
//
// It is not compiled in this repository's module (the directory starts with an underscore):
// build/bench-kernel.sh and build/bench-e2e.sh lay it into test/rtnlprobe of an assembled tree,
// which provides the netlink packages.
package rtnlprobe

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NS is an open network namespace and a netlink handle in it.
type NS struct {
	Name string
	ns   netns.NsHandle
	h    *netlink.Handle
}

// Open opens the named network namespace (as `ip netns` names it).
func Open(name string) (*NS, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink handle in %s: %w", name, err)
	}
	return &NS{Name: name, ns: ns, h: h}, nil
}

// Close releases the handle; a nil NS is allowed.
func (n *NS) Close() {
	if n == nil {
		return
	}
	n.h.Close()
	n.ns.Close()
}

// Recorder receives each timed operation: "add" (the pair in the probe's namespace), "move"
// (one end into the target), "del" (that end, deleted in the target) or "unrelated" (add and
// delete of a pair that never leaves the probe's namespace), its start and end, and its error.
// It is called from the probe's goroutine only.
type Recorder func(op string, start, end time.Time, err error)

// Prober runs the probe loop.
type Prober struct {
	own    *NS
	target atomic.Pointer[NS]
	every  time.Duration
	rec    Recorder
	stop   chan struct{}
	done   chan struct{}
}

// New returns a prober that runs in own, pauses every between rounds, and reports each operation
// to rec. Without a target only the "unrelated" operation runs.
func New(own *NS, every time.Duration, rec Recorder) *Prober {
	return &Prober{own: own, every: every, rec: rec, stop: make(chan struct{}), done: make(chan struct{})}
}

// SetTarget sets the namespace the veth end is moved into from the next round on (nil: none).
func (p *Prober) SetTarget(t *NS) { p.target.Store(t) }

// Start starts the loop in a goroutine.
func (p *Prober) Start() { go p.loop() }

// Stop ends the loop and waits until no operation runs; it must be called once, after Start.
func (p *Prober) Stop() {
	close(p.stop)
	<-p.done
}

func (p *Prober) record(op string, start time.Time, err error) { p.rec(op, start, time.Now(), err) }

// Link names: in the probe's own namespace, and (b) in the target's.
const linkA, linkB, unrelated0, unrelated1 = "bkpa", "bkpb", "bkpu0", "bkpu1"

func (p *Prober) loop() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		t := p.target.Load()
		// Leftovers of an interrupted round.
		for _, n := range []string{linkA, unrelated0} {
			if l, err := p.own.h.LinkByName(n); err == nil {
				_ = p.own.h.LinkDel(l)
			}
		}
		if t != nil {
			p.moveRound(t)
		}
		s := time.Now()
		err := p.own.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: unrelated0}, PeerName: unrelated1})
		if err == nil {
			var l netlink.Link
			if l, err = p.own.h.LinkByName(unrelated0); err == nil {
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

// moveRound times the add, the move into t and the deletion in t of one veth pair.
func (p *Prober) moveRound(t *NS) {
	if l, err := t.h.LinkByName(linkB); err == nil {
		_ = t.h.LinkDel(l)
	}
	s := time.Now()
	err := p.own.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: linkA}, PeerName: linkB})
	p.record("add", s, err)
	if err != nil {
		return
	}
	s = time.Now()
	l, err := p.own.h.LinkByName(linkB)
	if err == nil {
		err = p.own.h.LinkSetNsFd(l, int(t.ns))
	}
	p.record("move", s, err)
	if err != nil {
		return
	}
	s = time.Now()
	l, err = t.h.LinkByName(linkB)
	if err == nil {
		err = t.h.LinkDel(l)
	}
	p.record("del", s, err)
}
