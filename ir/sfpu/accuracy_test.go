package sfpu

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"
	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// accRange is an op's input range for the accuracy measurement and its
// float64 reference.
type accRange struct {
	op     Op
	lo, hi float64
	ref    func(x float64) float64
	// maxULP bounds the fp32 result's error in ulps (the test's
	// assertion; the measured values are the README's table).
	maxULP float64
}

var accRanges = []accRange{
	{Exp, -87.3, 88.7, math.Exp, 1},
	{Log, 0x1p-126, math.MaxFloat32, math.Log, 3},
	{Sigmoid, -88, 88, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, 3},
	{SiLU, -87.3, 88, func(x float64) float64 { return x / (1 + math.Exp(-x)) }, 3.5},
	{Rsqrt, 0x1p-126, math.MaxFloat32, func(x float64) float64 { return 1 / math.Sqrt(x) }, 1.5},
	{Sqrt, 0x1p-126, math.MaxFloat32, math.Sqrt, 2},
	{Recip, 0x1p-126, 0x1p126, func(x float64) float64 { return 1 / x }, 1.5},
	{Softplus, -87, 30, func(x float64) float64 {
		if x >= 20 {
			return x
		}
		return math.Log1p(math.Exp(x))
	}, 4},
}

// ulpErr is |got - want| in units of the last place of want's binade at
// precision bits (24 for fp32, 8 for bf16).
func ulpErr(got float32, want float64, bits int) float64 {
	_, e := math.Frexp(want)
	return math.Abs(float64(got)-want) / math.Ldexp(1, e-bits)
}

type accResult struct {
	n                 int
	rel, ulp32, ulpBF float64
	worstX            float32
}

// accuracy evaluates eval on the fp32 values of [lo, hi] of both signs,
// walked by bit pattern with the given stride (so every binade is
// sampled alike), and returns the max relative error, the max ulps of
// the fp32 result and of its bf16 truncation (what a bf16 DEST keeps).
// References below fp32's smallest normal are skipped: results there are
// flushed to zero by design.
func accuracy(r accRange, stride uint32, eval func(x float32) float32) accResult {
	var res accResult
	walk := func(neg bool, a, b float64) {
		ua, ub := math.Float32bits(float32(a)), math.Float32bits(float32(b))
		for u := ua; u <= ub && u >= ua; u += stride {
			x := math.Float32frombits(u)
			if neg {
				x = -x
			}
			want := r.ref(float64(x))
			if math.Abs(want) < 0x1p-126 || math.Abs(want) > math.MaxFloat32 {
				continue
			}
			got := eval(x)
			res.n++
			if u := ulpErr(got, want, 24); u > res.ulp32 || math.IsNaN(u) {
				res.ulp32, res.worstX = u, x
			}
			res.rel = max(res.rel, math.Abs(float64(got)-want)/math.Abs(want))
			bf := math.Float32frombits(math.Float32bits(got) & 0xffff0000)
			res.ulpBF = max(res.ulpBF, ulpErr(bf, want, 8))
		}
	}
	if r.lo < 0 {
		walk(true, 0x1p-126, -r.lo)
	}
	if r.hi > 0 {
		walk(false, max(r.lo, 0x1p-126), r.hi)
	}
	return res
}

// ttllk is a program of tt-llk's algorithm for an op, built from its
// source for comparison (their accurate, non-approximate versions).
var ttllk = map[Op]func() *Program{
	// sfpu/ckernel_sfpu_sqrt.h _calculate_sqrt_body_ (APPROXIMATE false,
	// SQRT_23-bits) with _init_sqrt_'s constants 0x5f1110a0, 2.2825186,
	// 2.2533049: y = magic - bits/2, c = -y*(x*y),
	// y *= P1 + c*(P2 + c), then one fused correction.
	Sqrt:  func() *Program { return ttSqrt(false) },
	Rsqrt: func() *Program { return ttSqrt(true) },
}

