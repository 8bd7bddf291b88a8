package ref

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Attention pieces: rotary (rotate-half RoPE); update_cache and fill_cache
// (write one position, or S consecutive positions, of a KV cache); and
// sdpa_decode and sdpa_prefill (one query token per user against the cache
// up to the current position, or S query tokens with a causal mask offset
// by the position). Without StorageFormats rotary and the sdpa ops are
// "fp32 math": computed in float64 and rounded once to float32 before the
// result's storage rounding. With it they are computed as the device's
// programs compute them, step by step (rotaryFPU; attender.attendFPU), so
// that a correct program agrees with the reference bit for bit. The cache
// updates only copy values.
//
// The decode ops (update_cache, sdpa_decode and the fused attn_prologue
// and sdpa_decode_gated) take pos [1], one position shared by every user
// of the batch, or pos [B], user b at pos[b] (decodePos); the prefill ops
// take pos [1] (spanPos).
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpRotary:      evalRotary,
		ir.OpUpdateCache: evalUpdateCache,
		ir.OpSDPADecode:  evalSDPADecode,
		ir.OpFillCache:   evalFillCache,
		ir.OpSDPAPrefill: evalSDPAPrefill,
	})
}

// decodePos returns the position of each of the B users held by pos,
// after checking that pos is [1] (every user at pos[0]) or [B] (user b at
// pos[b]) and that each is an integer in [0, length).
func decodePos(pos Tensor, B, length int) ([]int, error) {
	if !pos.Shape.Equal(ir.Shape{1}) && !pos.Shape.Equal(ir.Shape{B}) {
		return nil, fmt.Errorf("rule decode-pos: pos must be [1] or [%d] (one position per user), got %s", B, pos.Shape)
	}
	ps := make([]int, B)
	for b := range B {
		i := 0
		if pos.Shape[0] > 1 {
			i = b
		}
		p := float64(pos.Data[i])
		if p != math.Trunc(p) || p < 0 || p >= float64(length) {
			name := "pos"
			if pos.Shape[0] > 1 {
				name = fmt.Sprintf("pos[%d] =", i)
			}
			return nil, fmt.Errorf("rule decode-pos: %s %v is not a position of the %d-long cache (want an integer in [0, %d))", name, pos.Data[i], length, length)
		}
		ps[b] = int(p)
	}
	return ps, nil
}

// samePos is the positions of B users all at p.
func samePos(p, B int) []int {
	ps := make([]int, B)
	for b := range ps {
		ps[b] = p
	}
	return ps
}

// spanPos returns the first position held by pos, a [1] tensor, of span
// consecutive positions, after checking that it is an integer with
// 0 <= pos and pos + span <= length.
func spanPos(pos Tensor, span, length int) (int, error) {
	if !pos.Shape.Equal(ir.Shape{1}) {
		return 0, fmt.Errorf("rule decode-pos: pos must be [1], got %s", pos.Shape)
	}
	p := float64(pos.Data[0])
	if p == math.Trunc(p) && p >= 0 && p+float64(span) <= float64(length) {
		return int(p), nil
	}
	if span == 1 {
		return 0, fmt.Errorf("rule decode-pos: pos %v is not a position of the %d-long cache (want an integer in [0, %d))", pos.Data[0], length, length)
	}
	return 0, fmt.Errorf("rule prefill-pos: pos %v followed by %d positions does not fit the %d-long cache (want an integer in [0, %d])", pos.Data[0], span, length, length-span)
}

