package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Fused attention ops (produced by passes/fuse_attention.go), evaluated
// from their Doc lines, not through their decompositions:
//
//   - attn_prologue, attn_prologue_prefill: the q/gate split, per-head q
//     and k RMSNorm, partial rotate-half RoPE and the two KV-cache writes
//     of one decode step (one token per user) or one prefill step (S
//     tokens per user); both share prologue, which a prologueLayout
//     adapts to the mode's shapes;
//   - sdpa_decode_gated, sdpa_prefill_gated: decode or causal prefill
//     attention times sigmoid(gate), heads concatenated.
//
// All reproduce the composed path's storage roundings: with
// Options.StorageFormats the normed q and k rows are rounded to qg's dtype
// before RoPE (as the composed rms_norm stores them), and the attention
// output and sigmoid(gate) are rounded to q's and gate's dtypes before
// they are multiplied (as mul_tiles multiplies them, deviceMul); the
// results are rounded by the caller as usual (the new K rows of a cache
// in another dtype than qg's, bfp8_b, to qg's dtype first, as the composed
// path stores them before update_cache rounds them into the cache). Math
// is float64 rounded once
// to float32 per step, as in the composed ops' evaluators, except where
// StorageFormats models the device's programs: the norms (normRows), the
// prologues' RoPE (see prologue: the decode program's RoPE matmul is fp32
// math, the prefill program's element-wise RoPE is rotaryFPU, as the
// composed rotary is) and, unless Options.Composed, the gated attentions
// (which differ from the composed sdpa ops' program, see gatedFactors):
// the prefill one as its flash-attention program computes it, chunk by
// chunk with a running maximum (attender.attendFlashFPU,
// codegen/lower/flash_prefill.go), bit for bit; the decode one in one
// pass over the visible row (attender.attendGatedFPU). The
// decode program is flash decoding (codegen/lower/flash_sdpa.go): it
// computes the same quantities over chunks of the cache split among
// cores, with a running maximum and rescaled fp32 sums merged at the end,
// so its rounding order depends on the position and the cores it got; the
// reference keeps the one-pass order, which the device's result matches
// within that rounding (about a bf16 ulp of the largest result at HiFi4,
// see the bounds in flash_sdpa_test.go), not bit for bit.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpAttnPrologue:        evalAttnPrologue,
		ir.OpSDPADecodeGated:     evalSDPADecodeGated,
		ir.OpAttnProloguePrefill: evalAttnProloguePrefill,
		ir.OpSDPAPrefillGated:    evalSDPAPrefillGated,
	})
}

// storeAs rounds t through dt when opts.StorageFormats is set (an
// intermediate the composed path stores), else returns t.
func storeAs(dt ir.DType, t Tensor, opts Options) (Tensor, error) {
	if !opts.StorageFormats {
		return t, nil
	}
	return finishResult(dt, t, opts)
}

// prologueDims are the sizes an attn_prologue's operands imply.
type prologueDims struct{ B, H, Hkv, D, R, L int }

// checkPrologue validates the operand shapes of attn_prologue (see
// ir.shapeAttnPrologue) and returns the sizes.
func checkPrologue(args []Tensor) (prologueDims, error) {
	qg, k, v, qw, kw, cos, sin, kc, vc := args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8]
	var d prologueDims
	d.D = qw.Shape.Numel()
	if d.D < 2 || kw.Shape.Numel() != d.D {
		return d, fmt.Errorf("rule prologue-norms: q_norm %s and k_norm %s must both hold the head dim D >= 2 elements", qw.Shape, kw.Shape)
	}
	s := qg.Shape
	if s.Rank() != 3 || s[1] != 1 || s[2]%(2*d.D) != 0 {
		return d, fmt.Errorf("rule prologue-qg: qg %s must be [B,1,H*2*%d]", s, d.D)
	}
	d.B, d.H = s[0], s[2]/(2*d.D)
	if k.Shape.Rank() != 3 || !k.Shape.Equal(v.Shape) || k.Shape[0] != d.B || k.Shape[1] != 1 || k.Shape[2]%d.D != 0 {
		return d, fmt.Errorf("rule prologue-kv: k %s and v %s must both be [%d,1,Hkv*%d]", k.Shape, v.Shape, d.B, d.D)
	}
	d.Hkv = k.Shape[2] / d.D
	if cos.Shape.Rank() != 2 || !cos.Shape.Equal(sin.Shape) || cos.Shape[0] != d.B || cos.Shape[1]%2 != 0 || cos.Shape[1] < 2 || cos.Shape[1] > d.D {
		return d, fmt.Errorf("rule prologue-rope: cos %s and sin %s must both be [%d,R] with R even in 2..%d", cos.Shape, sin.Shape, d.B, d.D)
	}
	d.R = cos.Shape[1]
	c := kc.Shape
	if c.Rank() != 4 || !c.Equal(vc.Shape) || c[0] != d.B || c[1] != d.Hkv || c[3] != d.D {
		return d, fmt.Errorf("rule prologue-cache: k_cache %s and v_cache %s must both be [%d,%d,L,%d]", c, vc.Shape, d.B, d.Hkv, d.D)
	}
	d.L = c[2]
	return d, nil
}

