package main

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	vals := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		p, want float64
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {10, 1}, {1, 1}, {95, 10}} {
		if got := Percentile(vals, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if vals[0] != 5 {
		t.Error("Percentile sorted its input")
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Percentile(vals, 0)) || !math.IsNaN(Percentile(vals, 101)) {
		t.Error("want NaN for no values or p out of (0, 100]")
	}
	if Median([]float64{3}) != 3 || Median([]float64{1, 2}) != 1 {
		t.Error("Median")
	}
	// p99 of 200 values is the 198th smallest.
	var many []float64
	for i := 1; i <= 200; i++ {
		many = append(many, float64(i))
	}
	if got := Percentile(many, 99); got != 198 {
		t.Errorf("p99 of 1..200 = %v, want 198", got)
	}
}

func TestWindows(t *testing.T) {
	s := []Sample{
		{Op: "move", StartNS: 0, EndNS: 10},
		{Op: "del", StartNS: 5, EndNS: 50}, // waits through the window
		{Op: "unrelated", StartNS: 20, EndNS: 30},
		{Op: "move", StartNS: 60, EndNS: 70},
	}
	if got := Overlapping(s, 15, 40); len(got) != 2 || got[0].Op != "del" || got[1].Op != "unrelated" {
		t.Errorf("Overlapping = %+v", got)
	}
	if got := Overlapping(s, 10, 10); len(got) != 2 { // touching counts
		t.Errorf("Overlapping at an edge = %+v", got)
	}
	if got := Within(s, 0, 40); len(got) != 2 {
		t.Errorf("Within = %+v", got)
	}
	if got := ByOp(s, "move"); len(got) != 2 {
		t.Errorf("ByOp = %+v", got)
	}
}

func TestSummarize(t *testing.T) {
	var s []Sample
	for i := 1; i <= 100; i++ {
		s = append(s, Sample{StartNS: 0, EndNS: int64(i) * int64(time.Millisecond)})
	}
	s = append(s, Sample{StartNS: 0, EndNS: int64(5 * time.Second), Err: "x"})
	got := Summarize(s)
	if got.N != 101 || got.Max != 5*time.Second || got.P99 != 100*time.Millisecond || got.Errors != 1 {
		t.Errorf("Summarize = %+v", got)
	}
	if got.MaxByOp[""] != 5*time.Second || len(got.MaxByOp) != 1 {
		t.Errorf("MaxByOp = %v", got.MaxByOp)
	}
	if z := Summarize(nil); z.N != 0 || z.Max != 0 || z.MaxByOp != nil {
		t.Errorf("Summarize(nil) = %+v", z)
	}
}
