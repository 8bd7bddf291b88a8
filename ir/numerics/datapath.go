package numerics

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/tcc-dev/tcc/ir"
)

// This file is the FPU datapath bit for bit: how one MVMUL, ELWADD/ELWSUB
// or ELWMUL lane turns its source-register operands and its DEST value
// into a new DEST value, and how the packer turns an fp32 DEST value into
// bf16. The arithmetic follows Tenstorrent's ttsim Blackhole model
// (src/tensix.cpp: mvmul, elwadd, elwmul, fpu_accum_normalize_encode and
// the packer's fp32 -> bf16 path), which tcc's programs were run against:
// none of it is IEEE arithmetic. Products are formed from 5-bit x 7-bit
// mantissa slices, one fidelity phase per pass; the sixteen products of an
// MVMUL lane are summed in two groups of eight, each aligned to its largest
// exponent with rounding on one guard bit; those two sums and the DEST value
// are aligned to the largest of their exponents (rounding half up on the
// magnitude, with a bias of one toward zero for negative terms), added and
// renormalised with rounding half up. Every step is exact integer
// arithmetic, so the results are deterministic and reproducible.
//
// Operands here are 19-bit source words: an fp32 pattern shifted right by
// 13 (sign at bit 18, the 8-bit exponent at bits 10..17, 10 mantissa bits),
// so tf32 data keeps its 10 mantissa bits and bf16 data its 7. A word whose
// exponent is 0 is zero (subnormals flush). DEST values are fp32 patterns;
// without fp32 accumulation DEST holds bf16 (the low 16 bits are zero).

// srcWord is x as a source-register word; x must already be reduced to the
// source format (bf16 or tf32, see TruncTF32).
func srcWord(x float32) uint32 { return math.Float32bits(x) >> 13 }

func srcZero(w uint32) bool { return w&0x3FFFF < 0x400 }

// fidelityPhases is how many passes a fidelity runs (tt-metal's
// get_math_num_fidelity_phases; LoFi runs one).
func fidelityPhases(f ir.MathFidelity) int {
	if n := f.Passes(); n > 0 {
		return n
	}
	panic(fmt.Sprintf("numerics: unknown math fidelity %s (want LoFi, HiFi2, HiFi3 or HiFi4)", f))
}

// phaseSlices returns the 5-bit SrcA and 7-bit SrcB mantissa slices a
// fidelity phase multiplies and the exponent adjustment of their product.
// Phase bit 0 takes SrcA's low slice, bit 1 SrcB's low slice.
func phaseSlices(a, b uint32, phase int) (ma, mb uint32, adj int32) {
	ma, mb, adj = a&0x3FF|0x400, b&0x3FF|0x400, -127
	if phase&1 != 0 {
		ma, adj = (ma>>1)&31, adj-5
	} else {
		ma >>= 6
	}
	if phase&2 != 0 {
		mb, adj = (mb&15)<<3, adj-7
	} else {
		mb >>= 4
	}
	return ma, mb, adj
}

// term is one addend of the DEST accumulator: sign, biased exponent and a
// mantissa whose hidden bit sits at bit 23.
type term struct {
	sign uint32
	exp  int32
	man  uint32
}

// srcParts is a source word split once for every fidelity phase: its
// exponent, sign, the two mantissa slices a phase may take, and whether
// it is zero.
type srcParts struct {
	// pexp is exp, or zeroPExp for a zero: a product with a zero
	// operand then sits so far below its group's largest live one that
	// its aligned mantissa is 0 (mvmulPhases needs no branch for it).
	pexp int32
	exp  int16
	// hi and lo are at most 7 bits; sign is 0 or 1. Narrow fields make a
	// srcParts 12 bytes (Matmul's cache of converted weights holds more).
	hi, lo uint8
	sign   uint8
	zero   bool
}

// zeroPExp is a zero source word's pexp: two of them sum far below any
// live product's exponent sum (0..510) without overflowing an int32.
const zeroPExp = -1 << 24

// withPExp is p with its pexp set.
func withPExp(p srcParts) srcParts {
	p.pexp = int32(p.exp)
	if p.zero {
		p.pexp = zeroPExp
	}
	return p
}

