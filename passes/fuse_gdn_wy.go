package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// FuseGDNChunkWY (family gdn-prefill, stage fuse: it reads the fused
// products FuseBMMTransposeBMul and FuseBMMScaleB make there): the GDN
// prefill's per-chunk WY products,
//
//	kb = mul(kx, beta)
//	T  = tril_inverse(bmm_transpose_b_mul(kb, k, gamma))
//	u  = bmm_scale_b(T, v, beta)
//	wk = bmm_scale_b(T, kb, eg)
//
// become one gdn_chunk_wy(kx, k, v, beta, eg, gamma) program that works
// per (user, head, chunk) with kb, A and T in L1 (five programs before,
// kb, A and T each written to DRAM and read back). kx and k are the
// model's two reshapes of one l2-normed k; they stay two operands (the
// program reads their tiles once when they share a buffer). The fused
// op computes and rounds each intermediate as the composed ops do, so it
// equals them bit for bit (sim/ref TestGDNChunkWYEqualsComposed).
//
// FuseGDNChunkPrep (same family) then joins the query side of the chunk
// preparation, which reads the same k, gamma and eg: gdn_chunk_wy(kx, k,
// v, beta, eg, gamma), mul(q, eg) and bmm_transpose_b_mul(q, k, gamma)
// become one gdn_chunk_prep(kx, k, v, beta, eg, gamma, q) (two programs
// fewer again; k, gamma and eg are read once).
//
// FuseGDNChunkPrepExp (same family) then takes the decays' exp into the
// prep: gdn_chunk_prep(kx, k, v, beta, exp(g), gamma, q) becomes
// gdn_chunk_prep(kx, k, v, beta, g, gamma, q) with exp_g = 1, the exp
// computed per item on the SFPU as the exp op computes it (one program
// fewer; g's tile read instead of eg's).
//
// FuseGDNChunkPrepDecay (same family, after it) takes the decays Γ =
// tril(exp(g - g_row)) into the prep too: the prep reads g's row form's
// one tile instead of Γ's, and the sub, exp and tril programs go.
//
// FuseGDNChunkPrepRows (same family, after it) takes g's two reshapes
// into the prep: the model's g [B, H, N, L] (chunk n's decays in row n)
// reshaped to the column [B, H, N, L, 1] and the row [B, H, N, 1, L]
// were two programs writing a whole fp32 tile per chunk (32 values of
// 1,024) each; the prep now reads g's tile holding chunk n's row and
// moves that row into its column and row tiles in L1 (the reshapes'
// values, element for element, so the results are unchanged bit for
// bit).
//
// FuseGDNChunkPrepBetaSeq (same family, after it) takes beta's head-first
// layout_chain into the prep too: the gates' beta [B, S, H] (tokens first)
// transposed and reshaped to [B, H, N, L, 1] was one program writing a
// whole fp32 tile per chunk and head; the prep now reads the gates' tile
// holding the chunk's tokens of its head and moves that column to column
// 0 of a cleared tile (the layout_chain's values, bit for bit).
var _ = registerRules("gdn-prefill", ruleGDNChunkWY, ruleGDNChunkPrep, ruleGDNChunkPrepExp, ruleGDNChunkPrepDecay, ruleGDNChunkPrepRows, ruleGDNChunkPrepBetaSeq, ruleGDNChunkPrepQGroup, ruleGDNChunkKGroup)

// ruleGDNChunkWY is FuseGDNChunkWY (two roots: wk, then u).
func ruleGDNChunkWY() *rw.Rule {
	kb := rw.Op(ir.OpMul, rw.Var("kx"), rw.Var("beta")).As("kb")
	tr := rw.Op(ir.OpTrilInverse, rw.Op(ir.OpBMMTransposeBMul, kb, rw.Var("k"), rw.Var("gamma")).As("a")).As("t")
	return &rw.Rule{
		Name:    "FuseGDNChunkWY",
		Rewrite: "bmm_scale_b(T, kb, eg), bmm_scale_b(T, v, beta) with kb = mul(kx, beta), T = tril_inverse(bmm_transpose_b_mul(kb, k, gamma)) => gdn_chunk_wy(kx, k, v, beta, eg, gamma)",
		Pattern: rw.Op(ir.OpBMMScaleB, tr, kb, rw.Var("eg")).As("wk"),
		Extra:   []*rw.Pattern{rw.Op(ir.OpBMMScaleB, tr, rw.Var("v"), rw.Var("beta")).As("u")},
		Where:   gdnChunkWYApplies,
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			op, err := b.Emit(ir.OpGDNChunkWY, gdnChunkWYOperands(m), nil)
			if err != nil {
				return nil, err
			}
			return []*ir.Value{op.Results[1], op.Results[0]}, nil
		},
	}
}