func ttSqrt(reciprocal bool) *Program {
	a := &asm{}
	x := a.reg()
	a.load(x, isa.ArgNone)
	y, t, xy, c := a.reg(), a.reg(), a.reg(), a.reg()
	a.mov(y, x)
	a.emit(isa.Insn{Op: isa.SFPSHFT, D: y, Mod: 1, Imm: 0xfff})
	a.setK(t, 0x5f1110a0)
	a.emit(isa.Insn{Op: isa.SFPIADD, C: t, D: y, Mod: 6})
	a.mul(xy, x, y)
	a.emit(isa.Insn{Op: isa.SFPMUL, A: y, B: xy, C: isa.LConst0, D: c, Mod: 1}) // c = -y*xy
	a.setK(t, math.Float32bits(2.2533049))
	a.add(t, c, t, 0) // P2 + c
	p1 := a.konst(2.2825186)
	a.mad(t, c, t, p1, 0) // P1 + c*(P2 + c)
	a.mul(y, y, t)
	a.mul(xy, x, y)
	a.mad(c, y, xy, isa.LConst1, 1) // 1 - y*xy
	if reciprocal {
		a.emit(isa.Insn{Op: isa.SFPDIVP2, C: y, D: t, Mod: 1, Imm: 0xfff}) // y/2
		a.mad(y, c, t, y, 0)
	} else {
		a.mov(t, xy)
		a.emit(isa.Insn{Op: isa.SFPMULI, D: t, Imm: 0x3f00})
		a.mad(y, c, t, xy, 0)
	}
	a.store(y, isa.ArgNone)
	return a.program()
}

// Each op's accuracy against float64 over its whole input range: the fp32
// result within maxULP ulps, its bf16 truncation within 1 bf16 ulp, and
// no worse than tt-llk's algorithm for the op where the test models it
// (sqrt, rsqrt; recip is the same algorithm; exp's accurate version is
// the same Cody-Waite reduction and degree-7 Taylor polynomial, with a
// < 1 ulp target, sfpu/ckernel_sfpu_exp.h:127-128). TCC_SFPU_ACCURACY=1
// prints the table the README shows (a denser walk).
func TestAccuracy(t *testing.T) {
	// every third sample of the long check's walk (a subset: its maxima
	// are at most the long walk's, ~35,000 samples an op)
	stride := uint32(3 * 40009)
	if longtest.Enabled() {
		stride = 40009
	}
	table := os.Getenv("TCC_SFPU_ACCURACY") != ""
	if table {
		stride = 997
	}
	for _, r := range accRanges {
		t.Run(r.op.String(), func(t *testing.T) {
			res := accuracy(r, stride, func(x float32) float32 { return Programs[r.op].Eval(x, 0) })
			if res.n < 1000 {
				t.Fatalf("only %d samples", res.n)
			}
			line := fmt.Sprintf("| %s | [%g, %g] | %d | %.2g | %.2f | %.2f | %g |", r.op, r.lo, r.hi, res.n, res.rel, res.ulp32, res.ulpBF, Programs[r.op].Cycles())
			if mk := ttllk[r.op]; mk != nil {
				theirs := accuracy(r, stride, func(x float32) float32 { return mk().Eval(x, 0) })
				line += fmt.Sprintf(" tt-llk %.2g rel, %.2f ulp", theirs.rel, theirs.ulp32)
				if res.ulp32 > theirs.ulp32 {
					t.Errorf("%.2f ulp, tt-llk's algorithm %.2f", res.ulp32, theirs.ulp32)
				}
			}
			t.Log(line)
			if res.ulp32 > r.maxULP {
				t.Errorf("max error %.2f ulp at x = %g (%08x), want <= %g", res.ulp32, res.worstX, math.Float32bits(res.worstX), r.maxULP)
			}
			if res.ulpBF > 1 {
				t.Errorf("bf16 result off by %.2f bf16 ulp, want <= 1 (truncation)", res.ulpBF)
			}
		})
	}
}
