package ref

import (
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// flashChunkTiles is the cache tiles the flash prefill program
// (codegen/lower prefillChunk) streams per chunk of its online softmax.
const flashChunkTiles = 8

// flashItem is the work item of the flash prefill program that holds query
// row s (of S rows at positions pos, pos+1, ...): its tile row of up to 32
// query tokens, whose last visible position is last (its last token's),
// so it loops over cache tiles 0..tiles-1; the tiles from maskFrom on
// (the one or two crossing the causal diagonal) get a mask page.
type flashItem struct{ last, tiles, maskFrom int }

func flashItemOf(pos, s, S int) flashItem {
	T := ir.TileSize
	st := s / T
	last := pos + min(T*st+T-1, S-1)
	return flashItem{last: last, tiles: last/T + 1, maskFrom: (pos + T*st) / T}
}

// srcFP32 is the value an FPU source register holds for x read from an
// fp32 CB: truncated to tf32, fp32 subnormals flushed to a signed zero.
func srcFP32(x float32) float32 {
	x = numerics.TruncTF32(x)
	if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(x)))
	}
	return x
}

// flashKV loads the keys (transposed) and values
// of cache positions 0..n-1 of one kv head (k and v its [L, d] rows) into
// fk [d, n] and fv [n, d], as
// the flash prefill program's reader hands them to compute for an item
// whose last visible position is last: the rows past last are zero (the
// reader clears them in last's tile; later tiles are not read). It reuses
// them while the kv head and item stay the same.
func (a *attender) flashKV(k, v []float32, kv, last, n int) {
	if a.flashHead == kv && a.flashLast == last && a.flashN == n {
		return
	}
	d := a.d
	a.fk = append(a.fk[:0], make([]float32, d*n)...)
	a.fv = append(a.fv[:0], make([]float32, n*d)...)
	for t := range min(last+1, n, a.length) {
		for i, x := range k[t*d : (t+1)*d] {
			a.fk[i*n+t] = x
		}
		copy(a.fv[t*d:(t+1)*d], v[t*d:(t+1)*d])
	}
	a.flashHead, a.flashLast, a.flashN = kv, last, n
}

// attendFlashFPU writes to out the attention of query row s (q, of S
// rows at positions pos, pos+1, ...) over cache positions t <= pos + s
// of kv head kv (k and v its [L, d] rows) before its rounding to q's
// dtype, as the compute kernel of sdpa_prefill_gated
// (codegen/lower/flash_compute.go, flash_prefill.go) computes it at
// fidelity f, bit for bit: over the row's work item's cache tiles
// (flashItemOf; rows of the item past the row's own position are masked,
// not skipped) in chunks of flashChunkTiles tiles, an online softmax
// whose state is the shift nm (bf16), the row sum l and the output O
// (fp32, rescaled by the SFPU). Every fp32 intermediate an FPU op reads
// is read through a source register (srcFP32; numerics.Matmul truncates
// its operands the same way); the state is copied to DEST exactly:
//
//	raw_t = mask_t + q . k_t          matmul_tiles onto the mask (0 visible, -inf past pos + s) copied into
//	                                  DEST for tiles from maskFrom on, onto +0 before: numerics.MatmulOnto
//	s_t   = mulScalar(raw_t, scale)   mul_unary_tile, packed fp32 (where scale is a power of two the
//	                                  program multiplies q by it instead, once per item, q_scaled: the
//	                                  same bits, each product and sum scaled by 2^e exactly)
//	c     = max_t FidelityMul(s_t, 1) reduce_tile MAX over the chunk; the first maximum is kept, the
//	                                  running maximum keeps its upper 16 bits after every tile (afterTile)
//	nm'   = bf16(neg(c)) (the first chunk), else bf16(min(neg(c), nm))   negative_tile and (later
//	                                  chunks) min_binary: -max(m, c), packed to bf16 (half away from zero)
//	e_t   = expSoftmax(FPUAdd(tf32(s_t), nm')) add_tiles_bcast_cols, the softmax's exp (sfpu.ExpSoftmax), packed fp32
//	a     = expSoftmax(add(FPUSub(0, nm), FPUAdd(0, nm')))   later chunks: the rescale factor
//	l     = sum_t e_t                 matmul_tiles against the ones column onto +0 (matmulRowSum), later
//	                                  chunks add(that, mul(l, a))
//	O     = MatmulOnto(O', e, V), O' = +0 (the first chunk) or mul(O, a)
//
// then r = FPUAdd(0, tf32(recip(l))) (the reciprocal broadcast along the
// row by an add of the zero tile) and out = mul(O, r). The SFPU steps
// (neg, add, mul, min, mulScalar, expSoftmax, recip) are a.sf's.
func (a *attender) attendFlashFPU(out, q, k, v []float32, kv, pos, s, S int, scale float32, f ir.MathFidelity) {
	d, T := a.d, ir.TileSize
	it := flashItemOf(pos, s, S)
	n := it.tiles * T
	a.flashKV(k, v, kv, it.last, n)
	sf := a.sf
	rowLast := pos + s
	ninf := float32(math.Inf(-1))
	// the scores: the mask, where there is one, then q k^T, times scale
	acc := append(a.s[:0], make([]float32, n)...)
	for t := it.maskFrom * T; t < n; t++ {
		if t > rowLast {
			acc[t] = ninf
		}
	}
	sc := numerics.MatmulOnto(acc, q, a.fk, 1, d, n, f)
	for t, x := range sc {
		sc[t] = sf.mulScalar(x, scale)
	}
	a.s = sc
	e := append(a.p[:0], make([]float32, n)...)
	a.p = e
	o := append(a.o[:0], make([]float32, d)...)
	a.o = o
	var nm, l float32
	for t0 := 0; t0 < it.tiles; t0 += flashChunkTiles {
		later := t0 > 0
		lo, hi := t0*T, min(t0+flashChunkTiles, it.tiles)*T
		var c float32
		for t := lo; t < hi; t++ {
			if y := numerics.FidelityMul(sc[t], 1, f); t == lo || y > c {
				c = y
			}
			c = afterTile(c, t-lo, hi-lo)
		}
		x := sf.neg(c)
		if later {
			x = sf.min(x, nm)
		}
		nm2 := packedBF16(x)
		for t := lo; t < hi; t++ {
			e[t] = sf.expSoftmax(numerics.FPUAdd(srcFP32(sc[t]), nm2, true))
		}
		var alpha float32
		if later {
			alpha = sf.expSoftmax(sf.add(numerics.FPUSub(0, nm, true), numerics.FPUAdd(0, nm2, true)))
		}
		sum := matmulRowSum(hi-lo, func(i int) float32 { return e[lo+i] }, f)
		if later {
			sum = sf.add(sum, sf.mul(l, alpha))
			for i := range o {
				o[i] = sf.mul(o[i], alpha)
			}
		}
		l = sum
		numerics.MatmulOnto(o, e[lo:hi], a.fv[lo*d:hi*d], 1, hi-lo, d, f)
		nm = nm2
	}
	r := numerics.FPUAdd(0, srcFP32(sf.recip(l)), true)
	for i, x := range o {
		out[i] = sf.mul(x, r)
	}
}
