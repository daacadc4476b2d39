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
// writes only its own result slot, and the caller merges the slots in index order afterwards, so
// the outcome does not depend on how the work was scheduled.
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

// Run calls fn(i) exactly once for every i in [0, n) and returns when every call has returned.
// It uses at most workers goroutines, the caller's included; with workers <= 1, or n <= 1, it
// calls fn in index order on the calling goroutine, starting nothing. fn must be safe to call
// concurrently for different indexes. If a call panics, Run waits for the other workers to stop
// and then panics on the calling goroutine with the first panic's value.
func Run(n, workers int, fn func(i int)) {
	if workers > (n+batch-1)/batch {
		workers = (n + batch - 1) / batch
	}
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		panicked atomic.Pointer[workerPanic]
	)
	work := func() {
		defer func() {
			if r := recover(); r != nil {
				panicked.CompareAndSwap(nil, &workerPanic{value: r})
			}
		}()
		for panicked.Load() == nil {
			first := int(next.Add(batch)) - batch
			if first >= n {
				return
			}
			for i := first; i < min(first+batch, n); i++ {
				fn(i)
			}
		}
	}
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	if p := panicked.Load(); p != nil {
		panic(fmt.Sprintf("workerpool: a worker panicked: %v", p.value))
	}
}

// workerPanic carries a worker's panic value to the calling goroutine.
type workerPanic struct {
	value any
}
