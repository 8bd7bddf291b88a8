package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// ruleGDNChunkKGroup is FuseGDNChunkKGroup (family gdn-prefill, registered
// in fuse_gdn_wy.go after FuseGDNChunkPrepQGroup; it waits for rows = 1
// as that rule does). The model repeats each key head's k G times
// (repeat_interleave by G on the heads axis) before the heads-first
// transpose and the l2 norm, as it does q's, so k's norm chain normed and
// wrote H = G*Hk heads of fp32 where Hk hold the values; k feeds the prep
// (as kx and k) and the scan (as k). The rule moves the repeat out of the
// chain (past transposes, the norm and its unary ops, all per row of the
// last axis, which the repeat never touches, and the reshape to chunks:
// bit for bit, as FuseGDNChunkPrepQGroup's) into both readers, in one
// rewrite with the prep and its scan as the two roots: the chain writes
// Hk heads and both read value head h's k from key head h/G (k_group =
// G). The new chain's decomposition is its layout_chain then its
// rms_norm_plain_chain; the grouped prep's the prep on the repeats of kx
// and k, the grouped scan's the scan on the repeat of k (what k_group
// means).
//
//	gdn_chunk_prep(kr, kr, v, beta, g, gamma, q) and gdn_chunk_scan(prep's results, kr, g', state), kr = reshape(layout_norm_plain_chain(x) {steps = S|repeat_interleave:G:a|T}) => the same with kr = reshape(layout_norm_plain_chain(x) {steps = S|T}) and {k_group = G} on both
func ruleGDNChunkKGroup() *rw.Rule {
	chain := rw.Op(ir.OpLayoutNormPlainChain, rw.Var("x")).As("chain")
	return &rw.Rule{
		Name:    "FuseGDNChunkKGroup",
		Rewrite: "gdn_chunk_prep(kr, kr, v, beta, g, gamma, q) and gdn_chunk_scan(prep's results, kr, g', state), kr = reshape(layout_norm_plain_chain(x) {steps = S|repeat_interleave:G:a|T}) => the same with kr = reshape(layout_norm_plain_chain(x) {steps = S|T}) and {k_group = G} on both",
		Pattern: rw.Op(ir.OpGDNChunkPrep, rw.Op(ir.OpReshape, chain).As("kxr"), rw.Op(ir.OpReshape, chain).As("kr"),
			rw.Var("v"), rw.Var("beta"), rw.Var("g"), rw.Var("gamma"), rw.Var("q")).As("prep"),
		Extra: []*rw.Pattern{rw.Op(ir.OpGDNChunkScan, rw.Var("u"), rw.Var("wk"), rw.Var("qg"), rw.Var("qk"),
			rw.Op(ir.OpReshape, chain).As("ksr"), rw.Var("sg"), rw.Var("state")).As("scan")},
		Where: func(m *rw.Match) bool {
			_, _, ok := gdnKGroupPlan(m)
			return ok
		},
		NewDist: true,
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			steps, grp, _ := gdnKGroupPlan(m)
			c, err := gdnEmitChain(b, m.Op("chain"), m.Value("x"), steps)
			if err != nil {
				return nil, err
			}
			// kx's reshape and k's (the scan's too), as the match had them
			reshape := func(old *ir.Value) (*ir.Value, error) {
				ks := old.Type.Shape
				r, err := b.Emit1(ir.OpReshape, []*ir.Value{c}, ir.Attrs{"shape": []int{ks[0], ks[1] / grp, ks[2], ks[3], ks[4]}})
				if err != nil {
					return nil, err
				}
				r.Type.Dist = old.Type.Dist
				return r, nil
			}
			rx, err := reshape(m.Op("kxr").Result())
			if err != nil {
				return nil, err
			}
			r := rx
			if m.Op("kr") != m.Op("kxr") {
				if r, err = reshape(m.Op("kr").Result()); err != nil {
					return nil, err
				}
			}
			rep := ir.Attrs{"repeats": grp, "axis": 1}
			prep := m.Op("prep")
			pa := ir.Attrs{}
			for k, v := range prep.Attrs {
				pa[k] = v
			}
			pa["k_group"] = grp
			np, err := b.Emit(ir.OpGDNChunkPrep, append([]*ir.Value{rx, r}, prep.Operands[2:]...), pa)
			if err != nil {
				return nil, err
			}
			for i, v := range np.Results {
				v.Type.Dist = prep.Results[i].Type.Dist
			}
			// the grouped prep is the prep on kx's and k's repeats (its k_group semantics)
			if np.Decomp, err = gdnDecomp(np, func(in []*ir.Value, emit gdnEmitFn) ([]*ir.Value, error) {
				kx, err := emit(ir.OpRepeatInterleave, in[:1], rep, nil)
				if err != nil {
					return nil, err
				}
				k, err := emit(ir.OpRepeatInterleave, in[1:2], rep, nil)
				if err != nil {
					return nil, err
				}
				return emit(ir.OpGDNChunkPrep, append([]*ir.Value{kx[0], k[0]}, in[2:]...), prep.Attrs, prep)
			}); err != nil {
				return nil, err
			}
			scan := m.Op("scan")
			sa := ir.Attrs{}
			for k, v := range scan.Attrs {
				sa[k] = v
			}
			sa["k_group"] = grp
			ns, err := b.Emit(ir.OpGDNChunkScan, append(append(append([]*ir.Value{}, np.Results...), r), scan.Operands[5:]...), sa)
			if err != nil {
				return nil, err
			}
			for i, v := range ns.Results {
				v.Type.Dist = scan.Results[i].Type.Dist
			}
			// the grouped scan is the scan on k's repeat
			if ns.Decomp, err = gdnDecomp(ns, func(in []*ir.Value, emit gdnEmitFn) ([]*ir.Value, error) {
				k, err := emit(ir.OpRepeatInterleave, in[4:5], rep, nil)
				if err != nil {
					return nil, err
				}
				return emit(ir.OpGDNChunkScan, append(append(append([]*ir.Value{}, in[:4]...), k[0]), in[5:]...), scan.Attrs, scan)
			}); err != nil {
				return nil, err
			}
			return append(append([]*ir.Value{}, np.Results...), ns.Results...), nil
		},
	}
}