// evalAttnPrologue: see the attn_prologue Doc line. Results q, gate
// [B,H,D], k_cache', v_cache'; token t is user b.
func evalAttnPrologue(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	d, err := checkPrologue(args)
	if err != nil {
		return nil, err
	}
	ps, err := decodePos(args[9], d.B, d.L)
	if err != nil {
		return nil, err
	}
	return prologue(op, args, opts, prologueLayout{
		tokens: d.B, H: d.H, Hkv: d.Hkv, D: d.D, R: d.R,
		q:        ir.Shape{d.B, d.H, d.D},
		gate:     ir.Shape{d.B, d.H, d.D},
		qRow:     func(t, h int) int { return t*d.H + h },
		tableRow: func(t int) int { return t },
		cacheRow: func(t, j int) int { return (t*d.Hkv+j)*d.L + ps[t] },
	})
}

// evalAttnProloguePrefill: see the attn_prologue_prefill Doc line.
// Results q [B,H,S,D], gate [B,S,H,D], k_cache', v_cache'; token
// t = b*S + s.
func evalAttnProloguePrefill(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	qg, k, v, qw, kw, cos, sin, kc, vc := args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8]
	D := qw.Shape.Numel()
	if D < 2 || kw.Shape.Numel() != D {
		return nil, fmt.Errorf("rule prologue-norms: q_norm %s and k_norm %s must both hold the head dim D >= 2 elements", qw.Shape, kw.Shape)
	}
	s := qg.Shape
	if s.Rank() != 3 || s[2]%(2*D) != 0 {
		return nil, fmt.Errorf("rule prologue-qg: qg %s must be [B,S,H*2*%d]", s, D)
	}
	B, S, H := s[0], s[1], s[2]/(2*D)
	if k.Shape.Rank() != 3 || !k.Shape.Equal(v.Shape) || k.Shape[0] != B || k.Shape[1] != S || k.Shape[2]%D != 0 {
		return nil, fmt.Errorf("rule prologue-kv: k %s and v %s must both be [%d,%d,Hkv*%d]", k.Shape, v.Shape, B, S, D)
	}
	Hkv := k.Shape[2] / D
	if cos.Shape.Rank() != 3 || !cos.Shape.Equal(sin.Shape) || cos.Shape[0] != S || cos.Shape[1] != 1 || cos.Shape[2]%2 != 0 || cos.Shape[2] < 2 || cos.Shape[2] > D {
		return nil, fmt.Errorf("rule prologue-rope: cos %s and sin %s must both be [%d,1,R] with R even in 2..%d", cos.Shape, sin.Shape, S, D)
	}
	c := kc.Shape
	if c.Rank() != 4 || !c.Equal(vc.Shape) || c[0] != B || c[1] != Hkv || c[3] != D {
		return nil, fmt.Errorf("rule prologue-cache: k_cache %s and v_cache %s must both be [%d,%d,L,%d]", c, vc.Shape, B, Hkv, D)
	}
	L := c[2]
	p, err := spanPos(args[9], S, L)
	if err != nil {
		return nil, err
	}
	return prologue(op, args, opts, prologueLayout{
		tokens: B * S, H: H, Hkv: Hkv, D: D, R: cos.Shape[2],
		q:        ir.Shape{B, H, S, D},
		gate:     ir.Shape{B, S, H, D},
		qRow:     func(t, h int) int { return (t/S*H+h)*S + t%S },
		tableRow: func(t int) int { return t % S },
		cacheRow: func(t, j int) int { return (t/S*Hkv+j)*L + p + t%S },
		perRow:   true,
	})
}

// prologueLayout places the prologue of tokens rows of qg (row t holds
// H heads of D query then D gate columns), k and v (Hkv heads of D) in
// one mode's results: q row (t, h) is row qRow(t, h) of a tensor of shape
// q, gate row (t, h) is row t*H + h of a tensor of shape gate, the rope tables of token t are row
// tableRow(t), and the cache row of token t and kv head j is cacheRow(t, j).
// perRow says the tables differ per row of a tile (prefill: a token per
// row), so the program rotates element-wise rather than by a matmul.
type prologueLayout struct {
	tokens, H, Hkv, D, R int
	q, gate              ir.Shape
	qRow                 func(t, h int) int
	tableRow             func(t int) int
	cacheRow             func(t, j int) int
	perRow               bool
}

