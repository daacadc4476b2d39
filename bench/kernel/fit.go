package main

// The fit model used to extrapolate upstream's kernel cost to sizes that are too slow to run:
// a power law t = a·N^b, fitted by least squares on log t against log N. Pure.

import (
	"errors"
	"fmt"
	"math"
)

// PowerLaw is t = A·N^B.
type PowerLaw struct {
	A, B float64
	// Xs are the sizes the law was fitted on, for the report.
	Xs []float64
}

// FitPowerLaw fits t = a·N^b to the points (xs[i], ys[i]). It needs at least two points with
// distinct positive x and positive y; non-positive or NaN points are skipped.
func FitPowerLaw(xs, ys []float64) (PowerLaw, error) {
	if len(xs) != len(ys) {
		return PowerLaw{}, errors.New("fit: xs and ys differ in length")
	}
	var lx, ly, used []float64
	for i := range xs {
		if xs[i] > 0 && ys[i] > 0 && !math.IsNaN(ys[i]) && !math.IsInf(ys[i], 0) {
			lx = append(lx, math.Log(xs[i]))
			ly = append(ly, math.Log(ys[i]))
			used = append(used, xs[i])
		}
	}
	n := float64(len(lx))
	if len(lx) < 2 {
		return PowerLaw{}, fmt.Errorf("fit: need at least 2 positive points, have %d", len(lx))
	}
	var sx, sy, sxx, sxy float64
	for i := range lx {
		sx += lx[i]
		sy += ly[i]
		sxx += lx[i] * lx[i]
		sxy += lx[i] * ly[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return PowerLaw{}, errors.New("fit: all sizes are equal")
	}
	b := (n*sxy - sx*sy) / den
	a := math.Exp((sy - b*sx) / n)
	return PowerLaw{A: a, B: b, Xs: used}, nil
}

// At returns the law's value at n.
func (p PowerLaw) At(n float64) float64 { return p.A * math.Pow(n, p.B) }

func (p PowerLaw) String() string {
	return fmt.Sprintf("t = %.3g * N^%.2f (least squares on log-log over N=%v)", p.A, p.B, p.Xs)
}
