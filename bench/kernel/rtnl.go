//go:build benchkernel

package main

// The RTNL probe (test/rtnlprobe, from bench/_rtnlprobe), collecting its operations as Samples.

import (
	"sync"
	"time"

	"k8s.io/kubernetes/test/rtnlprobe"
)

type nsHandle = rtnlprobe.NS

func openNS(name string) (*nsHandle, error) { return rtnlprobe.Open(name) }

type prober struct {
	p       *rtnlprobe.Prober
	mu      sync.Mutex
	samples []Sample
}

func newProber(own *nsHandle, every time.Duration) *prober {
	pr := &prober{}
	pr.p = rtnlprobe.New(own, every, pr.record)
	return pr
}

func (p *prober) setTarget(t *nsHandle) { p.p.SetTarget(t) }

func (p *prober) start() { p.p.Start() }

// finish stops the loop and returns all samples.
func (p *prober) finish() []Sample {
	p.p.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.samples
}

func (p *prober) record(op string, start, end time.Time, err error) {
	s := Sample{Op: op, StartNS: start.UnixNano(), EndNS: end.UnixNano()}
	if err != nil {
		s.Err = err.Error()
	}
	p.mu.Lock()
	p.samples = append(p.samples, s)
	p.mu.Unlock()
}