// prologue computes the attn_prologue family's results (q, gate,
// k_cache', v_cache') from args (qg, k, v, q_norm, k_norm, cos, sin,
// k_cache, v_cache, pos) laid out by l.
func prologue(op *ir.Op, args []Tensor, opts Options, l prologueLayout) ([]Tensor, error) {
	eps, err := attrFloat(op, "eps")
	if err != nil {
		return nil, err
	}
	offset, err := attrFloat(op, "offset")
	if err != nil {
		return nil, err
	}
	qg, k, v, qw, kw, cos, sin, kc, vc := args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8]
	T, H, Hkv, D, R := l.tokens, l.H, l.Hkv, l.D, l.R
	normDT := op.Operands[0].Type.DType

	// norm returns the rmsnorm of the n rows of length D of rows, evaluated
	// as the composed rms_norm op it replaces (normRows), stored as qg's
	// dtype.
	norm := func(rows []float32, n int, w Tensor) (Tensor, error) {
		out := normRows(Tensor{Shape: ir.Shape{n, D}, Data: rows[:n*D]}, w.Data, eps, offset, RowSplit{}, opts)
		return storeAs(normDT, out, opts)
	}
	// rope rotates the first R dims of row r (token r / heads) in place,
	// with the arithmetic of the program (Composed: of the composed
	// rotary).
	//
	// Decode (codegen/lower/fused_attention.go): the normed tiles holding
	// rotary dims times the RoPE matrix (blocks.RopeMatrix) on the FPU,
	// whose products of bf16 data are exact and summed in fp32 DEST: one
	// rounding of y[i]*cos[i] + rotate_half(y)[i]*sin[i], fp32 math.
	//
	// Prefill (codegen/lower/fused_prologue_prefill.go), per tile of the
	// RtR = ceil(R/32) tiles holding rotary dims: ys = y times the signed
	// rotate-half permutation (a matmul: -y[i+R/2] for i < R/2, y[i-R/2]
	// for R/2 <= i < R, 0 past R; y read as tf32, times 1, exact), packed
	// to qg's dtype; then y*cos + ys*sin element-wise as rotaryFPU
	// computes it, with the gathered tables 1 (cos) and 0 (sin) past R, so
	// that the columns R..32*RtR go through the same multiply and add
	// (unchanged for bf16 data; fp32 data comes out tf32, SrcA's read of
	// y). The composed rotary computes the same rotaryFPU on the first R
	// columns only (its sign sits on sin, the product is sign-symmetric).
	fpu := opts.StorageFormats && (l.perRow || opts.Composed)
	width := R
	if fpu && !opts.Composed {
		width = min(D, (R+ir.TileSize-1)/ir.TileSize*ir.TileSize)
	}
	rope := func(t Tensor, heads int) {
		half := R / 2
		y := make([]float32, width)
		for r := range t.Shape[0] {
			tr := l.tableRow(r/heads) * R
			row := t.Data[r*D : r*D+width]
			copy(y, row)
			for i := range width {
				if !fpu {
					rh := float64(y[(i+half)%R])
					if i < half {
						rh = -rh
					}
					row[i] = float32(float64(y[i])*float64(cos.Data[tr+i]) + rh*float64(sin.Data[tr+i]))
					continue
				}
				c, s, ys := float32(1), float32(0), float32(0)
				if i < R {
					c, s, ys = cos.Data[tr+i], sin.Data[tr+i], numerics.TruncTF32(y[(i+half)%R])
					if i < half {
						ys = -ys
					}
				}
				row[i] = rotaryFPU(y[i], ys, c, s, opts)
			}
		}
	}

	// Split qg per (token, head) into query and gate rows.
	qRows := make([]float32, T*H*D)
	gate := NewTensor(ir.Shape{T * H * D})
	for th := range T * H {
		src := qg.Data[th*2*D:]
		copy(qRows[th*D:(th+1)*D], src[:D])
		copy(gate.Data[th*D:(th+1)*D], src[D:2*D])
	}
	qn, err := norm(qRows, T*H, qw)
	if err != nil {
		return nil, err
	}
	rope(qn, H)
	kn, err := norm(k.Data, T*Hkv, kw)
	if err != nil {
		return nil, err
	}
	rope(kn, Hkv)
	if op.Results[2].Type.DType != normDT {
		// A block-float cache: the K rows are stored in qg's dtype first
		// (the composed RoPE's result, the program's normed rows), then
		// rounded into the cache by the caller.
		if kn, err = storeAs(normDT, kn, opts); err != nil {
			return nil, err
		}
	}

	q := NewTensor(l.q)
	for th := range T * H {
		dst := l.qRow(th/H, th%H) * D
		copy(q.Data[dst:dst+D], qn.Data[th*D:(th+1)*D])
	}
	gate.Shape = l.gate.Clone()
	kOut, vOut := kc.Clone(), vc.Clone()
	for tj := range T * Hkv {
		dst := l.cacheRow(tj/Hkv, tj%Hkv) * D
		copy(kOut.Data[dst:dst+D], kn.Data[tj*D:(tj+1)*D])
		copy(vOut.Data[dst:dst+D], v.Data[tj*D:(tj+1)*D])
	}
	return []Tensor{q, gate, kOut, vOut}, nil
}