// gdnKGroupPlan is FuseGDNChunkKGroup's side condition and plan: the prep
// takes kx and k with the value heads (no k_group yet) and g's rows (rows
// = 1); the scan reads the prep's four results as u, wk, qg and qk, in
// order, and has no k_group; the three reshapes of the chain (kx's, k's,
// the scan's k, possibly one op) have one shape, fit gdnRepeatPlan, and
// without the repeat fit the k_group rules against v and the scan's
// state. It returns the steps without the repeat and G.
func gdnKGroupPlan(m *rw.Match) ([]ir.LayoutStep, int, bool) {
	prep, scan, chain := m.Op("prep"), m.Op("scan"), m.Op("chain")
	if g, err := ir.GDNKGroup(prep.Attrs); err != nil || g != 1 {
		return nil, 0, false
	}
	if g, err := ir.GDNKGroup(scan.Attrs); err != nil || g != 1 {
		return nil, 0, false
	}
	if rows, err := ir.GDNChunkPrepRows(prep.Attrs); err != nil || !rows {
		return nil, 0, false
	}
	for i, name := range []string{"u", "wk", "qg", "qk"} {
		if m.Value(name) != prep.Results[i] {
			return nil, 0, false
		}
	}
	kr := m.Op("kr")
	ks := kr.Result().Type.Shape
	for _, name := range []string{"kxr", "ksr"} {
		if o := m.Op(name); !o.Result().Type.Shape.Equal(ks) || len(o.Attrs) != 1 {
			return nil, 0, false
		}
	}
	kept, grp, ok := gdnRepeatPlan(chain, m.Value("x"), kr)
	if !ok {
		return nil, 0, false
	}
	kt := kr.Result().Type
	kt.Shape = ir.Shape{ks[0], ks[1] / grp, ks[2], ks[3], ks[4]}
	if _, err := ir.GDNKGroupType("k", kt, m.Value("v").Type, grp); err != nil {
		return nil, 0, false
	}
	if _, err := ir.GDNKGroupType("k", kt, m.Value("state").Type, grp); err != nil {
		return nil, 0, false
	}
	return kept, grp, true
}