func gdnChunkWYOperands(m *rw.Match) []*ir.Value {
	return []*ir.Value{m.Value("kx"), m.Value("k"), m.Value("v"), m.Value("beta"), m.Value("eg"), m.Value("gamma")}
}

// gdnChunkWYApplies is FuseGDNChunkWY's side condition: the mul scales
// kx (its first operand: the FPU broadcasts the second) by beta; every
// matched op produces fp32 of the fused op's shapes (the device inverse
// is fp32); no op sets a math fidelity or a result dtype of its own; and
// the fused op's types equal the roots'.
func gdnChunkWYApplies(m *rw.Match) bool {
	kbOp := m.Op("kb")
	if kbOp.Operands[0] != m.Value("kx") {
		return false
	}
	for _, name := range []string{"kb", "a", "t", "wk", "u"} {
		op := m.Op(name)
		if _, ok := op.Attrs[ir.FidelityAttr]; ok {
			return false
		}
		if _, ok := op.Attrs["dtype"]; ok {
			return false
		}
		if len(op.Results) != 1 || op.Result().Type.DType != ir.FP32 {
			return false
		}
	}
	types, err := ir.InferTypes(ir.OpGDNChunkWY, gdnChunkWYOperands(m), nil)
	if err != nil || len(types) != 2 {
		return false
	}
	for i, old := range []*ir.Value{m.Op("u").Result(), m.Op("wk").Result()} {
		if !types[i].Shape.Equal(old.Type.Shape) || types[i].DType != old.Type.DType {
			return false
		}
	}
	ks := m.Value("k").Type.Shape
	return gdnIs(m, "kb", ir.FP32, ks...) && gdnIs(m, "a", ir.FP32, ks[0], ks[1], ks[2], ks[3], ks[3]) && gdnIs(m, "t", ir.FP32, ks[0], ks[1], ks[2], ks[3], ks[3])
}

// ruleGDNChunkPrep is FuseGDNChunkPrep (three roots: the WY op, qg, qk).
func ruleGDNChunkPrep() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseGDNChunkPrep",
		Rewrite: "gdn_chunk_wy(kx, k, v, beta, eg, gamma), mul(q, eg), bmm_transpose_b_mul(q, k, gamma) => gdn_chunk_prep(kx, k, v, beta, eg, gamma, q)",
		Pattern: rw.Op(ir.OpGDNChunkWY, rw.Var("kx"), rw.Var("k"), rw.Var("v"), rw.Var("beta"), rw.Var("eg"), rw.Var("gamma")).As("wy"),
		Extra: []*rw.Pattern{
			rw.Op(ir.OpMul, rw.Var("q"), rw.Var("eg")).As("qg"),
			rw.Op(ir.OpBMMTransposeBMul, rw.Var("q"), rw.Var("k"), rw.Var("gamma")).As("qk"),
		},
		Where: gdnChunkPrepApplies,
		Build: gdnEmit(ir.OpGDNChunkPrep, gdnChunkPrepOperands, nil),
	}
}

func gdnChunkPrepOperands(m *rw.Match) []*ir.Value {
	return append(gdnChunkWYOperands(m), m.Value("q"))
}

