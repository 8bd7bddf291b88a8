package sfpu

import (
	"math"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// TestBF16Accuracy: sigmoid_bf16 and silu_bf16 are within 2^-17.5
// relative error of the float64 functions on their ranges (fp32 patterns
// of both signs by bit pattern, as TestAccuracy; results below fp32's
// normals skipped), in 45 and 41 cycles per 32 values against sigmoid's
// and silu's 56 and 53, and give the accurate programs' bits on the
// special inputs of sigmoidInputs (clamp bounds, zeros, infinities, NaNs)
// up to that error.
func TestBF16Accuracy(t *testing.T) {
	maxRel := math.Exp2(-17.5)
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
		{accRange{op: SigmoidBF16, lo: -87.3, hi: 88, ref: sig}, [2]float64{45, 56}, Sigmoid},
		{accRange{op: SiLUBF16, lo: -87.3, hi: 88, ref: func(x float64) float64 { return x * sig(x) }}, [2]float64{41, 53}, SiLU},
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
				t.Errorf("max relative error %.3g, want <= 2^-17.5 (%.3g)", res.rel, maxRel)
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

// TestBF16RoundsAsAccurate: packed as bf16 (numerics.PackerBF16, the
// rounding their fused ops' results get), sigmoid_bf16's and silu_bf16's
// results are sigmoid's and silu's on all but at most 1 in 2,000 inputs
// with |x| in [2^-6, 2^7) (fp32 patterns of both signs by bit pattern:
// where activations are; 2 and 0 of 10,900 differ). With one Newton
// step 0.1% to 0.3% differ, one ulp below (11 and 13 of these 10,900).
func TestBF16RoundsAsAccurate(t *testing.T) {
	for _, c := range [][2]Op{{SigmoidBF16, Sigmoid}, {SiLUBF16, SiLU}} {
		t.Run(c[0].String(), func(t *testing.T) {
			fast, slow := Programs[c[0]], Programs[c[1]]
			n, differ := 0, 0
			lo, hi := math.Float32bits(0x1p-6), math.Float32bits(0x1p7)
			for u := lo; u < hi; u += 20011 {
				for _, x := range []float32{math.Float32frombits(u), -math.Float32frombits(u)} {
					n++
					if numerics.PackerBF16(fast.Eval(x, 0)) != numerics.PackerBF16(slow.Eval(x, 0)) {
						differ++
					}
				}
			}
			t.Logf("%d of %d differ", differ, n)
			if differ*2000 > n {
				t.Errorf("packed as bf16, %d of %d results differ from %s's, want at most 1 in 2,000", differ, n, c[1])
			}
		})
	}
}
