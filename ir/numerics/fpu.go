package numerics

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
)

// srcOperand is one FPU source value reduced to the source-register format
// and split into its fidelity parts. hi and lo are exact bit subsets of the
// reduced value, so hi+lo is the part of the value the multiplier can see.
// A NaN or Inf is kept in hi with lo == 0.
type srcOperand struct{ hi, lo float32 }

// Mantissa masks for the fidelity splits (sign and exponent always kept).
const (
	srcAHiMask  = 0xFFF80000 // hidden bit + top 4 mantissa bits
	srcAAllMask = 0xFFFFC000 // ... + next 5 bits (tf32's last bit is unused)
	srcBHiMask  = 0xFFFE0000 // hidden bit + top 6 mantissa bits
	srcBAllMask = 0xFFFFE000 // ... + next 4 bits (all of tf32)
)

func splitOperand(x float32, hiMask, allMask uint32) srcOperand {
	r := TruncTF32(x)
	b := math.Float32bits(r)
	if b&0x7F800000 == 0x7F800000 { // Inf or NaN
		return srcOperand{hi: r}
	}
	hi := math.Float32frombits(b & hiMask)
	all := math.Float32frombits(b & allMask)
	return srcOperand{hi: hi, lo: all - hi} // exact: all and hi share sign and exponent
}

func splitSrcA(x float32) srcOperand { return splitOperand(x, srcAHiMask, srcAAllMask) }
func splitSrcB(x float32) srcOperand { return splitOperand(x, srcBHiMask, srcBAllMask) }

// minNormal32 is the smallest positive normal float32, 2^-126.
const minNormal32 = 0x1p-126

// product multiplies two split operands at fidelity f. Every partial sum is
// exact in float64; the result is rounded once to float32 and a subnormal
// result flushes to signed zero. Non-finite operands give the IEEE product
// of the reduced values.
func product(a, b srcOperand, f ir.MathFidelity) float32 {
	ah, al, bh, bl := float64(a.hi), float64(a.lo), float64(b.hi), float64(b.lo)
	var p float64
	switch f {
	case ir.LoFi:
		p = ah * bh
	case ir.HiFi2:
		p = (ah + al) * bh
	case ir.HiFi3:
		p = (ah+al)*bh + ah*bl
	default:
		p = (ah + al) * (bh + bl)
	}
	if p-p != 0 { // NaN or Inf: only possible with a non-finite operand
		p = (ah + al) * (bh + bl)
	}
	if math.Abs(p) < minNormal32 {
		return float32(math.Copysign(0, p))
	}
	return float32(p)
}

func checkFidelity(fn string, f ir.MathFidelity) {
	switch f {
	case ir.LoFi, ir.HiFi2, ir.HiFi3, ir.HiFi4:
		return
	}
	panic(fmt.Sprintf("numerics.%s: unknown math fidelity %s (want LoFi, HiFi2, HiFi3 or HiFi4)", fn, f))
}

// FidelityMul returns the FPU product of a SrcA operand a and a SrcB
// operand b at fidelity f, as one MVMUL/ELWMUL lane computes it:
//
//  1. Both operands are reduced to the source-register format: fp32 is
//     truncated to tf32 (TruncTF32); bf16 values, and so all bf16 and
//     block-float data, pass unchanged; subnormals flush to zero.
//  2. a is split into A_hi (hidden bit + top 4 mantissa bits) and A_lo
//     (next 5 bits); b into B_hi (hidden bit + top 6 bits) and B_lo (next 4
//     bits). A tf32 SrcA operand's last mantissa bit is never used.
//  3. The passes run by f are summed: LoFi A_hi*B_hi; HiFi2 + A_lo*B_hi;
//     HiFi3 + A_hi*B_lo; HiFi4 + A_lo*B_lo. For bf16 operands HiFi4 is the
//     exact product.
//
// The sum is exact and is rounded once to float32; a result below 2^-126
// in magnitude flushes to signed zero. NaN or Inf operands give the IEEE
// product of the reduced operands (Inf*0 is NaN).
//
// Eltwise multiply feeds in0 to SrcA and in1 to SrcB: FidelityMul(in0, in1).
// Matmul is the reverse (in0 feeds SrcB, in1 feeds SrcA):
// FidelityMul(in1, in0). It panics on a fidelity other than LoFi, HiFi2,
// HiFi3 or HiFi4.
func FidelityMul(a, b float32, f ir.MathFidelity) float32 {
	checkFidelity("FidelityMul", f)
	return product(splitSrcA(a), splitSrcB(b), f)
}

// Matmul returns the row-major [m, n] product of row-major a [m, k] (in0,
// fed to SrcB) and b [k, n] (in1, fed to SrcA) as the device computes it
// into an fp32 DEST starting from +0: both operands reduced to the source
// format (TruncTF32), then for each 32-deep tile of k (zero padded) the
// MatmulTile sequence of mvmul passes. It equals untilizing a tile-by-tile
// MatmulTile accumulation over the k tiles with fp32Dest. It panics if the
// slice lengths do not match the shapes or f is unknown.
func Matmul(a, b []float32, m, k, n int, f ir.MathFidelity) []float32 {
	return matmulOnto(nil, a, b, m, k, n, f)
}

// MatmulOnto is Matmul into an fp32 DEST that already holds acc (row-major
// [m, n], updated in place and returned) instead of +0: what matmul_tiles
// computes when it accumulates onto a tile copied or computed into DEST
// before it. MatmulOnto(zeros, ...) equals Matmul. It panics as Matmul
// does, and if acc is not m*n values.
func MatmulOnto(acc, a, b []float32, m, k, n int, f ir.MathFidelity) []float32 {
	checkMatrix("MatmulOnto (acc)", len(acc), m, n)
	return matmulOnto(acc, a, b, m, k, n, f)
}

// matmulOnto is Matmul from DEST acc (nil: +0).
func matmulOnto(acc, a, b []float32, m, k, n int, f ir.MathFidelity) []float32 {
	checkMatrix("Matmul (a)", len(a), m, k)
	checkMatrix("Matmul (b)", len(b), k, n)
	phases := fidelityPhases(f)
	kp := ceilTiles(k) * TileDim
	srcA := srcAOf(b, k, n) // srcA[j*kp+p] = b[p][j]; shared, read only
	srcB := make([]srcParts, kp)
	for i := range srcB {
		srcB[i] = partsB(0)
	}
	out := acc
	if out == nil {
		out = make([]float32, m*n)
	}
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			srcB[p] = partsB(srcWord(TruncTF32(a[i*k+p])))
		}
		for j := 0; j < n; j++ {
			col := srcA[j*kp : (j+1)*kp]
			d := math.Float32bits(out[i*n+j])
			for t := 0; t < kp; t += TileDim {
				d = mvmulPhases(col[t:t+32], srcB[t:t+32], d, phases, true)
			}
			out[i*n+j] = math.Float32frombits(d)
		}
	}
	return out
}
