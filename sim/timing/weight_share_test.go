package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestRowBlockPairsReadWeightsTogether: a prefill matmul whose cores
// split the rows in two row blocks (1,024 tokens of a [6144 -> 5120]
// bfp8_b projection, 3 columns x 16 rows per core) shares each weight
// slice between the two cores of a pair, each reading every other block
// from DRAM and writing it to its partner (lower's weightShare). The two
// read at the same time (a core reserves past its partner's block and
// reads its own next one before it waits), so the readers are done
// within 1.2x of DRAM streaming every weight byte once (1.16x); when a
// core waited for its partner's block before reading its own next one,
// the pairs took turns: 1.23x.
func TestRowBlockPairsReadWeightsTogether(t *testing.T) {
	const rows, kt, nt = 32, 192, 160
	tgt := target.Blackhole()
	b := ir.NewBuilder("prefill matmul row blocks")
	a := b.Input("a", ir.T(ir.BF16, 1, rows*ir.TileSize, kt*ir.TileSize))
	w := b.Weight("w", ir.T(ir.BFP8B, kt*ir.TileSize, nt*ir.TileSize))
	b.Output(b.Matmul(a, w))
	prm := Default()
	_, pt := simulateLastOp(t, b, tgt, prm)
	reader := -1.0
	for _, k := range pt.Devices[0].Kernels {
		if k.Role == kir.RoleReader {
			reader = max(reader, k.FinishUS)
		}
	}
	if reader < 0 {
		t.Fatal("no reader thread")
	}
	bytes := float64(kt * nt * ir.BFP8B.TileBytes())
	floorUS := prm.cyclesToUS(bytes / (float64(tgt.DRAMBanks) * prm.DRAMBankBytesPerCycle * prm.DRAMEfficiency))
	t.Logf("readers done at %.1f us; DRAM streaming the %.1f MB of weights once %.1f us (%.2fx)", reader, bytes/1e6, floorUS, reader/floorUS)
	if reader > 1.2*floorUS || reader < floorUS {
		t.Errorf("the row-block pairs' readers finish at %.1f us, %.2fx DRAM streaming the weights once (%.1f us); want 1x to 1.2x", reader, reader/floorUS, floorUS)
	}
}