// evalRotary: out = x * cos + rotate_half(x) * sin over x's last dim R,
// rotate_half(x)[i] = -x[i + R/2] for i < R/2 and x[i - R/2] otherwise;
// cos and sin have last dim R and broadcast to x without widening it.
// Without StorageFormats each element is float64 math rounded once to
// float32; with it, the device's (rotaryFPU, codegen/lower/rotary.go): the
// reader supplies x[(i + R/2) mod R] and sin with the sign of its columns
// i < R/2 flipped, and compute multiplies and adds them on the FPU.
func evalRotary(_ *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	x, cos, sin := args[0], args[1], args[2]
	r := x.Shape.Rank()
	if r == 0 || x.Shape[r-1]%2 != 0 {
		return nil, fmt.Errorf("rule rotary-even: x %s needs an even last dim", x.Shape)
	}
	R := x.Shape[r-1]
	for _, t := range []struct {
		name string
		v    Tensor
	}{{"cos", cos}, {"sin", sin}} {
		s := t.v.Shape
		if s.Rank() == 0 || s[s.Rank()-1] != R {
			return nil, fmt.Errorf("rule rotary-table: %s %s must have last dim %d", t.name, s, R)
		}
		b, err := broadcastShape(x.Shape, s)
		if err != nil {
			return nil, err
		}
		if !b.Equal(x.Shape) {
			return nil, fmt.Errorf("rule rotary-broadcast: %s %s must broadcast to x %s, not widen it", t.name, s, x.Shape)
		}
	}
	// Offsets of the cos and sin rows that pair with each row of x: walk
	// x's leading dims with the tables' broadcast strides.
	sc, ss := broadcastStrides(cos.Shape, x.Shape), broadcastStrides(sin.Shape, x.Shape)
	out := NewTensor(x.Shape)
	half := R / 2
	idx := make([]int, r-1)
	oc, os := 0, 0
	for row := 0; row < x.Shape.Rows2D(); row++ {
		xr := x.Data[row*R : (row+1)*R]
		cr, sr := cos.Data[oc:oc+R], sin.Data[os:os+R]
		for i := range R {
			if opts.StorageFormats {
				s := sr[i]
				if i < half {
					s = -s // the reader's sign flip of the sin tile
				}
				out.Data[row*R+i] = rotaryFPU(xr[i], xr[(i+half)%R], cr[i], s, opts)
				continue
			}
			rh := float64(xr[(i+half)%R])
			if i < half {
				rh = -rh
			}
			out.Data[row*R+i] = float32(float64(xr[i])*float64(cr[i]) + rh*float64(sr[i]))
		}
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			oc += sc[d]
			os += ss[d]
			if idx[d] < x.Shape[d] {
				break
			}
			oc -= sc[d] * x.Shape[d]
			os -= ss[d] * x.Shape[d]
			idx[d] = 0
		}
	}
	return []Tensor{out}, nil
}

// rotaryFPU is one element x*c + xr*s of a rotate-half RoPE as the
// device's FPU computes it element-wise (codegen/lower/rotary.go, and the
// rope of attn_prologue_prefill), xr being x's rotate-half partner and the
// minus of rotate_half carried by s or by xr (the FPU's product is
// sign-symmetric, so either gives the same bits), with an fp32 DEST:
//
//	t1  = x * c   mul_tiles, x in SrcA and c in SrcB (deviceMul), packed
//	              to an fp32 CB (exact)
//	t2  = xr * s  mul_tiles likewise, packed to an fp32 CB
//	out = t1 + t2 add_tiles on the two products read back through SrcA
//	              and SrcB, so truncated to tf32 (deviceAdd)
//
// The result is packed to the output's dtype by the caller's storage
// rounding. The tf32 reads of the products are the one place this differs
// from fp32 math: for bf16 data about 6% of the results differ by one bf16
// ulp from the correctly rounded x*c + xr*s.
func rotaryFPU(x, xr, c, s float32, opts Options) float32 {
	return deviceAdd(deviceMul(x, c, opts), deviceMul(xr, s, opts), opts)
}

