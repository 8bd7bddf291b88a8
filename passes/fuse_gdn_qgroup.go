package passes

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// ruleGDNChunkPrepQGroup is FuseGDNChunkPrepQGroup (family gdn-prefill,
// registered in fuse_gdn_wy.go after FuseGDNChunkPrepBetaSeq; it waits for
// rows = 1, after which only rules that keep the prep's attributes fire).
// The model repeats each key head's q G times (repeat_interleave by G on
// the heads axis, value head h reading key head h/G) before the
// heads-first transpose and the l2 norm, so the q norm chain normed and
// wrote H = G*Hk heads of fp32 where Hk hold the values. The rule moves
// the repeat out of the chain, past the chain's steps after it
// (transposes), the norm and its unary ops (all per row of the last axis,
// which the repeat never touches, so each repeated row is the row it
// copies, bit for bit) and the reshape to chunks, into the prep: the chain
// writes Hk heads and the prep reads value head h's q from key head h/G
// (q_group = G). The moved repeat goes into the prep in the same rewrite,
// never left as a program of its own. The new chain's decomposition is its
// layout_chain then its rms_norm_plain_chain, the grouped prep's the prep
// on repeat_interleave(q) (what q_group means).
//
//	gdn_chunk_prep(kx, k, v, beta, g, gamma, reshape(layout_norm_plain_chain(x) {steps = S|repeat_interleave:G:a|T})) => gdn_chunk_prep(kx, k, v, beta, g, gamma, reshape(layout_norm_plain_chain(x) {steps = S|T})) {q_group = G}
func ruleGDNChunkPrepQGroup() *rw.Rule {
	chain := rw.Op(ir.OpLayoutNormPlainChain, rw.Var("x")).As("chain")
	q := rw.Op(ir.OpReshape, chain).As("qr")
	return &rw.Rule{
		Name:    "FuseGDNChunkPrepQGroup",
		Rewrite: "gdn_chunk_prep(kx, k, v, beta, g, gamma, reshape(layout_norm_plain_chain(x) {steps = S|repeat_interleave:G:a|T})) => gdn_chunk_prep(kx, k, v, beta, g, gamma, reshape(layout_norm_plain_chain(x) {steps = S|T})) {q_group = G}",
		Pattern: rw.Op(ir.OpGDNChunkPrep, rw.Var("kx"), rw.Var("k"), rw.Var("v"), rw.Var("beta"), rw.Var("g"), rw.Var("gamma"), q).As("prep"),
		Where: func(m *rw.Match) bool {
			_, _, ok := gdnQGroupPlan(m)
			return ok
		},
		NewDist: true,
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			steps, grp, _ := gdnQGroupPlan(m)
			c, err := gdnEmitChain(b, m.Op("chain"), m.Value("x"), steps)
			if err != nil {
				return nil, err
			}
			qs := m.Op("qr").Result().Type.Shape
			r, err := b.Emit1(ir.OpReshape, []*ir.Value{c}, ir.Attrs{"shape": []int{qs[0], qs[1] / grp, qs[2], qs[3], qs[4]}})
			if err != nil {
				return nil, err
			}
			r.Type.Dist = m.Op("qr").Result().Type.Dist
			prep := m.Op("prep")
			pa := ir.Attrs{}
			for k, v := range prep.Attrs {
				pa[k] = v
			}
			pa["q_group"] = grp
			ops := append([]*ir.Value{}, prep.Operands[:6]...)
			op, err := b.Emit(ir.OpGDNChunkPrep, append(ops, r), pa)
			if err != nil {
				return nil, err
			}
			for i, v := range op.Results {
				v.Type.Dist = prep.Results[i].Type.Dist
			}
			// the grouped prep is the prep on q's repeat (its q_group semantics)
			if op.Decomp, err = gdnDecomp(op, func(in []*ir.Value, emit gdnEmitFn) ([]*ir.Value, error) {
				rep, err := emit(ir.OpRepeatInterleave, in[6:], ir.Attrs{"repeats": grp, "axis": 1}, nil)
				if err != nil {
					return nil, err
				}
				return emit(ir.OpGDNChunkPrep, append(append([]*ir.Value{}, in[:6]...), rep...), prep.Attrs, prep)
			}); err != nil {
				return nil, err
			}
			return op.Results, nil
		},
	}
}

