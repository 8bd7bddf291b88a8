package lower

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestCumsumSplitsByTriangle checks that cumsum's core count is chosen by
// the reader's triangle generation (1,024 stores a tile, far slower than
// the tile product compute waits for): one result tile per core while
// the grid lasts, where a split by compute alone puts 2..4 tiles on a
// core.
func TestCumsumSplitsByTriangle(t *testing.T) {
	for _, tc := range []struct {
		name string
		dims []int
		axis int
	}{
		{name: "last", dims: []int{1, 4, 128, 32}, axis: -1},
		{name: "rows", dims: []int{4, 128, 32}, axis: -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("cumsum")
			x := b.Input("x", tt(ir.FP32, dram, tc.dims...))
			b.Region("layer", 0)
			b.Output(b.Cumsum(x, tc.axis))
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			op := g.Ops()[len(g.Ops())-1]
			p, err := Lower(op, NewContext(target.Blackhole()))
			if err != nil {
				t.Fatal(err)
			}
			tiles := blocks.ImageOf(op.Result().Type.Shape).Pages
			if got := len(p.Cores()); got != tiles {
				t.Errorf("cumsum of %v along %d runs on %d cores, want %d (one result tile each)", tc.dims, tc.axis, got, tiles)
			}
		})
	}
}
