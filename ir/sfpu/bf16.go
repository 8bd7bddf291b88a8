package sfpu

import (
	"math"

	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// Sigmoid and SiLU for results rounded to bf16 (sigmoid_bf16,
// silu_bf16): the same clamp as sigmoid, then 2^f by a degree-4
// polynomial in place of exp's Cody-Waite reduction and degree-7 Taylor
// polynomial, and sigmoid's two Newton steps on SFPARECIP's estimate.
// Their relative error is under 2^-17.5 against float64
// (TestBF16Accuracy), and their results rounded to bf16 (the packer's
// rounding) are silu's and sigmoid's in all but about 1 in 5,000 inputs
// (TestBF16RoundsAsAccurate). With one Newton step (2^-14.94, always
// below: the step undershoots) 1 in 300 to 1 in 1,000 differed, and the
// qwen27b small config's --prefill 320 check fell below its fp32
// threshold (see SiLUBF16ForBF16Results).

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

// sigmoidBF16 is 1/(1 + e^-x) to 2^-17.5 relative: n = -x clamped to
// [sigLo, sigHi] as sigmoid, t = n*log2e + 1.5*2^23 (k = round(n*log2e)
// in its low bits), f = n*log2e - k in [-1/2, 1/2] (one fused
// multiply-add: the product is exact within it), 2^f by exp2Poly, times
// 2^k by the integer add of k<<23, then y = 1/(1 + e^n) by SFPARECIP and
// two Newton steps y = y*(2 - d*y) (recipAbove1's: y*(1 - d*y) would
// underflow for d near 2^126; d is in [1, 2^128), and for d >= 2^126 the
// estimate is 0, which the steps keep; one step leaves 2^-15 and makes
// sigmoid(x) for x >= 16, where d = 1, 1 - 2^-15.4 instead of 1). NaN
// gives a finite value (the caller's nanIn replaces it). times, unless
// noLReg, is an LREG w the result is multiplied by: w*y formed before
// the last step's second product, -e*(w*y), saving that product's wait
// (silu_bf16's x*sigmoid).
// exp (degree-7, Cody-Waite) => 2^f (degree 4), where the result is bf16.
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
	a.mad(e, t, y, e, 2)                                                       // e = d*y - 2
	a.emit(isa.Insn{Op: isa.SFPMUL, A: e, B: y, C: isa.LConst0, D: y, Mod: 1}) // y = -e*y
	a.setK(e, math.Float32bits(2))
	a.mad(e, t, y, e, 2) // e = d*y - 2
	if times != noLReg {
		a.mul(y, times, y) // y = w*y while e's product runs
	}
	a.emit(isa.Insn{Op: isa.SFPMUL, A: e, B: y, C: isa.LConst0, D: y, Mod: 1}) // y = -e*y
	a.free(t, e)
	return y
}

// SiLUBF16ForBF16Results switches silu_bf16 on for silu results rounded
// to bf16 (ForBF16Result). Its first version (one Newton step) was
// switched off because the qwen27b small config's check (tcc run
// --check --prefill 320 --steps 1 --max-seq 1024) fell below its fp32
// threshold at the step 256..319: logits PCC 0.988895 against 0.998534
// with silu's program. That was this random model amplifying rounding
// differences, not a wrong result: its callers all pack silu's result as
// bf16 from an fp32 DEST (matmul_swiglu, conv_depthwise_state_chain,
// norm_layout_gate), it was within 2^-14.94 of silu on every input and
// differed from silu's bf16 rounding in 0.1% to 0.3% of them (one ulp
// below); the fp32 PCC is one step's last-token logits from the
// device's state, which drifts with any rounding difference, and with
// one Newton step the earlier steps' fp32 PCCs were no worse (0.9968,
// 0.9997, 0.9993, 0.9994 against silu's 0.9947, 0.9996, 0.9990,
// 0.9990). With two Newton steps that check passes (step 256..319: fp32
// PCC 0.994971; every program bit for bit).
var SiLUBF16ForBF16Results = true

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
