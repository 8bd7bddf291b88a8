package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// GDN family (stage fuse-blocks): the Gated DeltaNet decode mixer written
// out by models/nn.GDNDecode becomes two fused programs between its
// in-projections and its out-projection:
//
//   - FuseGDNConvGates: the conv shift register, tap products, sum and SiLU
//     plus the beta and g gates (with their reshapes) -> gdn_conv_gates,
//     reading q|k|v, a and b straight from the in-projection outputs;
//   - FuseGDNRecurrence: the q/k/v head split and GQA repeat, the fp32
//     typecasts, l2 norms, decay, delta rule, rank-1 update, readout, the
//     state copy back and the gated RMSNorm times silu(z) -> gdn_recurrence.
//
// and rules for the prefill mixer of models/nn.GDNPrefill:
//
//   - FuseGDNPrefillGates (fuse_gdn_gates.go): the gates per token (the
//     typecasts to the fp32 state dtype, -exp(A_log), softplus(a +
//     dt_bias) times it, sigmoid(b)) -> gdn_prefill_gates;
//   - FuseGDNChunkStep: one step of the sequential loop over chunks (the
//     chunk slices, the four bmm, the subtract and adds, the decays and
//     the transpose) -> gdn_chunk_step, once per chunk;
//   - FuseGDNChunkScan (fuse_gdn_scan.go): the chain of those steps and
//     the concat of their outputs -> one gdn_chunk_scan.
//
// Both are multi-root rules (Rule.Extra) and update their state in place:
// the fused op's state result replaces the value recorded in
// g.StateUpdates. The rules are independent, with one ordering effect: in
// the model's op order the conv output is read by the head-split slices
// before the gate reshapes are emitted, so FuseGDNConvGates can only fire
// once those readers are gone, i.e. after FuseGDNRecurrence fired (with the
// recurrence rule disabled the conv and gates stay composed; the graph is
// still correct).
var _ = registerRules("gdn", ruleGDNRecurrence, ruleGDNConvGates, ruleGDNPrefillGates, ruleGDNChunkStep, ruleGDNChunkScan)

// gdnEmit is a GDN rule's Build: one op of kind with the match's operands
// and attrs (nil: none), its results replacing the roots' in order.
func gdnEmit(kind ir.OpKind, operands func(*rw.Match) []*ir.Value, attrs func(*rw.Match) ir.Attrs) func(*rw.Builder, *rw.Match) ([]*ir.Value, error) {
	return func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
		var a ir.Attrs
		if attrs != nil {
			a = attrs(m)
		}
		op, err := b.Emit(kind, operands(m), a)
		if err != nil {
			return nil, err
		}
		return op.Results, nil
	}
}

// gdnFloatStorage reports whether dt is stored value by value (bf16 or
// fp32), so the fused ops can round intermediates element by element as
// the composed chain stores them.
func gdnFloatStorage(dt ir.DType) bool { return dt == ir.BF16 || dt == ir.FP32 }

// gdnIs reports whether the op bound to name produced one result of shape
// s and dtype dt.
func gdnIs(m *rw.Match, name string, dt ir.DType, s ...int) bool {
	op := m.Op(name)
	return op != nil && len(op.Results) == 1 && op.Result().Type.DType == dt && op.Result().Type.Shape.Equal(ir.Shape(s))
}

// gdnOptIs is gdnIs for an op that a OneOf may have left out (nil is fine).
func gdnOptIs(m *rw.Match, name string, dt ir.DType, s ...int) bool {
	return m.Op(name) == nil || gdnIs(m, name, dt, s...)
}

// gdnAxis reports whether op's axis attribute, resolved against rank r,
// is want.
func gdnAxis(op *ir.Op, name string, r, want int) bool {
	a := op.Int(name)
	if a < 0 {
		a += r
	}
	return a == want
}

// gdnInts reports whether op's ints attribute name equals want.
func gdnInts(op *ir.Op, name string, want ...int) bool {
	return ir.Shape(op.Ints(name)).Equal(ir.Shape(want))
}