// partsA splits a SrcA word: 5-bit slices, hidden bit + top 4 (hi) and the
// next 5 bits (lo).
func partsA(w uint32) srcParts {
	m := w&0x3FF | 0x400
	return withPExp(srcParts{exp: int16(w >> 10 & 255), sign: uint8(w >> 18 & 1), hi: uint8(m >> 6), lo: uint8((m >> 1) & 31), zero: srcZero(w)})
}

// partsB splits a SrcB word: 7-bit slices, hidden bit + top 6 (hi) and the
// low 4 bits shifted up by 3 (lo).
func partsB(w uint32) srcParts {
	m := w&0x3FF | 0x400
	return withPExp(srcParts{exp: int16(w >> 10 & 255), sign: uint8(w >> 18 & 1), hi: uint8(m >> 4), lo: uint8((m & 15) << 3), zero: srcZero(w)})
}

// mvmulLane is one output element of an MVMUL pass: DEST dst plus the dot
// product of the 16 SrcA words a and SrcB words b at one fidelity phase.
func mvmulLane(a, b []uint32, dst uint32, phase int, fp32 bool) uint32 {
	var pa, pb [16]srcParts
	for i := range pa {
		pa[i], pb[i] = partsA(a[i]), partsB(b[i])
	}
	return mvmulParts(pa[:], pb[:], dst, phase, fp32)
}

// mvmulParts is mvmulLane on split words.
func mvmulParts(a, b []srcParts, dst uint32, phase int, fp32 bool) uint32 {
	adj := int32(-127)
	if phase&1 != 0 {
		adj -= 5
	}
	if phase&2 != 0 {
		adj -= 7
	}
	var signs [16]uint32
	var exps [16]int32
	var mans [16]int32
	for i := 0; i < 16; i++ {
		x, y := &a[i], &b[i]
		if x.zero || y.zero {
			continue // sign 0, exponent 0 (the clamped product adjustment), mantissa 0
		}
		ma, mb := uint32(x.hi), uint32(y.hi)
		if phase&1 != 0 {
			ma = uint32(x.lo)
		}
		if phase&2 != 0 {
			mb = uint32(y.lo)
		}
		signs[i] = uint32(x.sign ^ y.sign)
		exps[i] = int32(x.exp) + int32(y.exp) + adj
		mans[i] = int32(ma * mb)
	}
	var sops [2]term
	for g := 0; g < 2; g++ {
		e := exps[8*g]
		for i := 1; i < 8; i++ {
			e = max(e, exps[8*g+i])
		}
		if e <= 0 {
			continue
		}
		var sum int32
		for i := 8 * g; i < 8*g+8; i++ {
			d := min(uint32(e-exps[i]), 30)
			m := ((mans[i] << 1) + (1 << d)) >> (d + 1)
			if signs[i] != 0 {
				m = -m
			}
			sum += m
		}
		var s uint32
		if sum < 0 {
			s, sum = 1, -sum
		}
		sops[g] = term{sign: s, exp: e, man: uint32(sum) << 13}
	}
	return accumulate(sops[0], sops[1], dst, fp32)
}

