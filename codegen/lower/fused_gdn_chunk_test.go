package lower_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/ref"
	"github.com/tcc-dev/tcc/sim/timing"
)

// gdnChunkOp builds a one-op graph: gdn_chunk_step of chunk c over [B, H,
// N, 32, D] operands of dtype f.
func gdnChunkOp(t *testing.T, B, H, N, dk, dv, c int, f ir.DType) *ir.Op {
	t.Helper()
	const L = ir.TileSize
	b := ir.NewBuilder("gdn_chunk_step")
	in := func(name string, s ...int) *ir.Value { return b.Input(name, ir.T(f, s...)) }
	u, wk, qg := in("u", B, H, N, L, dv), in("wk", B, H, N, L, dk), in("qg", B, H, N, L, dk)
	qk, k, g := in("qk", B, H, N, L, L), in("k", B, H, N, L, dk), in("g", B, H, N, L)
	s := in("state", B, H, 1, dk, dv)
	b.Region(ir.RegionKind("gdn"), 0)
	rs := b.GDNChunkStep(u, wk, qg, qk, k, g, s, c)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	b.Output(rs...)
	gr, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return gr.Ops()[0]
}

// gdnChunkArgs draws operands like the model's: N(0, 0.5) values, and g
// per (user, head, chunk) a running sum of negative log decays.
func gdnChunkArgs(op *ir.Op, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 11))
	args := make([][]float32, len(op.Operands))
	for i, v := range op.Operands {
		d := make([]float32, v.Type.Shape.Numel())
		for j := range d {
			d[j] = float32(rng.NormFloat64() * 0.5)
		}
		args[i] = d
	}
	g := args[5]
	for j := range g {
		step := -float32(math.Abs(rng.NormFloat64()) * 0.1)
		if j%ir.TileSize == 0 {
			g[j] = step
		} else {
			g[j] = g[j-1] + step
		}
	}
	return args
}

// gdnChunkRun lowers op (no state aliasing: the chunk loop's state is an
// intermediate value), runs it (gdnRunWith) and returns its results.
func gdnChunkRun(t *testing.T, tgt *target.Target, op *ir.Op, args [][]float32, srcDir string, sources map[string]cpp.Source) [][]float32 {
	t.Helper()
	got, _ := gdnRunWith(t, tgt, lower.NewContext(tgt), op, args, srcDir, sources, nil)
	return got
}

// TestGDNChunkStepOnSim runs gdn_chunk_step on the simulator and compares
// both results with the reference at the device formats (which equals the
// composed chunk step bit for bit, sim/ref TestGDNChunkStepEqualsComposed):
// bit for bit, for fp32 and bf16, first, middle and last chunks, more
// chunks than one tile row of g (N = 35), several users and fewer cores
// than items. Every program passes kir.Validate and its kernels pass a
// g++ syntax check.
func TestGDNChunkStepOnSim(t *testing.T) {
	srcDir := t.TempDir()
	sources := map[string]cpp.Source{}
	two := *target.Blackhole()
	two.GridX, two.GridY = 2, 1
	cases := []struct {
		name               string
		tgt                *target.Target
		B, H, N, dk, dv, c int
		f                  ir.DType
	}{
		{"fp32_chunk1_of3", target.Blackhole(), 1, 2, 3, 64, 64, 1, ir.FP32},
		{"fp32_chunk0_dk32_dv64", target.Blackhole(), 1, 2, 2, 32, 64, 0, ir.FP32},
		{"fp32_chunk34_of35", target.Blackhole(), 1, 1, 35, 32, 32, 34, ir.FP32},
		{"fp32_3users_2cores", &two, 3, 2, 2, 32, 32, 1, ir.FP32},
		{"bf16_chunk2_of3", target.Blackhole(), 1, 2, 3, 64, 32, 2, ir.BF16},
		{"fp32_27b_head_dims", target.Blackhole(), 1, 2, 2, 128, 128, 1, ir.FP32},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op := gdnChunkOp(t, c.B, c.H, c.N, c.dk, c.dv, c.c, c.f)
			args := gdnChunkArgs(op, uint64(i+1))
			want, err := ref.EvalOpData(op, args, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := gdnChunkRun(t, c.tgt, op, args, srcDir, sources)
			for r, name := range []string{"o", "new_state"} {
				w, g := want[r].Data, got[r]
				diff := 0
				for j := range w {
					if math.Float32bits(w[j]) != math.Float32bits(g[j]) {
						if diff++; diff <= 3 {
							t.Errorf("%s[%d] = %g, reference %g", name, j, g[j], w[j])
						}
					}
				}
				t.Logf("%s %s: PCC %.7f, %d of %d elements differ", name, op.Results[r].Type.Shape, numerics.PCC(w, g), diff, len(w))
				if diff > 0 {
					t.Errorf("%s: %d of %d elements differ from the reference; want bit for bit", name, diff, len(w))
				}
			}
		})
	}
	t.Run("kernels compile", func(t *testing.T) {
		longtest.Skip(t, "the g++ syntax check of the gdn_chunk_step kernels")
		lower.CheckKernelSyntax(t, "gdn_chunk_step kernels", t.TempDir(), sources, false)
	})
}

