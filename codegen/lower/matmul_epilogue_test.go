package lower

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/ref"
	"github.com/tcc-dev/tcc/sim/timing"
)

// epiSiLUMul is an epilogue no op uses, defined here to show that a new
// epilogue is one type and touches nothing else: out = r(r(silu(r(a @ w)))
// * m), m a value of the result's shape, each r a rounding to the result
// dtype (the roundings of the unfused matmul, silu and mul).
type epiSiLUMul struct {
	epiPlain
	m             *ir.Value
	product, silu int // scratch CBs
	siluOp        kir.SFPUOp
}

func (e *epiSiLUMul) inputs() []mmInput    { return []mmInput{{"multiplier", e.m}} }
func (e *epiSiLUMul) tileOps() int         { return 2 }
func (e *epiSiLUMul) fpuMul(ir.DType) bool { return true } // its multiply is on the FPU
func (e *epiSiLUMul) dst(int, int) int     { return e.product }

func (e *epiSiLUMul) scratch(cbs *blocks.CBPlan, odt ir.DType, dest, _ int) {
	e.product = cbs.Scratch("product", odt, dest)
	e.silu = cbs.Scratch("silu", odt, 1)
	e.siluOp = siluFor(odt) // silu_bf16 for a bf16 result, as the unfused silu
}

func (e *epiSiLUMul) compute(c *blocks.Compute, sb kir.Var, in []int, out int) {
	c.For("j", kir.C(0), sb, func(kir.Var) {
		c.Unary(e.product, e.silu, []blocks.SFPUStep{{Op: e.siluOp}})
		c.BinaryTile(kir.EltMul, blocks.BcastNone, e.silu, in[0], out, false, nil)
	})
}

// TestMatmulEpilogueInOneFile runs a fused matmul with epiSiLUMul on the
// simulator (the full grid, where the activation is multicast, and a
// 2-core grid) and compares it with the reference of the unfused graph
// mul(silu(matmul(a, w)), m). The program is lowered for a matmul_add op
// of the same operands (it only provides the values and their buffers).
func TestMatmulEpilogueInOneFile(t *testing.T) {
	tests := []struct {
		name       string
		m, k, n    int
		wdt        ir.DType
		tileTarget func() *target.Target
	}{
		{"subblocks", 1, 128, 320, ir.BFP8B, target.Blackhole},
		{"subblocks/2x1", 1, 128, 320, ir.BFP8B, smallGrid},
		{"tile_rows", 40, 64, 96, ir.BF16, target.Blackhole},
		{"tile_rows/2x1", 40, 64, 96, ir.BF16, smallGrid},
	}
	srcs := newFCSources(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("silu_mul_epilogue")
			b.Region("mlp", 0)
			a, w := fcIn(b, "a", ir.BF16, tc.m, tc.k), fcW(b, "w", tc.wdt, tc.k, tc.n)
			m := fcIn(b, "m", ir.BF16, tc.m, tc.n)
			carrier := b.MatmulAdd(a, w, m)
			unfused := b.Mul(b.SiLU(b.Matmul(a, w)), m)
			b.Output(carrier, unfused)
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			op := carrier.Def
			args := fcArgs(op, uint64(900+i))
			env := map[*ir.Value]ref.Tensor{}
			for j, v := range op.Operands {
				env[v] = ref.Tensor{Shape: v.Type.Shape, Data: args[j]}
			}
			want, err := ref.Eval(g, env, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			ctx := NewContext(tc.tileTarget())
			f := &fusedMatmul{op: op, act: a, epi: &epiSiLUMul{m: m}, parts: []mmPart{{weights: []*ir.Value{w}, out: carrier}}}
			p, err := f.lower(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, info := fcExec(t, ctx, op, p, args, srcs)
			fcCompare(t, "silu_mul epilogue "+carrier.Type.Shape.String(), want[unfused].Data, got[0], info)
		})
	}
	srcs.check(t)
}