// gdnUpdates reports whether the value bound to state is a graph state
// whose new value is the result of the op bound to name.
func gdnUpdates(m *rw.Match, state, name string) bool {
	s, op := m.Value(state), m.Op(name)
	return s != nil && op != nil && s.Kind == ir.KindState && m.Graph.StateUpdates[s] == op.Result()
}

// gdnInfers reports whether the fused op accepts operands and attrs and
// its inferred result types equal the types (shape and dtype) of the root
// results they replace, so Build cannot fail.
func gdnInfers(m *rw.Match, kind ir.OpKind, operands []*ir.Value, attrs ir.Attrs) bool {
	types, err := ir.InferTypes(kind, operands, attrs)
	olds := m.RootResults()
	if err != nil || len(types) != len(olds) {
		return false
	}
	for i, t := range types {
		if !t.Shape.Equal(olds[i].Type.Shape) || t.DType != olds[i].Type.DType {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Conv + gates.

// gdnConvGatesPatterns returns the conv root silu(sum(concat(state, qkv) *
// taps)) and the extra roots: the shift-register slice of the same
// concat, reshape(sigmoid(b)) and reshape(softplus(a + dt_bias) *
// mul_scalar(exp(a_log), -1)).
func gdnConvGatesPatterns() (*rw.Pattern, []*rw.Pattern) {
	win := rw.Op(ir.OpConcat, rw.Var("conv_state"), rw.Var("qkv")).As("win")
	conv := rw.Op(ir.OpSiLU, rw.Op(ir.OpSum, rw.Op(ir.OpMul, win, rw.Var("taps")).As("tap_mul")).As("tap_sum")).As("conv")
	shift := rw.Op(ir.OpSlice, win).As("shift")
	beta := rw.Op(ir.OpReshape, rw.Op(ir.OpSigmoid, rw.Var("b")).As("sigmoid")).As("beta")
	negA := rw.Op(ir.OpMulScalar, rw.Op(ir.OpExp, rw.Var("a_log")).As("exp_a")).As("neg_a")
	dt := rw.Op(ir.OpAdd, rw.Var("a"), rw.Var("dt_bias")).As("dt")
	g := rw.Op(ir.OpReshape, rw.Op(ir.OpMul, rw.Op(ir.OpSoftplus, dt).As("softplus"), negA).As("gate")).As("g")
	return conv, []*rw.Pattern{shift, beta, g}
}

func gdnConvGatesOperands(m *rw.Match) []*ir.Value {
	return []*ir.Value{m.Value("conv_state"), m.Value("qkv"), m.Value("taps"), m.Value("a"), m.Value("b"), m.Value("a_log"), m.Value("dt_bias")}
}

// gdnConvGatesApplies is FuseGDNConvGates' side condition: the concat
// appends qkv [B,1,C] to conv_state [B,K-1,C] on axis 1 and conv_state is
// a graph state whose new value is the slice [0,1,0]..[B,K,C] of it; taps
// are [K,C] and the sum runs over axis 1; a and b are [B,1,H], the
// mul_scalar multiplies by -1 and both gates reshape to [B*H,1]; every
// conv intermediate has qkv's dtype, every g intermediate a's dtype and
// sigmoid b's dtype, each bf16 or fp32; and the fused op's types equal
// the roots'.
func gdnConvGatesApplies(m *rw.Match) bool {
	qkv, st, a, b := m.Value("qkv"), m.Value("conv_state"), m.Value("a"), m.Value("b")
	xs, ss := qkv.Type.Shape, st.Type.Shape
	if xs.Rank() != 3 || xs[1] != 1 || ss.Rank() != 3 || a.Type.Shape.Rank() != 3 {
		return false
	}
	B, K, C, H := xs[0], ss[1]+1, xs[2], a.Type.Shape[2]
	dx, da, db := qkv.Type.DType, a.Type.DType, b.Type.DType
	if !gdnFloatStorage(dx) || !gdnFloatStorage(da) || !gdnFloatStorage(db) || !gdnUpdates(m, "conv_state", "shift") {
		return false
	}
	win, sum, shift := m.Op("win"), m.Op("tap_sum"), m.Op("shift")
	if !gdnAxis(win, "axis", 3, 1) || !gdnAxis(sum, "axis", 3, 1) || !gdnInts(shift, "begin", 0, 1, 0) || !gdnInts(shift, "end", B, K, C) {
		return false
	}
	if m.Op("neg_a").Float("value") != -1 || !m.Value("taps").Type.Shape.Equal(ir.Shape{K, C}) {
		return false
	}
	ok := gdnIs(m, "win", dx, B, K, C) && gdnIs(m, "tap_mul", dx, B, K, C) && gdnIs(m, "tap_sum", dx, B, 1, C) &&
		gdnIs(m, "conv", dx, B, 1, C) && gdnIs(m, "shift", dx, B, K-1, C) &&
		gdnIs(m, "sigmoid", db, B, 1, H) && gdnIs(m, "beta", db, B*H, 1) &&
		gdnIs(m, "dt", da, B, 1, H) && gdnIs(m, "softplus", da, B, 1, H) && gdnIs(m, "gate", da, B, 1, H) && gdnIs(m, "g", da, B*H, 1) &&
		m.Op("exp_a").Result().Type.DType == da && m.Op("neg_a").Result().Type.DType == da
	return ok && gdnInfers(m, ir.OpGDNConvGates, gdnConvGatesOperands(m), nil)
}

// ruleGDNConvGates fuses the GDN decode conv and gates.
func ruleGDNConvGates() *rw.Rule {
	conv, extra := gdnConvGatesPatterns()
	return &rw.Rule{
		Name:    "FuseGDNConvGates",
		Rewrite: "silu(sum(mul(concat(st, qkv), taps))), slice(concat(st, qkv)), reshape(sigmoid(b)), reshape(mul(softplus(add(a, dt_bias)), mul_scalar(exp(a_log), -1))) => gdn_conv_gates(st, qkv, taps, a, b, a_log, dt_bias)",
		Pattern: conv,
		Extra:   extra,
		Where:   gdnConvGatesApplies,
		Build:   gdnEmit(ir.OpGDNConvGates, gdnConvGatesOperands, nil),
	}
}

// ---------------------------------------------------------------------------
// Recurrence + norm + gate.

// gdnCast is p, optionally typecast (to the state dtype).
func gdnCast(p *rw.Pattern, name string) *rw.Pattern {
	return rw.OneOf(rw.Op(ir.OpTypecast, p).As(name), p)
}

// gdnMoved is p, optionally moved to another memory.
func gdnMoved(p *rw.Pattern, name string) *rw.Pattern {
	return rw.OneOf(rw.Op(ir.OpToMemory, p).As(name), p)
}

// gdnHeadRows is one block of the conv output as rows per (user, value
// head): reshape(repeat_interleave(reshape(slice(qkv)))) with the repeat
// optional (no GQA), then optionally typecast. Ops are named p+"_slice",
// p+"_heads", p+"_rep", p+"_rows", p+"_cast".
func gdnHeadRows(p string, repeat bool) *rw.Pattern {
	heads := rw.Op(ir.OpReshape, rw.Op(ir.OpSlice, rw.Var("qkv")).As(p+"_slice")).As(p + "_heads")
	if repeat {
		heads = rw.OneOf(rw.Op(ir.OpRepeatInterleave, heads).As(p+"_rep"), heads)
	}
	return gdnCast(rw.Op(ir.OpReshape, heads).As(p+"_rows"), p+"_cast")
}

// gdnL2 is mul_scalar(rms_norm_plain(x)), the composed l2 norm; ops are
// named p+"_l2" and p+"_l2s".
func gdnL2(x *rw.Pattern, p string) *rw.Pattern {
	return rw.Op(ir.OpMulScalar, rw.Op(ir.OpRMSNormPlain, x).As(p+"_l2")).As(p + "_l2s")
}

// gdnRecurrencePatterns returns the gated output root
// mul(silu(z), reshape(rms_norm(reshape(bmm(q, S')), norm_w))) and the
// extra root to_memory(S'), the new state, where
// S' = add(S, mul(bmm(k col, delta), beta)), S = mul(state, exp(g)) and
// delta = sub(v, bmm(k row, S)).
func gdnRecurrencePatterns() (*rw.Pattern, []*rw.Pattern) {
	q := rw.Op(ir.OpMulScalar, gdnL2(gdnHeadRows("q", true), "q")).As("q_scale")
	k := gdnL2(gdnHeadRows("k", true), "k")
	v := gdnHeadRows("v", false)
	beta4 := rw.Op(ir.OpReshape, gdnCast(rw.Var("beta"), "beta_cast")).As("beta4")
	g4 := rw.Op(ir.OpReshape, gdnCast(rw.Var("g"), "g_cast")).As("g4")

	s := rw.Op(ir.OpMul, gdnMoved(rw.Var("state"), "s_in"), rw.Op(ir.OpExp, g4).As("eg")).As("s_decay")
	kS := rw.Op(ir.OpBMM, rw.Op(ir.OpReshape, k).As("k4"), s).As("kS")
	delta := rw.Op(ir.OpSub, rw.Op(ir.OpReshape, v).As("v4"), kS).As("delta")
	kcol := gdnMoved(rw.Op(ir.OpReshape, k).As("kcol"), "kcol_mem")
	outer := rw.Op(ir.OpBMM, kcol, gdnMoved(delta, "delta_mem")).As("outer")
	sNew := rw.Op(ir.OpAdd, s, rw.Op(ir.OpMul, outer, beta4).As("upd")).As("s_new")
	o := rw.Op(ir.OpBMM, rw.Op(ir.OpReshape, q).As("q4"), sNew).As("o")
	norm := rw.Op(ir.OpRMSNorm, rw.Op(ir.OpReshape, o).As("o_rows"), rw.Var("norm_w")).As("norm")
	out := rw.Op(ir.OpMul, rw.Op(ir.OpSiLU, rw.Var("z")).As("z_silu"), rw.Op(ir.OpReshape, norm).As("o_flat")).As("out")
	return out, []*rw.Pattern{rw.Op(ir.OpToMemory, sNew).As("s_out")}
}

func gdnRecurrenceOperands(m *rw.Match) []*ir.Value {
	return []*ir.Value{m.Value("qkv"), m.Value("beta"), m.Value("g"), m.Value("state"), m.Value("z"), m.Value("norm_w")}
}

func gdnRecurrenceAttrs(m *rw.Match) ir.Attrs {
	return ir.Attrs{
		"l2_eps":   m.Op("q_l2").Float("eps"),
		"l2_scale": m.Op("q_l2s").Float("value"),
		"scale":    m.Op("q_scale").Float("value"),
		"norm_eps": m.Op("norm").Float("eps"),
	}
}

// gdnRecurrenceApplies is FuseGDNRecurrence's side condition. With state
// [B,H,Dk,Dv] of dtype f (bf16 or fp32) a graph state whose new value is
// the final to_memory, qkv [B,1,C], kw = (C - H*Dv)/2 = Hk*Dk and G = H/Hk:
// the slices cut q = [0,kw), k = [kw,2kw) and v = [2kw,C) of qkv; q and k
// reshape to [B,Hk,Dk], repeat G times on axis 1 (no repeat when G = 1)
// and fold to [B*H,Dk]; v folds to [B*H,Dv]; every typecast converts to f
// and every value from the casts to the norm is f with the shape the
// decode step gives it (rows [B,H,1,D], k column [B,H,Dk,1], gates
// [B,H,1,1], states [B,H,Dk,Dv]); q's and k's l2 norms share eps and
// scale; the norm has offset 0 and a weight of Dv elements; silu(z) and
// the output have z's dtype (bf16 or fp32); and the fused op's types equal
// the roots'.
func gdnRecurrenceApplies(m *rw.Match) bool {
	st, qkv, z := m.Value("state"), m.Value("qkv"), m.Value("z")
	ss, xs := st.Type.Shape, qkv.Type.Shape
	f, dz := st.Type.DType, z.Type.DType
	if ss.Rank() != 4 || xs.Rank() != 3 || !gdnFloatStorage(f) || !gdnFloatStorage(dz) || !gdnUpdates(m, "state", "s_out") {
		return false
	}
	B, H, Dk, Dv, C := ss[0], ss[1], ss[2], ss[3], xs[2]
	kw2 := C - H*Dv
	if kw2 <= 0 || kw2%(2*Dk) != 0 || H%(kw2/(2*Dk)) != 0 {
		return false
	}
	kw := kw2 / 2
	Hk := kw / Dk
	G := H / Hk
	dx := qkv.Type.DType

	// Head split and GQA repeat.
	for _, p := range []struct {
		name       string
		lo, hi     int
		heads, dim int
	}{{"q", 0, kw, Hk, Dk}, {"k", kw, 2 * kw, Hk, Dk}, {"v", 2 * kw, C, H, Dv}} {
		sl := m.Op(p.name + "_slice")
		if !gdnInts(sl, "begin", 0, 0, p.lo) || !gdnInts(sl, "end", B, 1, p.hi) ||
			!gdnIs(m, p.name+"_heads", dx, B, p.heads, p.dim) || !gdnIs(m, p.name+"_rows", dx, B*H, p.dim) ||
			!gdnOptIs(m, p.name+"_cast", f, B*H, p.dim) {
			return false
		}
		if rep := m.Op(p.name + "_rep"); rep != nil {
			if rep.Int("repeats") != G || !gdnAxis(rep, "axis", 3, 1) || !gdnIs(m, p.name+"_rep", dx, B, H, p.dim) {
				return false
			}
		}
	}
	for _, name := range []string{"q_cast", "k_cast", "v_cast", "beta_cast", "g_cast"} {
		if op := m.Op(name); op != nil {
			if dt, ok := op.DTypeAttr("dtype"); !ok || dt != f {
				return false
			}
		}
	}
	if !m.Value("beta").Type.Shape.Equal(ir.Shape{B * H, 1}) || !m.Value("g").Type.Shape.Equal(ir.Shape{B * H, 1}) ||
		!gdnOptIs(m, "beta_cast", f, B*H, 1) || !gdnOptIs(m, "g_cast", f, B*H, 1) {
		return false
	}

	// Norms and scales.
	ql2, kl2, ql2s, kl2s := m.Op("q_l2"), m.Op("k_l2"), m.Op("q_l2s"), m.Op("k_l2s")
	if ql2.Float("eps") != kl2.Float("eps") || ql2s.Float("value") != kl2s.Float("value") {
		return false
	}
	norm := m.Op("norm")
	if norm.Float("offset") != 0 || m.Value("norm_w").Type.Shape.Numel() != Dv {
		return false
	}

	// Every recurrence value is f with its decode-step shape.
	row := func(d int) []int { return []int{B * H, d} }
	checks := []struct {
		name  string
		shape []int
	}{
		{"q_l2", row(Dk)}, {"q_l2s", row(Dk)}, {"q_scale", row(Dk)}, {"k_l2", row(Dk)}, {"k_l2s", row(Dk)},
		{"q4", []int{B, H, 1, Dk}}, {"k4", []int{B, H, 1, Dk}}, {"v4", []int{B, H, 1, Dv}}, {"kcol", []int{B, H, Dk, 1}},
		{"beta4", []int{B, H, 1, 1}}, {"g4", []int{B, H, 1, 1}}, {"eg", []int{B, H, 1, 1}},
		{"s_decay", ss}, {"kS", []int{B, H, 1, Dv}}, {"delta", []int{B, H, 1, Dv}}, {"outer", ss}, {"upd", ss},
		{"s_new", ss}, {"o", []int{B, H, 1, Dv}}, {"s_out", ss}, {"o_rows", row(Dv)}, {"norm", row(Dv)},
		{"o_flat", []int{B, 1, H * Dv}},
	}
	for _, c := range checks {
		if !gdnIs(m, c.name, f, c.shape...) {
			return false
		}
	}
	for _, name := range []string{"s_in", "kcol_mem", "delta_mem"} {
		if op := m.Op(name); op != nil && op.Result().Type.DType != f {
			return false
		}
	}
	if !gdnIs(m, "z_silu", dz, B, 1, H*Dv) || !gdnIs(m, "out", dz, B, 1, H*Dv) {
		return false
	}
	return gdnInfers(m, ir.OpGDNRecurrence, gdnRecurrenceOperands(m), gdnRecurrenceAttrs(m))
}

// ruleGDNRecurrence fuses the GDN decode recurrence, norm and gate.
func ruleGDNRecurrence() *rw.Rule {
	out, extra := gdnRecurrencePatterns()
	return &rw.Rule{
		Name:    "FuseGDNRecurrence",
		Rewrite: "mul(silu(z), reshape(rms_norm(reshape(bmm(q, S')), w))), to_memory(S') with S' = S*exp(g) + bmm(k, v - bmm(k, S*exp(g)))*beta, q, k, v head rows of qkv => gdn_recurrence(qkv, beta, g, S, z, w)",
		Pattern: out,
		Extra:   extra,
		Where:   gdnRecurrenceApplies,
		Build:   gdnEmit(ir.OpGDNRecurrence, gdnRecurrenceOperands, gdnRecurrenceAttrs),
	}
}

// ---------------------------------------------------------------------------
// Prefill chunk step.

// gdnChunkPatterns returns the chunk output root o = add(bmm(qg_c, S),
// bmm(qk_c, vNew)) and the extra root, the new state S' = add(mul(S,
// reshape(exp(gl))), bmm(transpose(kd), vNew)), where x_c = slice(x) is
// chunk c of x, vNew = sub(u_c, bmm(wk_c, S)), gl = slice(g_c) and kd =
// mul(k_c, reshape(exp(sub(gl, g_c)))).
func gdnChunkPatterns() (*rw.Pattern, []*rw.Pattern) {
	s := rw.Var("state")
	chunk := func(name string) *rw.Pattern { return rw.Op(ir.OpSlice, rw.Var(name)).As(name + "_c") }
	vNew := rw.Op(ir.OpSub, chunk("u"), rw.Op(ir.OpBMM, chunk("wk"), s).As("wk_s")).As("vnew")
	o := rw.Op(ir.OpAdd, rw.Op(ir.OpBMM, chunk("qg"), s).As("qg_s"), rw.Op(ir.OpBMM, chunk("qk"), vNew).As("qk_v")).As("o")
	gc := chunk("g")
	gl := rw.Op(ir.OpSlice, gc).As("gl")
	decay := rw.Op(ir.OpReshape, rw.Op(ir.OpExp, rw.Op(ir.OpSub, gl, gc).As("gd")).As("ed")).As("ed_col")
	kd := rw.Op(ir.OpMul, chunk("k"), decay).As("kd")
	sd := rw.Op(ir.OpMul, s, rw.Op(ir.OpReshape, rw.Op(ir.OpExp, gl).As("egl")).As("egl_r")).As("sd")
	upd := rw.Op(ir.OpBMM, rw.Op(ir.OpTranspose, kd).As("kd_t"), vNew).As("upd")
	return o, []*rw.Pattern{rw.Op(ir.OpAdd, sd, upd).As("s_new")}
}

// gdnChunkOperands are the fused op's operands: the whole tensors the
// chunk slices cut, and the state.
func gdnChunkOperands(m *rw.Match) []*ir.Value {
	return []*ir.Value{m.Value("u"), m.Value("wk"), m.Value("qg"), m.Value("qk"), m.Value("k"), m.Value("g"), m.Value("state")}
}

// gdnChunkApplies is FuseGDNChunkStep's side condition. With state
// [B,H,1,Dk,Dv] of dtype f (bf16 or fp32) and g [B,H,N,L] with L = 32
// (one tile of tokens, models/nn.ChunkSize) and Dk, Dv multiples of 32:
// every chunk slice cuts [c, c+1) of axis 2 (the same c < N for all six)
// and nothing else; gl is element L-1 of g_c; the reshapes make the
// decays a [B,H,1,L,1] column and a [B,H,1,1,1] scalar; the transpose
// swaps the last two axes; every operand and every matched value is f
// with the shape the chunk step gives it; no matched op sets a math
// fidelity (the fused program runs at the default, as they then do); and
// the fused op's types equal the roots'.
func gdnChunkApplies(m *rw.Match) bool {
	st, g := m.Value("state"), m.Value("g")
	ss, gs, f := st.Type.Shape, g.Type.Shape, st.Type.DType
	if ss.Rank() != 5 || ss[2] != 1 || gs.Rank() != 4 || !gdnFloatStorage(f) {
		return false
	}
	B, H, Dk, Dv, N, L := ss[0], ss[1], ss[3], ss[4], gs[2], gs[3]
	const T = ir.TileSize
	if L != T || Dk%T != 0 || Dv%T != 0 || gs[0] != B || gs[1] != H {
		return false
	}
	c := m.Op("g_c").Ints("begin")
	if len(c) != 4 || c[2] < 0 || c[2] >= N {
		return false
	}
	ch := c[2]
	for _, p := range []struct {
		name string
		dim  int
	}{{"u", Dv}, {"wk", Dk}, {"qg", Dk}, {"qk", L}, {"k", Dk}} {
		if !m.Value(p.name).Type.Shape.Equal(ir.Shape{B, H, N, L, p.dim}) || m.Value(p.name).Type.DType != f ||
			!gdnInts(m.Op(p.name+"_c"), "begin", 0, 0, ch, 0, 0) || !gdnInts(m.Op(p.name+"_c"), "end", B, H, ch+1, L, p.dim) ||
			!gdnIs(m, p.name+"_c", f, B, H, 1, L, p.dim) {
			return false
		}
	}
	if g.Type.DType != f || !gdnInts(m.Op("g_c"), "begin", 0, 0, ch, 0) || !gdnInts(m.Op("g_c"), "end", B, H, ch+1, L) ||
		!gdnInts(m.Op("gl"), "begin", 0, 0, 0, L-1) || !gdnInts(m.Op("gl"), "end", B, H, 1, L) {
		return false
	}
	kdT := m.Op("kd_t")
	if !(gdnAxis(kdT, "dim0", 5, 4) && gdnAxis(kdT, "dim1", 5, 3)) && !(gdnAxis(kdT, "dim0", 5, 3) && gdnAxis(kdT, "dim1", 5, 4)) {
		return false
	}
	checks := []struct {
		name  string
		shape []int
	}{
		{"wk_s", []int{B, H, 1, L, Dv}}, {"vnew", []int{B, H, 1, L, Dv}}, {"qg_s", []int{B, H, 1, L, Dv}},
		{"qk_v", []int{B, H, 1, L, Dv}}, {"o", []int{B, H, 1, L, Dv}}, {"g_c", []int{B, H, 1, L}},
		{"gl", []int{B, H, 1, 1}}, {"gd", []int{B, H, 1, L}}, {"ed", []int{B, H, 1, L}}, {"ed_col", []int{B, H, 1, L, 1}},
		{"kd", []int{B, H, 1, L, Dk}}, {"kd_t", []int{B, H, 1, Dk, L}}, {"egl", []int{B, H, 1, 1}},
		{"egl_r", []int{B, H, 1, 1, 1}}, {"sd", ss}, {"upd", ss}, {"s_new", ss},
	}
	for _, c := range checks {
		if !gdnIs(m, c.name, f, c.shape...) {
			return false
		}
	}
	for _, op := range m.Ops {
		if _, ok := op.Attrs[ir.FidelityAttr]; ok {
			return false
		}
	}
	return gdnInfers(m, ir.OpGDNChunkStep, gdnChunkOperands(m), gdnChunkAttrs(m))
}

// gdnChunkAttrs is the fused op's chunk index, the g slice's.
func gdnChunkAttrs(m *rw.Match) ir.Attrs {
	return ir.Attrs{"chunk": m.Op("g_c").Ints("begin")[2]}
}

// ruleGDNChunkStep fuses one step of the GDN prefill's loop over chunks.
func ruleGDNChunkStep() *rw.Rule {
	o, extra := gdnChunkPatterns()
	return &rw.Rule{
		Name:    "FuseGDNChunkStep",
		Rewrite: "add(bmm(qg_c, S), bmm(qk_c, vNew)), add(mul(S, reshape(exp(gl))), bmm(transpose(mul(k_c, reshape(exp(sub(gl, g_c))))), vNew)) with x_c = slice(x) chunk c, vNew = sub(u_c, bmm(wk_c, S)), gl = slice(g_c) => gdn_chunk_step(u, wk, qg, qk, k, g, S) {chunk = c}",
		Pattern: o,
		Extra:   extra,
		Where:   gdnChunkApplies,
		Build:   gdnEmit(ir.OpGDNChunkStep, gdnChunkOperands, gdnChunkAttrs),
	}
}
