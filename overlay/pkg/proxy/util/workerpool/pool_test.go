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
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRunCallsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 15, 16, 17, 100, 1000} {
		for _, workers := range []int{-1, 0, 1, 2, 3, 8, 64} {
			counts := make([]int32, n)
			Run(n, workers, func(i int) { atomic.AddInt32(&counts[i], 1) })
			for i, c := range counts {
				if c != 1 {
					t.Fatalf("n=%d workers=%d: index %d called %d times", n, workers, i, c)
				}
			}
		}
	}
}

func TestRunSerialIsInOrderOnCaller(t *testing.T) {
	var order []int
	Run(50, 1, func(i int) { order = append(order, i) }) // no lock: must be the calling goroutine
	for i, got := range order {
		if got != i {
			t.Fatalf("serial run called %d at position %d", got, i)
		}
	}
	if len(order) != 50 {
		t.Fatalf("serial run made %d calls, want 50", len(order))
	}
}

func TestRunBoundsConcurrency(t *testing.T) {
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
		Run(200, workers, func(i int) {
			mu.Lock()
			running++
			hi = max(hi, running)
			mu.Unlock()
			started <- struct{}{}
			<-release
			mu.Lock()
			running--
			mu.Unlock()
		})
	}()
	// Exactly `workers` calls can be in flight: wait for them, then let everything go.
	for i := 0; i < workers; i++ {
		<-started
	}
	close(release)
	<-done
	if hi != workers {
		t.Fatalf("at most %d calls ran at once, want exactly %d", hi, workers)
	}
}

func TestRunUsesWorkersInParallel(t *testing.T) {
	// Two calls must be able to wait for each other: impossible on one goroutine.
	var wg sync.WaitGroup
	wg.Add(2)
	Run(2*batch, 2, func(i int) {
		if i%batch == 0 {
			wg.Done()
			wg.Wait()
		}
	})
}

func TestRunPropagatesPanic(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "boom 77") {
			t.Fatalf("recovered %v, want the worker's panic", r)
		}
	}()
	Run(500, 4, func(i int) {
		if i == 77 {
			panic("boom 77")
		}
	})
	t.Fatal("Run returned after a worker panicked")
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
