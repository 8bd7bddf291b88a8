package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// FuseGDNChunkScan (family gdn, registered in fuse_gdn.go): the GDN
// prefill's loop over chunks, once FuseGDNChunkStep made each chunk one
// gdn_chunk_step, is a chain of steps, each reading the state the
// previous one left, whose outputs the model appends one by one
// (concat(out, o_i) along the chunk axis; FlattenConcat runs only in
// fuse-layout, after this stage). The rule joins the chain's head (a step
// or a scan already made of the first steps) and the next step with
// their concat into one gdn_chunk_scan, so repeated firings make the
// whole loop one program that keeps each item's state in L1 from chunk
// to chunk and writes every chunk's output straight into the joined
// tensor, instead of one program per chunk plus the concat's.
// gdnScanVars are the operands every step of a chain shares.
var gdnScanVars = []string{"u", "wk", "qg", "qk", "k", "g"}

// gdnScanElem is a pattern for a gdn_chunk_step (or gdn_chunk_scan) named
// name reading the shared operands and state.
func gdnScanElem(kind ir.OpKind, name string, state *rw.Pattern) *rw.Pattern {
	ps := make([]*rw.Pattern, 0, 7)
	for _, v := range gdnScanVars {
		ps = append(ps, rw.Var(v))
	}
	return rw.Op(kind, append(ps, state)...).As(name)
}

// gdnScanPattern is concat(e0, e1) with e0 a step or a scan from state
// and e1 a step from e0's state.
func gdnScanPattern() *rw.Pattern {
	head := func(state *rw.Pattern) *rw.Pattern {
		return rw.OneOf(gdnScanElem(ir.OpGDNChunkStep, "s0", state), gdnScanElem(ir.OpGDNChunkScan, "s0", state))
	}
	return rw.Op(ir.OpConcat, head(rw.Var("state")), gdnScanElem(ir.OpGDNChunkStep, "s1", head(rw.Any())))
}

// gdnScanSpan is the chunks element op covers: its first and its count.
func gdnScanSpan(op *ir.Op) (first, count int) {
	if op.Kind == ir.OpGDNChunkScan {
		return op.Int("first"), op.Int("count")
	}
	return op.Int("chunk"), 1
}

// gdnScanApplies is FuseGDNChunkScan's side condition: the concat
// joins along axis 2 of the rank-5 outputs e0's o then e1's; e1 reads
// e0's state result and covers the chunk after e0's; neither sets a math
// fidelity; and the scan's types equal the concat's and e1's state's.
func gdnScanApplies(m *rw.Match) bool {
	cat, e0, e1 := m.Root, m.Op("s0"), m.Op("s1")
	if !gdnAxis(cat, "axis", 5, 2) || len(e0.Results) != 2 || len(e1.Results) != 2 ||
		cat.Operands[0] != e0.Results[0] || cat.Operands[1] != e1.Results[0] || e1.Operands[6] != e0.Results[1] {
		return false
	}
	for _, op := range []*ir.Op{e0, e1} {
		if _, ok := op.Attrs[ir.FidelityAttr]; ok {
			return false
		}
	}
	first, count := gdnScanSpan(e0)
	if e1.Int("chunk") != first+count {
		return false
	}
	types, err := ir.InferTypes(ir.OpGDNChunkScan, gdnScanOperands(m), gdnScanAttrs(first, count+1))
	if err != nil || len(types) != 2 {
		return false
	}
	for i, old := range []*ir.Value{cat.Result(), e1.Results[1]} {
		if !types[i].Shape.Equal(old.Type.Shape) || types[i].DType != old.Type.DType {
			return false
		}
	}
	return true
}

// gdnScanOperands are the scan's operands: the shared ones and the first
// element's state.
func gdnScanOperands(m *rw.Match) []*ir.Value {
	var vs []*ir.Value
	for _, v := range gdnScanVars {
		vs = append(vs, m.Value(v))
	}
	return append(vs, m.Value("state"))
}

// gdnScanAttrs are the scan's attributes.
func gdnScanAttrs(first, count int) ir.Attrs {
	return ir.Attrs{"first": first, "count": count}
}

// ruleGDNChunkScan fuses the head of a chain of GDN chunk steps, the
// next step and the concat of their outputs.
func ruleGDNChunkScan() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseGDNChunkScan",
		Rewrite: "concat(gdn_chunk_step|gdn_chunk_scan(u, wk, qg, qk, k, g, S) = e0, gdn_chunk_step(u, wk, qg, qk, k, g, e0's state) {chunk = e0's next}) along axis 2 => gdn_chunk_scan(u, wk, qg, qk, k, g, S) {first, count}",
		Pattern: gdnScanPattern(),
		Extra:   []*rw.Pattern{gdnScanElem(ir.OpGDNChunkStep, "s1", rw.Any())},
		Where:   gdnScanApplies,
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			first, count := gdnScanSpan(m.Op("s0"))
			op, err := b.Emit(ir.OpGDNChunkScan, gdnScanOperands(m), gdnScanAttrs(first, count+1))
			if err != nil {
				return nil, err
			}
			o, s := op.Results[0], op.Results[1]
			// The step's o is read only by the concat this replaces: its
			// stand-in (the scan's last chunk) is dead at once.
			sh := o.Type.Shape
			begin := []int{0, 0, sh[2] - 1, 0, 0}
			last, err := b.Emit1(ir.OpSlice, []*ir.Value{o}, ir.Attrs{"begin": begin, "end": []int(sh.Clone())})
			if err != nil {
				return nil, err
			}
			return []*ir.Value{o, last, s}, nil
		},
	}
}
