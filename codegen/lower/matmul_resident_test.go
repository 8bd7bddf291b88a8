package lower

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// TestResidentWeightsOnSim runs prefill-shaped matmul engine ops (two to
// five tile rows of activation) on the simulator, bit for bit against
// the reference, and counts the program's NoC reads: each weight byte is
// read once (not once per tile row), each activation byte once per column
// group of the multicast and the epilogue's inputs once. A core's slice
// that does not fit L1 (streamed) keeps the per-row program: the weights
// read once per row, the activation by every core. actRows, where set, is
// the activation rows the program's act CB must hold: all (rowsInner), a
// ring of two or of one. rowBlocks is the row blocks the program's cores
// must split the rows into (planGrid; 0 means 1): with two, each core
// multiplies half the rows against a wider slice, the pairs share the
// weight stream (each weight byte still read once) and each block's
// column groups read its rows once.
func TestResidentWeightsOnSim(t *testing.T) {
	cases := []struct {
		name     string
		tgt      *target.Target
		streamed bool
		build    func(b *ir.Builder) []*ir.Value
		actRows  int
		// rowBlocks: the row blocks wanted (0: one).
		rowBlocks int
		// long: a TCC_LONG case (further variants, the 1-row ring and the
		// fallback: paths the long suite keeps covered).
		long bool
	}{
		{"matmul_bf16", target.Blackhole(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 96, 256), fcW(b, "w", ir.BF16, 256, 640)))
		}, 3, 0, false},
		{"matmul_bfp8", target.Blackhole(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 70, 384), fcW(b, "w", ir.BFP8B, 384, 1312)))
		}, 0, 0, true},
		{"matmul_bfp8_2cores", smallGrid(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 96, 256), fcW(b, "w", ir.BFP8B, 256, 416)))
		}, 0, 0, true}, // ~0.35 CPU-s: TestKChunksOnSim runs a resident 2-core matmul by default
		// A 2-core grid with 400 KiB of L1 each (smallL1): 128 KiB
		// activation rows (K 2048), so the rings and the fallback show at
		// small sizes.
		{"matmul_bfp8_ring_of_two", smallL1(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 96, 2048), fcW(b, "w", ir.BFP8B, 2048, 64)))
		}, 2, 0, false},
		{"matmul_bfp8_ring_of_one", smallL1(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 96, 2048), fcW(b, "w", ir.BFP8B, 2048, 192)))
		}, 1, 0, true},
		{"matmul_bfp8_too_big_for_l1", smallL1(), true, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 40, 2048), fcW(b, "w", ir.BFP8B, 2048, 512)))
		}, 0, 0, true},
		{"swiglu_bfp4", target.Blackhole(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 64, 512), fcW(b, "gate", ir.BFP4B, 512, 608), fcW(b, "up", ir.BFP4B, 512, 608)))
		}, 2, 0, true}, // ~1.8 CPU-s: TestWeightBlocksOnSim and the SrcB cases run bfp4_b swiglu by default
		// A ring of one row (smallL1, K 2048): compute pops each row
		// before the silu and the multiply (popEarly), the writer
		// multicasts the next row before it writes this one's results.
		{"swiglu_bfp4_ring_of_one", smallL1(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 64, 2048), fcW(b, "gate", ir.BFP4B, 2048, 128), fcW(b, "up", ir.BFP4B, 2048, 128)))
		}, 1, 0, true}, // ~1.5 CPU-s: matmul4's ring of one below runs the ring of one by default
		{"matmul4_bfp8", target.Blackhole(), false, func(b *ir.Builder) []*ir.Value {
			return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 96, 256), fcW(b, "w0", ir.BFP8B, 256, 640), fcW(b, "w1", ir.BFP8B, 256, 384),
				fcW(b, "w2", ir.BFP8B, 256, 24), fcW(b, "w3", ir.BFP8B, 256, 24))
		}, 3, 0, true},
		// A matmul4 with a ring of one row (smallL1, K 1536): the core's
		// last product pops the row in chunks, the writer multicasts the
		// next row's chunks as they free (rowChunks).
		{"matmul4_bfp8_ring_of_one", smallL1(), false, func(b *ir.Builder) []*ir.Value {
			return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 96, 1536), fcW(b, "w0", ir.BFP8B, 1536, 96), fcW(b, "w1", ir.BFP8B, 1536, 64),
				fcW(b, "w2", ir.BFP8B, 1536, 24), fcW(b, "w3", ir.BFP8B, 1536, 24))
		}, 1, 0, true}, // ~1.4 CPU-s: the swiglu ring of one above pops its rows by default
		{"rmsnorm_matmul_bfp8", target.Blackhole(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.RMSNormMatmul(fcIn(b, "x", ir.BF16, 1, 96, 256), fcW(b, "wn", ir.BF16, 256), fcW(b, "w", ir.BFP8B, 256, 320), 1e-5, 1))
		}, 0, 0, true},
		{"matmul_add_bfp8_five_rows", target.Blackhole(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 150, 256), fcW(b, "w", ir.BFP8B, 256, 320), fcIn(b, "r", ir.BF16, 1, 150, 320)))
		}, 5, 0, false},
		{"matmul_add_bfp8", target.Blackhole(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 96, 256), fcW(b, "w", ir.BFP8B, 256, 320), fcIn(b, "r", ir.BF16, 1, 96, 320)))
		}, 3, 0, true},
		// Two row blocks (smallL1): nine columns over two cores are five
		// on one core for every row; two blocks of one core each multiply
		// nine columns for half the rows (9 x 6 tile products per K step
		// instead of 5 x 12) in full-sync sub-blocks of 8 and 1, the
		// second block's rows multicast from its own first row; a ring of
		// two rows next to the wider slice.
		{"matmul_add_bfp8_row_blocks_ring_of_two", smallL1(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 384, 512), fcW(b, "w", ir.BFP8B, 512, 288), fcIn(b, "r", ir.BF16, 1, 384, 288)))
		}, 2, 2, true}, // ~3 CPU-s: the ring of one below runs row blocks by default
		// ... and a ring of one row (K 1536).
		{"matmul_bfp8_row_blocks_ring_of_one", smallL1(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 128, 1536), fcW(b, "w", ir.BFP8B, 1536, 96)))
		}, 1, 2, true}, // ~2.3 CPU-s: four row blocks below run row blocks and a ring of one by default
		// Four row blocks (quadL1: 4 cores): six columns are three per
		// core on two blocks of two cores; four blocks of one core each
		// multiply all six for a quarter of the rows (a one-row sub-block
		// of 6, bound by its products), blocks 0 and 1, 2 and 3 sharing
		// the weight stream (DRAM reads the weights twice).
		{"matmul_bfp8_four_row_blocks", quadL1(), false, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 128, 512), fcW(b, "w", ir.BFP8B, 512, 192)))
		}, 1, 4, false},
		// A matmul4 at 256 tokens on the full grid with 300 KiB of L1 per
		// core (gridL1): four row blocks (two pairs sharing weight streams)
		// of several column groups each.
		{"matmul4_bfp8_row_blocks", gridL1(), false, func(b *ir.Builder) []*ir.Value {
			return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 256, 1024), fcW(b, "w0", ir.BFP8B, 1024, 512), fcW(b, "w1", ir.BFP8B, 1024, 256),
				fcW(b, "w2", ir.BFP8B, 1024, 24), fcW(b, "w3", ir.BFP8B, 1024, 24))
		}, 0, 4, true},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s/%dx%d", tc.name, tc.tgt.GridX, tc.tgt.GridY), func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "a further resident-weights variant on the simulator")
			}
			op := fcBuild(t, tc.build)
			ctx := NewContext(tc.tgt)
			args := fcArgs(op, uint64(900+i))
			want := refEval(t, op, args)
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkActRows(t, op, p, tc.actRows)
			if got, want := progRowBlocks(t, p), max(1, tc.rowBlocks); got != want {
				t.Errorf("the program's cores split the rows into %d blocks, want %d", got, want)
			}
			// row blocks: sub-blocks of a full-sync fp32 DEST's 8 tiles
			full, sub := tc.rowBlocks > 1, fmt.Sprint(tc.tgt.DestTiles(tc.rowBlocks > 1, true))
			for _, k := range p.Kernels {
				if k.Role == kir.RoleCompute && (k.Compute.DstFullSyncEn != full || k.Defines["MM_SUBBLOCK"] != sub) {
					t.Errorf("compute has dst_full_sync_en %v and sub-blocks of %s tiles, want %v and %s", k.Compute.DstFullSyncEn, k.Defines["MM_SUBBLOCK"], full, sub)
				}
			}
			got, st := residentExec(t, ctx, op, p, args)
			info := fmt.Sprintf("%d cores, %d NoC bytes read", len(p.Cores()), st.NoCReadBytes)
			for j, r := range op.Results {
				fcCompare(t, fmt.Sprintf("%s result %d %s", op.Name(), j, r.Type.Shape), want[j].Data, got[j], info)
			}
			if want := residentReads(t, ctx, op, p, tc.streamed); st.NoCReadBytes != want {
				t.Errorf("the program reads %d bytes over the NoC, want %d (streamed %v); %s", st.NoCReadBytes, want, tc.streamed, info)
			}
		})
	}
}

