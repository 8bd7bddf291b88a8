package lower

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestRelayoutSplitCountsFillAndReads: a relayout's split counts each
// result tile's fill and source read, not just its runs, so the GDN
// prefill's small padded reshapes spread over the grid (by runs alone:
// 8 cores each, the fills and reads in series).
func TestRelayoutSplitCountsFillAndReads(t *testing.T) {
	for _, tc := range []struct {
		name     string
		build    func(b *ir.Builder) *ir.Value
		minCores int
	}{
		{"rows to one-row tiles", func(b *ir.Builder) *ir.Value {
			return b.Reshape(in(b, "g", tt(ir.FP32, dram, 1, 24, 8, 32)), []int{1, 24, 8, 1, 32})
		}, 64},
		{"row to chunk tiles", func(b *ir.Builder) *ir.Value {
			return b.Reshape(in(b, "g", tt(ir.FP32, dram, 1, 24, 256)), []int{1, 24, 8, 32})
		}, 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, tc.build)
			p, err := Lower(op, NewContext(target.Blackhole()))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(p.Cores()); got < tc.minCores {
				t.Errorf("%s -> %s on %d cores, want at least %d", op.Operands[0].Type.Shape, op.Result().Type.Shape, got, tc.minCores)
			}
		})
	}
}
