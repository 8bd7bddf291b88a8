package passes

import (
	"sort"

	"github.com/tcc-dev/tcc/ir"
)

// Weights on SrcB (issue 31, item 4): the table of weights stored in
// transposed tiles (ir.TensorType.TilesTransposed), which a matmul feeds to
// SrcB (ir.WeightSourceOf) and multiplies exactly at HiFi2 when they are
// block floats (ir.ExactMatmulFidelityOn). Not a pipeline pass: one copy
// of the weights serves a model's prefill and decode graphs, so the table
// is computed over all of them (models/srcbtable, which tcc build, run,
// perf and kernels_gen apply after the pipeline).

// WeightsOnSrcB returns the weights of g that may be stored in transposed
// tiles, sorted by ID: block-float weights of rank 2 in tile layout whose
// every use is a weight operand of an op whose only fidelity-dependent
// products are activation x weight (ir.WeightMatmulOperands: matmul,
// matmul2/3/4, matmul_add, matmul_swiglu with a bf16 result). A weight
// any other op reads (a norm's prologue, an embedding, a convolution)
// keeps tile layout.
func WeightsOnSrcB(g *ir.Graph) []*ir.Value {
	ok := map[*ir.Value]bool{}
	for _, w := range g.Weights {
		t := w.Type
		ok[w] = t.DType.IsBlockFloat() && t.Layout == ir.TileLayout && t.Shape.Rank() == 2
	}
	for _, r := range g.Regions {
		for _, op := range r.Ops {
			asWeight := map[int]bool{}
			if ws, isMM := ir.WeightMatmulOperands(op); isMM {
				for _, i := range ws {
					asWeight[i] = true
				}
			}
			for i, v := range op.Operands {
				if v.Kind == ir.KindWeight && !asWeight[i] {
					ok[v] = false
				}
			}
		}
	}
	for _, v := range g.Outputs {
		ok[v] = false
	}
	var out []*ir.Value
	for _, w := range g.Weights {
		if ok[w] {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// WeightNamesOnSrcB are the names of the weights that may be stored in
// transposed tiles across graphs that share one copy of the weights (a
// model's prefill and decode graphs): a weight every graph declaring it
// lists in WeightsOnSrcB. Sorted.
func WeightNamesOnSrcB(gs ...*ir.Graph) []string {
	ok := map[string]bool{}
	for _, g := range gs {
		srcB := map[*ir.Value]bool{}
		for _, w := range WeightsOnSrcB(g) {
			srcB[w] = true
		}
		for _, w := range g.Weights {
			prev, seen := ok[w.Name]
			ok[w.Name] = srcB[w] && (prev || !seen)
		}
	}
	var out []string
	for n, y := range ok {
		if y {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// StoreWeightsOnSrcB stores the weights of g named in names (from
// WeightNamesOnSrcB) in transposed tiles and returns how many it marked;
// each then has TilesTransposed set. A named weight not in
// WeightsOnSrcB(g) is left as it is.
//
//	w [K, N] bfp8_b tile, read only as a matmul's weight => w [K, N] bfp8_b tile_t (fed to SrcB)
func StoreWeightsOnSrcB(g *ir.Graph, names []string) int {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	marked := 0
	for _, w := range WeightsOnSrcB(g) {
		if want[w.Name] {
			w.Type.TilesTransposed = true
			marked++
		}
	}
	return marked
}
