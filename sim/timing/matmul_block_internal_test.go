package timing

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// TestMatmulBlockCycles checks matmul_block's charge against the tiles
// the LLK unpacks (tt-llk _llk_unpack_AB_matmul_): per call min(rt, ct)
// tiles of the shorter side once and rt*ct tiles of the longer side, so
// an rt x ct sub-block with both sides over 1 unpacks more than rt + ct
// tiles (a 2 x 2 block six, not four), and a one-row or one-column block
// exactly its rt + ct; the unpacks overlap the products, so the call
// takes the longer of the two, at every fidelity.
func TestMatmulBlockCycles(t *testing.T) {
	p := Default()
	u := p.MatmulUnpackCyclesPerTile
	cases := []struct {
		ct, rt  uint64
		unpacks float64
	}{
		{1, 1, 2},
		{4, 1, 5},
		{1, 4, 5},
		{2, 2, 6},
		{3, 2, 8},
		{2, 4, 10},
		{8, 1, 9},
	}
	for _, fid := range []ir.MathFidelity{ir.LoFi, ir.HiFi2, ir.HiFi4} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%dx%d", fid, tc.rt, tc.ct), func(t *testing.T) {
				want := max(tc.unpacks*u, float64(tc.ct*tc.rt)*p.MatmulCycles[fid])
				if got := matmulBlockCycles(p, fid, tc.ct, tc.rt); got != want {
					t.Errorf("matmul_block %d x %d costs %g cycles, want %g (%g unpacked tiles overlapping %d products)", tc.rt, tc.ct, got, want, tc.unpacks, tc.ct*tc.rt)
				}
			})
		}
	}
}
