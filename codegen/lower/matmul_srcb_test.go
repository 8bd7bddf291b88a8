package lower

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// fcWT is fcW stored in transposed tiles (layout tile_t: on SrcB).
func fcWT(b *ir.Builder, name string, dt ir.DType, dims ...int) *ir.Value {
	ty := ir.T(dt, dims...)
	ty.TilesTransposed = true
	return b.Weight(name, ty)
}

// TestWeightsOnSrcBOnSim runs the matmul engine's variants with weights
// stored in transposed tiles (matmul_srcb.go) on the simulator, bit for
// bit against the reference (which multiplies them with
// numerics.MatmulSrcB): a streamed decode row, the resident prefill paths
// (all rows in the CB: productRows; a ring of one row: popEarly and
// rowChunks; rows per core in a ring), a norm prologue and a mix of
// weights on SrcA and SrcB. Each compute kernel runs at the op's
// fidelity (HiFi2 for bfp8_b and bfp4_b on SrcB) and transposes DEST
// once per result tile.
func TestWeightsOnSrcBOnSim(t *testing.T) {
	cases := []struct {
		name  string
		tgt   *target.Target
		build func(b *ir.Builder) []*ir.Value
		fid   ir.MathFidelity
		// long: a TCC_LONG case (the resident prefill variants, ~0.5 to 1.5 CPU-s each)
		long bool
		// actRows: the activation rows the act CB must hold (0: unchecked):
		// all (rowsInner), a ring of two or of one (popEarly, rowChunks)
		actRows int
	}{
		{"matmul_decode_bf16", smallGrid(), func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 1, 64), fcWT(b, "w", ir.BF16, 64, 64)))
		}, ir.HiFi4, false, 0},
		{"matmul_decode_bfp8", target.Blackhole(), func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 1, 512), fcWT(b, "w", ir.BFP8B, 512, 256)))
		}, ir.HiFi2, false, 0},
		{"rmsnorm_matmul_decode_bfp4", smallGrid(), func(b *ir.Builder) []*ir.Value {
			return one(b.RMSNormMatmul(fcIn(b, "x", ir.BF16, 1, 1, 256), fcW(b, "wn", ir.BF16, 256), fcWT(b, "w", ir.BFP4B, 256, 192), 1e-5, 1))
		}, ir.HiFi4, false, 0}, // the bf16 norm weight keeps HiFi4 (ir.OpFidelity)
		{"matmul2_decode_mixed", smallGrid(), func(b *ir.Builder) []*ir.Value {
			return b.Matmul2(fcIn(b, "a", ir.BF16, 1, 1, 256), fcWT(b, "w0", ir.BFP8B, 256, 128), fcW(b, "w1", ir.BFP8B, 256, 64))
		}, ir.HiFi4, false, 0},
		{"matmul_resident_rows_bfp8", smallGrid(), func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 96, 256), fcWT(b, "w", ir.BFP8B, 256, 416)))
		}, ir.HiFi2, true, 0},
		{"matmul_rows_inner_bfp8", target.Blackhole(), func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 96, 256), fcWT(b, "w", ir.BFP8B, 256, 640)))
		}, ir.HiFi2, true, 3},
		{"swiglu_bfp4_ring_of_one", smallL1(), func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 64, 2048), fcWT(b, "gate", ir.BFP4B, 2048, 128), fcWT(b, "up", ir.BFP4B, 2048, 128)))
		}, ir.HiFi2, true, 1},
		{"matmul4_bfp8_ring_of_one", smallL1(), func(b *ir.Builder) []*ir.Value {
			return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 96, 1536), fcWT(b, "w0", ir.BFP8B, 1536, 96), fcWT(b, "w1", ir.BFP8B, 1536, 64),
				fcWT(b, "w2", ir.BFP8B, 1536, 24), fcWT(b, "w3", ir.BFP8B, 1536, 24))
		}, ir.HiFi2, true, 1},
		{"matmul_add_bfp8_ring_of_two", smallL1(), func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 96, 2048), fcWT(b, "w", ir.BFP8B, 2048, 64), fcIn(b, "r", ir.BF16, 1, 96, 64)))
		}, ir.HiFi2, true, 2},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s/%dx%d", tc.name, tc.tgt.GridX, tc.tgt.GridY), func(t *testing.T) {
			if tc.long {
				longtest.Skip(t, "a resident prefill variant with weights on SrcB on the simulator")
			}
			op := fcBuild(t, tc.build)
			ctx := NewContext(tc.tgt)
			args := fcArgs(op, uint64(1300+i))
			want := refEval(t, op, args)
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkActRows(t, op, p, tc.actRows)
			for _, k := range p.Kernels {
				if k.Role != kir.RoleCompute {
					continue
				}
				if k.Compute.MathFidelity != tc.fid {
					t.Errorf("kernel %s runs at %s, want %s", k.Name, k.Compute.MathFidelity, tc.fid)
				}
				n := 0
				kir.Inspect(k.Body, func(s kir.Stmt) bool {
					if _, ok := s.(kir.TransposeDest); ok {
						n++
					}
					return true
				})
				if n == 0 {
					t.Errorf("kernel %s has no transpose_wh_dest: the weights are not multiplied on SrcB", k.Name)
				}
			}
			got, st := residentExec(t, ctx, op, p, args)
			info := fmt.Sprintf("%d cores, %d steps", len(p.Cores()), st.Steps)
			for j, r := range op.Results {
				fcCompare(t, fmt.Sprintf("%s result %d %s", op.Name(), j, r.Type.Shape), want[j].Data, got[j], info)
			}
		})
	}
}