// TestMatmulEpilogueInputShape: an epilogue input whose shape is not the
// result's is an error naming the rule.
func TestMatmulEpilogueInputShape(t *testing.T) {
	b := ir.NewBuilder("silu_mul_epilogue")
	b.Region("mlp", 0)
	a, w := fcIn(b, "a", ir.BF16, 1, 64), fcW(b, "w", ir.BF16, 64, 64)
	out := b.Matmul(a, w)
	m := fcIn(b, "m", ir.BF16, 1, 32)
	b.Output(out, m)
	if _, err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	f := &fusedMatmul{op: out.Def, act: a, epi: &epiSiLUMul{m: m}, parts: []mmPart{{weights: []*ir.Value{w}, out: out}}}
	_, err := f.lower(NewContext(target.Blackhole()))
	if err == nil || !strings.Contains(err.Error(), "rule matmul-epilogue-input") {
		t.Errorf("lowering with a [1, 32] input for a [1, 64] result: error %v, want rule matmul-epilogue-input", err)
	}
}

// TestMatmulSwiGLUGatheredRows runs matmul_swiglu at decode shapes (one
// tile row of B live rows: B = 1, and B = 3, 6 and 8 packed users) on
// grids whose cores get 1, 2 or 3 output tiles, or 6 (two sub-blocks),
// and checks the result bit for bit against sim/ref and that the SFPU
// runs silu once per sub-block when the sub-block's live rows fit one
// tile (the writer gathers them), once per tile otherwise (B = 16 users
// of 3-tile sub-blocks: 48 rows). The silu count is read from the timing
// model's silu_tile time of the last compute thread.
func TestMatmulSwiGLUGatheredRows(t *testing.T) {
	tests := []struct {
		name   string
		users  int   // live rows of the activation's one tile row
		grid   int   // cores in one grid row
		tiles  []int // each core's output tiles
		gather bool  // silu runs once per sub-block
	}{
		{"B1/3+3+1", 1, 3, []int{3, 3, 1}, true},
		{"B1/3+2", 1, 2, []int{3, 2}, true},
		{"B1/6", 1, 1, []int{6}, true},
		{"B3/3+3+1", 3, 3, []int{3, 3, 1}, true},
		{"B3/3+2", 3, 2, []int{3, 2}, true},
		{"B3/6", 3, 1, []int{6}, true},
		{"B6/3+2", 6, 2, []int{3, 2}, true}, // tile 2's rows 12..17 straddle two face bands
		{"B8/6", 8, 1, []int{6}, true},      // a sub-block of 4 tiles fills the gathered tile
		{"B16/3+2", 16, 2, []int{3, 2}, false},
	}
	srcs := newFCSources(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.users == 3 {
				longtest.Skip(t, "3 users' splits (B1 and B6 cover them by default)")
			}
			tgt := *target.Blackhole()
			tgt.GridX, tgt.GridY = tc.grid, 1
			n := 0
			for _, c := range tc.tiles {
				n += c * ir.TileSize
			}
			op := fcBuild(t, func(b *ir.Builder) []*ir.Value {
				return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, tc.users, 256), fcW(b, "wg", ir.BFP4B, 256, n), fcW(b, "wu", ir.BFP4B, 256, n)))
			})
			args := fcArgs(op, uint64(1000+i))
			want := refEval(t, op, args)
			ctx := NewContext(&tgt)
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			cp := p.Kernel("compute")
			var tiles []int
			count := map[kir.Core]int{}
			for _, c := range kir.CoresOf(cp.Cores) {
				count[c] = argU32(t, cp.RuntimeValuesOn(c)[0])
				tiles = append(tiles, count[c])
			}
			if diff := cmp.Diff(tc.tiles, tiles); diff != "" {
				t.Fatalf("output tiles per core (-want +got):\n%s", diff)
			}
			got, info := fcExec(t, ctx, op, p, args, srcs)
			fcCompare(t, "matmul_swiglu "+op.Result().Type.Shape.String(), want[0].Data, got[0], info)

			prm := timing.Default()
			pt, err := timing.Simulate(p, &tgt, prm, timing.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range pt.Devices[0].Kernels {
				if th.Role != kir.RoleCompute {
					continue
				}
				dest := tgt.DestTiles(false, true)
				silus := count[th.Core]
				if tc.gather {
					silus = (silus + dest - 1) / dest
				}
				wantUS := float64(silus) * prm.TCCSFPUCycles[siluFor(ir.BF16)] / prm.ClockHz * 1e6 // the default: tcc's SFPU code; a bf16 result: siluFor's op
				if gotUS := th.Busy["silu_tile"]; math.Abs(gotUS-wantUS) > 1e-9 {
					t.Errorf("compute on core %v (%d tiles): silu_tile busy %.4f us, want %.4f (%d silu_tile)", th.Core, count[th.Core], gotUS, wantUS, silus)
				}
			}
		})
	}
	srcs.check(t)
}