// gdnChunkPrepApplies is FuseGDNChunkPrep's side condition: the mul
// scales q (its first operand) by eg; neither it nor the product sets a
// math fidelity or a dtype of its own; and the fused op's types equal
// the roots'.
func gdnChunkPrepApplies(m *rw.Match) bool {
	if m.Op("qg").Operands[0] != m.Value("q") {
		return false
	}
	for _, name := range []string{"qg", "qk"} {
		op := m.Op(name)
		if _, ok := op.Attrs[ir.FidelityAttr]; ok {
			return false
		}
		if _, ok := op.Attrs["dtype"]; ok {
			return false
		}
	}
	types, err := ir.InferTypes(ir.OpGDNChunkPrep, gdnChunkPrepOperands(m), nil)
	if err != nil || len(types) != 4 {
		return false
	}
	wy := m.Op("wy")
	olds := []*ir.Value{wy.Results[0], wy.Results[1], m.Op("qg").Result(), m.Op("qk").Result()}
	for i, old := range olds {
		if !types[i].Shape.Equal(old.Type.Shape) || types[i].DType != old.Type.DType {
			return false
		}
	}
	return true
}

// ruleGDNChunkPrepExp is FuseGDNChunkPrepExp.
//
//	gdn_chunk_prep(kx, k, v, beta, exp(g), gamma, q) => gdn_chunk_prep(kx, k, v, beta, g, gamma, q) {exp_g = 1}
func ruleGDNChunkPrepExp() *rw.Rule {
	eg := rw.Op(ir.OpExp, rw.Var("g")).As("exp")
	return &rw.Rule{
		Name:    "FuseGDNChunkPrepExp",
		Rewrite: "gdn_chunk_prep(kx, k, v, beta, exp(g), gamma, q) => gdn_chunk_prep(kx, k, v, beta, g, gamma, q) {exp_g = 1}",
		Pattern: rw.Op(ir.OpGDNChunkPrep, rw.Var("kx"), rw.Var("k"), rw.Var("v"), rw.Var("beta"), eg, rw.Var("gamma"), rw.Var("q")).As("prep"),
		Where:   gdnChunkPrepExpApplies,
		Build: gdnEmit(ir.OpGDNChunkPrep, func(m *rw.Match) []*ir.Value {
			return []*ir.Value{m.Value("kx"), m.Value("k"), m.Value("v"), m.Value("beta"), m.Value("g"), m.Value("gamma"), m.Value("q")}
		}, func(*rw.Match) ir.Attrs { return ir.Attrs{"exp_g": 1} }),
	}
}

// gdnChunkPrepExpApplies is FuseGDNChunkPrepExp's side condition: the prep
// does not take an exp already (exp_g absent or 0); the exp keeps g's
// shape and dtype (the prep's dtype: the in-program exp rounds to it as
// the exp op stores it) and sets no attribute of its own.
func gdnChunkPrepExpApplies(m *rw.Match) bool {
	if expG, err := ir.GDNChunkPrepExpG(m.Op("prep").Attrs); err != nil || expG {
		return false
	}
	e, g := m.Op("exp"), m.Value("g")
	if len(e.Attrs) != 0 || len(e.Results) != 1 {
		return false
	}
	t := e.Result().Type
	return t.DType == g.Type.DType && t.Shape.Equal(g.Type.Shape) && t.Layout == g.Type.Layout
}

// ruleGDNChunkPrepDecay is FuseGDNChunkPrepDecay.
//
//	gdn_chunk_prep(kx, k, v, beta, g, tril(exp(sub(g, gr))), q) {exp_g = 1} => gdn_chunk_prep(kx, k, v, beta, g, gr, q) {exp_g = 1, decay = 1}
func ruleGDNChunkPrepDecay() *rw.Rule {
	gamma := rw.Op(ir.OpTril, rw.Op(ir.OpExp, rw.Op(ir.OpSub, rw.Var("g"), rw.Var("gr")).As("sub")).As("exp")).As("tril")
	return &rw.Rule{
		Name:    "FuseGDNChunkPrepDecay",
		Rewrite: "gdn_chunk_prep(kx, k, v, beta, g, tril(exp(sub(g, gr))), q) {exp_g = 1} => gdn_chunk_prep(kx, k, v, beta, g, gr, q) {exp_g = 1, decay = 1}",
		Pattern: rw.Op(ir.OpGDNChunkPrep, rw.Var("kx"), rw.Var("k"), rw.Var("v"), rw.Var("beta"), rw.Var("g"), gamma, rw.Var("q")).As("prep"),
		Where:   gdnChunkPrepDecayApplies,
		Build: gdnEmit(ir.OpGDNChunkPrep, func(m *rw.Match) []*ir.Value {
			return []*ir.Value{m.Value("kx"), m.Value("k"), m.Value("v"), m.Value("beta"), m.Value("g"), m.Value("gr"), m.Value("q")}
		}, func(*rw.Match) ir.Attrs { return ir.Attrs{"exp_g": 1, "decay": 1} }),
	}
}

