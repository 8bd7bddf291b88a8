package passes

import (
	"slices"

	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Attention family (stage fuse-blocks): the gated full-attention decode
// mixer of models/nn (GatedAttentionDecode) as the composed path issues
// it becomes
//
//	q/k/v projections | attn_prologue | sdpa_decode_gated | o_proj | all_reduce
//
// and the prefill mixer (GatedAttentionPrefill) the same with
// attn_prologue_prefill and sdpa_prefill_gated. The rules reproduce the
// composed path's bf16 rounding points, so the fused graph computes the
// same values as the unfused one.
//
// The prologue rule matches the q/gate split, the head reshapes, the
// per-head q and k RMSNorm, the two rotate-half RoPE chains (slice,
// transpose, rotary, transpose, reshard, pass-through slice, reshard,
// concat), the pads and reshards into the KV-update layout and the two
// cache updates; its four roots (q, gate, new K cache, new V cache) are
// replaced by the fused op's four results, so the caches stay the
// targets of the graph's state updates. The SDPA rule matches the
// attention, sigmoid(gate) multiply and head concat. The rules do not
// depend on each other: either one alone leaves a correct graph.
//
// Memory moves (to_memory) are matched where the composed path has them
// and are also allowed to be absent; they change no value.
var _ = registerRules("attention", ruleAttnPrologue, ruleAttnPrologueFullRotary, ruleSDPADecodeGated,
	ruleAttnProloguePrefill, ruleSDPAPrefillGated)

// attnMoved matches p or to_memory(p).
func attnMoved(p *rw.Pattern) *rw.Pattern { return rw.OneOf(rw.Op(ir.OpToMemory, p), p) }

// attnHeadNorm matches the per-head rms_norm of x with weight variable w,
// named name.
func attnHeadNorm(x *rw.Pattern, w, name string) *rw.Pattern {
	return rw.Op(ir.OpRMSNorm, x, rw.Var(w)).As(name)
}

// attnRopeRotated matches the rotary half of the composed partial RoPE of x
// ([B, n, D]): transpose(rotary(transpose(slice(x)), cos, sin)). Its ops
// are named p+"_rot_slice", p+"_t0", p+"_rotary", p+"_t1".
func attnRopeRotated(x *rw.Pattern, p string) *rw.Pattern {
	rs := rw.Op(ir.OpSlice, x).As(p + "_rot_slice")
	t0 := rw.Op(ir.OpTranspose, rs).As(p + "_t0")
	rot := rw.Op(ir.OpRotary, t0, rw.Var("cos"), rw.Var("sin")).As(p + "_rotary")
	return rw.Op(ir.OpTranspose, rot).As(p + "_t1")
}

// attnRopePartial matches the composed partial RoPE of x: the rotated part
// concatenated with the pass-through slice (named p+"_pass_slice" and
// p+"_concat").
func attnRopePartial(x *rw.Pattern, p string) *rw.Pattern {
	pass := rw.Op(ir.OpSlice, x).As(p + "_pass_slice")
	return rw.Op(ir.OpConcat, attnMoved(attnRopeRotated(x, p)), attnMoved(pass)).As(p + "_concat")
}

// attnPadded matches x, optionally padded (the pad named name), optionally
// moved after that.
func attnPadded(x *rw.Pattern, name string) *rw.Pattern {
	return attnMoved(rw.OneOf(rw.Op(ir.OpPad, x).As(name), x))
}

// attnProloguePatterns returns the four root patterns of the prologue: the K
// cache update, the V cache update, the q ready for sdpa_decode and the
// gate slice. With partial the RoPE is the composed partial chain (rotary
// dims < head dim), else the whole head is rotated and the q root is the
// reshard after the second transpose.
func attnProloguePatterns(partial bool) (kRoot, vRoot, qRoot, gateRoot *rw.Pattern) {
	qHeads := rw.Op(ir.OpReshape, rw.Var("qg")).As("qg_heads")
	qSplit := rw.Op(ir.OpSlice, qHeads).As("q_split")
	gateRoot = rw.Op(ir.OpSlice, qHeads).As("gate_split")
	qNormed := attnHeadNorm(attnMoved(qSplit), "q_norm", "q_normed")

	kHeads := rw.Op(ir.OpReshape, rw.Var("k")).As("k_heads")
	kNormed := attnHeadNorm(attnMoved(kHeads), "k_norm", "k_normed")

	var kOut *rw.Pattern
	if partial {
		qRoot = attnRopePartial(qNormed, "q")
		kOut = attnRopePartial(kNormed, "k")
	} else {
		qRoot = rw.Op(ir.OpToMemory, attnRopeRotated(qNormed, "q"))
		kOut = attnMoved(attnRopeRotated(kNormed, "k"))
	}
	kRoot = rw.Op(ir.OpUpdateCache, rw.Var("k_cache"), attnPadded(kOut, "k_pad"), rw.Var("pos")).As("k_update")

	vHeads := attnMoved(rw.Op(ir.OpReshape, rw.Var("v")).As("v_heads"))
	vRoot = rw.Op(ir.OpUpdateCache, rw.Var("v_cache"), attnPadded(vHeads, "v_pad"), rw.Var("pos")).As("v_update")
	return kRoot, vRoot, qRoot, gateRoot
}

func ruleAttnPrologue() *rw.Rule {
	k, v, q, gate := attnProloguePatterns(true)
	return &rw.Rule{
		Name:    "FuseAttnPrologue",
		Rewrite: "reshape/slice q|gate, reshape k|v, rms_norm q|k, partial-RoPE chains, pad + reshard, update_cache K|V => attn_prologue(qg, k, v, q_norm, k_norm, cos, sin, k_cache, v_cache, pos) -> q, gate, K, V",
		Pattern: k,
		Extra:   []*rw.Pattern{v, q, gate},
		Where:   func(m *rw.Match) bool { return attnPrologueApplies(m, true) },
		Build:   buildAttnPrologue,
	}
}

func ruleAttnPrologueFullRotary() *rw.Rule {
	k, v, q, gate := attnProloguePatterns(false)
	return &rw.Rule{
		Name:    "FuseAttnPrologueFullRotary",
		Rewrite: "reshape/slice q|gate, reshape k|v, rms_norm q|k, whole-head RoPE chains, pad + reshard, update_cache K|V => attn_prologue(qg, k, v, q_norm, k_norm, cos, sin, k_cache, v_cache, pos) -> q, gate, K, V",
		Pattern: k,
		Extra:   []*rw.Pattern{v, q, gate},
		Where:   func(m *rw.Match) bool { return attnPrologueApplies(m, false) },
		Build:   buildAttnPrologue,
	}
}

// attnPrologueOperands are the fused op's operands, in op table order.
func attnPrologueOperands(m *rw.Match) []*ir.Value {
	return []*ir.Value{m.Value("qg"), m.Value("k"), m.Value("v"), m.Value("q_norm"), m.Value("k_norm"),
		m.Value("cos"), m.Value("sin"), m.Value("k_cache"), m.Value("v_cache"), m.Value("pos")}
}

func attnPrologueAttrs(m *rw.Match) ir.Attrs {
	n := m.Op("q_normed")
	return ir.Attrs{"eps": n.Float("eps"), "offset": n.Float("offset")}
}

// attnSliceIs reports whether op is a slice with the given begin and end.
func attnSliceIs(op *ir.Op, begin, end []int) bool {
	return op != nil && slices.Equal(op.Ints("begin"), begin) && slices.Equal(op.Ints("end"), end)
}

// attnSwaps01 reports whether op is a transpose of dims 0 and 1.
func attnSwaps01(op *ir.Op) bool {
	if op == nil {
		return false
	}
	d0, d1 := op.Int("dim0"), op.Int("dim1")
	return (d0 == 0 && d1 == 1) || (d0 == 1 && d1 == 0)
}

// attnElementwiseStorage reports whether dt is stored value by value (bf16
// round-to-nearest or fp32), so the fused op's rounding points reproduce
// the composed ops' whatever the intermediate shapes.
func attnElementwiseStorage(dt ir.DType) bool { return dt == ir.BF16 || dt == ir.FP32 }

// attnSameDType reports whether every result of the matched ops has dtype dt
// (no typecast inside the match), but the cache updates' (k_update,
// v_update), which may also be bfp8_b: a block-float KV cache, into which
// the fused prologue rounds the new rows as the update's result stores
// them.
func attnSameDType(m *rw.Match, dt ir.DType) bool {
	for _, op := range m.Ops {
		for _, r := range op.Results {
			if r.Type.DType != dt && !(r.Type.DType == ir.BFP8B && (op == m.Op("k_update") || op == m.Op("v_update"))) {
				return false
			}
		}
	}
	return true
}

// attnResultsMatch reports whether the fused op's inferred result types equal
// the types of the values they replace (shape and dtype).
func attnResultsMatch(types []ir.TensorType, olds []*ir.Value) bool {
	if len(types) != len(olds) {
		return false
	}
	for i, t := range types {
		if !t.Shape.Equal(olds[i].Type.Shape) || t.DType != olds[i].Type.DType {
			return false
		}
	}
	return true
}

// attnPrologueApplies is the prologue rules' side condition: every matched op
// is in one value-by-value dtype; the head split reshapes qg [B,1,H*2D]
// to [B,H,2D] and takes query columns 0..D and gate columns D..2D of each
// head (D = the q_norm size); k and v reshape to [B,Hkv,D]; both norms
// share eps and offset; each RoPE chain rotates dims 0..R (R = cos's last
// dim, R < D with partial, R = D without) after swapping dims 0 and 1 and
// passes R..D through; the two cache updates write distinct caches; and
// the fused op's shape rule accepts the operands and gives the roots'
// shapes and dtypes.
func attnPrologueApplies(m *rw.Match, partial bool) bool {
	qg := m.Value("qg")
	dt := qg.Type.DType
	if !attnElementwiseStorage(dt) || !attnSameDType(m, dt) || m.Value("k_cache") == m.Value("v_cache") {
		return false
	}
	types, err := ir.InferTypes(ir.OpAttnPrologue, attnPrologueOperands(m), attnPrologueAttrs(m))
	if err != nil {
		return false
	}
	// Root order: K update, V update, q, gate; fused results: q, gate, K, V.
	olds := m.RootResults()
	if !attnResultsMatch(types, []*ir.Value{olds[2], olds[3], olds[0], olds[1]}) {
		return false
	}
	s := types[0].Shape // q: [B, H, D]
	B, H, D := s[0], s[1], s[2]
	Hkv := m.Value("k").Type.Shape[2] / D
	R := m.Value("cos").Type.Shape[1]
	if partial != (R < D) {
		return false
	}
	if !slices.Equal(m.Op("qg_heads").Ints("shape"), []int{B, H, 2 * D}) ||
		!attnSliceIs(m.Op("q_split"), []int{0, 0, 0}, []int{B, H, D}) ||
		!attnSliceIs(m.Op("gate_split"), []int{0, 0, D}, []int{B, H, 2 * D}) ||
		!slices.Equal(m.Op("k_heads").Ints("shape"), []int{B, Hkv, D}) ||
		!slices.Equal(m.Op("v_heads").Ints("shape"), []int{B, Hkv, D}) {
		return false
	}
	qn, kn := m.Op("q_normed"), m.Op("k_normed")
	if qn.Float("eps") != kn.Float("eps") || qn.Float("offset") != kn.Float("offset") {
		return false
	}
	for _, hd := range []struct {
		p string
		n int
	}{{"q", H}, {"k", Hkv}} {
		if !attnSliceIs(m.Op(hd.p+"_rot_slice"), []int{0, 0, 0}, []int{B, hd.n, R}) || !attnSwaps01(m.Op(hd.p+"_t0")) || !attnSwaps01(m.Op(hd.p+"_t1")) {
			return false
		}
		if !partial {
			continue
		}
		cat := m.Op(hd.p + "_concat")
		if !attnSliceIs(m.Op(hd.p+"_pass_slice"), []int{0, 0, R}, []int{B, hd.n, D}) || (cat.Int("axis") != 2 && cat.Int("axis") != -1) {
			return false
		}
	}
	return true
}

func buildAttnPrologue(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
	op, err := b.Emit(ir.OpAttnPrologue, attnPrologueOperands(m), attnPrologueAttrs(m))
	if err != nil {
		return nil, err
	}
	r := op.Results // q, gate, K, V; roots are K, V, q, gate
	return []*ir.Value{r[2], r[3], r[0], r[1]}, nil
}

func ruleSDPADecodeGated() *rw.Rule {
	sdpa := rw.Op(ir.OpSDPADecode, rw.Var("q"), rw.Var("k"), rw.Var("v"), rw.Var("pos")).As("sdpa")
	gate := rw.Op(ir.OpSigmoid, rw.Var("gate")).As("sigmoid")
	mul := rw.Op(ir.OpMul, attnMoved(sdpa), attnMoved(gate)).As("mul")
	return &rw.Rule{
		Name:    "FuseSDPADecodeGated",
		Rewrite: "reshape(mul(sdpa_decode(q, k, v, pos), sigmoid(gate))) => sdpa_decode_gated(q, k, v, pos, gate) {scale}",
		Pattern: rw.Op(ir.OpReshape, attnMoved(mul)).As("concat"),
		Where:   attnSDPAGatedApplies,
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpSDPADecodeGated, attnSDPAGatedOperands(m), ir.Attrs{"scale": m.Op("sdpa").Float("scale")})
			return []*ir.Value{v}, err
		},
	}
}