// mvmulPhases is DEST dst after the MVMUL passes of one 32-deep dot
// product at every fidelity phase 0..phases-1, in the card's order: per
// phase the first 16 products (a[:16], b[:16]), then the last 16. It gives
// exactly what the sequence of mvmulParts calls gives (TestMvmulPhases),
// computing once what the phases share: a product's exponent before the
// phase's adjustment, its alignment shift within its group of eight and
// its sign (the adjustment is the same for every product of a phase, so
// it moves the group's largest exponent and leaves the shifts alone; a
// zero product contributes nothing at any shift).
func mvmulPhases(a, b []srcParts, dst uint32, phases int, fp32 bool) uint32 {
	a, b = a[:32], b[:32]
	const none = math.MinInt32
	var emax [4]int32 // per group of eight products: the largest exponent, or none
	// sums[p][g] is group g's sum of aligned products at phase p: each
	// product's four partial products (hi/lo of each operand) are rounded
	// with the same shift, so one pass over a group fills every phase.
	var sums [4][4]int32
	for g := 0; g < 4; g++ {
		ga, gb := a[8*g:8*g+8:8*g+8], b[8*g:8*g+8:8*g+8]
		var pe [8]int32
		e := int32(none)
		for k := range 8 {
			pe[k] = ga[k].pexp + gb[k].pexp
			e = max(e, pe[k])
		}
		if e < zeroPExp/2 { // every product has a zero operand
			emax[g] = none
			continue
		}
		emax[g] = e
		// A product with a zero operand (pexp) shifts by 30: its at most
		// 13-bit partial products round to 0, as skipping it would give.
		// Only the phases the fidelity runs are summed (LoFi one, HiFi2
		// two): the simulator spends most of a matmul here.
		var s0, s1, s2, s3 int32
		for k := range 8 {
			x, y := &ga[k], &gb[k]
			sh := uint32(min(e-pe[k], 30))
			r, s := int32(1)<<sh, sh+1
			neg := -int32(x.sign ^ y.sign) // 0, or -1 to negate: (m ^ -1) + 1 = -m
			xh, xl, yh, yl := int32(x.hi), int32(x.lo), int32(y.hi), int32(y.lo)
			s0 += ((xh*yh<<1+r)>>s ^ neg) - neg
			if phases > 1 {
				s1 += ((xl*yh<<1+r)>>s ^ neg) - neg
				if phases > 2 {
					s2 += ((xh*yl<<1+r)>>s ^ neg) - neg
					s3 += ((xl*yl<<1+r)>>s ^ neg) - neg
				}
			}
		}
		sums[0][g], sums[1][g], sums[2][g], sums[3][g] = s0, s1, s2, s3
	}
	d := dst
	for phase := 0; phase < phases; phase++ {
		adj := int32(-127)
		if phase&1 != 0 {
			adj -= 5
		}
		if phase&2 != 0 {
			adj -= 7
		}
		for h := 0; h < 2; h++ {
			var sops [2]term
			for gg := 0; gg < 2; gg++ {
				g := 2*h + gg
				if emax[g] == none || emax[g]+adj <= 0 {
					continue
				}
				sum := sums[phase][g]
				var sg uint32
				if sum < 0 {
					sg, sum = 1, -sum
				}
				sops[gg] = term{sign: sg, exp: emax[g] + adj, man: uint32(sum) << 13}
			}
			d = accumulate(sops[0], sops[1], d, fp32)
		}
	}
	return d
}

// accumulate adds two terms to DEST value dst and encodes the sum.
func accumulate(t0, t1 term, dst uint32, fp32 bool) uint32 {
	sd, ed, md := dst>>31, int32(dst>>23&255), dst&0x7FFFFF|0x800000
	if ed == 0 {
		md = 0
	}
	e := max(t0.exp, t1.exp, ed)
	if e <= 0 {
		return 0
	}
	align := func(m uint32, ex int32, bias uint32) uint32 {
		if ex >= e {
			return m
		}
		if d := uint32(e - ex); d < 31 {
			return (m + 1<<(d-1) - bias) >> d
		}
		return 0
	}
	m0, m1 := align(t0.man, t0.exp, t0.sign), align(t1.man, t1.exp, t1.sign)
	md = align(md, ed, 0)
	if !fp32 { // without fp32 accumulation the low 13 bits are rounded away
		m0 = (m0 + 1<<12 - t0.sign) &^ 0x1FFF
		m1 = (m1 + 1<<12 - t1.sign) &^ 0x1FFF
		md = (md + 1<<12) &^ 0x1FFF
	}
	sign, man := sd, int32(md)
	t0.man, t1.man = m0, m1
	for _, t := range [2]term{t0, t1} {
		if t.sign == sign {
			man += int32(t.man)
		} else {
			man -= int32(t.man)
		}
	}
	if man < 0 {
		man, sign = -man, sign^1
	}
	if man == 0 {
		return 0
	}
	shift := int32(bits.LeadingZeros32(uint32(man))) - 8
	e -= shift
	if !fp32 {
		shift -= 16 // normalise to bf16's 8 significant bits
	}
	if shift < 0 {
		shift = -shift
		man = (man + 1<<(shift-1)) >> shift
	} else {
		man <<= shift
	}
	if !fp32 {
		man <<= 16
	}
	if man&0x1000000 != 0 {
		e++
	}
	switch {
	case e <= 0:
		return 0
	case e >= 255:
		return sign<<31 | 255<<23
	}
	return sign<<31 | uint32(e)<<23 | uint32(man)&0x7FFFFF
}