// evalUpdateCache: out = cache [B, Hc, L, D] with out[b, h, pos_b, :] =
// new[b, h, :] for every b and h < Hc; new is [B, Hn >= Hc, D] and its
// rows h >= Hc are ignored. Every other cache position is copied
// unchanged.
func evalUpdateCache(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	cache, nw, pos := args[0], args[1], args[2]
	c, n := cache.Shape, nw.Shape
	if c.Rank() != 4 || n.Rank() != 3 {
		return nil, fmt.Errorf("rule cache-rank: want cache [B,H,L,D] and new [B,H,D], got %s and %s", c, n)
	}
	if n[0] != c[0] || n[1] < c[1] || n[2] != c[3] {
		return nil, fmt.Errorf("rule cache-shape: new %s does not fit cache %s (want [%d, >=%d, %d])", n, c, c[0], c[1], c[3])
	}
	B, Hc, L, D, Hn := c[0], c[1], c[2], c[3], n[1]
	ps, err := decodePos(pos, B, L)
	if err != nil {
		return nil, err
	}
	out := cache.Clone()
	for b := range B {
		for h := range Hc {
			dst := ((b*Hc+h)*L + ps[b]) * D
			src := (b*Hn + h) * D
			copy(out.Data[dst:dst+D], nw.Data[src:src+D])
		}
	}
	return []Tensor{out}, nil
}

// evalFillCache: out = cache [B, H, L, D] with out[b, h, pos + s, :] =
// new[b, h, s, :] for s < S, new [B, H, S, D], pos + S <= L; every other
// cache position is copied unchanged.
func evalFillCache(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	cache, nw, pos := args[0], args[1], args[2]
	c, n := cache.Shape, nw.Shape
	if c.Rank() != 4 || n.Rank() != 4 || n[0] != c[0] || n[1] != c[1] || n[2] > c[2] || n[3] != c[3] {
		return nil, fmt.Errorf("rule cache-shape: new %s does not fit cache %s (want [%d, %d, <=%d, %d])", n, c, c[0], c[1], c[2], c[3])
	}
	B, H, L, D, S := c[0], c[1], c[2], c[3], n[2]
	p, err := spanPos(pos, S, L)
	if err != nil {
		return nil, err
	}
	out := cache.Clone()
	for bh := range B * H {
		dst := (bh*L + p) * D
		copy(out.Data[dst:dst+S*D], nw.Data[bh*S*D:(bh+1)*S*D])
	}
	return []Tensor{out}, nil
}

// evalSDPADecode: for q [B, Hq, D] and k, v [B, Hkv, L, D] with G = Hq/Hkv,
// out[b, h, :] = sum_{t <= pos_b} p[t] * v[b, h/G, t, :] where p is the
// softmax over t <= pos_b of scale * dot(q[b, h, :], k[b, h/G, t, :]),
// pos_b user b's position (decodePos). Cache positions after it are not
// read. With StorageFormats each row is
// the program's (attender.attendFPU).
func evalSDPADecode(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	scale, err := attrFloat(op, "scale")
	if err != nil {
		return nil, err
	}
	q, k, v, pos := args[0], args[1], args[2], args[3]
	d, err := decodeDims(q, k, v)
	if err != nil {
		return nil, err
	}
	ps, err := decodePos(pos, d.B, d.L)
	if err != nil {
		return nil, err
	}
	return []Tensor{attendAll(d, q, k, v, ps, scale, opts, sdpaProgram)}, nil
}

// evalSDPAPrefill: for q [B, Hq, S, D] and k, v [B, Hkv, L, D] with
// G = Hq/Hkv, query s of head h attends causally to cache positions
// t <= pos + s of kv head h/G: out[b, h, s, :] = sum_t p[t] * v[b, h/G, t, :]
// with p the softmax of scale * dot(q[b, h, s, :], k[b, h/G, t, :]).
// pos + S <= L; later positions are not read. With StorageFormats each
// row is the program's (attender.attendFPU), as for sdpa_decode: the
// prefill program runs the decode program's pipeline on each query tile
// row, with a per-row mask.
func evalSDPAPrefill(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	scale, err := attrFloat(op, "scale")
	if err != nil {
		return nil, err
	}
	q, k, v, pos := args[0], args[1], args[2], args[3]
	d, err := prefillDims(q, k, v)
	if err != nil {
		return nil, err
	}
	p, err := spanPos(pos, d.S, d.L)
	if err != nil {
		return nil, err
	}
	return []Tensor{attendAll(d, q, k, v, samePos(p, d.B), scale, opts, sdpaProgram)}, nil
}

