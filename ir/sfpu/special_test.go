package sfpu

import (
	"math"
	"testing"
)

// Special inputs give IEEE's results (NaN in, NaN out), with the SFPU's
// flushing: a denormal input is a zero and a result below fp32's normals
// is zero.
func TestProgramSpecialValues(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	denorm := math.Float32frombits(0x00400000)
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct {
		op      Op
		x, y    float32
		want    float32
		comment string
	}{
		{Exp, 0, 0, 1, ""},
		{Exp, inf, 0, inf, ""},
		{Exp, -inf, 0, 0, ""},
		{Exp, 89, 0, inf, "overflows"},
		{Exp, -88, 0, 0, "below fp32's normals: flushed"},
		{Exp, -0x1p100, 0, 0, "gdn_chunk_prep's decay mask (codegen/lower gdnDecayMask): +0"},
		{Exp, nan, 0, nan, ""},
		{Log, 1, 0, 0, ""},
		{Log, 0, 0, -inf, ""},
		{Log, denorm, 0, -inf, "a denormal is zero"},
		{Log, -1, 0, nan, ""},
		{Log, inf, 0, inf, ""},
		{Log, nan, 0, nan, ""},
		{Recip, 0, 0, inf, ""},
		{Recip, negZero, 0, -inf, ""},
		{Recip, inf, 0, 0, ""},
		{Recip, -4, 0, -0.25, ""},
		{Recip, nan, 0, nan, ""},
		{Rsqrt, 4, 0, 0.5, ""},
		{Rsqrt, 0, 0, inf, ""},
		{Rsqrt, negZero, 0, -inf, ""},
		{Rsqrt, nan, 0, nan, ""},
		{Rsqrt, denorm, 0, inf, "a denormal is zero"},
		{Rsqrt, -1, 0, nan, ""},
		{Rsqrt, inf, 0, 0, ""},
		{Rsqrt, -inf, 0, nan, ""},
		{Rsqrt, -denorm, 0, -inf, "a denormal is zero"},
		{Rsqrt, -nan, 0, nan, ""},
		{Rsqrt, math.Float32frombits(0x7f800001), 0, nan, "a signalling NaN"},
		{Rsqrt, math.Float32frombits(0xffffffff), 0, nan, ""},
		{Rsqrt, math.Float32frombits(0x7f7fffff), 0, float32(1 / math.Sqrt(float64(math.MaxFloat32))), "fp32's largest"},
		{Rsqrt, math.Float32frombits(0x00800000), 0, 0x1p63, "fp32's smallest normal"},
		{Sqrt, 9, 0, 3, ""},
		{Sqrt, 0, 0, 0, ""},
		{Sqrt, negZero, 0, negZero, ""},
		{Sqrt, -1, 0, nan, ""},
		{Sqrt, inf, 0, inf, ""},
		{Sqrt, nan, 0, nan, ""},
		{Sqrt, denorm, 0, 0, "a denormal is zero"},
		{Sigmoid, 0, 0, 0.5, ""},
		{Sigmoid, inf, 0, 1, ""},
		{Sigmoid, -inf, 0, 0, ""},
		{Sigmoid, nan, 0, nan, ""},
		{SiLU, 0, 0, 0, ""},
		{SiLU, inf, 0, inf, ""},
		// sigmoid_bf16(0) is 0.5 within 2^-17.5 (TestBF16Accuracy), not
		// exactly; +Inf gives 1 exactly (with one Newton step 1 - 2^-15.4).
		{SigmoidBF16, inf, 0, 1, ""},
		{SigmoidBF16, -inf, 0, 0, ""},
		{SigmoidBF16, nan, 0, nan, ""},
		{SiLUBF16, 0, 0, 0, ""},
		{SiLUBF16, inf, 0, inf, ""},
		{SiLUBF16, nan, 0, nan, ""},
		{Softplus, 0, 0, float32(math.Ln2), ""},
		{Softplus, 25, 0, 25, "past the threshold: x"},
		{Softplus, -inf, 0, 0, ""},
		{Softplus, inf, 0, inf, ""},
		{Softplus, nan, 0, nan, ""},
		{Relu, -1, 0, 0, ""},
		{Relu, 1.5, 0, 1.5, ""},
		{Abs, -2, 0, 2, ""},
		{Negative, 2, 0, -2, ""},
		{Square, -3, 0, 9, ""},
		{AddScalar, 1, 2, 3, ""},
		{MulScalar, 3, 2.5, 7.5, ""},
		{AddBinary, 1, 2, 3, ""},
		{MulBinary, 3, -2, -6, ""},
		{MinBinary, 3, -2, -2, ""},
		{MinBinary, -2, 3, -2, ""},
		{MinBinary, inf, -1.5, -1.5, "-c of a row that sees none of the chunk"},
		{MinBinary, -1.5, inf, -1.5, ""},
		{MinBinary, negZero, 0, negZero, "SFPSWAP orders -0 below +0"},
		{MinBinary, 0, negZero, negZero, ""},
		{MinBinary, -inf, 1, -inf, ""},
	} {
		t.Run(c.op.String(), func(t *testing.T) {
			got := Programs[c.op].Eval(c.x, c.y)
			same := math.Float32bits(got) == math.Float32bits(c.want) || (c.want != c.want && got != got)
			if !same {
				t.Errorf("%s(%g, %g) = %g (%08x), want %g %s", c.op, c.x, c.y, got, math.Float32bits(got), c.want, c.comment)
			}
		})
	}
}

// TestCodeForOpWithoutProgram: an op with no tcc program (one added to the
// table with its tt-metal call only) runs tt-metal's call under CodeTCC,
// so adding an SFPU op stays two table lines; ops with a program keep
// CodeTCC.
func TestCodeForOpWithoutProgram(t *testing.T) {
	for _, s := range Table {
		if !s.Op.HasProgram() {
			continue
		}
		if got := CodeTCC.For(s.Op); got != CodeTCC {
			t.Errorf("CodeTCC.For(%s) = %s, want tcc", s.Name, got)
		}
	}
	none := Op(len(Table))
	if none.HasProgram() {
		t.Fatalf("op %d past the table has a program", none)
	}
	for _, c := range Codes {
		if got := c.For(none); got != CodeLLK {
			t.Errorf("%s.For(op without a program) = %s, want llk", c, got)
		}
	}
}
