package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestConcatRowsReadsTailOnce: the row concat of a short head before many
// rows (the GDN prefill's conv state before the step's tokens) builds each
// result tile from two of the tail's tiles; its reader keeps the tile row
// the previous unit read, so the program moves each tail tile about once
// each way and is predicted near the DRAM time of the bytes read once and
// written once (reading every tail tile twice costs ~1.5x of it).
func TestConcatRowsReadsTailOnce(t *testing.T) {
	cases := []struct {
		name       string
		rows, cols int
		max        float64
	}{
		{"gdn_conv_state", 1024, 5120, 1.2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tgt := target.Blackhole()
			b := ir.NewBuilder("concat rows")
			head := b.Input("state", ir.T(ir.BF16, 1, 3, tc.cols))
			tail := b.Input("x", ir.T(ir.BF16, 1, tc.rows, tc.cols))
			b.Output(b.Concat(head, tail, 1))
			prm := Default()
			_, pt := simulateLastOp(t, b, tgt, prm)
			tileBytes := float64(ir.BF16.TileBytes())
			tiles := float64(tc.rows/ir.TileSize*tc.cols/ir.TileSize) * tileBytes
			bytes := 2*tiles + float64(tc.cols/ir.TileSize)*tileBytes // the tail in and the result out
			floorUS := bytes/(prm.DRAMBankBytesPerCycle*float64(tgt.DRAMBanks)*prm.DRAMEfficiency)/prm.ClockHz*1e6 + prm.FixedProgramUS
			t.Logf("predicted %.1f us, the DRAM time of the bytes moved once %.1f us (%.3fx)", pt.US(), floorUS, pt.US()/floorUS)
			if pt.US() > tc.max*floorUS {
				t.Errorf("the row concat [1,3,%d] ++ [1,%d,%d] bf16 is predicted at %.1f us, %.3fx the DRAM time of its bytes moved once (%.1f us); want at most %.2fx", tc.cols, tc.rows, tc.cols, pt.US(), pt.US()/floorUS, floorUS, tc.max)
			}
		})
	}
}