// gdnEmitChain emits the layout_norm_plain_chain old (of x) with steps
// instead of its own (its other attributes and split kept); its
// decomposition is its layout_chain then its rms_norm_plain_chain (as
// FuseLayoutNormPlainChain joins them). It returns the chain's result.
func gdnEmitChain(b *rw.Builder, old *ir.Op, x *ir.Value, steps []ir.LayoutStep) (*ir.Value, error) {
	attrs := ir.Attrs{}
	for k, v := range old.Attrs {
		attrs[k] = v
	}
	attrs["steps"] = ir.FormatLayoutChain(steps)
	c, err := b.Emit1(ir.OpLayoutNormPlainChain, []*ir.Value{x}, attrs)
	if err != nil {
		return nil, err
	}
	c.Type.Dist = old.Result().Type.Dist
	lc := ir.Attrs{"steps": attrs["steps"]}
	if dt, ok := attrs["dtype"]; ok {
		lc["dtype"] = dt
	}
	nc := ir.Attrs{}
	for k, v := range attrs {
		if k != "steps" && k != "dtype" {
			nc[k] = v
		}
	}
	if c.Def.Decomp, err = gdnDecomp(c.Def, func(in []*ir.Value, emit gdnEmitFn) ([]*ir.Value, error) {
		l, err := emit(ir.OpLayoutChain, in, lc, nil)
		if err != nil {
			return nil, err
		}
		return emit(ir.OpRMSNormPlainChain, l, nc, nil)
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// gdnQGroupPlan is FuseGDNChunkPrepQGroup's side condition and plan: the
// prep takes q with k's heads (no q_group yet) and g's rows (rows = 1);
// the chain and reshape fit gdnRepeatPlan, and the reshape without the
// repeat fits the prep's q_group rule against k (as its repeat with
// k_group). It returns the steps without the repeat and G.
func gdnQGroupPlan(m *rw.Match) ([]ir.LayoutStep, int, bool) {
	prep, chain, qr := m.Op("prep"), m.Op("chain"), m.Op("qr")
	if g, err := ir.GDNChunkPrepQGroup(prep.Attrs); err != nil || g != 1 {
		return nil, 0, false
	}
	if rows, err := ir.GDNChunkPrepRows(prep.Attrs); err != nil || !rows { // the Exp, Decay and Rows rules set fixed attributes
		return nil, 0, false
	}
	kept, grp, ok := gdnRepeatPlan(chain, m.Value("x"), qr)
	if !ok {
		return nil, 0, false
	}
	k := m.Value("k").Type
	if kg, err := ir.GDNKGroup(prep.Attrs); err != nil {
		return nil, 0, false
	} else if kg > 1 {
		if k, err = ir.GDNKGroupType("k", k, prep.Operands[2].Type, kg); err != nil {
			return nil, 0, false
		}
	}
	qs := qr.Result().Type.Shape
	qt := qr.Result().Type
	qt.Shape = ir.Shape{qs[0], qs[1] / grp, qs[2], qs[3], qs[4]}
	if _, err := ir.GDNChunkPrepQGroupType(qt, k, grp); err != nil {
		return nil, 0, false
	}
	return kept, grp, true
}

// gdnRepeatPlan is the chain part of the group rules' side conditions:
// the chain of x has exactly one repeat_interleave step by G >= 2,
// followed only by transposes that bring its axis to axis 1 of the
// chain's rank-4 result [B, H, S, D] (so the norm's last axis is never
// repeated); the reshape sets only its shape, [B, H, N, L, D] with N*L =
// S; and the chain without the repeat keeps two steps or more ([B, H/G,
// S, D]). It returns the steps without the repeat and G.
func gdnRepeatPlan(chain *ir.Op, x *ir.Value, reshape *ir.Op) ([]ir.LayoutStep, int, bool) {
	if len(reshape.Attrs) != 1 {
		return nil, 0, false
	}
	s, ok := chain.Attrs["steps"].(string)
	if !ok {
		return nil, 0, false
	}
	steps, err := ir.ParseLayoutChain(s)
	if err != nil {
		return nil, 0, false
	}
	types, err := ir.LayoutChainTypes(x.Type, steps)
	if err != nil {
		return nil, 0, false
	}
	rep := -1
	for i, st := range steps {
		if st.Op == ir.OpRepeatInterleave {
			if rep >= 0 {
				return nil, 0, false
			}
			rep = i
		}
	}
	if rep < 0 || len(steps) < 3 {
		return nil, 0, false
	}
	grp, ok := steps[rep].Attrs["repeats"].(int)
	if !ok || grp < 2 {
		return nil, 0, false
	}
	r := types[rep].Shape.Rank()
	axis, err := ir.LayoutStepAxis(steps[rep], "axis", r)
	if err != nil {
		return nil, 0, false
	}
	for _, st := range steps[rep+1:] { // only transposes after the repeat: follow its axis
		if st.Op != ir.OpTranspose {
			return nil, 0, false
		}
		d0, err0 := ir.LayoutStepAxis(st, "dim0", r)
		d1, err1 := ir.LayoutStepAxis(st, "dim1", r)
		if err0 != nil || err1 != nil {
			return nil, 0, false
		}
		switch axis {
		case d0:
			axis = d1
		case d1:
			axis = d0
		}
	}
	out := chain.Result().Type.Shape
	qs := reshape.Result().Type.Shape
	if r != 4 || axis != 1 || qs.Rank() != 5 || qs[0] != out[0] || qs[1] != out[1] || qs[2]*qs[3] != out[2] || qs[4] != out[3] || out[1]%grp != 0 {
		return nil, 0, false
	}
	return append(append([]ir.LayoutStep{}, steps[:rep]...), steps[rep+1:]...), grp, true
}

// gdnEmitFn adds one op to a decomposition being built: kind on operands
// with attrs (copied), its rule and decomposition those of like when like
// is not nil; it returns the op's results.
type gdnEmitFn func(kind ir.OpKind, operands []*ir.Value, attrs ir.Attrs, like *ir.Op) ([]*ir.Value, error)

// gdnDecomp is a decomposition of fused written by build: one placeholder
// per operand of fused (named after the op table's operand, of the
// operand's kind and type), the ops build emits on them in order (types
// inferred, fused's region), and build's values as the outputs, one per
// result of fused with its shape and dtype; IDs are local (placeholders
// first, then each op followed by its results), as ir's text form has them.
func gdnDecomp(fused *ir.Op, build func(in []*ir.Value, emit gdnEmitFn) ([]*ir.Value, error)) (*ir.Decomposition, error) {
	info := fused.Info()
	d := &ir.Decomposition{}
	id := 0
	next := func() int { id++; return id - 1 }
	for i, v := range fused.Operands {
		d.Inputs = append(d.Inputs, &ir.Value{ID: next(), Name: info.Operands[min(i, len(info.Operands)-1)], Kind: v.Kind, Type: v.Type})
	}
	emit := func(kind ir.OpKind, operands []*ir.Value, attrs ir.Attrs, like *ir.Op) ([]*ir.Value, error) {
		a := ir.Attrs{}
		for k, v := range attrs {
			a[k] = v
		}
		types, err := ir.InferTypes(kind, operands, a)
		if err != nil {
			return nil, err
		}
		op := &ir.Op{ID: next(), Kind: kind, Operands: append([]*ir.Value{}, operands...), Attrs: a, Region: fused.Region}
		if like != nil {
			op.Rule, op.Decomp = like.Rule, like.Decomp
		}
		for _, t := range types {
			op.Results = append(op.Results, &ir.Value{ID: next(), Kind: ir.KindResult, Type: t, Def: op})
		}
		d.Ops = append(d.Ops, op)
		return op.Results, nil
	}
	outs, err := build(d.Inputs, emit)
	if err != nil {
		return nil, fmt.Errorf("%s decomposition: %w", fused.Name(), err)
	}
	if len(outs) != len(fused.Results) {
		return nil, fmt.Errorf("%s decomposition: %d outputs for %d results", fused.Name(), len(outs), len(fused.Results))
	}
	for i, o := range outs {
		if !o.Type.Shape.Equal(fused.Results[i].Type.Shape) || o.Type.DType != fused.Results[i].Type.DType {
			return nil, fmt.Errorf("%s decomposition: output %d is %s %s, result is %s %s", fused.Name(), i, o.Type.Shape, o.Type.DType, fused.Results[i].Type.Shape, fused.Results[i].Type.DType)
		}
	}
	d.Outputs = outs
	return d, nil
}