// checkActRows checks that p's activation CB holds rows tile rows of
// op's activation (no check when rows is 0).
func checkActRows(t *testing.T, op *ir.Op, p *kir.Program, rows int) {
	t.Helper()
	if rows == 0 {
		return
	}
	kt := op.Operands[0].Type.Shape.Cols2D() / ir.TileSize
	for _, cb := range p.CBs {
		if cb.Name == "act" && cb.Pages != rows*kt {
			t.Errorf("the activation CB holds %d pages, want %d rows of %d", cb.Pages, rows, kt)
		}
	}
}

// smallL1 is smallGrid with 400 KiB of L1 per core for CBs.
func smallL1() *target.Target {
	t := smallGrid()
	t.L1Size = t.L1UnreservedBase + 400<<10
	return t
}

// quadL1 is a 4 x 1 Blackhole grid with 200 KiB of L1 per core for CBs.
func quadL1() *target.Target {
	t := *target.Blackhole()
	t.GridX, t.GridY = 4, 1
	t.L1Size = t.L1UnreservedBase + 200<<10
	return &t
}

// gridL1 is the Blackhole grid with 300 KiB of L1 per core for CBs.
func gridL1() *target.Target {
	t := target.Blackhole()
	t.L1Size = t.L1UnreservedBase + 300<<10
	return t
}