// sdpaDims are the sizes of an attention's query q [B, Hq, S, D] (decode:
// [B, Hq, D], S = 1) and caches k, v [B, Hkv, L, D].
type sdpaDims struct{ B, Hq, S, D, Hkv, L int }

// decodeDims checks q [B,Hq,D] against k, v [B,Hkv,L,D] (Hq a multiple of
// Hkv) and returns their sizes with S = 1.
func decodeDims(q, k, v Tensor) (sdpaDims, error) {
	if q.Shape.Rank() != 3 || k.Shape.Rank() != 4 || !k.Shape.Equal(v.Shape) {
		return sdpaDims{}, fmt.Errorf("rule sdpa-rank: want q [B,Hq,D] and k, v [B,Hkv,L,D] equal, got %s, %s, %s", q.Shape, k.Shape, v.Shape)
	}
	d := sdpaDims{B: q.Shape[0], Hq: q.Shape[1], S: 1, D: q.Shape[2], Hkv: k.Shape[1], L: k.Shape[2]}
	if k.Shape[0] != d.B || k.Shape[3] != d.D || d.Hq%d.Hkv != 0 {
		return sdpaDims{}, fmt.Errorf("rule sdpa-shape: q %s and cache %s disagree (batch, head dim, or q heads not a multiple of kv heads)", q.Shape, k.Shape)
	}
	return d, nil
}

// prefillDims checks q [B,Hq,S,D] against k, v [B,Hkv,L,D] (Hq a multiple
// of Hkv, S <= L) and returns their sizes.
func prefillDims(q, k, v Tensor) (sdpaDims, error) {
	if q.Shape.Rank() != 4 || k.Shape.Rank() != 4 || !k.Shape.Equal(v.Shape) {
		return sdpaDims{}, fmt.Errorf("rule sdpa-rank: want q [B,Hq,S,D] and k, v [B,Hkv,L,D] equal, got %s, %s, %s", q.Shape, k.Shape, v.Shape)
	}
	d := sdpaDims{B: q.Shape[0], Hq: q.Shape[1], S: q.Shape[2], D: q.Shape[3], Hkv: k.Shape[1], L: k.Shape[2]}
	if k.Shape[0] != d.B || k.Shape[3] != d.D || d.Hq%d.Hkv != 0 || d.S > d.L {
		return sdpaDims{}, fmt.Errorf("rule sdpa-shape: q %s and cache %s disagree (batch, head dim, q heads not a multiple of kv heads, or S > L)", q.Shape, k.Shape)
	}
	return d, nil
}

// attendProgram names the device program whose arithmetic attendAll
// reproduces at the storage formats.
type attendProgram int

const (
	// sdpaProgram is the program of sdpa_decode and sdpa_prefill
	// (attender.attendFPU).
	sdpaProgram attendProgram = iota
	// gatedProgram is sdpa_decode_gated's program before the gate in one
	// pass (attender.attendGatedFPU; the device's flash decoding agrees
	// within rounding).
	gatedProgram
	// flashPrefillProgram is sdpa_prefill_gated's program before the gate
	// (attender.attendFlashFPU: flash attention, bit for bit).
	flashPrefillProgram
)