// gdnChunkPrepDecayApplies is FuseGDNChunkPrepDecay's side condition: the
// prep takes exp(g) (exp_g = 1) and not Γ's chain already; tril keeps the
// diagonal (diagonal 0); sub and exp set no attribute; g is [B, H, N, L,
// 1] and gr [B, H, N, 1, L] of the prep's dtype, so the sub broadcasts g's
// column and gr's row into Γ's [B, H, N, L, L] tile, as the prep's
// program computes it.
func gdnChunkPrepDecayApplies(m *rw.Match) bool {
	attrs := m.Op("prep").Attrs
	expG, err := ir.GDNChunkPrepExpG(attrs)
	if err != nil || !expG {
		return false
	}
	if decay, err := ir.GDNChunkPrepDecay(attrs); err != nil || decay {
		return false
	}
	if d, ok := m.Op("tril").Attrs["diagonal"].(int); !ok || d != 0 || len(m.Op("tril").Attrs) != 1 {
		return false
	}
	if len(m.Op("sub").Attrs) != 0 || len(m.Op("exp").Attrs) != 0 {
		return false
	}
	g, gr := m.Value("g").Type, m.Value("gr").Type
	s := g.Shape
	if s.Rank() != 5 || s[4] != 1 || gr.DType != g.DType || !gr.Shape.Equal(ir.Shape{s[0], s[1], s[2], 1, s[3]}) {
		return false
	}
	return gdnIs(m, "sub", g.DType, s[0], s[1], s[2], s[3], s[3]) && gdnIs(m, "exp", g.DType, s[0], s[1], s[2], s[3], s[3]) && gdnIs(m, "tril", g.DType, s[0], s[1], s[2], s[3], s[3])
}

// ruleGDNChunkPrepRows is FuseGDNChunkPrepRows.
//
//	gdn_chunk_prep(kx, k, v, beta, reshape(g), reshape(g), q) {exp_g = 1, decay = 1} => gdn_chunk_prep(kx, k, v, beta, g, g, q) {exp_g = 1, decay = 1, rows = 1}
func ruleGDNChunkPrepRows() *rw.Rule {
	col := rw.Op(ir.OpReshape, rw.Var("g")).As("col")
	row := rw.Op(ir.OpReshape, rw.Var("g")).As("row")
	return &rw.Rule{
		Name:    "FuseGDNChunkPrepRows",
		Rewrite: "gdn_chunk_prep(kx, k, v, beta, reshape(g), reshape(g), q) {exp_g = 1, decay = 1} => gdn_chunk_prep(kx, k, v, beta, g, g, q) {exp_g = 1, decay = 1, rows = 1}",
		Pattern: rw.Op(ir.OpGDNChunkPrep, rw.Var("kx"), rw.Var("k"), rw.Var("v"), rw.Var("beta"), col, row, rw.Var("q")).As("prep"),
		Where:   gdnChunkPrepRowsApplies,
		Build: gdnEmit(ir.OpGDNChunkPrep, func(m *rw.Match) []*ir.Value {
			return []*ir.Value{m.Value("kx"), m.Value("k"), m.Value("v"), m.Value("beta"), m.Value("g"), m.Value("g"), m.Value("q")}
		}, func(*rw.Match) ir.Attrs { return ir.Attrs{"exp_g": 1, "decay": 1, "rows": 1} }),
	}
}

