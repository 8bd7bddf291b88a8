package sfpu

import (
	"math"

	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// Sigmoid and SiLU for results rounded to bf16 (sigmoid_bf16,
// silu_bf16): the same clamp as sigmoid, then 2^f by a degree-4
// polynomial in place of exp's Cody-Waite reduction and degree-7 Taylor
// polynomial, and one Newton step on SFPARECIP's estimate in place of
// two. Their relative error is under 2^-14 against float64
// (TestBF16Accuracy), 1/64 of a bf16 ulp: the bf16 rounding of the
// result is the correctly rounded one but within 2^-14 of a tie.

// exp2Poly are the coefficients c0..c4 of 2^f on [-1/2, 1/2], the
// minimax polynomial of the relative error (Remez exchange on the
// degree-4 polynomials, coefficients rounded to fp32; error 2.6e-6,
// 2^-18.5).
var exp2Poly = [5]float32{
	math.Float32frombits(0x3f7ffff4), // 0.9999993
	math.Float32frombits(0x3f31706e), // 0.6931218
	math.Float32frombits(0x3e76036d), // 0.24024744
	math.Float32frombits(0x3d650a20), // 0.05591786
	math.Float32frombits(0x3c1ccbeb), // 0.009570102
}

// sigmoidBF16 is 1/(1 + e^-x) to about 2^-15 relative: n = -x clamped to
// [sigLo, sigHi] as sigmoid, t = n*log2e + 1.5*2^23 (k = round(n*log2e)
// in its low bits), f = n*log2e - k in [-1/2, 1/2] (one fused
// multiply-add: the product is exact within it), 2^f by exp2Poly, times
// 2^k by the integer add of k<<23, then y = 1/(1 + e^n) by SFPARECIP and
// one Newton step y = y*(2 - d*y) (recipAbove1's form: y*(1 - d*y) would
// underflow for d near 2^126; d is in [1, 2^128), and for d >= 2^126 the
// estimate is 0, which the step keeps). NaN gives a finite value (the
// caller's nanIn replaces it). times, unless noLReg, is an LREG w the
// result is multiplied by: w*y formed before the Newton step's second
// product, -e*(w*y), saving that product's wait (silu_bf16's x*sigmoid).
// exp (degree-7, Cody-Waite) + two Newton steps => 2^f (degree 4) + one step, where the result is bf16.
func (a *asm) sigmoidBF16(x, times uint8) uint8 {
	n, k := a.reg(), a.reg()
	a.emit(isa.Insn{Op: isa.SFPMOV, C: x, D: n, Mod: 1}) // n = -x
	a.setK(k, math.Float32bits(sigLo))
	a.emit(isa.Insn{Op: isa.SFPSWAP, C: n, D: k, Mod: 1}) // n = max(n, sigLo)
	a.setK(k, math.Float32bits(sigHi))
	a.emit(isa.Insn{Op: isa.SFPSWAP, C: k, D: n, Mod: 1}) // n = min(n, sigHi)
	l2e, m := a.hoist(math.Float32bits(log2e)), a.hoist(math.Float32bits(roundMagi))
	t := a.reg()
	a.mad(t, n, l2e, m, 0)         // t = n*log2e + 1.5*2^23
	a.mad(k, t, isa.LConst1, m, 2) // k = t - 1.5*2^23 (exact)
	a.mad(n, n, l2e, k, 2)         // f = n*log2e - k
	a.free(k)
	p, c := a.konst(exp2Poly[4]), a.reg()
	for i := 3; i >= 0; i-- {
		a.setK(c, math.Float32bits(exp2Poly[i]))
		a.mad(p, p, n, c, 0)
	}
	a.free(n, c)
	a.emit(isa.Insn{Op: isa.SFPSHFT, D: t, Mod: 1, Imm: 23})
	a.emit(isa.Insn{Op: isa.SFPIADD, C: p, D: t, Mod: 4}) // e^n = p + (k<<23), condition codes untouched
	a.add(t, t, isa.LConst1, 0)                           // d = 1 + e^n
	y, e := p, a.reg()
	a.setK(e, math.Float32bits(2))
	a.emit(isa.Insn{Op: isa.SFPARECIP, C: t, D: y})
	a.mad(e, t, y, e, 2) // e = d*y - 2
	if times != noLReg {
		a.mul(y, times, y) // y = w*y while e's product runs
	}
	a.emit(isa.Insn{Op: isa.SFPMUL, A: e, B: y, C: isa.LConst0, D: y, Mod: 1}) // y = -e*y
	a.free(t, e)
	return y
}

// SiLUBF16ForBF16Results switches silu_bf16 on for silu results rounded
// to bf16 (ForBF16Result). It is off: with it, the qwen27b small config's
// 700-token check (cmd/tcc/cli TestRunQwenPromptLengths, TCC_LONG) fell
// below its fp32 threshold at the step 256..319 (logits PCC 0.988895
// against 0.998534 with silu's program; every program bit for bit against
// its same-formats reference in both), so the fused ops keep silu's
// program until that is understood.
var SiLUBF16ForBF16Results = false

// ForBF16Result is the op to run in place of o where its result is
// rounded to bf16: silu_bf16 for silu when SiLUBF16ForBF16Results is set,
// o itself otherwise. Every fused op computing silu on a value it rounds
// to bf16 asks it, and so does the reference (sim/ref siluTo), so the
// fused ops match their decompositions bit for bit either way.
// sigmoid_bf16 is not used yet: sigmoid's fused ops (the gated attention,
// the GDN gates) would move with it.
func (o Op) ForBF16Result() Op {
	if o == SiLU && SiLUBF16ForBF16Results {
		return SiLUBF16
	}
	return o
}