// attendAll returns the causal attention of q over the caches k, v (sizes
// d): result row (b, h, s) is the attention of query row (b, h, s) over
// cache positions t <= ps[b] + s of kv head h / (Hq/Hkv), shaped like q. With
// opts.StorageFormats each row is computed as program prog computes it at
// opts.Fidelity, otherwise in float64 (attender.attend).
func attendAll(d sdpaDims, q, k, v Tensor, ps []int, scale float64, opts Options, prog attendProgram) Tensor {
	G := d.Hq / d.Hkv
	D := d.D
	out := NewTensor(q.Shape)
	a := newAttender(d.L, D)
	a.sf = sfpuFor(opts)
	for b := range d.B {
		p := ps[b]
		for h := range d.Hq {
			kv := b*d.Hkv + h/G
			base := kv * d.L * D // row t of the kv head is at base + t*D
			if opts.StorageFormats && prog != flashPrefillProgram && a.kvHead != kv {
				a.transposeKeys(k.Data[base:base+d.L*D], kv)
			}
			for s := range d.S {
				row := ((b*d.Hq+h)*d.S + s) * D
				o, qr, vr := out.Data[row:row+D], q.Data[row:row+D], v.Data[base:]
				switch {
				case !opts.StorageFormats:
					a.attend(o, qr, k.Data[base:], vr, p+s, scale)
				case prog == flashPrefillProgram:
					a.attendFlashFPU(o, qr, k.Data[base:base+d.L*D], v.Data[base:base+d.L*D], kv, p, s, d.S, float32(scale), opts.Fidelity)
				case prog == gatedProgram:
					a.attendGatedFPU(o, qr, vr, p+s, float32(scale), opts.Fidelity)
				default:
					a.attendFPU(o, qr, vr, p+s, float32(scale), opts.Fidelity)
				}
			}
		}
	}
	return out
}

// attender holds the scratch of one query's attention.
type attender struct {
	d, length int
	score     []float64
	acc       []float64
	// attendFPU's scratch: the transposed keys kT [d, length] of kv head
	// kvHead (-1: none yet), their first columns, the scores and the
	// probabilities.
	kvHead int
	kT, kn []float32
	s, p   []float32
	// sf is the SFPU functions the FPU paths compute with (sfpuFor).
	sf *sfpuFuncs
	// attendFlashFPU's scratch: the keys (transposed) and values of the
	// first flashN positions of kv head flashHead (-1: none yet) as an
	// item whose last visible position is flashLast reads them
	// (flashKV), and the output accumulator.
	flashHead, flashLast, flashN int
	fk, fv, o                    []float32
}

func newAttender(length, d int) *attender {
	return &attender{d: d, length: length, score: make([]float64, length), acc: make([]float64, d), kvHead: -1, flashHead: -1}
}

// attend writes to out the attention of query row q over key and value rows
// t = 0..last of k and v (row t at offset t*d): the softmax of scale * q.k_t,
// with the maximum score subtracted before exponentiating, weighting v_t.
// Everything is float64, rounded once to float32.
func (a *attender) attend(out, q, k, v []float32, last int, scale float64) {
	d := a.d
	score := a.score[:last+1]
	best := math.Inf(-1)
	for t := range score {
		kr := k[t*d : (t+1)*d]
		var dot float64
		for i, qv := range q {
			dot += float64(qv) * float64(kr[i])
		}
		score[t] = scale * dot
		best = math.Max(best, score[t])
	}
	var total float64
	for t, s := range score {
		score[t] = math.Exp(s - best)
		total += score[t]
	}
	clear(a.acc)
	for t, w := range score {
		for i, vv := range v[t*d : (t+1)*d] {
			a.acc[i] += w * float64(vv)
		}
	}
	for i, x := range a.acc {
		out[i] = float32(x / total)
	}
}

// transposeKeys stores the key rows k ([length, d]) of kv head kv as kT
// [d, length] for attendFPU.
func (a *attender) transposeKeys(k []float32, kv int) {
	d, n := a.d, a.length
	if a.kT == nil {
		a.kT = make([]float32, d*n)
	}
	for t := range n {
		for i, x := range k[t*d : (t+1)*d] {
			a.kT[i*n+t] = x
		}
	}
	a.kvHead = kv
}