func attnSDPAGatedOperands(m *rw.Match) []*ir.Value {
	return []*ir.Value{m.Value("q"), m.Value("k"), m.Value("v"), m.Value("pos"), m.Value("gate")}
}

// attnSDPAGatedApplies: every matched op is in q's value-by-value dtype (so
// the attention output and the sigmoid are rounded there, as the fused op
// does), the multiply does not broadcast (gate has q's shape, checked by
// the shape rule), and the reshape is the head concat [B,H,D] -> [B,1,H*D].
func attnSDPAGatedApplies(m *rw.Match) bool {
	dt := m.Value("q").Type.DType
	if !attnElementwiseStorage(dt) || !attnSameDType(m, dt) {
		return false
	}
	types, err := ir.InferTypes(ir.OpSDPADecodeGated, attnSDPAGatedOperands(m), ir.Attrs{"scale": m.Op("sdpa").Float("scale")})
	if err != nil || !attnResultsMatch(types, m.RootResults()) {
		return false
	}
	return m.Op("mul").Result().Type.Shape.Equal(m.Value("q").Type.Shape)
}

// Prefill (models/nn GatedAttentionPrefill): the same chain over S tokens
// per user, without the decode path's transposes around rotary, reshards
// and pads; the heads-first transposes feed fill_cache and sdpa_prefill.

