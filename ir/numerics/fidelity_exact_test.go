package numerics

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// cheaper is the next fidelity below f (HiFi4 -> HiFi3 -> HiFi2 -> LoFi).
func cheaper(f ir.MathFidelity) (ir.MathFidelity, bool) {
	switch f {
	case ir.HiFi4:
		return ir.HiFi3, true
	case ir.HiFi3:
		return ir.HiFi2, true
	case ir.HiFi2:
		return ir.LoFi, true
	}
	return 0, false
}

// matmulDiffs runs trials random [32 x 128] x [128 x 32] matmuls (four k
// tiles accumulated, as the matmul kernels do) with weights of format wdt
// (SrcA) and activations of format adt (SrcB) at fidelities f and HiFi4,
// and returns how many of the output values differ in any bit.
func matmulDiffs(r *rand.Rand, wdt, adt ir.DType, f ir.MathFidelity, fp32Dest bool, trials int) (diffs, values int) {
	const kt = 4
	rnd := func() []float32 {
		out := make([]float32, TileElems)
		for i := range out { // normal values over nine binades
			out[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4)))
		}
		return out
	}
	for range trials {
		got, want := make([]float32, TileElems), make([]float32, TileElems)
		for range kt {
			a := Quantize(adt, rnd()) // in0, SrcB: as unpacked (fp32 reads as tf32)
			for i := range a {
				a[i] = TruncTF32(a[i])
			}
			w := Quantize(wdt, rnd()) // in1, SrcA
			MatmulTile(got, a, w, f, fp32Dest)
			MatmulTile(want, a, w, ir.HiFi4, fp32Dest)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				diffs++
			}
		}
		values += TileElems
	}
	return diffs, values
}

// The fidelity policy's table (ir.ExactMatmulFidelity) is tight: for every
// weight format, matmuls at its fidelity equal HiFi4 bit for bit on random
// tiles (bf16 and fp32 activations, fp32 and bf16 DEST; 32 trials of four
// k tiles each, 32,768 output values per case), and at the next cheaper
// fidelity they do not.
func TestExactMatmulFidelity(t *testing.T) {
	for _, wdt := range []ir.DType{ir.FP32, ir.BF16, ir.BFP8B, ir.BFP4B} {
		exact := ir.ExactMatmulFidelity(wdt)
		for _, adt := range []ir.DType{ir.BF16, ir.FP32} {
			for _, fp32Dest := range []bool{true, false} {
				t.Run(fmt.Sprintf("w_%s/a_%s/fp32dest_%v", wdt, adt, fp32Dest), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(wdt), uint64(adt)))
					if exact != ir.HiFi4 {
						if d, n := matmulDiffs(r, wdt, adt, exact, fp32Dest, 32); d != 0 {
							t.Errorf("%s weights at %s: %d of %d values differ from HiFi4", wdt, exact, d, n)
						}
					}
					if c, ok := cheaper(exact); ok {
						if d, n := matmulDiffs(r, wdt, adt, c, fp32Dest, 8); d == 0 {
							t.Errorf("%s weights at %s: all %d values equal HiFi4; the table's %s is not the cheapest", wdt, c, n, exact)
						}
					}
				})
			}
		}
	}
}

// The limit of "equal": a fidelity phase whose products are all zero (here
// phase 3, bfp4_b's absent low SrcA slice) still aligns DEST to the
// exponent of its largest would-be product. A dot product whose large
// terms cancel exactly (x*1 + x*-1) leaves only a tiny term t from the
// other 16-deep slice; phase 1 already aligns t's high part away, phase 2
// adds t's low part (bf16's last activation bit), and phase 3 aligns that
// away too: HiFi3 keeps t's low part, HiFi4 gives 0. Both have lost t.
func TestExactMatmulFidelityCancellation(t *testing.T) {
	a, w := make([]float32, TileElems), make([]float32, TileElems)
	x := RoundBF16(1.0078125 * 1024)
	tiny := RoundBF16(1.0078125 * 0x1p-20)
	a[FaceIndex(0, 0)], w[FaceIndex(0, 0)] = x, 1
	a[FaceIndex(0, 1)], w[FaceIndex(1, 0)] = x, -1
	a[FaceIndex(0, 16)], w[FaceIndex(16, 0)] = tiny, 1
	got := map[ir.MathFidelity]float32{}
	for _, f := range []ir.MathFidelity{ir.HiFi3, ir.HiFi4} {
		acc := make([]float32, TileElems)
		MatmulTile(acc, a, w, f, true)
		got[f] = acc[0]
	}
	if got[ir.HiFi4] != 0 || got[ir.HiFi3] != 0x1p-27 {
		t.Errorf("cancelling dot product: HiFi3 %g, HiFi4 %g; want 2^-27 (t's low part) and 0", got[ir.HiFi3], got[ir.HiFi4])
	}
}
