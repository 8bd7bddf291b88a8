package numerics

import (
	"fmt"
	"math"
)

// RelErrFloorFraction scales the floor of MaxRelErr's denominator: errors are
// measured relative to max(|want[i]|, RelErrFloorFraction * max|want|).
const RelErrFloorFraction = 1e-3

func checkSameLen(fn string, want, got []float32) {
	if len(want) != len(got) {
		panic(fmt.Sprintf("numerics.%s: want has %d values, got has %d; the vectors must be the same length", fn, len(want), len(got)))
	}
}

// sameValues reports whether want and got are element-wise equal, NaN
// matching NaN and +0 matching -0.
func sameValues(want, got []float32) bool {
	for i, w := range want {
		g := got[i]
		if w != g && !(w != w && g != g) {
			return false
		}
	}
	return true
}

// PCC returns the Pearson correlation coefficient of want and got, computed
// in float64 with two-pass means, clamped to [-1, 1]. It never returns NaN:
//
//   - vectors that are element-wise equal (NaN matching NaN, including two
//     empty or two equal constant vectors) give 1;
//   - otherwise, a NaN or Inf in either vector gives 0;
//   - otherwise, a zero-variance (constant) vector on either side gives 0.
//
// It panics if the lengths differ.
func PCC(want, got []float32) float64 {
	checkSameLen("PCC", want, got)
	if sameValues(want, got) {
		return 1
	}
	n := float64(len(want))
	var sw, sg float64
	for i, w := range want {
		g := float64(got[i])
		if math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) {
			return 0
		}
		sw += float64(w)
		sg += g
	}
	mw, mg := sw/n, sg/n
	var cov, vw, vg float64
	for i, w := range want {
		dw := float64(w) - mw
		dg := float64(got[i]) - mg
		cov += float64(dw * dg) // explicit conversions keep the sums unfused
		vw += float64(dw * dw)
		vg += float64(dg * dg)
	}
	if vw == 0 || vg == 0 {
		return 0
	}
	r := cov / (math.Sqrt(vw) * math.Sqrt(vg))
	return math.Max(-1, math.Min(1, r))
}

// MaxRelErr returns max over i of |got[i]-want[i]| / max(|want[i]|, floor),
// computed in float64, where floor = RelErrFloorFraction * max|want| (1e-3
// of the largest finite reference magnitude), so near-zero reference values
// are judged against the tensor's scale rather than themselves. When every
// reference value is zero the floor is 1 and the result is the largest
// absolute error. Positions where want and got are equal (NaN matching NaN,
// Inf matching the same Inf) contribute 0; any other position involving NaN
// or Inf contributes +Inf. Empty vectors give 0. It panics if the lengths
// differ.
func MaxRelErr(want, got []float32) float64 {
	checkSameLen("MaxRelErr", want, got)
	var scale float64
	for _, w := range want {
		if a := math.Abs(float64(w)); a > scale && !math.IsInf(a, 0) {
			scale = a
		}
	}
	floor := RelErrFloorFraction * scale
	if scale == 0 {
		floor = 1
	}
	var worst float64
	for i, w := range want {
		g := got[i]
		if w == g || (w != w && g != g) {
			continue
		}
		wf, gf := float64(w), float64(g)
		if math.IsNaN(wf) || math.IsNaN(gf) || math.IsInf(wf, 0) || math.IsInf(gf, 0) {
			return math.Inf(1)
		}
		e := math.Abs(gf-wf) / math.Max(math.Abs(wf), floor)
		worst = math.Max(worst, e)
	}
	return worst
}