// attnPrefillRope matches the prefill RoPE of x ([B,S,n,D]) and the
// transpose to [B,n,S,D]: transpose(concat(rotary(slice(x)), slice(x)))
// with partial RoPE, transpose(rotary(slice(x))) over the whole head. Ops
// are named p+"_rot_slice", p+"_rotary", p+"_pass_slice", p+"_concat"
// and p+"_heads_first".
func attnPrefillRope(x *rw.Pattern, p string) *rw.Pattern {
	rot := rw.Op(ir.OpRotary, rw.Op(ir.OpSlice, x).As(p+"_rot_slice"), rw.Var("cos"), rw.Var("sin")).As(p + "_rotary")
	pass := rw.Op(ir.OpSlice, x).As(p + "_pass_slice")
	cat := rw.Op(ir.OpConcat, attnMoved(rot), attnMoved(pass)).As(p + "_concat")
	return rw.Op(ir.OpTranspose, attnMoved(rw.OneOf(cat, rot))).As(p + "_heads_first")
}

func ruleAttnProloguePrefill() *rw.Rule {
	qHeads := rw.Op(ir.OpReshape, rw.Var("qg")).As("qg_heads")
	qSplit := rw.Op(ir.OpSlice, qHeads).As("q_split")
	gate := rw.Op(ir.OpSlice, qHeads).As("gate_split")
	q := attnPrefillRope(attnHeadNorm(attnMoved(qSplit), "q_norm", "q_normed"), "q")
	kHeads := rw.Op(ir.OpReshape, rw.Var("k")).As("k_heads")
	kT := attnPrefillRope(attnHeadNorm(attnMoved(kHeads), "k_norm", "k_normed"), "k")
	k := rw.Op(ir.OpFillCache, rw.Var("k_cache"), attnMoved(kT), rw.Var("pos")).As("k_update")
	vT := rw.Op(ir.OpTranspose, attnMoved(rw.Op(ir.OpReshape, rw.Var("v")).As("v_heads"))).As("v_heads_first")
	v := rw.Op(ir.OpFillCache, rw.Var("v_cache"), attnMoved(vT), rw.Var("pos")).As("v_update")
	return &rw.Rule{
		Name:    "FuseAttnProloguePrefill",
		Rewrite: "reshape/slice q|gate, reshape k|v, rms_norm q|k, RoPE (rotary + concat) and heads-first transposes, fill_cache K|V => attn_prologue_prefill(qg, k, v, q_norm, k_norm, cos, sin, k_cache, v_cache, pos) -> q, gate, K, V",
		Pattern: k,
		Extra:   []*rw.Pattern{v, q, gate},
		Where:   attnProloguePrefillApplies,
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			op, err := b.Emit(ir.OpAttnProloguePrefill, attnPrologueOperands(m), attnPrologueAttrs(m))
			if err != nil {
				return nil, err
			}
			r := op.Results // q, gate, K, V; roots are K, V, q, gate
			return []*ir.Value{r[2], r[3], r[0], r[1]}, nil
		},
	}
}