// TestGDNChunkStepErrors: shapes the program cannot run are clear errors,
// not panics.
func TestGDNChunkStepErrors(t *testing.T) {
	short := gdnChunkOp(t, 1, 1, 2, 32, 32, 1, ir.FP32)
	// A chunk of 16 tokens: g [1,1,2,16] and the [.., 16, D] operands.
	for i, v := range short.Operands {
		s := v.Type.Shape.Clone()
		if i == 5 {
			s[3] = 16
		} else if i < 5 {
			s[3] = 16
			if i == 3 {
				s[4] = 16
			}
		}
		short.Operands[i] = &ir.Value{ID: v.ID, Name: v.Name, Kind: v.Kind, Type: ir.TensorType{Shape: s, DType: v.Type.DType, Layout: v.Type.Layout, Mem: v.Type.Mem}}
	}
	badChunk := gdnChunkOp(t, 1, 1, 2, 32, 32, 1, ir.FP32)
	badChunk.Attrs = ir.Attrs{"chunk": 5}
	cases := []struct {
		name string
		op   *ir.Op
		rule string
	}{
		{"chunk of 16 tokens", short, "gdn-chunk-tiles"},
		{"chunk past the end", badChunk, "gdn-chunk-index"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := lower.Lower(c.op, lower.NewContext(target.Blackhole()))
			if err == nil || !strings.Contains(err.Error(), "rule "+c.rule) {
				t.Errorf("error %v, want rule %s", err, c.rule)
			}
		})
	}
}

// TestGDNChunkScanOnSim runs the GDN prefill's chunk loop over 2,048 tokens
// (64 chunks of 32, one user, two heads of 64x64 fp32 state) on the
// simulator, chunk after chunk, each step's new state read back and fed to
// the next as the model's loop does, against the reference evaluating the
// same steps in turn; it prints the agreement of the outputs and the
// final state and wants them bit for bit. The reference's step equals the
// composed chain bit for bit (sim/ref TestGDNChunkStepEqualsComposed),
// and the composed chain the token-by-token equations (models/nn
// TestGDNPrefillMatchesEquations).
func TestGDNChunkScanOnSim(t *testing.T) {
	longtest.Skip(t, "64 chunk steps on the simulator (~2,048 tokens)")
	const N, H, D = 64, 2, 64
	tgt := target.Blackhole()
	srcDir, sources := t.TempDir(), map[string]cpp.Source{}
	ops := make([]*ir.Op, N)
	for c := range ops {
		ops[c] = gdnChunkOp(t, 1, H, N, D, D, c, ir.FP32)
	}
	args := gdnChunkArgs(ops[0], 7)
	refArgs := append([][]float32(nil), args...)
	var wantO, gotO []float32
	for c, op := range ops {
		want, err := ref.EvalOpData(op, refArgs, ref.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		got := gdnChunkRun(t, tgt, op, args, srcDir, sources)
		wantO, gotO = append(wantO, want[0].Data...), append(gotO, got[0]...)
		// The next step reads each side's own new state (operand 6).
		refArgs[6], args[6] = want[1].Data, got[1]
		if c == N-1 {
			diff := 0
			for j := range refArgs[6] {
				if math.Float32bits(refArgs[6][j]) != math.Float32bits(args[6][j]) {
					diff++
				}
			}
			t.Logf("final state after %d tokens: PCC %.7f, %d of %d elements differ", N*ir.TileSize, numerics.PCC(refArgs[6], args[6]), diff, len(args[6]))
			if diff > 0 {
				t.Errorf("final state: %d elements differ from the reference", diff)
			}
		}
	}
	diff := 0
	for j := range wantO {
		if math.Float32bits(wantO[j]) != math.Float32bits(gotO[j]) {
			diff++
		}
	}
	t.Logf("outputs of %d tokens: PCC %.7f, max rel err %.3g, %d of %d elements differ", N*ir.TileSize, numerics.PCC(wantO, gotO), numerics.MaxRelErr(wantO, gotO), diff, len(wantO))
	if diff > 0 {
		t.Errorf("outputs: %d elements differ from the reference; want bit for bit", diff)
	}
}

// TestGDNChunkStepSplitsValueColumns: gdn_chunk_step splits each head's
// value tile columns over several cores where the cost model
// (planGDNChunkSplit) finds it cheaper, and the timing model's time of
// the program is logged. The 27B's prefill (mesh 1x2: 24 value heads of
// a 128x128 fp32 state) runs its 4 value tiles per head on 4 cores, 96
// in all, sharing each head's wk, qg, k, qk and g tiles by multicast
// (the old one-head-per-core split took 24); a grid smaller than the
// heads keeps one block per head.
func TestGDNChunkStepSplitsValueColumns(t *testing.T) {
	two := *target.Blackhole()
	two.GridX, two.GridY = 2, 1
	cases := []struct {
		name         string
		tgt          *target.Target
		B, H, dk, dv int
		wantCores    int
	}{
		{"27b_mesh1x2", target.Blackhole(), 1, 24, 128, 128, 96},
		{"two_heads_128", target.Blackhole(), 1, 2, 128, 128, 8},
		{"one_tile_head", target.Blackhole(), 1, 2, 32, 32, 2},
		{"grid_of_2", &two, 3, 2, 32, 64, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op := gdnChunkOp(t, c.B, c.H, 8, c.dk, c.dv, 3, ir.FP32)
			p, err := lower.Lower(op, lower.NewContext(c.tgt))
			if err != nil {
				t.Fatal(err)
			}
			pt, err := timing.Simulate(p, c.tgt, timing.Default(), timing.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d cores, %.2f us (timing model)", len(p.Cores()), pt.US())
			if got := len(p.Cores()); got != c.wantCores {
				t.Errorf("gdn_chunk_step runs on %d cores, want %d", got, c.wantCores)
			}
		})
	}
}
