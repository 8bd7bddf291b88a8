package sfpu

import (
	"math"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"
	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// sigmoidBefore is sigmoid before the clamp: 1/(1 + e^-x) from exp with
// its two guard blocks and the guarded recip.
func sigmoidBefore(a *asm, x uint8) uint8 {
	n := a.reg()
	a.emit(isa.Insn{Op: isa.SFPMOV, C: x, D: n, Mod: 1})
	e := a.exp(n)
	a.free(n)
	a.add(e, e, isa.LConst1, 0)
	r := a.recip(e)
	a.free(e)
	return r
}

// sigmoidSiLUBefore are the sigmoid and silu programs before the clamp
// (silu with nanIn).
func sigmoidSiLUBefore() map[Op]*Program {
	return map[Op]*Program{
		Sigmoid: unary(true, sigmoidBefore),
		SiLU: unary(true, func(a *asm, x uint8) uint8 {
			r := sigmoidBefore(a, x)
			a.mul(r, x, r)
			return r
		}),
	}
}

// sigmoidInputs are the special inputs (zeros, infinities, NaNs of
// either sign and several payloads, denormals), the neighbourhoods of
// the clamp's bounds, of the old guards' thresholds and of where 1 + e^-x
// reaches 2^126 or stops rounding to 1 (±300 ulps of each, either sign),
// and fp32 patterns sampled by bit pattern every stride.
func sigmoidInputs(stride uint64) []uint32 {
	in := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,
		0x7fffffff, 0xffffffff, 0x7fa00000, 0x00000001, 0x807fffff, 0x3f800000, 0xbf800000}
	for _, k := range []float32{sigLo, sigHi, expHi, expLo, 87.3365, 16.6355, 17.3287} {
		for _, s := range []float32{1, -1} {
			b := math.Float32bits(s * k)
			for d := uint32(0); d <= 300; d++ {
				in = append(in, b-d, b+d)
			}
		}
	}
	for b := uint64(0); b < 1<<32; b += stride {
		in = append(in, uint32(b))
	}
	return in
}

// TestSigmoidClamp: sigmoid's and silu's programs (-x clamped by two
// SFPSWAP in place of exp's guards, recip's guard dropped, silu without
// nanIn) give the bits the programs before gave on every sigmoidInputs
// value in an fp32 DEST and on bf16 patterns in a 16-bit DEST (every
// 7th; under TCC_LONG every one, and fp32 sampled 10 times denser), in
// 56 and 53 cycles per 32 values instead of 73 and 74.
func TestSigmoidClamp(t *testing.T) {
	before := sigmoidSiLUBefore()
	cases := []struct {
		op        Op
		cycles    [2]float64 // before, now
		faceSetup float64
	}{
		{Sigmoid, [2]float64{73, 56}, 3},
		{SiLU, [2]float64{74, 53}, 3},
	}
	stride, bf16Stride := uint64(40009), uint32(7)
	if longtest.Enabled() {
		stride, bf16Stride = 4001, 1
	}
	fp32In := sigmoidInputs(stride)
	for _, c := range cases {
		t.Run(c.op.String(), func(t *testing.T) {
			b, now := before[c.op], Programs[c.op]
			if got := [2]float64{b.Cycles(), now.Cycles()}; got != c.cycles {
				t.Errorf("cycles per 32 values before and now %v, want %v", got, c.cycles)
			}
			if got := now.FaceCycles(); got != c.faceSetup {
				t.Errorf("Setup cycles per face %g, want %g", got, c.faceSetup)
			}
			bad := 0
			check := func(x float32, fp32 bool) {
				w, g := math.Float32bits(b.EvalDest(x, 0, fp32)), math.Float32bits(now.EvalDest(x, 0, fp32))
				if w != g && bad < 10 {
					bad++
					t.Errorf("%s(%#08x) fp32 DEST %v: %#08x, before %#08x", c.op, math.Float32bits(x), fp32, g, w)
				}
			}
			for _, x := range fp32In {
				check(math.Float32frombits(x), true)
			}
			for h := uint32(0); h < 1<<16; h += bf16Stride {
				check(math.Float32frombits(h<<16), false)
			}
		})
	}
}
