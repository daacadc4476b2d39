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

// Package workerpool runs independent, indexed pieces of work on a bounded number of
// goroutines. The proxiers use it for their per-service-port rule generation stage: each piece
// writes only its own result slot, and the caller merges the slots in index order, so the
// outcome does not depend on how the work was scheduled.
package workerpool

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Size returns the number of workers to use when configured workers were asked for: configured
// itself when it is positive, and otherwise GOMAXPROCS (the number of CPUs the process may use).
func Size(configured int) int {
	if configured > 0 {
		return configured
	}
	return runtime.GOMAXPROCS(0)
}

// batch is how many consecutive indexes a worker claims at a time: enough to keep the shared
// counter out of the profile, few enough that the workers finish together.
const batch = 16

// RunOrdered calls produce(i) once for every i in [0, n) on at most workers goroutines (the
// calling goroutine and workers-1 started for it), and consume(i) for every i, in index order,
// on the calling goroutine, as soon as produce(i) has returned: consuming the first results
// overlaps producing the later ones. The calling goroutine produces whenever the next result to
// consume is not ready, so the workers never outnumber the CPUs they were sized for. Everything
// produce(i) wrote is visible to consume(i). With workers <= 1, or n <= 1, it alternates
// produce(i) and consume(i) on the calling goroutine, starting nothing. produce must be safe to
// call concurrently for different indexes, and must not wait for any consume call. If produce
// panics, RunOrdered stops consuming, waits for the other workers to stop and panics on the
// calling goroutine.
func RunOrdered(n, workers int, produce, consume func(i int)) {
	batches := (n + batch - 1) / batch
	workers = min(workers, batches)
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			produce(i)
			consume(i)
		}
		return
	}
	done := make([]chan struct{}, batches)
	for b := range done {
		done[b] = make(chan struct{})
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		panicked atomic.Pointer[workerPanic]
	)
	produceBatch := func(b int) {
		defer close(done[b])
		defer func() {
			if r := recover(); r != nil {
				panicked.CompareAndSwap(nil, &workerPanic{value: r})
			}
		}()
		for i := b * batch; i < min((b+1)*batch, n); i++ {
			produce(i)
		}
	}
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			for {
				b := int(next.Add(1)) - 1
				if b >= batches {
					return
				}
				produceBatch(b)
			}
		}()
	}
	for b := 0; b < batches; b++ {
		// The caller is the last worker: it produces a batch whenever the next one to
		// consume is not ready, so that consuming never waits for a CPU behind the workers.
	wait:
		for {
			select {
			case <-done[b]:
				break wait
			default:
			}
			c := int(next.Add(1)) - 1
			if c >= batches {
				<-done[b]
				break
			}
			produceBatch(c)
		}
		if panicked.Load() != nil {
			break
		}
		for i := b * batch; i < min((b+1)*batch, n); i++ {
			consume(i)
		}
	}
	wg.Wait()
	if p := panicked.Load(); p != nil {
		panic(fmt.Sprintf("workerpool: a worker panicked: %v", p.value))
	}
}

// workerPanic carries a worker's panic value to the calling goroutine.
type workerPanic struct {
	value any
}