// TestMatmulSwiGLUTransposesOnce: with the gate and up weights on SrcB
// their products are C^T tiles; for a bf16 result matmul_swiglu packs them
// untransposed, runs silu and the SFPU multiply on them and transposes
// only the product in DEST before its pack: one transpose_wh_dest
// statement in the compute kernel, after the multiply (two before: one
// per weight, in productDone). On SrcA nothing is transposed. The
// multiply copies the silu and up tiles (two bf16 CBs) of a group of
// tiles into DEST after one copy_tile_to_dst_init_short, or none on SrcA
// (blocks.Compute.CopyShared, mulGroups; one per CB and tile before). Prefill shapes (two tile rows) on two cores, bit for bit
// against sim/ref.
func TestMatmulSwiGLUTransposesOnce(t *testing.T) {
	tests := []struct {
		name       string
		onB        bool
		transposes int // TransposeDest statements in the compute kernel
		// loopInits are the copy inits in the multiply's loop of DEST
		// sections: one after each group's transposes (whose init replaces
		// the copy's), none on SrcA (the one init before the loop serves
		// both CBs)
		loopInits int
	}{
		{"srcb", true, 1, 1},
		{"srca", false, 0, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.onB {
				longtest.Skip(t, "matmul_swiglu on SrcA (unchanged; ~0.1 CPU-s)")
			}
			w := fcW
			if tc.onB {
				w = fcWT
			}
			op := fcBuild(t, func(b *ir.Builder) []*ir.Value {
				return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 64, 64), w(b, "wg", ir.BFP4B, 64, 64), w(b, "wu", ir.BFP4B, 64, 64)))
			})
			args := fcArgs(op, uint64(1400+i))
			want := refEval(t, op, args)
			ctx := NewContext(smallGrid())
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			n, afterMul, mul := 0, 0, false
			kir.Inspect(p.Kernel("compute").Body, func(s kir.Stmt) bool {
				switch s := s.(type) {
				case kir.SFPU:
					mul = mul || s.Op == kir.SFPUMulBinary
				case kir.TransposeDest:
					n++
					if mul {
						afterMul++
					}
				}
				return true
			})
			if n != tc.transposes || afterMul != n {
				t.Errorf("compute has %d transpose_wh_dest statements, %d of them after the multiply; want %d, all after it", n, afterMul, tc.transposes)
			}
			// copy inits in the loop whose DEST sections multiply, and the
			// tiles a section takes (the loop's step)
			inits, step := -1, kir.Const{}
			kir.Inspect(p.Kernel("compute").Body, func(s kir.Stmt) bool {
				f, ok := s.(kir.For)
				if !ok {
					return true
				}
				section := false
				for _, s := range f.Body {
					_, acq := s.(kir.TileRegsAcquire)
					section = section || acq
				}
				n, mul := 0, false
				kir.Inspect(f.Body, func(s kir.Stmt) bool {
					switch s := s.(type) {
					case kir.CopyTileInit:
						n++
					case kir.SFPU:
						mul = mul || s.Op == kir.SFPUMulBinary
					}
					return true
				})
				if section && mul {
					inits = n
					step, _ = f.Step.(kir.Const)
				}
				return true
			})
			if inits != tc.loopInits {
				t.Errorf("the multiply's loop has %d copy_tile_to_dst_init_short, want %d", inits, tc.loopInits)
			}
			if want := uint32(2); step.V != want { // half of the 4-tile sub-block
				t.Errorf("the multiply's DEST sections take %d tiles each, want %d", step.V, want)
			}
			got, info := fcExec(t, ctx, op, p, args, nil)
			fcCompare(t, "matmul_swiglu "+op.Result().Type.Shape.String(), want[0].Data, got[0], info)
		})
	}
}