// scoresFPU returns q . k_t for t = 0..last (keys transposed by
// transposeKeys) as matmul_tiles computes them into an fp32 DEST over the
// D tiles at fidelity f, q in SrcB and k^T in SrcA (numerics.Matmul).
func (a *attender) scoresFPU(q []float32, last int, f ir.MathFidelity) []float32 {
	d, n := a.d, last+1
	kT := a.kT
	if n < a.length {
		a.kn = append(a.kn[:0], make([]float32, d*n)...)
		for i := range d {
			copy(a.kn[i*n:(i+1)*n], a.kT[i*a.length:i*a.length+n])
		}
		kT = a.kn
	}
	return numerics.Matmul(q, kT, 1, d, n, f)
}

// scaledScores leaves in a.s the scores q . k_t (t <= last) times scale,
// stored fp32 by the SFPU; with addMask the mask's 0 is then added on the
// FPU, which reads them as tf32 (the plain program; the gated one finds
// the maximum before any add). It returns the row maximum as the max
// reduce reads the scores (FidelityMul(s, 1), the first maximum on ties).
func (a *attender) scaledScores(q []float32, last int, scale float32, f ir.MathFidelity, addMask bool) float32 {
	raw := a.scoresFPU(q, last, f)
	a.s = append(a.s[:0], raw...)
	var m float32
	for t, x := range raw {
		a.s[t] = x * scale
		if addMask {
			a.s[t] = numerics.FPUAdd(numerics.TruncTF32(a.s[t]), 0, true)
		}
		if y := numerics.FidelityMul(a.s[t], 1, f); t == 0 || y > m {
			m = y
		}
		m = afterTile(m, t, len(raw))
	}
	return m
}

// afterTile is a row reduction's running value v after position t of n:
// at the end of every tile of 32 positions (and of the row) it passes
// through SrcB and keeps its upper 16 bits (numerics.ReduceRowOut, the
// bf16 scaler); in between it is unchanged. The positions the kernel
// reduces past n (masked: -inf for the maximum, 0 for the sum) leave the
// truncated value as it is.
func afterTile(v float32, t, n int) float32 {
	if t%numerics.TileDim == numerics.TileDim-1 || t == n-1 {
		return numerics.ReduceRowOut(v, ir.BF16, true)
	}
	return v
}

// attendFPU writes to out the attention of query row q over cache
// positions t = 0..last (keys transposed by transposeKeys, value row t at
// v[t*d:]) as the compute kernel of sdpa_decode and sdpa_prefill
// (codegen/lower/sdpa.go, attend) computes it at fidelity f. Every fp32
// intermediate sits in an fp32 CB, and the FPU reads it through a source
// register, truncated to tf32 (numerics.TruncTF32):
//
//	raw_t = q . k_t                          matmul_tiles over the D tiles into an fp32 DEST, q in SrcB
//	                                         and k^T in SrcA: numerics.Matmul
//	s_t   = FPUAdd(tf32(raw_t * scale), 0)   mul_unary_tile on the SFPU (float32), packed fp32; add_tiles
//	                                         of the mask tile (0 where visible)
//	m     = max_t FidelityMul(s_t, 1)        reduce_tile MAX REDUCE_ROW, s in SrcA and the bf16 scaler 1
//	                                         in SrcB; the first maximum is kept; the running maximum
//	                                         keeps its upper 16 bits after every tile (afterTile)
//	e_t   = Exp(FPUSub(s_t, tf32(m)))        sub_tiles_bcast_cols, exp_tile on the SFPU
//	r     = Recip(sum_t e_t)                 matmul_tiles of e (SrcB) against the ones column (SrcA) over
//	                                         the tiles of positions into an fp32 DEST (matmulRowSum),
//	                                         recip_tile on the SFPU
//	p_t   = FPUMul(tf32(e_t), tf32(r))       mul_tiles_bcast_cols, e in SrcA
//	out   = sum_t p_t v_t                    matmul_tiles over the cache tiles into an fp32 DEST, p in
//	                                         SrcB and v in SrcA: numerics.Matmul
//
// all products at fidelity f; the caller packs out to the result's dtype.
// The kernel runs over the whole cache, but positions after last add
// nothing: their mask is -inf, so e_t = p_t = 0 (a zero product), the
// maximum and the sum are unchanged by them, and accumulating zero tiles
// leaves an fp32 DEST as it is. So only t <= last is computed, and stale
// cache rows (the reader clears them) are never read.
func (a *attender) attendFPU(out, q, v []float32, last int, scale float32, f ir.MathFidelity) {
	d, n := a.d, last+1
	tf := numerics.TruncTF32
	m := a.scaledScores(q, last, scale, f, true)
	a.p = append(a.p[:0], a.s...)
	for t, x := range a.s {
		a.p[t] = a.sf.exp(numerics.FPUSub(tf(x), tf(m), true))
	}
	sum := matmulRowSum(len(a.p), func(t int) float32 { return a.p[t] }, f)
	r := tf(a.sf.recip(sum))
	for t, e := range a.p {
		a.p[t] = numerics.FPUMul(tf(e), r, 0, f, true)
	}
	copy(out, numerics.Matmul(a.p, v[:n*d], 1, n, d, f))
}

