package passes

import "github.com/tcc-dev/tcc/ir"

// PlaceStats counts what Place did.
type PlaceStats struct {
	Results int // op results visited
	Changed int // results whose memory config or layout changed
	Kept    int // results left alone because keep reported them placed
}

// Place is the minimal placement policy. Afterwards every op result for
// which keep (may be nil) returns false is in DRAM interleaved memory, and
// in tile layout if its dtype is a float; integer results (argmax indices)
// keep the layout their shape rule gave them. Inputs, weights and state
// keep their declared placement, and decompositions of fused ops are not
// touched. Shapes, dtypes and distributions never change, so a graph that
// verified before still verifies.
func Place(g *ir.Graph, keep func(*ir.Value) bool) PlaceStats {
	var st PlaceStats
	for _, op := range g.Ops() {
		for _, v := range op.Results {
			st.Results++
			if keep != nil && keep(v) {
				st.Kept++
				continue
			}
			t := v.Type
			t.Mem = ir.DRAM
			if t.DType.IsFloat() {
				t.Layout = ir.TileLayout
			}
			if !t.Mem.Equal(v.Type.Mem) || t.Layout != v.Type.Layout {
				st.Changed++
				v.Type = t
			}
		}
	}
	return st
}
