package sfpu

import (
	"math"

	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// The softmax's exp (ExpSoftmax): e^x for the online softmax of the flash
// prefill attention, whose argument is a score less the row's running
// maximum (x <= 0 up to the maximum's bf16 rounding, -inf where masked)
// and whose result the consumers read as tf32 (the FPU's source
// registers: P V and the row sum). Domain: x <= expSoftmaxHi; below
// expSoftmaxLo (-inf included) the result is +0.
//
// exp (Cody-Waite in base e, degree-7 Taylor, overflow, underflow and NaN
// guards: 50 cycles an iteration) => base-2 reduction, degree-4 minimax
// polynomial, one clamp and the 2^k scale as a multiply (21 cycles).
var (
	// expSoftmaxLo is the clamp: e^-88 < 2^-126 rounds k = round(x log2 e)
	// to -127, whose scale 2^k is built as +0 (the result is +0).
	expSoftmaxLo = float32(-88)
	// expSoftmaxHi bounds the domain: above it k reaches 128 (the scale
	// is +Inf or wraps).
	expSoftmaxHi = float32(88)
	// expRound2 is 1.5*2^23 + 127: x log2 e plus it holds k + 127 in its
	// low mantissa bits (k = round(x log2 e)).
	expRound2 = float32(1.5*(1<<23) + 127)
	// expSoftmaxPoly are c1..c4 of 2^f ~ 1 + c1 f + c2 f^2 + c3 f^3 + c4 f^4 on
	// |f| <= 1/2: a minimax fit of the relative error (2.9e-6) with c3
	// and c4 rounded to bf16 (one SFPLOADI each) and c1, c2 refitted.
	expSoftmaxPoly = [4]float32{
		math.Float32frombits(0x3f317093), math.Float32frombits(0x3e7601c6),
		math.Float32frombits(0x3d650000), math.Float32frombits(0x3c1d0000),
	}
)

// expSoftmax is e^x for x <= expSoftmaxHi: x clamped below at
// expSoftmaxLo (SFPSWAP max), t = x log2 e + expRound2 (k + 127 in t's low
// bits, k = round(x log2 e)), f = x log2 e - k in [-1/2, 1/2] (one fused
// multiply-add), the scale s = 2^k as the float whose bits are
// (k + 127) << 23 (t shifted left 23: +0 for k = -127), and the result
// s + (f s) p(f), p(f) = c1 + f (c2 + f (c3 + f c4)), one rounding of
// s (1 + f p(f)). Postconditions (TestExpSoftmax): relative error under
// 1e-5 against float64 where e^x is an fp32 normal, 1 exactly at 0, +0
// for x < expSoftmaxLo and -inf.
func (a *asm) expSoftmax(x uint8) uint8 {
	l2e, m := a.hoist(math.Float32bits(log2e)), a.hoist(math.Float32bits(expRound2))
	c1 := a.hoist(math.Float32bits(expSoftmaxPoly[0]))
	c := a.konst(expSoftmaxLo)
	a.emit(isa.Insn{Op: isa.SFPSWAP, C: x, D: c, Mod: 1}) // x = max(x, lo) (c the min)
	t := a.reg()
	a.mad(t, x, l2e, m, 0) // t = x log2 e + 1.5*2^23 + 127
	f := a.reg()
	a.mad(f, t, isa.LConst1, m, 2)                           // k = t - (1.5*2^23 + 127) (exact)
	a.mad(f, x, l2e, f, 2)                                   // f = x log2 e - k
	a.emit(isa.Insn{Op: isa.SFPSHFT, D: t, Mod: 1, Imm: 23}) // s: t's bits << 23 = (k + 127) << 23
	a.setK(c, math.Float32bits(expSoftmaxPoly[3]))
	k := a.konst(expSoftmaxPoly[2])
	a.mad(c, c, f, k, 0) // c3 + f c4
	a.setK(k, math.Float32bits(expSoftmaxPoly[1]))
	a.mad(c, c, f, k, 0)  // c2 + f (...)
	a.mad(c, c, f, c1, 0) // p(f)
	a.mul(k, f, t)        // f s (exact: s is a power of two or 0)
	a.mad(x, c, k, t, 0)  // s + (f s) p(f)
	a.free(t, f, c, k)
	return x
}
