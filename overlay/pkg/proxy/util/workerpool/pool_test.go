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

package workerpool

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRunOrderedBoundsConcurrency(t *testing.T) {
	const workers = 3
	var (
		mu          sync.Mutex
		running, hi int
		release     = make(chan struct{})
		started     = make(chan struct{}, 1000)
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunOrdered(200, workers, func(i int) {
			mu.Lock()
			running++
			hi = max(hi, running)
			mu.Unlock()
			started <- struct{}{}
			<-release
			mu.Lock()
			running--
			mu.Unlock()
		}, func(int) {})
	}()
	// Exactly `workers` calls can be in flight: wait for them, then let everything go.
	for i := 0; i < workers; i++ {
		<-started
	}
	close(release)
	<-done
	if hi != workers {
		t.Fatalf("at most %d produce calls ran at once, want exactly %d", hi, workers)
	}
}

func TestRunOrderedSerialStartsNothing(t *testing.T) {
	var order []string
	RunOrdered(3, 1, func(i int) { order = append(order, fmt.Sprint("p", i)) }, func(i int) { order = append(order, fmt.Sprint("c", i)) })
	if got := strings.Join(order, " "); got != "p0 c0 p1 c1 p2 c2" {
		t.Fatalf("serial order %q", got)
	}
}

func TestSize(t *testing.T) {
	if got := Size(5); got != 5 {
		t.Errorf("Size(5) = %d", got)
	}
	for _, c := range []int{0, -3} {
		if got := Size(c); got != runtime.GOMAXPROCS(0) {
			t.Errorf("Size(%d) = %d, want GOMAXPROCS %d", c, got, runtime.GOMAXPROCS(0))
		}
	}
}

func TestRunOrderedConsumesInOrderAfterProducing(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 300} {
		for _, workers := range []int{0, 1, 2, 5} {
			produced := make([]int32, n)
			var consumed []int
			RunOrdered(n, workers, func(i int) {
				atomic.AddInt32(&produced[i], 1)
			}, func(i int) {
				// Runs on the caller: no lock. produce(i) must have happened before.
				if atomic.LoadInt32(&produced[i]) != 1 {
					t.Errorf("n=%d workers=%d: consumed %d before it was produced", n, workers, i)
				}
				consumed = append(consumed, i)
			})
			if len(consumed) != n {
				t.Fatalf("n=%d workers=%d: consumed %d items", n, workers, len(consumed))
			}
			for i, c := range consumed {
				if c != i || produced[i] != 1 {
					t.Fatalf("n=%d workers=%d: position %d consumed %d (produced %d times)", n, workers, i, c, produced[i])
				}
			}
		}
	}
}

// onCaller reports whether it runs on the goroutine of the test function named test: the
// caller of RunOrdered, rather than a worker it started.
func onCaller(test string) bool {
	buf := make([]byte, 16<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "workerpool."+test+"(")
}

func TestRunOrderedOverlapsConsumingWithProducing(t *testing.T) {
	// The last batch waits for the first item to be consumed when a worker produces it: that
	// cannot end unless consuming starts before producing ends. (The caller produces too; it
	// must not wait for its own consuming.)
	for round := 0; round < 20; round++ {
		firstConsumed := make(chan struct{})
		n := 4 * batch
		RunOrdered(n, 2, func(i int) {
			if i == n-1 && !onCaller("TestRunOrderedOverlapsConsumingWithProducing") {
				<-firstConsumed
			}
		}, func(i int) {
			if i == 0 {
				close(firstConsumed)
			}
		})
	}
}

func TestRunOrderedCallerProducesWhileWaiting(t *testing.T) {
	// With two workers, the first batch blocks until the other two are produced. Whoever holds
	// it, the other produces the rest: the caller either holds it or, waiting to consume it,
	// produces the others itself.
	const n = 3 * batch
	var produced atomic.Int32
	var onCallerCalls atomic.Int32
	othersDone := make(chan struct{})
	RunOrdered(n, 2, func(i int) {
		if onCaller("TestRunOrderedCallerProducesWhileWaiting") {
			onCallerCalls.Add(1)
		}
		if i < batch {
			if i == 0 {
				<-othersDone
			}
			return
		}
		if produced.Add(1) == n-batch {
			close(othersDone)
		}
	}, func(int) {})
	if onCallerCalls.Load() == 0 {
		t.Fatal("the caller produced nothing while the next batch was not ready")
	}
}

func TestRunOrderedPropagatesPanic(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "boom 40") {
			t.Fatalf("recovered %v, want the worker's panic", r)
		}
	}()
	RunOrdered(200, 3, func(i int) {
		if i == 40 {
			panic("boom 40")
		}
	}, func(int) {})
	t.Fatal("RunOrdered returned after a worker panicked")
}