// elwaddLane is one ELWADD lane (ELWSUB negates b first) without DEST
// accumulation: a + b with b aligned to a's exponent in 11 bits.
func elwaddLane(a, b uint32, fp32 bool) uint32 {
	if srcZero(a) {
		a = 0
	}
	if srcZero(b) {
		b = 0
	}
	if a&0x3FFFF < b&0x3FFFF {
		a, b = b, a
	}
	sa, sb := a>>18&1, b>>18&1
	ea, eb := int32(a>>10&255), int32(b>>10&255)
	var ma, mb uint32
	if a != 0 {
		ma = a&0x3FF | 0x400
	}
	if b != 0 {
		mb = b&0x3FF | 0x400
	}
	if eb < ea {
		if d := uint32(ea - eb); d < 12 {
			mb = (mb + 1<<(d-1)) >> d
		} else {
			mb = 0
		}
	}
	m := ma + mb
	if sa != sb {
		m = ma - mb
	}
	return accumulate(term{sign: sa, exp: ea, man: m << 13}, term{}, 0, fp32)
}

// elwmulLane is one ELWMUL pass at one fidelity phase; ELWMUL always
// accumulates into DEST.
func elwmulLane(a, b, dst uint32, phase int, fp32 bool) uint32 {
	t := term{}
	if !srcZero(a) && !srcZero(b) {
		ma, mb, adj := phaseSlices(a, b, phase)
		if e := int32(a>>10&255) + int32(b>>10&255) + adj; e > 0 {
			t = term{sign: (a ^ b) >> 18 & 1, exp: e, man: ma * mb << 13}
		}
	}
	return accumulate(t, term{}, dst, fp32)
}

// destWord is a DEST value as the accumulator reads it: fp32, or bf16
// (the low 16 bits dropped) without fp32 accumulation.
func destWord(x float32, fp32 bool) uint32 {
	b := math.Float32bits(x)
	if !fp32 {
		b &= 0xFFFF0000
	}
	return b
}

// FPUAdd returns DEST = a + b as ELWADD computes it (add_tiles; DEST is
// not accumulated into). a and b are source-register values (bf16, or
// tf32 from fp32 data; see TruncTF32). With fp32Dest false the result is
// a bf16 value.
func FPUAdd(a, b float32, fp32Dest bool) float32 {
	return math.Float32frombits(elwaddLane(srcWord(a), srcWord(b), fp32Dest))
}

// FPUSub returns DEST = a - b as ELWSUB computes it (ELWADD of -b).
func FPUSub(a, b float32, fp32Dest bool) float32 {
	return math.Float32frombits(elwaddLane(srcWord(a), srcWord(b)^1<<18, fp32Dest))
}

// FPUMul returns DEST dst + a*b as ELWMUL computes it at fidelity f: one
// pass per fidelity phase, each accumulated into DEST. a is the SrcA
// operand (eltwise in0), b the SrcB operand (in1). mul_tiles runs on a
// DEST the packer has cleared, so dst is normally 0.
func FPUMul(a, b, dst float32, f ir.MathFidelity, fp32Dest bool) float32 {
	wa, wb, d := srcWord(a), srcWord(b), destWord(dst, fp32Dest)
	for p := 0; p < fidelityPhases(f); p++ {
		d = elwmulLane(wa, wb, d, p, fp32Dest)
	}
	return math.Float32frombits(d)
}