// gdnChunkPrepRowsApplies is FuseGDNChunkPrepRows's side condition: the
// prep takes g and its row form (exp_g = 1, decay = 1) and not g's rows
// already; g is [B, H, N, L] of the prep's dtype, the column operand its
// reshape to [B, H, N, L, 1] and the row operand its reshape to [B, H, N,
// 1, L], both reshapes setting only their shape.
func gdnChunkPrepRowsApplies(m *rw.Match) bool {
	attrs := m.Op("prep").Attrs
	if decay, err := ir.GDNChunkPrepDecay(attrs); err != nil || !decay {
		return false
	}
	if rows, err := ir.GDNChunkPrepRows(attrs); err != nil || rows {
		return false
	}
	if len(m.Op("col").Attrs) != 1 || len(m.Op("row").Attrs) != 1 {
		return false
	}
	g := m.Value("g").Type
	s := g.Shape
	if s.Rank() != 4 || g.DType != m.Value("k").Type.DType {
		return false
	}
	return gdnIs(m, "col", g.DType, s[0], s[1], s[2], s[3], 1) && gdnIs(m, "row", g.DType, s[0], s[1], s[2], 1, s[3])
}

// ruleGDNChunkPrepBetaSeq is FuseGDNChunkPrepBetaSeq.
//
//	gdn_chunk_prep(kx, k, v, layout_chain(b) {steps = "transpose:1:2|reshape:B,H,N,L,1"}, g, g, q) {rows = 1} => gdn_chunk_prep(kx, k, v, b, g, g, q) {rows = 1, beta_seq = 1}
func ruleGDNChunkPrepBetaSeq() *rw.Rule {
	beta := rw.Op(ir.OpLayoutChain, rw.Var("b")).As("chain")
	return &rw.Rule{
		Name:    "FuseGDNChunkPrepBetaSeq",
		Rewrite: `gdn_chunk_prep(kx, k, v, layout_chain(b) {steps = "transpose:1:2|reshape:B,H,N,L,1"}, g, g, q) {rows = 1} => gdn_chunk_prep(kx, k, v, b, g, g, q) {rows = 1, beta_seq = 1}`,
		Pattern: rw.Op(ir.OpGDNChunkPrep, rw.Var("kx"), rw.Var("k"), rw.Var("v"), beta, rw.Var("g"), rw.Var("gamma"), rw.Var("q")).As("prep"),
		Where:   gdnChunkPrepBetaSeqApplies,
		Build: gdnEmit(ir.OpGDNChunkPrep, func(m *rw.Match) []*ir.Value {
			return []*ir.Value{m.Value("kx"), m.Value("k"), m.Value("v"), m.Value("b"), m.Value("g"), m.Value("gamma"), m.Value("q")}
		}, func(m *rw.Match) ir.Attrs {
			a := ir.Attrs{}
			for k, v := range m.Op("prep").Attrs {
				a[k] = v
			}
			a["beta_seq"] = 1
			return a
		}),
	}
}

// gdnChunkPrepBetaSeqApplies is FuseGDNChunkPrepBetaSeq's side condition:
// the prep takes g's rows (rows = 1) and not beta tokens first already;
// the layout_chain sets only its steps, which are exactly a transpose of
// axes 1 and 2 and a reshape to [B, H, N, L, 1] of b [B, N*L, H] of k's
// dtype (the chain's result then is the prep's beta column form).
func gdnChunkPrepBetaSeqApplies(m *rw.Match) bool {
	attrs := m.Op("prep").Attrs
	if rows, err := ir.GDNChunkPrepRows(attrs); err != nil || !rows {
		return false
	}
	if seq, err := ir.GDNChunkPrepBetaSeq(attrs); err != nil || seq {
		return false
	}
	chain := m.Op("chain")
	steps, ok := chain.Attrs["steps"].(string)
	if !ok || len(chain.Attrs) != 1 {
		return false
	}
	k, b := m.Value("k").Type, m.Value("b").Type
	if _, err := ir.GDNChunkPrepBetaSeqType(b, k); err != nil {
		return false
	}
	s := k.Shape
	want := ir.FormatLayoutChain([]ir.LayoutStep{
		{Op: ir.OpTranspose, Attrs: ir.Attrs{"dim0": 1, "dim1": 2}},
		{Op: ir.OpReshape, Attrs: ir.Attrs{"shape": []int{s[0], s[1], s[2], s[3], 1}}},
	})
	return steps == want && chain.Result().Type.DType == k.DType
}
