package timing

import (
	"fmt"
	"math"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"

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
	prm := Default()
	p, pt := simulateLastOp(t, b, tgt, prm)
	cores := len(p.Cores())
	perCore := (nt + cores - 1) / cores
	floorUS := float64(rows*kt*perCore)*prm.MatmulCycles[ir.HiFi4]/prm.ClockHz*1e6 + prm.FixedProgramUS
	t.Logf("%d cores, %d tile column(s) on the busiest: predicted %.1f us, its products' floor %.1f us (%.2fx)", cores, perCore, pt.US(), floorUS, pt.US()/floorUS)
	if pt.US() > 1.5*floorUS || pt.US() < floorUS {
		t.Errorf("a compute-bound prefill matmul is predicted at %.1f us, %.2fx its products' floor of %.1f us; want 1x to 1.5x", pt.US(), pt.US()/floorUS, floorUS)
	}
}

// TestPrefillSwiGLUOverlapsRowMulticast: a prefill matmul_swiglu whose
// cores hold one activation row at a time (1,024 tokens of the 27B's
// [5120 -> 8704] bfp4_b gate and up projections: a row of 160 bf16 tiles,
// 320 KiB, next to each core's resident slices; two row blocks of 55
// cores, 5 columns x 16 rows each) frees each row before its epilogue, so
// the next row's read and multicast run during the silu of the gate tiles
// instead of after it (lower's popEarly). The busiest core's products,
// epilogue SFPU work and packing then leave 1.12x (the weights' first
// stream and the first row's wait): want at most 1.15x. When every row
// waited for its multicast after the epilogue (before), 1.18x.
func TestPrefillSwiGLUOverlapsRowMulticast(t *testing.T) {
	const rows, kt, nt = 32, 160, 272
	tgt := target.Blackhole()
	b := ir.NewBuilder("prefill swiglu")
	a := b.Input("a", ir.T(ir.BF16, 1, rows*ir.TileSize, kt*ir.TileSize))
	b.Output(b.MatmulSwiGLU(a, b.Weight("gate", ir.T(ir.BFP4B, kt*ir.TileSize, nt*ir.TileSize)), b.Weight("up", ir.T(ir.BFP4B, kt*ir.TileSize, nt*ir.TileSize))))
	prm := Default()
	p, pt := simulateLastOp(t, b, tgt, prm)
	var sub, per int
	fmt.Sscan(p.Kernels[1].Defines["MM_SUBBLOCK"], &sub)
	for _, k := range p.Kernels {
		if k.Role == kir.RoleCompute {
			fmt.Sscan(k.Defines["MM_TILES_PER_CORE"], &per)
		}
	}
	cores := len(p.Cores())
	blocks := cores / ((nt + per - 1) / per) // row blocks: the cores' runs
	coreRows := rows / max(1, blocks)
	tiles := float64(coreRows * per)
	products := 2 * tiles * kt * prm.MatmulCycles[ir.HiFi3]
	epilogue := tiles * (prm.SFPUCycles[kir.SFPUSiLU] + prm.SFPUCycles[kir.SFPUMulBinary] + 3*prm.UnpackCyclesPerTile + 4*prm.PackCycles32)
	workUS := (products+epilogue)/prm.ClockHz*1e6 + prm.FixedProgramUS
	t.Logf("%d cores, %d row block(s), %d columns x %d rows on the busiest: predicted %.1f us, its work %.1f us (%.3fx)", cores, blocks, per, coreRows, pt.US(), workUS, pt.US()/workUS)
	if pt.US() > 1.15*workUS || pt.US() < workUS {
		t.Errorf("a one-row-ring prefill matmul_swiglu is predicted at %.1f us, %.3fx its busiest core's products and epilogue (%.1f us); want 1x to 1.15x", pt.US(), pt.US()/workUS, workUS)
	}
}