// evalSDPADecodeGated: out[b,0,h*D+i] = o[b,h,i] * sigmoid(gate[b,h,i]),
// o the decode attention of sdpa_decode; see gatedFactors.
func evalSDPADecodeGated(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	scale, err := attrFloat(op, "scale")
	if err != nil {
		return nil, err
	}
	q, k, v, pos, gate := args[0], args[1], args[2], args[3], args[4]
	d, err := decodeDims(q, k, v)
	if err != nil {
		return nil, err
	}
	B, Hq, D := d.B, d.Hq, d.D
	if !gate.Shape.Equal(q.Shape) {
		return nil, fmt.Errorf("rule sdpa-gate: gate %s must have q's shape %s", gate.Shape, q.Shape)
	}
	ps, err := decodePos(pos, d.B, d.L)
	if err != nil {
		return nil, err
	}
	o, s, err := gatedFactors(op, d, args, ps, scale, opts, gatedProgram)
	if err != nil {
		return nil, err
	}
	out := NewTensor(ir.Shape{B, 1, Hq * D})
	for i := range out.Data {
		out.Data[i] = deviceMul(o.Data[i], s.Data[i], opts)
	}
	return []Tensor{out}, nil
}

// evalSDPAPrefillGated: out[b,s,h*D+i] = o[b,h,s,i] * sigmoid(gate[b,s,h,i]),
// o the causal attention of sdpa_prefill; see gatedFactors.
func evalSDPAPrefillGated(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	scale, err := attrFloat(op, "scale")
	if err != nil {
		return nil, err
	}
	q, k, v, pos, gate := args[0], args[1], args[2], args[3], args[4]
	d, err := prefillDims(q, k, v)
	if err != nil {
		return nil, err
	}
	B, Hq, S, D := d.B, d.Hq, d.S, d.D
	if !gate.Shape.Equal(ir.Shape{B, S, Hq, D}) {
		return nil, fmt.Errorf("rule sdpa-gate: gate %s must be [%d,%d,%d,%d]", gate.Shape, B, S, Hq, D)
	}
	p, err := spanPos(pos, S, d.L)
	if err != nil {
		return nil, err
	}
	o, g, err := gatedFactors(op, d, args, samePos(p, B), scale, opts, flashPrefillProgram)
	if err != nil {
		return nil, err
	}
	out := NewTensor(ir.Shape{B, S, Hq * D})
	for b := range B {
		for s := range S {
			for h := range Hq {
				src := ((b*Hq+h)*S + s) * D
				dst := ((b*S+s)*Hq + h) * D
				for i := range D {
					out.Data[dst+i] = deviceMul(o.Data[src+i], g.Data[dst+i], opts)
				}
			}
		}
	}
	return []Tensor{out}, nil
}

// gatedFactors returns the factors of a gated attention's product (args
// are q, k, v, pos, gate): o, the attention of q (shaped like q), and
// sigmoid(gate), with opts.StorageFormats rounded to q's and gate's
// dtypes, where both the composed path and the fused program store them.
// The caller multiplies them as mul_tiles does (deviceMul, o in SrcA) in
// both. The composed path computes o as sdpa_decode and sdpa_prefill do
// (attendFPU), the fused program as prog says (gatedProgram for decode,
// flashPrefillProgram for prefill); with opts.StorageFormats the latter is
// used unless opts.Composed asks for the decomposition's arithmetic. The sigmoid is the SFPU's on the gate
// copied exactly into DEST in both.
func gatedFactors(op *ir.Op, d sdpaDims, args []Tensor, ps []int, scale float64, opts Options, prog attendProgram) (o, s Tensor, err error) {
	q, k, v, gate := args[0], args[1], args[2], args[4]
	if opts.Composed {
		prog = sdpaProgram
	}
	o = attendAll(d, q, k, v, ps, scale, opts, prog)
	if o, err = storeAs(op.Operands[0].Type.DType, o, opts); err != nil {
		return Tensor{}, Tensor{}, err
	}
	s = NewTensor(gate.Shape)
	for i, x := range gate.Data {
		s.Data[i] = sfpuFor(opts).sigmoid(x)
	}
	if s, err = storeAs(op.Operands[4].Type.DType, s, opts); err != nil {
		return Tensor{}, Tensor{}, err
	}
	return o, s, nil
}