// MatmulTile accumulates acc += a x b for 32x32 tiles given in face order
// as the LLK tile matmul runs MVMUL on Blackhole: a is in0 and feeds SrcB,
// b is in1 and feeds SrcA, both already source-register values. For every
// output element DEST is updated once per fidelity phase (in phase order)
// and, within a phase, once per 16-deep slice of the inner dimension
// (k 0..15, then 16..31), each update one mvmul lane. With fp32Dest false
// DEST holds bf16 and acc comes back bf16. It panics if a slice is not one
// tile long or f is unknown.
func MatmulTile(acc, a, b []float32, f ir.MathFidelity, fp32Dest bool) {
	if len(acc) != TileElems || len(a) != TileElems || len(b) != TileElems {
		panic(fmt.Sprintf("numerics.MatmulTile: want three %d-value tiles, got acc %d, a %d, b %d", TileElems, len(acc), len(a), len(b)))
	}
	phases := fidelityPhases(f)
	var srcA, srcB [TileDim][TileDim]srcParts // srcA[j][k] = in1[k][j]; srcB[i][k] = in0[i][k]
	for r := 0; r < TileDim; r++ {
		for c := 0; c < TileDim; c++ {
			srcA[c][r] = partsA(srcWord(b[FaceIndex(r, c)]))
			srcB[r][c] = partsB(srcWord(a[FaceIndex(r, c)]))
		}
	}
	for i := 0; i < TileDim; i++ {
		for j := 0; j < TileDim; j++ {
			at := FaceIndex(i, j)
			d := destWord(acc[at], fp32Dest)
			acc[at] = math.Float32frombits(mvmulPhases(srcA[j][:], srcB[i][:], d, phases, fp32Dest))
		}
	}
}

// PackerBF16 is the bf16 the packer writes for an fp32 DEST value x: the
// magnitude rounded half away from zero (not to even), NaN written as an
// infinity of its sign, and a result below the smallest normal bf16
// written as +0.
func PackerBF16(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		b = b&0x80000000 | 0x7F800000
	}
	v := uint16((b + 0x8000) >> 16)
	if v&0x7FFF < 0x80 {
		v = 0
	}
	return v
}

// ReduceRowOut is the DEST value reduce_tile<_, REDUCE_ROW> leaves for a
// row whose pooled value (the GAPOOL/GMPOOL result, accumulated in DEST
// row 0) is x, with the scaler tile stored as scaler. tt-llk
// (llk_math_reduce.h, without enforce_fp32_accumulation) turns the pooled
// row into a column through SrcB: MOVD2B, TRNSPSRCB, MOVD2B again (the row
// a next tile accumulates onto) and ELWADD of a zeroed SrcA, so every
// value, the running row included, is rewritten as SrcB holds it. SrcB has
// the scaler's source format: from an fp32 DEST a bf16 SrcB keeps x's
// upper 16 bits (truncation toward zero, ttsim's MOVD2B), a tf32 one its
// upper 19; the ELWADD then puts 0 + that value in DEST (FPUAdd). A bf16
// DEST (fp32Dest false) already holds the pooled value as bf16, which the
// trip leaves unchanged: x is returned as it is. Postcondition: with
// fp32Dest and a bf16 scaler the result's low 16 bits are zero.
func ReduceRowOut(x float32, scaler ir.DType, fp32Dest bool) float32 {
	if !fp32Dest {
		return x
	}
	mask := uint32(0xFFFF0000)
	if scaler == ir.FP32 {
		mask = 0xFFFFE000
	}
	return FPUAdd(0, math.Float32frombits(math.Float32bits(x)&mask), true)
}

// PoolTile is DEST dst after reduce_tile's GAPOOLs pool one line of a
// tile, x (the 32 values of a row for REDUCE_ROW, whose faces the unpacker
// transposes, or of a column for REDUCE_COL; source-register values),
// against the scaler s (SrcB) at fidelity f: GAPOOL is MVMUL on four rows
// (ttsim's tensix_matmul_op), so each face's 16 products are one mvmul
// lane, all the fidelity phases of the first face (x[:16]) and then of the
// second (x[16:]) accumulated onto DEST (tt-llk's llk_math_reduce.h runs
// the phases' MOP per face). With fp32Dest false DEST holds bf16. It
// panics unless x is 32 values long.
func PoolTile(dst float32, x []float32, s float32, f ir.MathFidelity, fp32Dest bool) float32 {
	if len(x) != TileDim {
		panic(fmt.Sprintf("numerics.PoolTile: want %d values, got %d", TileDim, len(x)))
	}
	phases := fidelityPhases(f)
	var pa [TileDim]srcParts
	for i, v := range x {
		pa[i] = partsA(srcWord(v))
	}
	var pb [16]srcParts
	for i := range pb {
		pb[i] = partsB(srcWord(s))
	}
	d := destWord(dst, fp32Dest)
	for h := 0; h < 2; h++ {
		for p := 0; p < phases; p++ {
			d = mvmulParts(pa[16*h:16*h+16], pb[:], d, p, fp32Dest)
		}
	}
	return math.Float32frombits(d)
}
