package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestPrefillMatmulNearComputeFloor: a prefill matmul as lower builds it
// (weights resident in L1, the activation rows multicast; 1,024 tokens
// of a [2048 -> 3520] bfp8_b projection, one tile column per core at
// HiFi4) is predicted within 1.5x of its tile products at 64 cycles each
// on its busiest core: the unpack of the operands overlaps the products
// (matmulBlockCycles). In series, as before, a product took 64 + 2 x 59
// cycles and the program 2.56x that floor (1.39x now).
func TestPrefillMatmulNearComputeFloor(t *testing.T) {
	const rows, kt, nt = 32, 64, 110
	tgt := target.Blackhole()
	b := ir.NewBuilder("prefill matmul")
	b.Output(b.Matmul(b.Input("a", ir.T(ir.BF16, 1, rows*ir.TileSize, kt*ir.TileSize)), b.Weight("w", ir.T(ir.BFP8B, kt*ir.TileSize, nt*ir.TileSize))))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	ops := g.Ops()
	op := ops[len(ops)-1]
	p, err := lower.Lower(op, lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	prm := Default()
	pt, err := Simulate(p, tgt, prm, Options{Devices: 1})
	if err != nil {
		t.Fatal(err)
	}
	cores := len(p.Cores())
	perCore := (nt + cores - 1) / cores
	floorUS := float64(rows*kt*perCore)*prm.MatmulCycles[ir.HiFi4]/prm.ClockHz*1e6 + prm.FixedProgramUS
	t.Logf("%d cores, %d tile column(s) on the busiest: predicted %.1f us, its products' floor %.1f us (%.2fx)", cores, perCore, pt.US(), floorUS, pt.US()/floorUS)
	if pt.US() > 1.5*floorUS || pt.US() < floorUS {
		t.Errorf("a compute-bound prefill matmul is predicted at %.1f us, %.2fx its products' floor of %.1f us; want 1x to 1.5x", pt.US(), pt.US()/floorUS, floorUS)
	}
}
