package sfpu

import (
	"math"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestBF16Accuracy: sigmoid_bf16 and silu_bf16 are within 2^-14 relative
// error of the float64 functions on their ranges (fp32 patterns of both
// signs by bit pattern, as TestAccuracy; results below fp32's normals
// skipped), in 41 and 37 cycles per 32 values against sigmoid's and
// silu's 56 and 53, and give the accurate programs' bits on the special
// inputs of sigmoidInputs (clamp bounds, zeros, infinities, NaNs) up to
// that error.
func TestBF16Accuracy(t *testing.T) {
	const maxRel = 0x1p-14
	stride := uint32(3 * 40009)
	if longtest.Enabled() {
		stride = 4001
	}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	for _, c := range []struct {
		r       accRange
		cycles  [2]float64 // the bf16 program's, the accurate one's
		precise Op
	}{
		{accRange{op: SigmoidBF16, lo: -87.3, hi: 88, ref: sig}, [2]float64{41, 56}, Sigmoid},
		{accRange{op: SiLUBF16, lo: -87.3, hi: 88, ref: func(x float64) float64 { return x * sig(x) }}, [2]float64{37, 53}, SiLU},
	} {
		t.Run(c.r.op.String(), func(t *testing.T) {
			p := Programs[c.r.op]
			if got := [2]float64{p.Cycles(), Programs[c.precise].Cycles()}; got != c.cycles {
				t.Errorf("cycles per 32 values %v, want %v", got, c.cycles)
			}
			res := accuracy(c.r, stride, func(x float32) float32 { return p.Eval(x, 0) })
			if res.n < 1000 {
				t.Fatalf("only %d samples", res.n)
			}
			t.Logf("max relative error %.3g (2^%.2f) over %d samples", res.rel, math.Log2(res.rel), res.n)
			if res.rel > maxRel {
				t.Errorf("max relative error %.3g, want <= 2^-14 (%.3g)", res.rel, maxRel)
			}
			bad := 0
			for _, b := range sigmoidInputs(1 << 32) {
				x := math.Float32frombits(b)
				g, w := p.Eval(x, 0), Programs[c.precise].Eval(x, 0)
				ok := math.Float32bits(g) == math.Float32bits(w) || (g != g && w != w) ||
					math.Abs(float64(g)-float64(w)) <= maxRel*math.Abs(float64(w)) || math.Abs(float64(w)) < 0x1p-126
				if !ok && bad < 10 {
					bad++
					t.Errorf("%s(%#08x) = %g, %s gives %g", c.r.op, b, g, c.precise, w)
				}
			}
		})
	}
}
