package main

import (
	"math"
	"strings"
	"testing"
)

func TestFitPowerLawExact(t *testing.T) {
	// t = 2e-9 * N^2.5 exactly.
	xs := []float64{6000, 12000, 24000}
	var ys []float64
	for _, x := range xs {
		ys = append(ys, 2e-9*math.Pow(x, 2.5))
	}
	p, err := FitPowerLaw(xs, ys)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(p.B-2.5) > 1e-9 || math.Abs(p.A/2e-9-1) > 1e-6 {
		t.Errorf("fit = %+v, want A=2e-9 B=2.5", p)
	}
	if got, want := p.At(36000), 2e-9*math.Pow(36000, 2.5); math.Abs(got/want-1) > 1e-6 {
		t.Errorf("At(36000) = %v, want %v", got, want)
	}
	if !strings.Contains(p.String(), "N^2.50") {
		t.Errorf("String() = %q", p.String())
	}
}

func TestFitPowerLawBaseline(t *testing.T) {
	// The baseline's upstream full-sync figures (s): the fit must be super-quadratic and
	// put 36k well beyond 24k.
	p, err := FitPowerLaw([]float64{6000, 12000, 24000}, []float64{8.2, 37.3, 469.9})
	if err != nil {
		t.Fatal(err)
	}
	if p.B < 2 || p.B > 4 {
		t.Errorf("exponent %v out of the expected range", p.B)
	}
	if p.At(36000) < 469.9 {
		t.Errorf("extrapolation to 36k = %v, below the 24k figure", p.At(36000))
	}
}

func TestFitPowerLawErrors(t *testing.T) {
	for _, tc := range []struct {
		xs, ys []float64
	}{
		{[]float64{1000}, []float64{1}},
		{[]float64{1000, 2000}, []float64{1}},
		{[]float64{1000, 1000}, []float64{1, 2}},
		{[]float64{1000, 2000}, []float64{0, math.NaN()}},
	} {
		if _, err := FitPowerLaw(tc.xs, tc.ys); err == nil {
			t.Errorf("FitPowerLaw(%v, %v): no error", tc.xs, tc.ys)
		}
	}
	// Non-positive points are skipped, not fatal, when two good ones remain.
	if _, err := FitPowerLaw([]float64{1000, 2000, 3000}, []float64{1, 0, 9}); err != nil {
		t.Errorf("skipping a zero: %v", err)
	}
}