// TestPrefillMatmulRowChunksOverlapMulticast: a prefill matmul whose
// cores hold one activation row at a time (1,024 tokens, a row of 160 or
// 192 bf16 tiles next to each core's resident slices; two row blocks)
// pops each row in chunks during its last product, and the writer
// multicasts the next row's chunks as they free (lower's rowChunks), so
// the next row's read and multicast no longer follow the row's last
// product. The cases: the 27B's GDN input projections (matmul4, [5120 ->
// 5120 + 3072 + 24 + 24] bfp8_b, 5 columns x 16 rows on the busiest core
// in up to two parts) and a plain [6144 -> 5120] bfp8_b projection (3
// columns x 16 rows). The busiest core's products at HiFi4 then leave
// 1.14x and 1.15x (most of it the weights' first stream before the first
// products); when every row waited for its read and multicast after the
// last product (before), 1.28x and 1.38x.
func TestPrefillMatmulRowChunksOverlapMulticast(t *testing.T) {
	cases := []struct {
		name string
		kt   int
		nts  []int // the parts' widths in tiles
		max  float64
	}{
		{"matmul4", 160, []int{160, 96, 1, 1}, 1.18},
		{"matmul", 192, []int{160}, 1.22},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const rows = 32
			tgt := target.Blackhole()
			b := ir.NewBuilder("prefill " + tc.name)
			a := b.Input("a", ir.T(ir.BF16, 1, rows*ir.TileSize, tc.kt*ir.TileSize))
			w := func(i int) *ir.Value {
				return b.Weight(fmt.Sprintf("w%d", i), ir.T(ir.BFP8B, tc.kt*ir.TileSize, tc.nts[i]*ir.TileSize))
			}
			nt := 0
			for _, n := range tc.nts {
				nt += n
			}
			if len(tc.nts) == 4 {
				for _, v := range b.Matmul4(a, w(0), w(1), w(2), w(3)) {
					b.Output(v)
				}
			} else {
				b.Output(b.Matmul(a, w(0)))
			}
			prm := Default()
			p, pt := simulateLastOp(t, b, tgt, prm)
			var per int
			for _, k := range p.Kernels {
				if k.Role == kir.RoleCompute {
					fmt.Sscan(k.Defines["MM_TILES_PER_CORE"], &per)
				}
			}
			cores := len(p.Cores())
			blocks := cores / ((nt + per - 1) / per) // row blocks: the cores' runs
			coreRows := rows / max(1, blocks)
			products := float64(coreRows*per*tc.kt) * prm.MatmulCycles[ir.HiFi4]
			workUS := products/prm.ClockHz*1e6 + prm.FixedProgramUS
			t.Logf("%d cores, %d row block(s), %d columns x %d rows on the busiest: predicted %.1f us, its products %.1f us (%.3fx)", cores, blocks, per, coreRows, pt.US(), workUS, pt.US()/workUS)
			if pt.US() > tc.max*workUS || pt.US() < workUS {
				t.Errorf("a one-row-ring prefill %s is predicted at %.1f us, %.3fx its busiest core's products (%.1f us); want 1x to %.2fx", tc.name, pt.US(), pt.US()/workUS, workUS, tc.max)
			}
		})
	}
}

