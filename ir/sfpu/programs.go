package sfpu

import (
	"math"

	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// The building blocks of tcc's SFPU programs. Each computes into a new
// LREG from its inputs, which it leaves unchanged, and frees its
// temporaries. Conditional blocks assume every lane is enabled on entry
// (they run at the top level of a program).

// Constants of exp (Cody-Waite reduction with ln2 split in a 15-bit high
// part, so k*ln2Hi is exact for |k| <= 2^8, and a low part).
var (
	log2e     = float32(math.Log2E)
	ln2Hi     = math.Float32frombits(0x3f317200) // 0.693145751953125
	ln2Lo     = float32(math.Ln2 - float64(math.Float32frombits(0x3f317200)))
	roundMagi = float32(1.5 * (1 << 23)) // x + 1.5*2^23 rounds x to an integer in the low mantissa bits
	// expHi is the smallest fp32 whose e^x overflows: ln(FLT_MAX) rounded
	// up; expLo the largest below which e^x is under 2^-126 (flushed).
	expHi = math.Float32frombits(0x42b17218) // 88.72283935546875
	expLo = math.Float32frombits(0xc2aeac50) // -87.33654785
)

// expTaylor are 1/n! for n = 1..7: e^r for |r| <= ln2/2 by Horner on the
// degree-7 Taylor polynomial (truncation below 2^-27 of the result).
var expTaylor = func() [8]float32 {
	var c [8]float32
	f := 1.0
	for n := 1; n < 8; n++ {
		f *= float64(n)
		c[n] = float32(1 / f)
	}
	return c
}()

// exp is e^x: k = round(x/ln2) by the 1.5*2^23 addition (an integer in
// the sum's low bits), r = x - k*ln2Hi - k*ln2Lo, p = e^r by Horner, and
// p scaled by 2^k with an integer add of k<<23 to its bits. x >= expHi
// gives +Inf, x < expLo gives 0 (the true value is below fp32's normals);
// NaN gives +Inf (the caller's nanIn makes it NaN).
func (a *asm) exp(x uint8) uint8 { return a.expH(x, false, false) }

// expH is exp; hoist keeps log2e and 1.5*2^23 in LREGs loaded once per
// face (two LREGs fewer for the caller). With nanOut a NaN x gives NaN
// (0x7fc00000, as nanIn would make it): a NaN x takes the overflow
// block (x - expHi is a positive NaN), whose result there is x * +Inf,
// +Inf for x >= expHi and the FMA's canonical NaN for a NaN x: one
// SFPMUL in place of nanIn's seven instructions (nanIn after the guards
// => x * +Inf in the overflow block, bit for bit:
// TestExpNaNInOverflowBlock).
func (a *asm) expH(x uint8, hoist, nanOut bool) uint8 {
	t, c := a.expCore(x, hoist)
	a.ifCmp(x, expHi, ccGE0, c, func() {
		a.setK(t, 0x7f800000)
		if nanOut {
			a.mul(t, x, t)
		}
	})
	a.ifCmp(x, expLo, ccLT0, c, func() { a.setK(t, 0) })
	a.free(c)
	return t
}

// expCore is exp without the guards: right for x in [expLo, expHi); the
// second LREG is a scratch the caller frees.
func (a *asm) expCore(x uint8, hoist bool) (uint8, uint8) {
	var t, l2e, m uint8
	if hoist {
		l2e, m = a.hoist(math.Float32bits(log2e)), a.hoist(math.Float32bits(roundMagi))
		t = a.reg()
	} else {
		t = a.konst(log2e)
		l2e, m = t, a.konst(roundMagi)
	}
	a.mad(t, x, l2e, m, 0) // t = x*log2e + 1.5*2^23
	k := a.reg()
	a.mad(k, t, isa.LConst1, m, 2) // k = t - 1.5*2^23 (exact)
	if !hoist {
		a.free(m)
	}
	c := a.konst(ln2Hi)
	r := a.reg()
	a.mad(r, k, c, x, 1) // r = x - k*ln2Hi (exact product)
	a.setK(c, math.Float32bits(ln2Lo))
	a.mad(r, k, c, r, 1) // r -= k*ln2Lo
	a.free(k)
	p := a.konst(expTaylor[7])
	for n := 6; n >= 1; n-- {
		a.setK(c, math.Float32bits(expTaylor[n]))
		a.mad(p, p, r, c, 0)
	}
	a.mad(p, p, r, isa.LConst1, 0)
	a.free(r)
	// 2^k: t's bits are 0x4b400000 + k; shifted left 23 they are k<<23.
	a.emit(isa.Insn{Op: isa.SFPSHFT, D: t, Mod: 1, Imm: 23})
	a.emit(isa.Insn{Op: isa.SFPIADD, C: p, D: t, Mod: 4}) // t = p + (k<<23), condition codes untouched
	a.free(p)
	return t, c
}

// ifCmp runs body on the lanes where x - k satisfies mode (ccGE0: x >= k,
// ccLT0: x < k), with tmp as scratch. The difference of two floats has
// the sign of their exact difference, so the compare is exact; a NaN x
// gives a positive NaN: x >= k.
func (a *asm) ifCmp(x uint8, k float32, mode uint8, tmp uint8, body func()) {
	a.push()
	a.setK(tmp, math.Float32bits(k))
	a.add(tmp, x, tmp, 2)
	a.setcc(tmp, mode)
	body()
	a.pop()
}

// ifExp runs body on the lanes whose biased exponent of x is e (0: zero
// or denormal, 255: Inf or NaN).
func (a *asm) ifExp(x uint8, e uint16, body func()) {
	s := a.reg()
	a.push()
	a.emit(isa.Insn{Op: isa.SFPEXEXP, C: x, D: s, Mod: 1}) // the biased exponent
	if e != 0 {
		a.emit(isa.Insn{Op: isa.SFPIADD, C: s, D: s, Mod: 5, Imm: uint16(-int16(e)) & 0xfff})
	}
	a.setcc(s, ccEQ0)
	body()
	a.pop()
	a.free(s)
}

// ifNeg runs body on the lanes where x's sign bit is set.
func (a *asm) ifNeg(x uint8, body func()) {
	a.push()
	a.setcc(x, ccLT0)
	body()
	a.pop()
}

// nanIn makes r NaN (0x7fc00000) on the lanes where x is a NaN: |x|'s
// bits minus 0x7f800001 is not negative.
func (a *asm) nanIn(x, r uint8) {
	t, m := a.reg(), a.reg()
	a.emit(isa.Insn{Op: isa.SFPSETSGN, C: x, D: t, Mod: 1}) // t = |x|
	a.setK(m, 0x7f800001)
	a.push()
	a.emit(isa.Insn{Op: isa.SFPIADD, C: t, D: m, Mod: 10}) // m = t - m; enabled where >= 0
	a.setK(r, 0x7fc00000)
	a.pop()
	a.free(t, m)
}

// recip is 1/x: SFPARECIP's 7-bit estimate y and two Newton steps
// y *= 2 - x*y, each residual t = x*y - 2 one fused multiply-add and
// y = -t*y one multiply (tt-llk's _sfpu_reciprocal_<2>,
// sfpu/ckernel_sfpu_recip.h, uses the same steps: a product y*(1 - x*y)
// would underflow for |x| near 2^126). The steps run only where t < 0:
// not where SFPARECIP gave Inf for a zero x or 0 for an Inf x, whose t is
// NaN (positive); y stays ±Inf or ±0 there (and 0 for |x| >= 2^126,
// whose 1/x is below fp32's normals).
func (a *asm) recip(x uint8) uint8 {
	y, t, two := a.reg(), a.reg(), a.reg()
	a.setK(two, math.Float32bits(2))
	a.emit(isa.Insn{Op: isa.SFPARECIP, C: x, D: y})
	a.mad(t, x, y, two, 2) // t = x*y - 2
	a.push()
	a.setcc(t, ccLT0)
	a.emit(isa.Insn{Op: isa.SFPMUL, A: t, B: y, C: isa.LConst0, D: y, Mod: 1}) // y = -t*y
	a.mad(t, x, y, two, 2)
	a.emit(isa.Insn{Op: isa.SFPMUL, A: t, B: y, C: isa.LConst0, D: y, Mod: 1})
	a.pop()
	a.free(t, two)
	return y
}

// recipFinite is recip for an x known to be normal and below 2^126 in
// magnitude (no guard: one LREG fewer).
func (a *asm) recipFinite(x uint8) uint8 {
	y, e := a.reg(), a.reg()
	a.emit(isa.Insn{Op: isa.SFPARECIP, C: x, D: y})
	for range 2 {
		a.mad(e, x, y, isa.LConst1, 1) // e = 1 - x*y
		a.mad(y, y, e, y, 0)
	}
	a.free(e)
	return y
}

// quotient is num/den for a den known to be normal and below 2^126 in
// magnitude: num times recipFinite(den), plus one residual correction
// (q += (num - q*den)/den). It frees num and den.
func (a *asm) quotient(num, den uint8) uint8 {
	rd := a.recipFinite(den)
	q := a.reg()
	a.mul(q, num, rd)
	a.mad(num, q, den, num, 1) // num - q*den
	a.mad(q, num, rd, q, 0)    // q += residual/den
	a.free(num, den, rd)
	return q
}

// Constants of tt-llk's SQRT_23-bits estimate (sfpu/ckernel_sfpu_sqrt.h
// _init_sqrt_ and _calculate_sqrt_body_, after Moroz et al., "Fast and
// accurate approximation algorithms for computing floating point square
// root", Numerical Algorithms 2024).
const (
	sqrtMagic = 0x5f1110a0
	sqrtP1    = float32(2.2825186)
	sqrtP2    = float32(2.2533049)
)

// rsqrtEst is 1/sqrt(x) for a positive normal x: the SQRT_23-bits
// estimate y = magic - bits/2, c = -y*(x*y), y *= P1 + c*(P2 + c)
// (products formed through x*y, near sqrt x, so none under- or
// overflows for a normal x). final adds the fused correction
// y += (y/2)*(1 - y*(x*y)), to within about an ulp.
func (a *asm) rsqrtEst(x uint8, final bool) uint8 {
	y, t, c := a.reg(), a.reg(), a.reg()
	a.emit(isa.Insn{Op: isa.SFPSHFT, C: x, D: y, Mod: 5, Imm: 0xfff})      // y = bits >> 1 (instr_mod1 4: the source is LREG c)
	a.emit(isa.Insn{Op: isa.SFPIADD, C: a.hoist(sqrtMagic), D: y, Mod: 6}) // y = magic - y, condition codes untouched
	a.mul(t, x, y)
	a.emit(isa.Insn{Op: isa.SFPMUL, A: y, B: t, C: isa.LConst0, D: c, Mod: 1}) // c = -y*(x*y)
	a.add(t, c, a.hoist(math.Float32bits(sqrtP2)), 0)                          // P2 + c
	a.mad(t, c, t, a.hoist(math.Float32bits(sqrtP1)), 0)                       // P1 + c*(P2 + c)
	a.mul(y, y, t)
	if final {
		a.mul(t, x, y)
		a.halve(c, y)                  // y/2 (exact): (y/2)*t is (t/2)*y
		a.mad(t, y, t, isa.LConst1, 1) // t = 1 - y*(x*y)
		a.mad(y, c, t, y, 0)
	}
	a.free(t, c)
	return y
}

// halve emits d = c/2 by SFPDIVP2 (the exponent less one: exact for a
// normal c above 2^-125; Inf and NaN unchanged), a simple-unit
// instruction (no MAD slot after it, unlike SFPMULI).
func (a *asm) halve(d, c uint8) {
	a.emit(isa.Insn{Op: isa.SFPDIVP2, C: c, D: d, Mod: 1, Imm: 0xfff})
}

// expTest is a new LREG holding x's biased exponent modulo 256 (the
// exponent of x's bits + 2^23 as integers, less one): 0 where x is zero
// or denormal, -1 where Inf or NaN, positive elsewhere. Emitted ahead of
// the arithmetic, its four instructions fill MAD slots;
// ifZeroOrNonFinite and ifNegNonzero test it.
func (a *asm) expTest(x uint8) uint8 {
	s := a.reg()
	a.emit(isa.Insn{Op: isa.SFPLOADI, D: s, Imm: 0x0080})             // 0x00800000
	a.emit(isa.Insn{Op: isa.SFPIADD, C: x, D: s, Mod: 4})             // s = x + s, condition codes untouched
	a.emit(isa.Insn{Op: isa.SFPEXEXP, C: s, D: s, Mod: 1})            // its biased exponent
	a.emit(isa.Insn{Op: isa.SFPIADD, C: s, D: s, Mod: 5, Imm: 0xfff}) // less one
	return s
}

// ifZeroOrNonFinite runs body on the lanes where x is zero, denormal, Inf
// or NaN (expTest's s - 1 is negative; tmp is scratch).
func (a *asm) ifZeroOrNonFinite(s, tmp uint8, body func()) {
	a.push()
	a.emit(isa.Insn{Op: isa.SFPIADD, C: s, D: tmp, Mod: 1, Imm: 0xfff}) // s - 1; enabled where < 0
	body()
	a.pop()
}

// ifNegNonzero runs body on the lanes where x is negative and not a zero
// or denormal (expTest's s is not zero).
func (a *asm) ifNegNonzero(x, s uint8, body func()) {
	a.push()
	a.setcc(x, ccLT0)
	a.setcc(s, ccNE0)
	body()
	a.pop()
}

// log is ln x for x > 0: x = 2^e * m with m in [sqrt(1/2), sqrt 2),
// s = (m-1)/(m+1) (the quotient corrected by one fused residual step),
// ln m = 2 atanh s = s*(2 + z*(2/3 + z*(2/5 + ... + z*2/11))), z = s*s
// (|s| <= 0.1716: truncation under 2^-33), and e*ln2 added as e*ln2Lo
// then e*ln2Hi. Zero, negative, Inf and NaN inputs are the caller's.
func (a *asm) log(x uint8) uint8 {
	e, m, t := a.reg(), a.reg(), a.reg()
	a.emit(isa.Insn{Op: isa.SFPEXEXP, C: x, D: e})                    // e = exponent - 127
	a.emit(isa.Insn{Op: isa.SFPSETEXP, C: x, D: m, Mod: 1, Imm: 127}) // m in [1, 2)
	a.ifCmp(m, float32(math.Sqrt2), ccGE0, t, func() {
		a.emit(isa.Insn{Op: isa.SFPSETEXP, C: m, D: m, Mod: 1, Imm: 126})
		a.emit(isa.Insn{Op: isa.SFPIADD, C: e, D: e, Mod: 5, Imm: 1})
	})
	num, den := t, a.reg()
	a.add(num, m, isa.LConst1, 2) // m - 1 (exact)
	a.add(den, m, isa.LConst1, 0) // m + 1
	a.free(m)
	s := a.quotient(num, den) // den in [1.7, 2.5)
	z := a.reg()
	a.mul(z, s, s)
	p := a.konst(2.0 / 11)
	c := a.reg()
	for _, k := range []float32{2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3, 2} {
		a.setK(c, math.Float32bits(k))
		a.mad(p, p, z, c, 0)
	}
	a.mul(p, p, s) // ln m
	a.free(z, s)
	// e as a float: two's complement to sign-magnitude, then to fp32.
	a.emit(isa.Insn{Op: isa.SFPCAST, C: e, D: e, Mod: 3})
	a.emit(isa.Insn{Op: isa.SFPCAST, C: e, D: e, Mod: 0})
	a.setK(c, math.Float32bits(ln2Lo))
	a.mad(p, e, c, p, 0)
	a.setK(c, math.Float32bits(ln2Hi))
	a.mad(p, e, c, p, 0)
	a.free(e, c)
	return p
}

// Sigmoid's clamp of -x (sigmoidClamp): below sigLo e^-x < 2^-115
// leaves 1 + e^-x at 1, above sigHi e^-x > 2^126 makes 1 + e^-x one whose
// reciprocal is 0 (SFPARECIP's 0, which the Newton steps keep), the
// values sigmoid has at the bounds; NaN lands on a bound (SFPSWAP orders
// by sign and magnitude).
var (
	sigLo = float32(-80)
	sigHi = float32(88)
)

// sigmoid is 1/(1 + e^-x): n = -x clamped to [sigLo, sigHi] by two
// SFPSWAP min/max (6 cycles in place of exp's two guard blocks, 16),
// expCore (right on the clamped range), 1 + e^n in [1, 2^128) and
// recipAbove1. Postcondition: the bits of 1/(1 + exp(-x)) built from
// exp and recip with their guards (TestSigmoidClamp) on every non-NaN x;
// NaN gives a finite value the caller's nanIn replaces.
// exp guards + guarded recip => clamp + unguarded recip.
func (a *asm) sigmoid(x uint8) uint8 {
	n, k := a.reg(), a.reg()
	a.emit(isa.Insn{Op: isa.SFPMOV, C: x, D: n, Mod: 1}) // n = -x
	a.setK(k, math.Float32bits(sigLo))
	a.emit(isa.Insn{Op: isa.SFPSWAP, C: n, D: k, Mod: 1}) // n = max(n, sigLo) (k the min)
	a.setK(k, math.Float32bits(sigHi))
	a.emit(isa.Insn{Op: isa.SFPSWAP, C: k, D: n, Mod: 1}) // n = min(n, sigHi) (k the max)
	a.free(k)
	e, c := a.expCore(n, true)
	a.free(c, n)
	a.add(e, e, isa.LConst1, 0)
	r := a.recipAbove1(e)
	a.free(e)
	return r
}

// recipAbove1 is recip for an x in [1, 2^128) (finite, positive, not
// below 1): there recip's residual t = x*y - 2 is always negative (about
// -1, or -2 where SFPARECIP gives 0 for x >= 2^126), so its guard is
// dropped and the same two Newton steps run unconditionally (same bits,
// three instructions fewer).
func (a *asm) recipAbove1(x uint8) uint8 {
	y, t, two := a.reg(), a.reg(), a.reg()
	a.setK(two, math.Float32bits(2))
	a.emit(isa.Insn{Op: isa.SFPARECIP, C: x, D: y})
	for range 2 {
		a.mad(t, x, y, two, 2)                                                     // t = x*y - 2
		a.emit(isa.Insn{Op: isa.SFPMUL, A: t, B: y, C: isa.LConst0, D: y, Mod: 1}) // y = -t*y
	}
	a.free(t, two)
	return y
}

// unary builds a one-operand program: load x, body, NaN passthrough when
// nan, store.
func unary(nan bool, body func(a *asm, x uint8) uint8) *Program {
	a := &asm{}
	x := a.reg()
	a.load(x, isa.ArgNone)
	r := body(a, x)
	if nan {
		a.nanIn(x, r)
	}
	a.store(r, isa.ArgNone)
	return a.program()
}

// Programs is tcc's own SFPU program of each op, indexed by Op.
var Programs = buildPrograms()

// unaryBody is the arithmetic of a one-operand op: from x (which it may
// overwrite and return) into the LREG it returns; nan adds the NaN
// passthrough (nanIn). A scalar op reads its parameter from LREG s
// (param's, which the caller loads).
type unaryBody struct {
	nan   bool
	param bool
	body  func(a *asm, x, s uint8) uint8
}

// unaryBodies are the one-operand ops' bodies, indexed by Op (nil: a
// binary op, or an op without a program).
var unaryBodies = func() [len(Table)]*unaryBody {
	var u [len(Table)]*unaryBody
	plain := func(nan bool, f func(a *asm, x uint8) uint8) *unaryBody {
		return &unaryBody{nan: nan, body: func(a *asm, x, _ uint8) uint8 { return f(a, x) }}
	}
	u[Exp] = plain(false, func(a *asm, x uint8) uint8 { return a.expH(x, true, true) })
	u[Log] = plain(true, func(a *asm, x uint8) uint8 {
		r := a.log(x)
		a.ifExp(x, 255, func() { a.mov(r, x) })         // +Inf (and -Inf, NaN below)
		a.ifNeg(x, func() { a.setK(r, 0x7fc00000) })    // negative: NaN
		a.ifExp(x, 0, func() { a.setK(r, 0xff800000) }) // zero or denormal: -Inf
		return r
	})
	u[Sigmoid] = plain(true, (*asm).sigmoid)
	// silu: x * sigmoid(x) with no nanIn: sigmoid of a NaN is finite, so
	// the product is the FMA's canonical NaN, nanIn's 0x7fc00000.
	u[SiLU] = plain(false, func(a *asm, x uint8) uint8 {
		r := a.sigmoid(x)
		a.mul(r, x, r)
		return r
	})
	// rsqrt and sqrt: NaN propagates through the estimate's products (a
	// NaN x gives NaN), so only +Inf, negatives and zeros are fixed up.
	// rsqrt: zeros, denormals and ±Inf take SFPARECIP's value (±0 and a
	// denormal: ±Inf; +Inf: 0), then the negatives but -0 and the negative
	// denormals (-Inf and negative NaNs included) NaN: two blocks on
	// expTest's one exponent test, whose four instructions fill MAD slots.
	// A NaN (which SFPARECIP would make ±0) keeps the estimate's NaN.
	u[SigmoidBF16] = plain(true, func(a *asm, x uint8) uint8 { return a.sigmoidBF16(x, noLReg) })
	// silu_bf16: x * sigmoid_bf16(x), x folded into the Newton step; a
	// NaN x gives the FMA's canonical NaN as silu's.
	u[SiLUBF16] = plain(false, func(a *asm, x uint8) uint8 { return a.sigmoidBF16(x, x) })
	u[Rsqrt] = plain(false, func(a *asm, x uint8) uint8 {
		s := a.expTest(x)
		r := a.rsqrtEst(x, true)
		h := a.reg()
		a.ifZeroOrNonFinite(s, h, func() {
			// not a NaN: x's mantissa (its bits << 9) AND s (0 for a zero
			// or denormal, all ones for Inf or NaN) is 0
			a.emit(isa.Insn{Op: isa.SFPSHFT, C: x, D: h, Mod: 5, Imm: 9})
			a.emit(isa.Insn{Op: isa.SFPAND, C: s, D: h})
			a.setcc(h, ccEQ0)
			a.emit(isa.Insn{Op: isa.SFPARECIP, C: x, D: r})
		})
		a.free(h)
		a.ifNegNonzero(x, s, func() { a.setK(r, 0x7fc00000) })
		a.free(s)
		return r
	})
	u[Sqrt] = plain(false, func(a *asm, x uint8) uint8 {
		// r = x*y corrected by r*(1 - y*r)/2: the residual of y, not
		// x - r*r, whose product the FMA truncates (tt-llk's
		// _calculate_sqrt_body_ corrects the same way).
		s := a.expTest(x)
		y := a.rsqrtEst(x, false)
		r, h := a.reg(), a.reg()
		a.mul(r, x, y)
		a.halve(h, r)                  // r/2 (exact for a normal r; zeros are fixed below)
		a.mad(y, y, r, isa.LConst1, 1) // e = 1 - y*r
		a.mad(r, y, h, r, 0)           // r += e*(r/2)
		// ±0 (a denormal is stored flushed), ±Inf and NaN: x; then
		// negatives but -0 (and -Inf): NaN.
		a.ifZeroOrNonFinite(s, h, func() { a.mov(r, x) })
		a.free(y, h)
		a.ifNegNonzero(x, s, func() { a.setK(r, 0x7fc00000) })
		a.free(s)
		return r
	})
	u[Recip] = plain(true, (*asm).recip)
	u[Square] = plain(false, func(a *asm, x uint8) uint8 {
		r := a.reg()
		a.mul(r, x, x)
		return r
	})
	u[Negative] = plain(false, func(a *asm, x uint8) uint8 {
		a.emit(isa.Insn{Op: isa.SFPMOV, C: x, D: x, Mod: 1})
		return x
	})
	u[Abs] = plain(false, func(a *asm, x uint8) uint8 {
		a.emit(isa.Insn{Op: isa.SFPABS, C: x, D: x, Mod: 1})
		return x
	})
	u[Relu] = plain(false, func(a *asm, x uint8) uint8 {
		a.ifNeg(x, func() { a.setK(x, 0) })
		return x
	})
	u[Softplus] = plain(false, (*asm).softplus)
	u[ExpSoftmax] = plain(false, (*asm).expSoftmax)
	u[AddScalar] = &unaryBody{param: true, body: func(a *asm, x, s uint8) uint8 { a.add(x, x, s, 0); return x }}
	u[MulScalar] = &unaryBody{param: true, body: func(a *asm, x, s uint8) uint8 { a.mul(x, x, s); return x }}
	return u
}()

func buildPrograms() [len(Table)]*Program {
	var p [len(Table)]*Program
	for o, u := range unaryBodies {
		switch {
		case u == nil:
		case u.param:
			p[o] = scalar(u.body)
		default:
			p[o] = unary(u.nan, func(a *asm, x uint8) uint8 { return u.body(a, x, noLReg) })
		}
	}
	p[AddBinary] = binary(func(a *asm, x, y uint8) { a.add(x, x, y, 0) })
	p[MulBinary] = binary(func(a *asm, x, y uint8) { a.mul(x, x, y) })
	// SFPSWAP min/max leaves the larger in C and the smaller in D
	p[MinBinary] = binary(func(a *asm, x, y uint8) { a.emit(isa.Insn{Op: isa.SFPSWAP, C: y, D: x, Mod: 1}) })
	return p
}

// noLReg is the parameter LREG of an op that takes none.
const noLReg = 0xff

// log1pAtanh are 1/(4^k (2k+1)) for k = 6..0: log1p(v) = 2 atanh(v/(2+v))
// = u*(1 + w/12 + w^2/80 + ... + w^6/53248), u = 2v/(2+v), w = u*u (the
// series in u rather than s = u/2 keeps u normal for v down to 2^-126);
// for v in [0, 1] u <= 2/3 and the truncation is under 2^-26 of the
// result.
var log1pAtanh = func() [7]float32 {
	var c [7]float32
	for i := range c {
		k := 6 - i
		c[i] = float32(1 / (math.Pow(4, float64(k)) * float64(2*k+1)))
	}
	return c
}()

// softplus is max(x, 0) + log1p(e^-|x|) for PyTorch's beta 1 and
// threshold 20: past 20, log1p(e^-x) < 2.1e-9 is under half an ulp of x,
// so x + it is x, the threshold's value, without a test. e^-|x| below
// expLo is 0. NaN propagates (its e^-|x| is NaN: the guard's compare
// keeps it), +Inf gives +Inf, -Inf 0.
func (a *asm) softplus(x uint8) uint8 {
	n := a.reg()
	a.emit(isa.Insn{Op: isa.SFPSETSGN, C: x, D: n, Mod: 1, Imm: 1}) // n = -|x|
	v, c := a.expCore(n, true)
	a.ifCmp(n, expLo, ccLT0, c, func() { a.setK(v, 0) })
	a.free(n)
	// u = v/(1 + v/2), the quotient corrected by one fused residual step.
	den := a.reg()
	a.setK(c, math.Float32bits(0.5))
	a.mad(den, v, c, isa.LConst1, 0) // 1 + v/2 in [1, 1.5]
	u := a.quotient(v, den)
	w := a.reg()
	a.mul(w, u, u)
	p := a.konst(log1pAtanh[0])
	for _, k := range log1pAtanh[1:] {
		a.setK(c, math.Float32bits(k))
		a.mad(p, p, w, c, 0)
	}
	a.mul(p, p, u) // log1p(e^-|x|)
	a.free(w, u, c)
	a.push()
	a.setcc(x, ccGE0)
	a.add(p, x, p, 0)
	a.pop()
	return p
}

// scalar builds x op param: the parameter's two halves loaded from the
// call's argument once per face (Setup).
func scalar(body func(a *asm, x, s uint8) uint8) *Program {
	a := &asm{}
	x, s := a.reg(), a.reg()
	a.setup = []isa.Insn{{Op: isa.SFPLOADI, D: s, Mod: 8, Arg: isa.ArgParamHi}, {Op: isa.SFPLOADI, D: s, Mod: 10, Arg: isa.ArgParamLo}}
	a.load(x, isa.ArgNone)
	a.store(body(a, x, s), isa.ArgNone)
	return a.program()
}

// binary builds DEST[out] = DEST[in0] op DEST[in1].
func binary(body func(a *asm, x, y uint8)) *Program {
	a := &asm{}
	x, y := a.reg(), a.reg()
	a.load(x, isa.ArgIn0)
	a.load(y, isa.ArgIn1)
	body(a, x, y)
	a.store(x, isa.ArgOut)
	return a.program()
}