// attnSwaps12 reports whether op is a transpose of dims 1 and 2.
func attnSwaps12(op *ir.Op) bool {
	if op == nil {
		return false
	}
	d0, d1 := op.Int("dim0"), op.Int("dim1")
	return (d0 == 1 && d1 == 2) || (d0 == 2 && d1 == 1)
}

// attnProloguePrefillApplies is the prefill prologue's side condition, as
// attnPrologueApplies: one value-by-value dtype; qg [B,S,H*2D] reshaped to
// [B,S,H,2D] with query columns 0..D and gate columns D..2D; k and v
// reshaped to [B,S,Hkv,D]; equal eps and offset; RoPE on dims 0..R of
// each head (R = cos's last dim) with dims R..D concatenated after (or
// R = D and no concat); the transposes swap dims 1 and 2; distinct caches;
// the fused op's shape rule gives the roots' shapes and dtypes.
func attnProloguePrefillApplies(m *rw.Match) bool {
	qg := m.Value("qg")
	dt := qg.Type.DType
	if !attnElementwiseStorage(dt) || !attnSameDType(m, dt) || m.Value("k_cache") == m.Value("v_cache") {
		return false
	}
	types, err := ir.InferTypes(ir.OpAttnProloguePrefill, attnPrologueOperands(m), attnPrologueAttrs(m))
	if err != nil {
		return false
	}
	olds := m.RootResults()
	if !attnResultsMatch(types, []*ir.Value{olds[2], olds[3], olds[0], olds[1]}) {
		return false
	}
	s := types[0].Shape // q: [B, H, S, D]
	B, H, S, D := s[0], s[1], s[2], s[3]
	Hkv := m.Value("k").Type.Shape[2] / D
	R := m.Value("cos").Type.Shape[2]
	if !slices.Equal(m.Op("qg_heads").Ints("shape"), []int{B, S, H, 2 * D}) ||
		!attnSliceIs(m.Op("q_split"), []int{0, 0, 0, 0}, []int{B, S, H, D}) ||
		!attnSliceIs(m.Op("gate_split"), []int{0, 0, 0, D}, []int{B, S, H, 2 * D}) ||
		!slices.Equal(m.Op("k_heads").Ints("shape"), []int{B, S, Hkv, D}) ||
		!slices.Equal(m.Op("v_heads").Ints("shape"), []int{B, S, Hkv, D}) ||
		!attnSwaps12(m.Op("v_heads_first")) {
		return false
	}
	qn, kn := m.Op("q_normed"), m.Op("k_normed")
	if qn.Float("eps") != kn.Float("eps") || qn.Float("offset") != kn.Float("offset") {
		return false
	}
	for _, hd := range []struct {
		p string
		n int
	}{{"q", H}, {"k", Hkv}} {
		if !attnSliceIs(m.Op(hd.p+"_rot_slice"), []int{0, 0, 0, 0}, []int{B, S, hd.n, R}) || !attnSwaps12(m.Op(hd.p+"_heads_first")) {
			return false
		}
		cat := m.Op(hd.p + "_concat")
		if cat == nil {
			if R != D {
				return false
			}
			continue
		}
		if R == D || !attnSliceIs(m.Op(hd.p+"_pass_slice"), []int{0, 0, 0, R}, []int{B, S, hd.n, D}) || (cat.Int("axis") != 3 && cat.Int("axis") != -1) {
			return false
		}
	}
	return true
}

