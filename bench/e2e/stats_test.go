package e2e

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	vals := ms(50, 10, 40, 30, 20, 60, 70, 80, 90, 100)
	for p, want := range map[float64]int{50: 50, 99: 100, 10: 10, 11: 20, 100: 100} {
		if got := Percentile(vals, p); got != time.Duration(want)*time.Millisecond {
			t.Errorf("p%v = %v, want %dms", p, got, want)
		}
	}
	if vals[0] != 50*time.Millisecond {
		t.Error("Percentile sorted its input")
	}
	if Percentile(nil, 50) != 0 || Percentile(vals, 0) != 0 {
		t.Error("no values or p=0 must give 0")
	}
}

func TestWorstInWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(from, to int) Op {
		return Op{Name: "move", Start: t0.Add(time.Duration(from) * time.Millisecond), End: t0.Add(time.Duration(to) * time.Millisecond)}
	}
	ops := []Op{at(0, 5), at(90, 400), at(500, 510), at(1000, 1003)}
	ops[2].Failed = true
	w := Window{From: t0.Add(100 * time.Millisecond), To: t0.Add(600 * time.Millisecond)}
	worst, n := WorstIn(ops, w)
	// The operation that started before the window and waited through it counts.
	if worst != 310*time.Millisecond || n != 2 {
		t.Errorf("worst %v of %d, want 310ms of 2", worst, n)
	}
	if f := Failures(In(ops, w)); f != 1 {
		t.Errorf("%d failures, want 1", f)
	}
	if worst, n := WorstIn(ops, Window{From: t0.Add(2 * time.Second), To: t0.Add(3 * time.Second)}); worst != 0 || n != 0 {
		t.Errorf("empty window: %v %d", worst, n)
	}
}