// residentReads is the NoC bytes op's program p reads: with resident
// weights every weight (the op's operands of kind weight) once (once per
// pair of row blocks: weightShare), the
// activation (operand 0) once per column group of p's cores (of a row
// block's cores, that block's rows: rowBlocks), the other
// inputs once; streamed, every weight once per tile row and the
// activation once per core. rmsnorm_matmul has no multicast: every core
// reads x, and the norm weight (operand 1) once per row, and fills its
// scaler tile with local NoC copies (blocks.FillWords: the 2048-byte tile
// past its 512-byte seed).
func residentReads(t *testing.T, ctx *Context, op *ir.Op, p *kir.Program, streamed bool) int64 {
	t.Helper()
	// the activation rows' reads: a column group of a row block reads
	// that block's rows, or each rectangle of one when the writer
	// multicasts with loopback (actLoopback)
	rowBlocks, cores := progRowBlocks(t, p), p.Cores()
	loopback := writerLoopback(p)
	groups := 0
	for b := range rowBlocks {
		n := len(cores) / rowBlocks
		gs, err := multicore.ColumnGroups(ctx.Target, cores[b*n:(b+1)*n])
		if err == nil && loopback {
			gs, err = multicore.RectGroups(ctx.Target, gs)
		}
		if err != nil {
			t.Fatal(err)
		}
		groups += len(gs)
	}
	ncores, rows := int64(len(cores)), int64(op.Operands[0].Type.Shape.Tiles()/tilesWide(op.Operands[0].Type.Shape))
	acts, weights := int64(groups), int64(max(1, rowBlocks/2)) // once per pair of row blocks (weightShare)
	if streamed {
		acts, weights = ncores, rows
	}
	norm := op.Kind == ir.OpRMSNormMatmul
	if norm {
		acts = ncores
	}
	var n int64
	if norm {
		n += ncores * 1536
	}
	for i, v := range op.Operands {
		bytes := int64(v.Type.Shape.Tiles() * v.Type.DType.TileBytes())
		switch {
		case i == 0:
			bytes = bytes * acts / int64(rowBlocks)
		case norm && i == 1:
			bytes *= ncores * rows
		case v.Kind == ir.KindWeight:
			bytes *= weights
		}
		n += bytes
	}
	return n
}

// writerLoopback reports whether p's writer multicasts with loopback
// (noc_async_write_multicast_loopback_src).
func writerLoopback(p *kir.Program) bool {
	found := false
	for _, k := range p.Kernels {
		if k.Role == kir.RoleWriter {
			kir.Inspect(k.Body, func(s kir.Stmt) bool {
				_, ok := s.(kir.NoCAsyncWriteMulticastLoopbackSrc)
				found = found || ok
				return !found
			})
		}
	}
	return found
}

// progRowBlocks is the row blocks of matmul program p: the distinct
// values of its reader's runtime arg row0 over its cores (1 without it).
func progRowBlocks(t *testing.T, p *kir.Program) int {
	t.Helper()
	for _, k := range p.Kernels {
		if k.Role != kir.RoleReader {
			continue
		}
		a := k.LookupArg("row0")
		if a == nil {
			return 1
		}
		seen := map[uint32]bool{}
		for _, c := range p.Cores() {
			seen[k.RuntimeValuesOn(c)[a.Index].Const] = true
		}
		return len(seen)
	}
	t.Fatal("no reader")
	return 0
}