// simulateLastOp lowers the last op of b's graph for tgt and simulates
// its program on one device with prm: the program and its timing.
func simulateLastOp(t *testing.T, b *ir.Builder, tgt *target.Target, prm *Params) (*kir.Program, *ProgramTime) {
	t.Helper()
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	ops := g.Ops()
	p, err := lower.Lower(ops[len(ops)-1], lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := Simulate(p, tgt, prm, Options{Devices: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p, pt
}

// TestPrefillMatmulResidentWaitsOnce: once a resident prefill matmul's
// core has run its first tile row it holds every weight tile, so each
// later row waits once per sub-block for the row (one K block of kt, with
// a ring of two rows) and not for its weights, instead of twice per K
// block of the weight stream. The 27B's out projection ([3072 -> 5120]
// bfp8_b on SrcB, 512 tokens, a ring of two activation rows, 3 columns x
// 8 rows per core) made 49
// cb_wait_front calls per row, 392 in all (predicted 108.5 us), and now
// 49 in the first row and 2 in each later one, 63 (104.8 us). Its
// matmul4 (the row-chunk path: 10 chunks of 16 K tiles per row) drops
// the chunks' weight waits after the first row: 160 calls before, 90
// now.
func TestPrefillMatmulResidentWaitsOnce(t *testing.T) {
	cases := []struct {
		name        string
		kt          int
		nts         []int // the parts' widths in tiles
		first, next int   // the most compute cb_wait_front calls in the first row, in each later row
	}{
		{"matmul_out_proj", 96, []int{160}, 49, 2},
		{"matmul4_row_chunks", 160, []int{160, 96, 1, 1}, 20, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const rows = 16
			b := ir.NewBuilder("prefill " + tc.name)
			a := b.Input("a", ir.T(ir.BF16, 1, rows*ir.TileSize, tc.kt*ir.TileSize))
			w := func(i int) *ir.Value {
				ty := ir.T(ir.BFP8B, tc.kt*ir.TileSize, tc.nts[i]*ir.TileSize)
				ty.TilesTransposed = true
				return b.Weight(fmt.Sprintf("w%d", i), ty)
			}
			if len(tc.nts) == 4 {
				for _, v := range b.Matmul4(a, w(0), w(1), w(2), w(3)) {
					b.Output(v)
				}
			} else {
				b.Output(b.Matmul(a, w(0)))
			}
			prm := Default()
			p, pt := simulateLastOp(t, b, target.Blackhole(), prm)
			var per int
			for _, k := range p.Kernels {
				if k.Role == kir.RoleCompute {
					fmt.Sscan(k.Defines["MM_TILES_PER_CORE"], &per)
				}
			}
			nt := 0
			for _, n := range tc.nts {
				nt += n
			}
			coreRows := rows / max(1, len(p.Cores())/((nt+per-1)/per))
			for _, k := range pt.Devices[0].Kernels {
				if k.Role != kir.RoleCompute {
					continue
				}
				calls := math.Round(k.Busy["cb_wait_front"] * 1e-6 * prm.ClockHz / prm.CBCycles)
				limit := float64(tc.first + tc.next*(coreRows-1))
				t.Logf("predicted %.1f us; compute %s: %.0f cb_wait_front calls over %d rows (limit %.0f)", pt.US(), k.Core, calls, coreRows, limit)
				if calls > limit {
					t.Errorf("compute made %.0f cb_wait_front calls over its %d rows; want at most %.0f (%d in the first row, %d in each later one)", calls, coreRows, limit, tc.first, tc.next)
				}
			}
		})
	}
}

// TestPrefillMatmulKChunks: a prefill matmul whose cores receive each
// activation row in K chunks (lower's K chunks: the 27B's down projection
// at 1x1, [8704 -> 5120] bfp8_b on SrcB, whose 544-tile row does not fit
// next to the weights; here 8 tile rows, two columns a core) keeps each
// row's sums in DEST over its chunks (one sub-block: no partial sums
// packed, copied back and reconfigured for per chunk), and its writer
// sends the next row's first chunk before the row's results, so a row's
// first chunk no longer waits for those writes. Predicted 468.6 us; 507.0
// before both, 491.8 with the chunk ahead only, 483.2 with the sums held
// only (at 4,096 tokens: 5,600.5 -> 4,900.9 us).
func TestPrefillMatmulKChunks(t *testing.T) {
	const rows, kt, nt = 8, 544, 160
	b := ir.NewBuilder("prefill matmul in K chunks")
	ty := ir.T(ir.BFP8B, kt*ir.TileSize, nt*ir.TileSize)
	ty.TilesTransposed = true
	b.Output(b.Matmul(b.Input("a", ir.T(ir.BF16, 1, rows*ir.TileSize, kt*ir.TileSize)), b.Weight("w", ty)))
	p, pt := simulateLastOp(t, b, target.Blackhole(), Default())
	for _, cb := range p.CBs {
		if cb.Name == "act" && cb.Pages >= kt {
			t.Fatalf("the act CB holds %d pages, want K chunks (fewer than a row's %d)", cb.Pages, kt)
		}
	}
	var copies float64
	for _, k := range pt.Devices[0].Kernels {
		if k.Role == kir.RoleCompute {
			copies = k.Busy["copy_tile"]
		}
	}
	t.Logf("predicted %.1f us; compute copied partial sums for %.1f us", pt.US(), copies)
	if copies > 0 {
		t.Errorf("compute reloads partial sums (copy_tile %.1f us), want them held in DEST", copies)
	}
	if pt.US() > 476 {
		t.Errorf("predicted %.1f us, want at most 476 (468.6 with the sums held in DEST and the next row's first chunk ahead)", pt.US())
	}
}