// TestWeightBlocksSameOnSrcB: a decode plan (one tile row) waits on its
// weight stream, so its split, and with it the weight's block layout
// (WeightBlocks), charges the products at the weight's exact fidelity on
// SrcA wherever the weight is fed: a weight stored in transposed tiles
// (exact at HiFi2 on SrcB) gets the layout it has on SrcA. Planned at
// HiFi2's cheaper products, the 27B's decode matmuls took fewer cores
// and read their weights more slowly (tcc perf qwen27b --mesh 1x2,
// predicted: 27,897.1 us a step, against 27,712.3 with this plan).
func TestWeightBlocksSameOnSrcB(t *testing.T) {
	tgt := target.Blackhole()
	cases := []struct {
		name  string
		dt    ir.DType
		k, n  int
		build func(b *ir.Builder, a, w *ir.Value) *ir.Value
	}{
		{"in_proj_qkv_bfp8", ir.BFP8B, 5120, 5120, func(b *ir.Builder, a, w *ir.Value) *ir.Value { return b.Matmul(a, w) }},
		{"down_proj_bfp8", ir.BFP8B, 8704, 5120, func(b *ir.Builder, a, w *ir.Value) *ir.Value { return b.Matmul(a, w) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var layouts [2]*kir.BlockLayout
			for i, onB := range []bool{false, true} {
				op := fcBuild(t, func(b *ir.Builder) []*ir.Value {
					w := fcW(b, "w", tc.dt, tc.k, tc.n)
					if onB {
						w = fcWT(b, "w", tc.dt, tc.k, tc.n)
					}
					return one(tc.build(b, fcIn(b, "a", ir.BF16, 1, 1, tc.k), w))
				})
				w := op.Operands[1]
				if w.Type.TilesTransposed != onB {
					t.Fatalf("operand 1 %s: transposed tiles %v, want %v", w.Name, w.Type.TilesTransposed, onB)
				}
				layouts[i] = WeightBlocks(tgt, w, []*ir.Op{op}, NewContext(tgt).Fidelity)
				if layouts[i] == nil {
					t.Fatalf("no block layout (transposed tiles %v)", onB)
				}
			}
			if *layouts[0] != *layouts[1] {
				t.Errorf("block layout on SrcB %+v, on SrcA %+v: want the same decode plan", *layouts[1], *layouts[0])
			}
		})
	}
}

// TestActLoopbackFollowsFidelity: the 27B's down-projection-sized plain
// matmul at 4,096 tokens (K 8,704, N 5,120 on 108 cores in two row
// blocks, 3 columns per core) multicasts its activation rows with one
// sender per rectangle (loopback) when its weight is on SrcB (HiFi2: a
// row's products take 3*272*32 cycles, less than a column group's sender
// reading the row and multicasting it to 3 rectangles, 4*272*33), and by
// one sender per column group at HiFi4 (3*272*64 cycles of products cover
// the sender). (The out projection, K 3,072, now runs 6 columns a core in
// four row blocks, whose products cover the sender at either fidelity.)
// Lowering only.
func TestActLoopbackFollowsFidelity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		srcB     bool
		loopback bool
	}{
		{"weights on SrcB, HiFi2", true, true},
		{"weights on SrcA, HiFi4", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fcW
			if tc.srcB {
				w = fcWT
			}
			op := fcBuild(t, func(b *ir.Builder) []*ir.Value {
				return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 4096, 8704), w(b, "w", ir.BFP8B, 8704, 5120)))
			})
			p, err := Lower(op, NewContext(target.Blackhole()))
			if err != nil {
				t.Fatal(err)
			}
			if got := writerLoopback(p); got != tc.loopback {
				t.Errorf("the writer multicasts with loopback: %v, want %v (%d cores)", got, tc.loopback, len(p.Cores()))
			}
		})
	}
}