// residentExec runs p (op lowered with ctx) on a fresh simulated device
// with op's operands set to args and returns op's results and the run's
// statistics.
func residentExec(t *testing.T, ctx *Context, op *ir.Op, p *kir.Program, args [][]float32) ([][]float32, *kexec.Stats) {
	t.Helper()
	if err := kir.Validate(p, ctx.Target); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, k := range p.Kernels {
		if _, err := cpp.PrintKernel(p, k); err != nil {
			t.Fatalf("printing kernel %s: %v", k.Name, err)
		}
	}
	d := kexec.NewDevice(ctx.Target)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range op.Operands {
		if err := upload(d, ctx.BufferName(v), v, args[i]); err != nil {
			t.Fatal(err)
		}
	}
	st, err := d.Run(p, kexec.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := make([][]float32, len(op.Results))
	for i, r := range op.Results {
		if got[i], err = download(d, ctx.BufferName(r), r); err != nil {
			t.Fatal(err)
		}
	}
	return got, st
}

// TestResidentPlan lowers the 27B prefill matmuls of a 256-token step
// (1x2 per-device shapes) and checks their core counts: the planner
// costs the resident kernel (weights once, compute per row), whose
// compute grows with the rows while the weight stream does not, so it
// spreads the columns over more cores than the per-row plan (matmul3:
// 56 cores, matmul4: 66), and all three split their 8 tile rows into two
// row blocks (planGrid: 47, 54 and 54 cores of 5, 5 and 3 columns per
// block instead of 76, 88 and 80 cores of 3, 3 and 2; the
// down-projection's 3 x 272 weight tiles and one 272-tile row just fit).
func TestResidentPlan(t *testing.T) {
	cases := []struct {
		name      string
		wantCores int
		build     func(b *ir.Builder) []*ir.Value
	}{
		{"matmul3", 94, func(b *ir.Builder) []*ir.Value {
			return b.Matmul3(fcIn(b, "a", ir.BF16, 1, 256, 5120), fcW(b, "q", ir.BFP8B, 5120, 6144), fcW(b, "k", ir.BFP8B, 5120, 512), fcW(b, "v", ir.BFP8B, 5120, 512))
		}},
		{"matmul4", 108, func(b *ir.Builder) []*ir.Value {
			return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 256, 5120), fcW(b, "w0", ir.BFP8B, 5120, 5120), fcW(b, "w1", ir.BFP8B, 5120, 3072),
				fcW(b, "w2", ir.BFP8B, 5120, 24), fcW(b, "w3", ir.BFP8B, 5120, 24))
		}},
		{"matmul_down", 108, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 256, 8704), fcW(b, "w", ir.BFP8B, 8704, 5120)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := fcBuild(t, tc.build)
			p, err := Lower(op, NewContext(target.Blackhole()))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(p.Cores()); got != tc.wantCores {
				t.Errorf("%s runs on %d cores, want %d", op.Name(), got, tc.wantCores)
			}
		})
	}
}

// TestRowBlocksAt4096Tokens lowers the 27B's prefill matmuls at a
// 4,096-token step (per-device shapes of the 1x2 mesh, weights on SrcB)
// and checks the row blocks planGrid chooses and each core's columns:
// the GDN out-projection (K 96) splits its rows in four blocks so a core
// multiplies 6 columns, a one-row sub-block bound by its products; the
// down-projection's wider slices (K 272) do not fit next to a row, so it
// keeps two blocks of 3 columns, the MLP's gate and up two of 5.
func TestRowBlocksAt4096Tokens(t *testing.T) {
	cases := []struct {
		name            string
		build           func(b *ir.Builder) []*ir.Value
		rowBlocks, cols int
	}{
		{"out_projection", func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 4096, 3072), fcWT(b, "w", ir.BFP8B, 3072, 5120)))
		}, 4, 6},
		{"down_projection", func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 4096, 8704), fcWT(b, "w", ir.BFP8B, 8704, 5120)))
		}, 2, 3},
		{"swiglu", func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 4096, 5120), fcWT(b, "gate", ir.BFP4B, 5120, 8704), fcWT(b, "up", ir.BFP4B, 5120, 8704)))
		}, 2, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Lower(fcBuild(t, tc.build), NewContext(target.Blackhole()))
			if err != nil {
				t.Fatal(err)
			}
			if got := progRowBlocks(t, p); got != tc.rowBlocks {
				t.Errorf("the program's cores split the rows into %d blocks, want %d", got, tc.rowBlocks)
			}
			if got, want := p.Kernel("compute").Defines["MM_TILES_PER_CORE"], fmt.Sprint(tc.cols); got != want {
				t.Errorf("each core multiplies %s columns, want %s", got, want)
			}
		})
	}
}
