package sfpu

import (
	"math"
	"testing"
)

// TestExpSoftmax: the softmax's exp against float64 over its domain,
// walked by bit pattern (every binade alike, both signs up to 88, plus a
// dense walk of [-1, 0], where the softmax's arguments are): relative
// error at most 5e-6 where e^x >= 2^-100 (measured 4.7e-6 at 87.74 by
// the long walk; a tf32 read of the result truncates by up to 2^-10,
// ~1e-3), below that an absolute error under 2^-116 (f 2^k underflows
// there), and exactly 1 at ±0 and +0 at and below -88 and at -inf (the
// masked scores). In 21 cycles an iteration, exp's 50.
func TestExpSoftmax(t *testing.T) {
	p := Programs[ExpSoftmax]
	if got, want := [2]float64{p.Cycles(), Programs[Exp].Cycles()}, [2]float64{21, 50}; got != want {
		t.Errorf("cycles per 32 values (exp_softmax, exp) %v, want %v", got, want)
	}
	worst, wx, absErr := 0.0, float32(0), 0.0
	check := func(x float32) {
		want := math.Exp(float64(x))
		got := float64(p.Eval(x, 0))
		if want < 0x1p-100 {
			absErr = max(absErr, math.Abs(got-want))
			return
		}
		if e := math.Abs(got-want) / want; e > worst || math.IsNaN(e) {
			worst, wx = e, x
		}
	}
	for u := uint32(0); u <= math.Float32bits(expSoftmaxHi); u += 3 * 40009 {
		check(math.Float32frombits(u))
		check(-math.Float32frombits(u))
	}
	for u := math.Float32bits(0x1p-20); u <= math.Float32bits(1); u += 9973 {
		check(-math.Float32frombits(u))
	}
	t.Logf("max relative error %.3g at %g; absolute below 2^-100: 2^%.1f", worst, wx, math.Log2(absErr))
	if worst > 5e-6 {
		t.Errorf("relative error %.3g at x = %g (%#08x), want <= 5e-6", worst, wx, math.Float32bits(wx))
	}
	if absErr > 0x1p-116 {
		t.Errorf("absolute error %g where e^x < 2^-100, want <= 2^-116", absErr)
	}
	for _, c := range []struct {
		x    float32
		want uint32
	}{
		{0, 0x3f800000}, {float32(math.Copysign(0, -1)), 0x3f800000},
		{-88, 0}, {-88.5, 0}, {-1000, 0}, {-math.MaxFloat32, 0}, {float32(math.Inf(-1)), 0},
	} {
		if got := math.Float32bits(p.Eval(c.x, 0)); got != c.want {
			t.Errorf("exp_softmax(%g) = %#08x, want %#08x", c.x, got, c.want)
		}
	}
}