func ruleSDPAPrefillGated() *rw.Rule {
	sdpa := rw.Op(ir.OpSDPAPrefill, rw.Var("q"), rw.Var("k"), rw.Var("v"), rw.Var("pos")).As("sdpa")
	tokensFirst := rw.Op(ir.OpTranspose, attnMoved(sdpa)).As("tokens_first")
	gate := rw.Op(ir.OpSigmoid, rw.Var("gate")).As("sigmoid")
	mul := rw.Op(ir.OpMul, attnMoved(tokensFirst), attnMoved(gate)).As("mul")
	return &rw.Rule{
		Name:    "FuseSDPAPrefillGated",
		Rewrite: "reshape(mul(transpose(sdpa_prefill(q, k, v, pos)), sigmoid(gate))) => sdpa_prefill_gated(q, k, v, pos, gate) {scale}",
		Pattern: rw.Op(ir.OpReshape, attnMoved(mul)).As("concat"),
		Where: func(m *rw.Match) bool {
			dt := m.Value("q").Type.DType
			if !attnElementwiseStorage(dt) || !attnSameDType(m, dt) || !attnSwaps12(m.Op("tokens_first")) {
				return false
			}
			types, err := ir.InferTypes(ir.OpSDPAPrefillGated, attnSDPAGatedOperands(m), ir.Attrs{"scale": m.Op("sdpa").Float("scale")})
			if err != nil || !attnResultsMatch(types, m.RootResults()) {
				return false
			}
			return m.Op("mul").Result().Type.Shape.Equal(m.Value("gate").Type.Shape)
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpSDPAPrefillGated, attnSDPAGatedOperands(m), ir.Attrs{"scale": m.Op("sdpa").Float("scale")})
			return []*ir.Value{v}, err
		},
	}
}
