package lower_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// gdnFusedOps builds the small config's decode graph on a 1 x cols mesh,
// runs the pass pipeline and returns the graph with its first
// gdn_conv_gates and gdn_recurrence ops.
func gdnFusedOps(t *testing.T, cols int) (*ir.Graph, *ir.Op, *ir.Op) {
	t.Helper()
	c, err := config.Load("../../models/qwen27b/testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	o := qwen27b.DefaultOptions()
	o.Config = c
	g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Default().Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	var conv, rec *ir.Op
	for _, op := range g.Ops() {
		switch {
		case op.Kind == ir.OpGDNConvGates && conv == nil:
			conv = op
		case op.Kind == ir.OpGDNRecurrence && rec == nil:
			rec = op
		}
	}
	if conv == nil || rec == nil {
		t.Fatalf("the fused 1x%d graph has no gdn_conv_gates or gdn_recurrence op", cols)
	}
	return g, conv, rec
}

// gdnConvOp and gdnRecurrenceOp build one fused op on its own: B users, C
// = 2*hk*dk + h*dv channels, K taps, state dtype f.
func gdnConvOp(t *testing.T, B, C, K, H int) *ir.Op {
	b := ir.NewBuilder("gdn_conv")
	b.Region(ir.RegionKind("gdn"), 0)
	st := b.State("conv_state", ir.T(ir.BF16, B, K-1, C))
	rs := b.GDNConvGates(st, b.Input("qkv", ir.T(ir.BF16, B, 1, C)), b.Weight("taps", ir.T(ir.BF16, K, C)),
		b.Input("a", ir.T(ir.BF16, B, 1, H)), b.Input("b", ir.T(ir.BF16, B, 1, H)),
		b.Weight("a_log", ir.T(ir.BF16, H)), b.Weight("dt_bias", ir.T(ir.BF16, H)))
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	b.UpdateState(st, rs[1])
	b.Output(rs[0], rs[2], rs[3])
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g.Ops()[0]
}

func gdnRecurrenceOp(t *testing.T, B, hk, H, dk, dv int, f ir.DType) *ir.Op {
	b := ir.NewBuilder("gdn_recurrence")
	b.Region(ir.RegionKind("gdn"), 0)
	st := b.State("recurrent", ir.T(f, B, H, dk, dv))
	rs := b.GDNRecurrence(b.Input("qkv", ir.T(ir.BF16, B, 1, 2*hk*dk+H*dv)), b.Input("beta", ir.T(ir.BF16, B*H, 1)),
		b.Input("g", ir.T(ir.BF16, B*H, 1)), st, b.Input("z", ir.T(ir.BF16, B, 1, H*dv)), b.Weight("norm_w", ir.T(ir.BF16, dv)),
		1e-6/float64(dk), 1/math.Sqrt(float64(dk)), 1/math.Sqrt(float64(dk)), 1e-6)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	b.UpdateState(st, rs[1])
	b.Output(rs[0])
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g.Ops()[0]
}

// gdnArgs draws operand values like the model's: N(0, 1) activations and
// states, beta in (0, 1), g <= 0 (a decay), N(0, 0.5) taps.
func gdnArgs(op *ir.Op, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	names := op.Info().Operands
	args := make([][]float32, len(op.Operands))
	for i, v := range op.Operands {
		d := make([]float32, v.Type.Shape.Numel())
		for j := range d {
			x := rng.NormFloat64()
			switch {
			case op.Kind == ir.OpGDNRecurrence && names[i] == "beta":
				x = rng.Float64()
			case op.Kind == ir.OpGDNRecurrence && names[i] == "g":
				x = -math.Abs(x)
			case names[i] == "taps":
				x *= 0.5
			}
			d[j] = float32(x)
		}
		args[i] = d
	}
	return args
}

// gdnStateOperand is the operand index of the state op's result 1 updates.
func gdnStateOperand(op *ir.Op) int {
	if op.Kind == ir.OpGDNConvGates {
		return 0
	}
	return 3
}

// gdnDims is the (batch, rows, cols) view of a tile-layout shape.
func gdnDims(s ir.Shape) (int, int, int) {
	if s.Rank() == 1 {
		return 1, 1, s[0]
	}
	return s.Numel() / (s[s.Rank()-1] * s[s.Rank()-2]), s[s.Rank()-2], s[s.Rank()-1]
}

// gdnRun lowers op with its state result aliased to the state operand (in
// place, as codegen.Compile does), checks that the new state has no
// buffer of its own, and runs it (gdnRunWith).
func gdnRun(t *testing.T, tgt *target.Target, op *ir.Op, args [][]float32, srcDir string, sources map[string]cpp.Source) ([][]float32, *kexec.Stats) {
	t.Helper()
	ctx := lower.NewContext(tgt)
	state := op.Operands[gdnStateOperand(op)]
	ctx.Alias = map[*ir.Value]*ir.Value{op.Results[1]: state}
	return gdnRunWith(t, tgt, ctx, op, args, srcDir, sources, func(p *kir.Program) {
		// In place: the new state has no buffer of its own.
		names := map[string]int{}
		for _, b := range p.Buffers {
			names[b.Name]++
		}
		if sn := ctx.BufferName(state); ctx.BufferName(op.Results[1]) != sn || names[sn] != 1 || len(p.Buffers) != len(op.Operands)+len(op.Results)-1 {
			t.Fatalf("state %q is not updated in place: buffers %v", sn, names)
		}
	})
}

// gdnRunWith lowers op with ctx, validates the program, runs check on it
// (nil: none), writes its kernels' C++ into srcDir (for the syntax check),
// runs it on a fresh simulated device and returns the values of every
// result (read from the buffers ctx names) and the run's statistics.
func gdnRunWith(t *testing.T, tgt *target.Target, ctx *lower.Context, op *ir.Op, args [][]float32, srcDir string, sources map[string]cpp.Source, check func(p *kir.Program)) ([][]float32, *kexec.Stats) {
	t.Helper()
	p, err := lower.Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := kir.Validate(p, tgt); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if check != nil {
		check(p)
	}
	for _, k := range p.Kernels {
		src, err := cpp.PrintKernel(p, k)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(srcDir, fmt.Sprintf("%s.%s.%s.cpp", strings.ReplaceAll(t.Name(), "/", "_"), p.Name, k.Name))
		if err := os.WriteFile(f, src, 0o644); err != nil {
			t.Fatal(err)
		}
		sources[f] = cpp.Source{Processor: k.Processor, Defines: k.Defines}
	}
	d := kexec.NewDevice(tgt)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range op.Operands {
		bt, r, c := gdnDims(v.Type.Shape)
		if err := d.WriteTiles(ctx.BufferName(v), numerics.TilizeBatch(args[i], bt, r, c)); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := d.Run(p, kexec.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := make([][]float32, len(op.Results))
	for i, v := range op.Results {
		tiles, err := d.ReadTiles(ctx.BufferName(v))
		if err != nil {
			t.Fatal(err)
		}
		bt, r, c := gdnDims(v.Type.Shape)
		got[i] = numerics.UntilizeBatch(tiles, bt, r, c)
	}
	return got, stats
}

// gdnRef is op's results on args by the reference at the device formats.
func gdnRef(t *testing.T, op *ir.Op, args [][]float32) []ref.Tensor {
	t.Helper()
	want, err := ref.EvalOpData(op, args, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// gdnCheck runs op on the simulator and compares every result with
// ref.EvalOp at the device formats: bit for bit where exact[i], else PCC
// >= 0.999 (max relative error logged).
func gdnCheck(t *testing.T, tgt *target.Target, op *ir.Op, seed uint64, exact []bool, srcDir string, sources map[string]cpp.Source) {
	t.Helper()
	args := gdnArgs(op, seed)
	want := gdnRef(t, op, args)
	start := time.Now()
	got, stats := gdnRun(t, tgt, op, args, srcDir, sources)
	names := []string{"out", "new_state"}
	if op.Kind == ir.OpGDNConvGates {
		names = []string{"conv", "new_state", "beta", "g"}
	}
	for i := range op.Results {
		w, g := want[i].Data, got[i]
		diff := 0
		var maxAbs, maxErr float64
		for j := range w {
			if w[j] != g[j] {
				diff++
			}
			maxAbs = math.Max(maxAbs, math.Abs(float64(w[j])))
			maxErr = math.Max(maxErr, math.Abs(float64(g[j])-float64(w[j])))
		}
		pcc, rel := numerics.PCC(w, g), numerics.MaxRelErr(w, g)
		t.Logf("%s %s: PCC %.7f, max rel err %.3g, max abs err %.3g of max |ref| %.3g, %d of %d elements differ from the reference",
			names[i], op.Results[i].Type.Shape, pcc, rel, maxErr, maxAbs, diff, len(w))
		switch {
		case exact[i] && diff > 0:
			t.Errorf("%s: %d elements differ; want bit-exact (a copy or the same operations as the reference)", names[i], diff)
		case pcc < 0.999:
			t.Errorf("%s: PCC %.6f, want >= 0.999", names[i], pcc)
		}
	}
	t.Logf("%d simulator steps, %d tile ops, %v", stats.Steps, stats.TileOps, time.Since(start).Round(time.Millisecond))
}

// smallGridGDN is Blackhole with a 2x1 worker grid: one conv core with
// many pages and one gate core; several heads per recurrence core.
func smallGridGDN() *target.Target {
	t := *target.Blackhole()
	t.GridX, t.GridY = 2, 1
	return &t
}

// TestFusedGDNOnSim lowers gdn_conv_gates and gdn_recurrence at the small
// config's per-device shapes (meshes 1x1 and 1x2, ops taken from the fused
// graph), at the 27B's 1x2 per-device shapes and at variants (several
// users, a bf16 state, a 2-core grid), runs them on kexec with the state
// updated in place and compares with the reference evaluator. Every
// program passes kir.Validate and its kernels pass a g++ syntax check.
func TestFusedGDNOnSim(t *testing.T) {
	srcDir := t.TempDir()
	sources := map[string]cpp.Source{}
	bh := target.Blackhole()
	convExact := []bool{true, true, true, true}
	// fp32 state: the reference models the program's tf32 source reads
	// and DEST accumulations (ref's gdnHeadFPU), so it agrees bit for bit.
	recExact := []bool{true, true}
	for _, cols := range []int{1, 2} {
		t.Run(fmt.Sprintf("small_1x%d", cols), func(t *testing.T) {
			g, conv, rec := gdnFusedOps(t, cols)
			for _, op := range []*ir.Op{conv, rec} {
				st := op.Operands[gdnStateOperand(op)]
				if st.Kind != ir.KindState || g.StateUpdates[st] != op.Results[1] {
					t.Fatalf("%s: result 1 is not the new value of state %s", op.Where(), st)
				}
			}
			t.Run("conv_gates", func(t *testing.T) { gdnCheck(t, bh, conv, 1, convExact, srcDir, sources) })
			t.Run("recurrence", func(t *testing.T) { gdnCheck(t, bh, rec, 2, recExact, srcDir, sources) })
			t.Run("conv_gates_2cores", func(t *testing.T) { gdnCheck(t, smallGridGDN(), conv, 3, convExact, srcDir, sources) })
			t.Run("recurrence_2cores", func(t *testing.T) { gdnCheck(t, smallGridGDN(), rec, 4, recExact, srcDir, sources) })
		})
	}
	t.Run("27b_1x2", func(t *testing.T) {
		t.Run("conv_gates", func(t *testing.T) { gdnCheck(t, bh, gdnConvOp(t, 1, 5120, 4, 24), 5, convExact, srcDir, sources) })
		t.Run("recurrence", func(t *testing.T) {
			longtest.Skip(t, "the 27B's head dims on the full grid (~1.5 CPU-s); small_1x1/1x2 and TestGDNRecurrencePerHead run the recurrence bit for bit by default")
			gdnCheck(t, bh, gdnRecurrenceOp(t, 1, 8, 24, 128, 128, ir.FP32), 6, recExact, srcDir, sources)
		})
	})
	t.Run("variants", func(t *testing.T) {
		// 3 users x 12 heads: the gate columns span two tiles, and a
		// tile holds several users' gates.
		t.Run("conv_gates_3_users", func(t *testing.T) { gdnCheck(t, bh, gdnConvOp(t, 3, 320, 4, 12), 7, convExact, srcDir, sources) })
		// Several users' sums gathered into one tile per channel tile for a
		// single SiLU: 8 users over many cores, and 3 users with every
		// channel tile on one conv core.
		t.Run("conv_gates_8_users", func(t *testing.T) { gdnCheck(t, bh, gdnConvOp(t, 8, 1024, 4, 24), 11, convExact, srcDir, sources) })
		t.Run("conv_gates_3_users_2cores", func(t *testing.T) {
			gdnCheck(t, smallGridGDN(), gdnConvOp(t, 3, 320, 4, 12), 12, convExact, srcDir, sources)
		})
		t.Run("recurrence_3_users", func(t *testing.T) {
			gdnCheck(t, bh, gdnRecurrenceOp(t, 3, 2, 6, 32, 32, ir.FP32), 8, recExact, srcDir, sources)
		})
		// 17 users x 12 heads of the small config: more heads than cores
		// (two per core), the gates' last column tile partial (long:
		// TestGDNRecurrencePerHead runs the same op bit for bit per head).
		t.Run("recurrence_17_users", func(t *testing.T) {
			longtest.Skip(t, "TestGDNRecurrencePackedUsers runs 17 users bit for bit by default")
			gdnCheck(t, bh, gdnRecurrenceOp(t, 17, 4, 12, 32, 32, ir.FP32), 10, recExact, srcDir, sources)
		})
		t.Run("recurrence_bf16_state", func(t *testing.T) {
			gdnCheck(t, bh, gdnRecurrenceOp(t, 1, 2, 6, 64, 32, ir.BF16), 9, []bool{false, false}, srcDir, sources)
		})
	})
	t.Run("kernels compile", func(t *testing.T) {
		longtest.Skip(t, "the g++ syntax check of every fused GDN kernel (~3 CPU-s)")
		lower.CheckKernelSyntax(t, "fused GDN kernels", t.TempDir(), sources, false)
	})
}

// TestGDNConvTapSumOrder runs gdn_conv_gates on a window whose tap sum
// rounds differently in float32 tap order than once from the exact sum:
// taps 1, window [1 + 2^-7, -2^-8, -2^-24, -2^-24]. In order, 1 + 2^-8 is
// exact and each -2^-24 is half an fp32 ulp of it and ties to even, so the
// sum stays 1 + 2^-8, which the packer (half away from zero) writes as
// 1 + 2^-7; the exact sum 1 + 2^-8 - 2^-23 packs to 1. The program's
// reduce_tile pools the column (GAPOOL, an mvmul lane: each -2^-24 is
// aligned away below the largest tap), which gives 1 + 2^-8 too, in the
// simulator as on ttsim (runtime's TestColumnSumMatchesTTSim), and the
// reference at the device formats must agree with it bit for bit (a
// one-element difference of this kind showed at B = 32 in the small
// config's 16-step end-to-end run).
func TestGDNConvTapSumOrder(t *testing.T) {
	op := gdnConvOp(t, 1, 32, 4, 12)
	args := gdnArgs(op, 1)
	win := []float32{1 + 1.0/128, -1.0 / 256, -1.0 / (1 << 24), -1.0 / (1 << 24)}
	for c := range 32 {
		for j := range 3 {
			args[0][j*32+c] = win[j] // conv_state [1, 3, 32]: window rows 0..2
		}
		args[1][c] = win[3] // qkv: the window's last row
		for j := range 4 {
			args[2][j*32+c] = 1 // taps
		}
	}
	want := gdnRef(t, op, args)
	got, _ := gdnRun(t, target.Blackhole(), op, args, t.TempDir(), map[string]cpp.Source{})
	packed := func(x float32) float32 { return numerics.FromBF16Bits(numerics.PackerBF16(x)) }
	inOrder, exact := packed(numerics.SiLU(packed(1+1.0/256))), packed(numerics.SiLU(packed(1+1.0/256-1.0/(1<<23))))
	if inOrder == exact {
		t.Fatalf("the case does not separate the sums: both give %g", exact)
	}
	if got[0][0] != inOrder {
		t.Errorf("conv[0] on the device: %g, want %g (silu of the pooled sum; from the exact sum %g)", got[0][0], inOrder, exact)
	}
	if d := cmp.Diff(want[0].Data, got[0]); d != "" {
		t.Errorf("conv: reference and device differ (-ref +device):\n%s", d)
	}
}

// TestGDNRecurrencePerHead runs the recurrence at 17 users x 12 heads
// (the small config's, fp32 state) on the simulator and compares every
// head's new state and output with the reference at the same formats,
// which reads the fp32 state and intermediates through tf32 source
// registers as the program does: every head must agree bit for bit. The
// largest per-head difference from the fp32 reference (ExactOptions, the
// independent check) is logged for information.
func TestGDNRecurrencePerHead(t *testing.T) {
	longtest.Skip(t, "17 users x 12 heads compared head by head (~3 CPU-s); TestGDNRecurrencePackedUsers runs 17 users bit for bit by default")
	const B, H, Dk, Dv = 17, 12, 32, 32
	op := gdnRecurrenceOp(t, B, 4, H, Dk, Dv, ir.FP32)
	args := gdnArgs(op, 11)
	targs := make([]ref.Tensor, len(args))
	for i, v := range op.Operands {
		targs[i] = ref.Tensor{Shape: v.Type.Shape, Data: args[i]}
	}
	same, err := ref.EvalOp(op, targs, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	exact, err := ref.EvalOp(op, targs, ref.ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := gdnRun(t, target.Blackhole(), op, args, t.TempDir(), map[string]cpp.Source{})
	// per head: the max abs difference and the max abs difference over the
	// head's max |reference| (a relative error that cancellation near zero
	// does not blow up).
	perHead := func(w, g []float32, n int) (abs, rel []float64) {
		abs, rel = make([]float64, B*H), make([]float64, B*H)
		for hd := range B * H {
			var m, e float64
			for j := hd * n; j < (hd+1)*n; j++ {
				m = math.Max(m, math.Abs(float64(w[j])))
				e = math.Max(e, math.Abs(float64(g[j])-float64(w[j])))
			}
			abs[hd] = e
			if m > 0 {
				rel[hd] = e / m
			}
		}
		return abs, rel
	}
	for _, r := range []struct {
		name string
		i, n int
	}{{"out", 0, Dv}, {"new_state", 1, Dk * Dv}} {
		abs, rel := perHead(same[r.i].Data, got[r.i], r.n)
		xabs, xrel := perHead(exact[r.i].Data, got[r.i], r.n)
		worst, xworst := 0, 0
		for hd := range abs {
			if rel[hd] > rel[worst] {
				worst = hd
			}
			if xrel[hd] > xrel[xworst] {
				xworst = hd
			}
			if abs[hd] != 0 {
				t.Errorf("%s of user %d head %d: max abs diff %.3g (%.3g of the head's max |ref|) from the same-formats reference; want bit for bit", r.name, hd/H, hd%H, abs[hd], rel[hd])
			}
		}
		t.Logf("%s: same formats: worst head %d/%d max abs diff %.3g, rel %.3g; fp32 reference (info): worst head %d/%d max abs diff %.3g, rel %.3g",
			r.name, worst/H, worst%H, abs[worst], rel[worst], xworst/H, xworst%H, xabs[xworst], xrel[xworst])
	}
}

// TestGDNRecurrenceStateDrift runs the recurrence for many decode steps
// on one device, the state kept in place, for heads that barely decay (g
// = -1e-3) and compares the state with the reference run step by step.
// Reading the fp32 state through the FPU's tf32 source registers at every
// decay would truncate it toward zero by about 2^-10 per step (a few
// percent after a hundred steps); the program only reads the decrement
// that way, so the state must stay within 1e-3 of the reference.
func TestGDNRecurrenceStateDrift(t *testing.T) {
	longtest.Skip(t, "100 decode steps on the simulator (~1.5 CPU-s)")
	const steps = 100
	tgt := target.Blackhole()
	op := gdnRecurrenceOp(t, 1, 1, 2, 32, 32, ir.FP32)
	ctx := lower.NewContext(tgt)
	st := op.Operands[3]
	ctx.Alias = map[*ir.Value]*ir.Value{op.Results[1]: st}
	p, err := lower.Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := kexec.NewDevice(tgt)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	upload := func(i int, data []float32) {
		v := op.Operands[i]
		bt, r, c := gdnDims(v.Type.Shape)
		if err := d.WriteTiles(ctx.BufferName(v), numerics.TilizeBatch(data, bt, r, c)); err != nil {
			t.Fatal(err)
		}
	}
	refState := gdnArgs(op, 100)[3]
	upload(3, refState)
	for s := range steps {
		args := gdnArgs(op, uint64(200+s))
		for i := range args[2] {
			args[2][i] = -1e-3
		}
		for i := range args[1] {
			args[1][i] *= 0.05 // small updates: the state is mostly carried over
		}
		args[3] = refState
		for _, i := range []int{0, 1, 2, 4, 5} {
			upload(i, args[i])
		}
		if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		targs := make([]ref.Tensor, len(args))
		for i, v := range op.Operands {
			targs[i] = ref.Tensor{Shape: v.Type.Shape, Data: args[i]}
		}
		want, err := ref.EvalOp(op, targs, ref.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		refState = want[1].Data
	}
	tiles, err := d.ReadTiles(ctx.BufferName(st))
	if err != nil {
		t.Fatal(err)
	}
	bt, r, c := gdnDims(st.Type.Shape)
	got := numerics.UntilizeBatch(tiles, bt, r, c)
	var num, den, ng float64
	for i, w := range refState {
		e := float64(got[i]) - float64(w)
		num += e * e
		den += float64(w) * float64(w)
		ng += float64(got[i]) * float64(got[i])
	}
	rel, ratio := math.Sqrt(num/den), math.Sqrt(ng/den)
	t.Logf("after %d steps: relative L2 error of the state %.3g, norm ratio device/reference %.6f", steps, rel, ratio)
	if rel > 1e-3 {
		t.Errorf("state drifted from the reference: relative L2 error %.3g after %d steps (want <= 1e-3)", rel, steps)
	}
}

// TestFusedGDNErrors checks that shapes and dtypes the programs cannot
// handle are rejected with the rule that names the limit.
func TestFusedGDNErrors(t *testing.T) {
	oneCore := *target.Blackhole()
	oneCore.GridX, oneCore.GridY = 1, 1
	for _, tc := range []struct {
		name string
		tgt  *target.Target
		op   func(t *testing.T) *ir.Op
		rule string
	}{
		{"conv_window_33_taps", target.Blackhole(), func(t *testing.T) *ir.Op { return gdnConvOp(t, 1, 64, 33, 4) }, "rule gdn-conv-window"},
		{"conv_one_core", &oneCore, func(t *testing.T) *ir.Op { return gdnConvOp(t, 1, 64, 4, 4) }, "rule gdn-conv-cores"},
		{"recurrence_head_dim_16", target.Blackhole(), func(t *testing.T) *ir.Op { return gdnRecurrenceOp(t, 1, 1, 2, 16, 32, ir.FP32) }, "rule gdn-recurrence-head-dim"},
		{"recurrence_bfp8_state", target.Blackhole(), func(t *testing.T) *ir.Op { return gdnRecurrenceOp(t, 1, 1, 2, 32, 32, ir.BFP8B) }, "rule gdn-recurrence-state-dtype"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op(t)
			_, err := lower.Lower(op, lower.NewContext(tc.tgt))
			if err == nil || !strings.Contains(err.Error(), tc.rule) || !strings.Contains(err.Error(), op.Name()) {
				t.Errorf("Lower(%s) = %v, want an error naming the op and %q", op.Name(), err, tc.rule)
			}
		})
	}
}

// TestGDNRecurrencePackedUsers runs the recurrence with several items per
// core (B users x 6 heads on 2 cores: 9 and 24 items per core, the
// latter's 48 z rows two packed tiles) and checks that the program packs
// the core's silu(z) and exp(g) into shared tiles (CBs silu_z_packed and
// exp_g_packed of ceil(rows/32) pages) and that its results agree bit for
// bit with the reference (fp32 state; a bf16 state by PCC, as its other
// tests).
func TestGDNRecurrencePackedUsers(t *testing.T) {
	tgt := smallGridGDN()
	for _, tc := range []struct {
		users        int
		f            ir.DType
		zPages, gPgs int
	}{
		{3, ir.FP32, 1, 1},  // 9 items x 2 value tiles per core: 18 rows
		{8, ir.FP32, 2, 1},  // 24 items x 2: 48 rows (TCC_LONG: 3 and 17 users cover one and several pages)
		{8, ir.BF16, 2, 1},  // the bf16 state's decay: r(exp(g)) without - 1
		{17, ir.FP32, 4, 2}, // 51 items x 2: 102 rows, two g tiles
	} {
		t.Run(fmt.Sprintf("%d_users_%s", tc.users, tc.f), func(t *testing.T) {
			if tc.users == 8 && tc.f == ir.FP32 {
				longtest.Skip(t, "a further packed fp32 case (~0.7 CPU-s)")
			}
			op := gdnRecurrenceOp(t, tc.users, 2, 6, 32, 64, tc.f)
			p, err := lower.Lower(op, lower.NewContext(tgt))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, cb := range p.CBs {
				if cb.Name == "silu_z_packed" || cb.Name == "exp_g_packed" {
					got[cb.Name] = cb.Pages
				}
			}
			want := map[string]int{"silu_z_packed": tc.zPages, "exp_g_packed": tc.gPgs}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("packed CBs' pages (-want +got):\n%s", d)
			}
			if tc.users == 17 && !longtest.Enabled() {
				return // the packing above is checked; its run on the simulator is a long check (~1.7 CPU-s)
			}
			exact := tc.f == ir.FP32
			gdnCheck(t, tgt, op, 21, []bool{exact, exact}, t.TempDir(), map[string]cpp.Source{})
		})
	}
}

// TestGDNConvGatesPacked checks gdn_conv_gates' packed paths on the
// simulator, bit for bit against the reference: at one user two channel
// tiles' sums gathered into one tile for one SiLU (CB gathered_sums; an
// odd tile count keeps a SiLU per tile), g and beta on separate gate
// cores when two cores are free (beta_compute), and a channel tile's
// users sharing one taps page (taps CB of two batches' tiles).
func TestGDNConvGatesPacked(t *testing.T) {
	for _, tc := range []struct {
		name           string
		tgt            *target.Target
		users, cols    int
		gathered, beta bool
		tapPages       int
	}{
		{"1_user", target.Blackhole(), 1, 1024, true, true, 4},          // 32 tiles: two per core, one batch of 2
		{"1_user_2cores", smallGridGDN(), 1, 1024, true, false, 16},     // 32 tiles on one core: batches of 8, one gate core
		{"1_user_odd_tiles", target.Blackhole(), 1, 96, false, true, 2}, // 3 tiles: one per core, no gather
		{"8_users", target.Blackhole(), 8, 1024, true, true, 2},         // one taps page per channel tile of 8 users
		{"3_users_2cores", smallGridGDN(), 3, 320, true, false, 4},      // 10 tiles x 3 users, batches of 2 tiles
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := gdnConvOp(t, tc.users, tc.cols, 4, 24)
			p, err := lower.Lower(op, lower.NewContext(tc.tgt))
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				Gathered, Beta bool
				TapPages       int
			}{}
			for _, cb := range p.CBs {
				switch cb.Name {
				case "gathered_sums":
					got.Gathered = true
				case "taps":
					got.TapPages = cb.Pages
				}
			}
			for _, k := range p.Kernels {
				got.Beta = got.Beta || k.Name == "beta_compute"
			}
			want := got
			want.Gathered, want.Beta, want.TapPages = tc.gathered, tc.beta, tc.tapPages
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("program (-want +got):\n%s", d)
			}
			gdnCheck(t, tc.tgt, op, 31, []bool{true, true, true, true}, t.TempDir(), map[string]cpp.Source{})
		})
	}
}