// attendGatedFPU is the reference of sdpa_decode_gated up to the gate,
// in one pass over the whole visible row: it writes to out the attention
// before its rounding to q's dtype. The program runs an online softmax
// (flash decoding, codegen/lower/flash_sdpa.go): it computes the same
// steps chunk by chunk with a running maximum and merges the cores'
// rescaled sums, which match this one-pass order within rounding, not
// bit for bit (sdpa_prefill_gated's flash attention, chunk by chunk on
// one core, has its own bit-exact reference, attendFlashFPU). The one pass keeps the scores in fp32 without a source-register
// read, subtracts a bf16 maximum with a matmul, and normalises after P V:
//
//	raw_t = q . k_t                          matmul_tiles onto the mask tile copied into DEST (exact: 0
//	                                         where visible): scoresFPU
//	s_t   = raw_t * scale                    mul_unary_tile on the SFPU (float32), packed fp32
//	m     = max_t FidelityMul(s_t, 1)        reduce_tile MAX REDUCE_ROW; the first maximum is kept
//	nm    = bf16(-m)                         negative_tile, packed to bf16 (half away from zero)
//	x_t   = tf32(s_t) + nm * 1               copy_tile (the scores CB is also an FPU operand, so it is
//	                                         not unpacked to DEST: tf32), then matmul_tiles of nm (SrcB)
//	                                         and a ones row (SrcA) onto it: numerics.MatmulOnto
//	e_t   = Exp(x_t)                         exp_tile on the SFPU, packed fp32
//	r     = Recip(sum_t e_t)                 matmul_tiles against the ones column (matmulRowSum), recip_tile
//	pv    = sum_t e_t v_t                    matmul_tiles over the cache tiles into an fp32 DEST, e in
//	                                         SrcB and v in SrcA, packed fp32
//	out   = FPUMul(tf32(pv), tf32(r))        mul_tiles_bcast_cols, pv in SrcA
//
// all products at fidelity f. As in attendFPU, the positions after last
// (mask -inf: e_t = 0) add nothing and are not computed.
func (a *attender) attendGatedFPU(out, q, v []float32, last int, scale float32, f ir.MathFidelity) {
	d, n := a.d, last+1
	tf := numerics.TruncTF32
	m := a.scaledScores(q, last, scale, f, false)
	nm := packedBF16(-m)
	a.p = append(a.p[:0], a.s...)
	x := []float32{0}
	for t, st := range a.s {
		x[0] = tf(st)
		numerics.MatmulOnto(x, []float32{nm}, []float32{1}, 1, 1, 1, f)
		a.p[t] = a.sf.exp(x[0])
	}
	sum := matmulRowSum(len(a.p), func(t int) float32 { return a.p[t] }, f)
	r := tf(a.sf.recip(sum))
	for i, pv := range numerics.Matmul(a.p, v[:n*d], 1, n, d, f) {
		out[i] = numerics.FPUMul(tf(pv), r, 0, f, true)
	}
}
