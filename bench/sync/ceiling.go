package main

import (
	"sync"
	"time"
)

// The machine's parallel ceiling.
//
// speedup_36k compares the patched full sync on one worker with all workers. On a shared or
// virtual machine two vCPUs rarely give twice one vCPU's throughput, and how much less varies
// from minute to minute. The orchestrator therefore runs, in the same rounds as the syncs, a
// loop with no serial part, no allocation and no shared writes on one goroutine and on all of
// them, and prints its median speedup: the most speedup_36k could read on this machine at the
// time.

// ceilingIterations is the loop's total work: about half a second on one vCPU, as long as
// one worker's full sync at 36,000 service ports.
const ceilingIterations = 150_000_000

// split divides total iterations into parts as equal as possible, largest first.
func split(total, parts int) []int {
	out := make([]int, parts)
	for i := range out {
		out[i] = total / parts
		if i < total%parts {
			out[i]++
		}
	}
	return out
}

// spin runs n iterations of multiply-and-xor over a table of its own of 1 MiB (a worker's
// share of the L2 cache), so that the goroutines share nothing but the machine.
func spin(n int, seed uint64) uint64 {
	table := make([]uint64, 1<<17)
	h := seed | 1
	for i := 0; i < n; i++ {
		h ^= uint64(i)
		h *= 1099511628211
		table[h&(1<<17-1)] += h
	}
	return h + table[seed&(1<<17-1)]
}

// spinOn runs ceilingIterations split over goroutines and returns the wall time.
func spinOn(goroutines int) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	sink := make([]uint64, goroutines)
	for g, n := range split(ceilingIterations, goroutines) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sink[g] = spin(n, uint64(g))
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// ceilingRound measures the loop on one goroutine and on workers, and returns the speedup.
func ceilingRound(workers int) float64 {
	one := spinOn(1)
	all := spinOn(workers)
	if all <= 0 {
		return 0
	}
	return float64(one) / float64(all)
}
