package lower

import (
	"errors"
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
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// Tests of the common fused ops (fused_common.go, and the fused matmuls of
// matmul.go) on the simulator against
// ref.EvalOp (ref.DefaultOptions): the real fused ops of tiny-mlp and of
// the small qwen27b config (meshes 1x1 and 1x2) taken from the graphs the
// pass pipeline produces, hand-built variants (2-core grid so that core
// ranges straddle parts and sub-blocks, mixed weight dtypes, several
// tokens, other reshapes and chains) and 27B 1x2 per-device shapes.

// fcKinds are the common fused op kinds (fused_common.go, matmul.go).
var fcKinds = []ir.OpKind{ir.OpMatmul2, ir.OpMatmul3, ir.OpMatmul4, ir.OpMatmulAdd, ir.OpRMSNormMatmul,
	ir.OpMatmulSwiGLU, ir.OpAddRMSNorm, ir.OpEltwiseChain, ir.OpEmbeddingReshape}

// fcTinyMLP is tiny-mlp's decode graph after the pass pipeline.
func fcTinyMLP(t *testing.T) *ir.Graph {
	t.Helper()
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 1})
	if _, err := passes.Default().Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return g
}

// fcSmallQwen is the small qwen27b config's decode graph on a 1 x cols
// mesh after the pass pipeline.
func fcSmallQwen(t *testing.T, cols int) *ir.Graph {
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
	return g
}

// fcFirstOps returns the first op of every kind of fcKinds in g, in
// fcKinds order.
func fcFirstOps(g *ir.Graph) []*ir.Op {
	first := map[ir.OpKind]*ir.Op{}
	for _, op := range g.Ops() {
		if _, seen := first[op.Kind]; !seen {
			first[op.Kind] = op
		}
	}
	var ops []*ir.Op
	for _, k := range fcKinds {
		if op := first[k]; op != nil {
			ops = append(ops, op)
		}
	}
	return ops
}

// fcArgs draws operand values: token ids below the table's row count for
// integer operands, N(0, 1) otherwise; an operand repeated in the operand
// list gets the same values.
func fcArgs(op *ir.Op, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 11))
	args := make([][]float32, len(op.Operands))
	for i, v := range op.Operands {
		args[i] = make([]float32, v.Type.Shape.Numel())
		for j := range args[i] {
			if v.Type.DType.IsFloat() {
				args[i][j] = float32(rng.NormFloat64())
			} else {
				args[i][j] = float32(rng.IntN(op.Operands[1].Type.Shape[0]))
			}
		}
		for j := range i {
			if op.Operands[j] == v {
				args[i] = args[j]
			}
		}
	}
	return args
}

// fcSources collects kernel sources for one g++ syntax check at the end of
// a test.
type fcSources struct {
	dir  string
	srcs map[string]cpp.Source
	seen map[string]bool
}

func newFCSources(t *testing.T) *fcSources {
	return &fcSources{dir: t.TempDir(), srcs: map[string]cpp.Source{}, seen: map[string]bool{}}
}

// add prints every kernel of p (each distinct source once).
func (s *fcSources) add(t *testing.T, p *kir.Program) {
	t.Helper()
	for _, k := range p.Kernels {
		src, err := cpp.PrintKernel(p, k)
		if err != nil {
			t.Fatalf("printing kernel %s of %s: %v", k.Name, p.Name, err)
		}
		if s.seen[string(src)] {
			continue
		}
		s.seen[string(src)] = true
		f := filepath.Join(s.dir, fmt.Sprintf("k%03d_%s_%s.cpp", len(s.seen), p.Name, k.Name))
		if err := os.WriteFile(f, src, 0o644); err != nil {
			t.Fatal(err)
		}
		s.srcs[f] = cpp.Source{Processor: k.Processor, Defines: k.Defines}
	}
}

// check runs cpp.SyntaxCheck on the collected sources (skipped without
// g++).
func (s *fcSources) check(t *testing.T) {
	t.Helper()
	if len(s.srcs) == 0 {
		return
	}
	outputs, ok, err := cpp.SyntaxCheck(s.dir, s.srcs)
	if errors.Is(err, cpp.ErrNoCompiler) {
		t.Log(err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for d, out := range outputs {
		if !ok[d] {
			t.Errorf("g++ -fsyntax-only -D%s rejected generated kernels:\n%s", d, out)
		}
	}
	t.Logf("g++ syntax check: %d distinct kernel sources", len(s.srcs))
}

// fcRun lowers op for tgt, validates the program, adds its kernels to
// srcs, runs it on a fresh simulated device with random operands and
// compares every result with ref.EvalOp: bit for bit for fcExact ops,
// else PCC >= 0.999 and the norm ratio within 1% (the maximum relative
// error is logged). It returns the program.
func fcRun(t *testing.T, tgt *target.Target, op *ir.Op, seed uint64, srcs *fcSources) *kir.Program {
	t.Helper()
	args := fcArgs(op, seed)
	ctx := NewContext(tgt)
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.EvalOpData(op, args, refOptions(op, p))
	if err != nil {
		t.Fatal(err)
	}
	got, info := fcExec(t, ctx, op, p, args, srcs)
	for i, r := range op.Results {
		fcCompare(t, fmt.Sprintf("%s result %d %s", op.Name(), i, r.Type.Shape), want[i].Data, got[i], info)
	}
	return p
}

// refOptions is the reference at the device formats for op lowered to p:
// a split-row norm's row sums follow p's chunks (p.RowSplit).
func refOptions(op *ir.Op, p *kir.Program) ref.Options {
	o := ref.DefaultOptions()
	if rs := p.RowSplit; rs != nil {
		o.RowSplit = func(o *ir.Op) ref.RowSplit {
			if o != op {
				return ref.RowSplit{}
			}
			return ref.RowSplit{Per: rs.Per, Fan: rs.Fan}
		}
	}
	return o
}

// refEval is op's results on args by the reference at the device formats.
func refEval(t *testing.T, op *ir.Op, args [][]float32) []ref.Tensor {
	t.Helper()
	want, err := ref.EvalOpData(op, args, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// fcExec validates p, op's program lowered with ctx, adds its kernels to
// srcs (unless nil), runs it on a fresh simulated device with op's
// operands set to args and returns op's results and a line on the run.
func fcExec(t *testing.T, ctx *Context, op *ir.Op, p *kir.Program, args [][]float32, srcs *fcSources) ([][]float32, string) {
	t.Helper()
	if err := kir.Validate(p, ctx.Target); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if srcs != nil {
		srcs.add(t, p)
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
	start := time.Now()
	st, err := d.Run(p, kexec.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	info := fmt.Sprintf("%d cores, %d steps, %v", len(p.Cores()), st.Steps, time.Since(start).Round(time.Millisecond))
	got := make([][]float32, len(op.Results))
	for i, r := range op.Results {
		if got[i], err = download(d, ctx.BufferName(r), r); err != nil {
			t.Fatal(err)
		}
	}
	return got, info
}

// fcCompare checks got against want bit for bit (see fcRun): the
// reference models every fused program's data path; zeros compare by
// sign too.
func fcCompare(t *testing.T, what string, want, got []float32, info string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s: element %d: got %v, want %v (bit for bit); %s", what, i, got[i], want[i], info)
		}
	}
	t.Logf("%s: exact; %s", what, info)
}

// TestFusedCommonModelOps runs the first op of every common fused kind of
// tiny-mlp's and the small qwen27b config's fused decode graphs (1x1 and
// 1x2: per-device shapes) on the full grid and on a 2-core grid.
func TestFusedCommonModelOps(t *testing.T) {
	srcs := newFCSources(t)
	graphs := []struct {
		name string
		g    *ir.Graph
		want []ir.OpKind // kinds the graph must have
	}{
		{"tiny-mlp", fcTinyMLP(t), []ir.OpKind{ir.OpMatmulSwiGLU, ir.OpMatmulAdd, ir.OpRMSNormMatmul}},
		{"small-1x1", fcSmallQwen(t, 1), []ir.OpKind{ir.OpMatmul3, ir.OpMatmul4, ir.OpMatmulAdd, ir.OpMatmulSwiGLU, ir.OpAddRMSNorm, ir.OpRMSNormMatmul, ir.OpEmbeddingReshape}},
		{"small-1x2", fcSmallQwen(t, 2), []ir.OpKind{ir.OpMatmul3, ir.OpMatmul4, ir.OpMatmulSwiGLU, ir.OpRMSNormMatmul, ir.OpEmbeddingReshape}},
	}
	for gi, gc := range graphs {
		ops := fcFirstOps(gc.g)
		have := map[ir.OpKind]bool{}
		for _, op := range ops {
			have[op.Kind] = true
		}
		for _, k := range gc.want {
			if !have[k] {
				t.Errorf("%s: the fused graph has no %s op", gc.name, k)
			}
		}
		for oi, op := range ops {
			t.Run(gc.name+"/"+op.Name(), func(t *testing.T) {
				if gc.name == "small-1x2" && op.Kind != ir.OpEmbeddingReshape {
					longtest.Skip(t, "the 1x2 shard's matmuls on the full grid (~0.2-0.3 CPU-s each; small-1x1's run there by default)")
				}
				fcRun(t, target.Blackhole(), op, uint64(100*gi+oi+1), srcs)
			})
			t.Run(gc.name+"/"+op.Name()+"/2x1", func(t *testing.T) {
				if gc.name == "small-1x2" {
					longtest.Skip(t, "the 1x2 shard's ops on 2 cores (small-1x1's run there by default)")
				}
				fcRun(t, smallGrid(), op, uint64(100*gi+oi+50), nil)
			})
		}
	}
	srcs.check(t)
}

// fcBuild builds a one-region graph with build and returns the op that
// computes build's first result.
func fcBuild(t *testing.T, build func(b *ir.Builder) []*ir.Value) *ir.Op {
	t.Helper()
	b := ir.NewBuilder("fused_common")
	b.Region("mlp", 0)
	outs := build(b)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	b.Output(outs...)
	if _, err := b.Finish(); err != nil {
		t.Fatalf("building the graph: %v", err)
	}
	return outs[0].Def
}

func fcIn(b *ir.Builder, name string, dt ir.DType, dims ...int) *ir.Value {
	return b.Input(name, ir.T(dt, dims...))
}

func fcW(b *ir.Builder, name string, dt ir.DType, dims ...int) *ir.Value {
	return b.Weight(name, ir.T(dt, dims...))
}

func one(v *ir.Value) []*ir.Value { return []*ir.Value{v} }

// fcVariants are hand-built ops beyond the model graphs' signatures.
var fcVariants = []struct {
	name  string
	build func(b *ir.Builder) []*ir.Value
}{
	{"matmul2_mixed_dtypes", func(b *ir.Builder) []*ir.Value {
		return b.Matmul2(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "w0", ir.BF16, 256, 200), fcW(b, "w1", ir.BFP8B, 256, 12))
	}},
	{"matmul3_rows", func(b *ir.Builder) []*ir.Value {
		return b.Matmul3(fcIn(b, "a", ir.BF16, 3, 128), fcW(b, "w0", ir.BFP8B, 128, 160), fcW(b, "w1", ir.BFP8B, 128, 96), fcW(b, "w2", ir.BFP4B, 128, 64))
	}},
	{"matmul4_subblocks", func(b *ir.Builder) []*ir.Value {
		return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 64), fcW(b, "w0", ir.BF16, 64, 320), fcW(b, "w1", ir.BF16, 64, 96), fcW(b, "w2", ir.BF16, 64, 6), fcW(b, "w3", ir.BF16, 64, 6))
	}},
	{"matmul_add_subblocks", func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 2, 256), fcW(b, "w", ir.BFP8B, 256, 320), fcIn(b, "r", ir.BF16, 2, 320)))
	}},
	// B = 3 users: three tile rows of one live row each, every kernel
	// repeats per tile row.
	{"matmul_add_users", func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 3, 1, 128), fcW(b, "w", ir.BFP8B, 128, 160), fcIn(b, "r", ir.BF16, 3, 1, 160)))
	}},
	{"matmul_add_two_tile_rows", func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 40, 64), fcW(b, "w", ir.BF16, 64, 64), fcIn(b, "r", ir.BF16, 40, 64)))
	}},
	{"matmul_swiglu_users", func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 2, 1, 128), fcW(b, "wg", ir.BFP4B, 128, 96), fcW(b, "wu", ir.BFP4B, 128, 96)))
	}},
	{"rmsnorm_matmul_users", func(b *ir.Builder) []*ir.Value {
		return one(b.RMSNormMatmul(fcIn(b, "x", ir.BF16, 2, 1, 192), fcW(b, "wn", ir.BF16, 192), fcW(b, "w", ir.BFP8B, 192, 64), 1e-5, 1))
	}},
	{"matmul4_users", func(b *ir.Builder) []*ir.Value {
		return b.Matmul4(fcIn(b, "a", ir.BF16, 2, 1, 64), fcW(b, "w0", ir.BF16, 64, 320), fcW(b, "w1", ir.BF16, 64, 96), fcW(b, "w2", ir.BF16, 64, 6), fcW(b, "w3", ir.BF16, 64, 6))
	}},
	// Packed rows of 3 users in, per-user rows out (pass pack-rows).
	{"matmul3_users_attr", func(b *ir.Builder) []*ir.Value {
		return b.Matmul3(fcIn(b, "a", ir.BF16, 1, 3, 128), fcW(b, "w0", ir.BFP8B, 128, 160), fcW(b, "w1", ir.BF16, 128, 96), fcW(b, "w2", ir.BFP8B, 128, 32), ir.With("users", 3))
	}},
	{"matmul_add_fp32", func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulAdd(fcIn(b, "a", ir.FP32, 1, 128), fcW(b, "w", ir.BF16, 128, 64), fcIn(b, "r", ir.FP32, 1, 64)))
	}},
	{"matmul_swiglu_subblocks", func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 1, 128), fcW(b, "wg", ir.BFP4B, 128, 352), fcW(b, "wu", ir.BFP4B, 128, 352)))
	}},
	{"rmsnorm_matmul_no_offset_rows", func(b *ir.Builder) []*ir.Value {
		return one(b.RMSNormMatmul(fcIn(b, "x", ir.BF16, 5, 192), fcW(b, "wn", ir.BF16, 192), fcW(b, "w", ir.BFP8B, 192, 300), 1e-5, 0))
	}},
	{"add_rmsnorm_rows", func(b *ir.Builder) []*ir.Value {
		return b.AddRMSNorm(fcIn(b, "a", ir.BF16, 70, 64), fcIn(b, "b", ir.BF16, 70, 64), fcW(b, "w", ir.BF16, 64), 1e-6, 0)
	}},
	{"add_rmsnorm_same_operand", func(b *ir.Builder) []*ir.Value {
		x := fcIn(b, "x", ir.BF16, 1, 1, 96)
		return b.AddRMSNorm(x, x, fcW(b, "w", ir.BF16, 96), 1e-6, 1)
	}},
	{"eltwise_chain_neg_exp", func(b *ir.Builder) []*ir.Value {
		return one(b.EltwiseChain(fcW(b, "a_log", ir.BF16, 24), "exp,mul_scalar:-1"))
	}},
	{"eltwise_chain_gate", func(b *ir.Builder) []*ir.Value {
		return one(b.EltwiseChain(fcIn(b, "x", ir.BF16, 1, 1, 24), "softplus,mul_scalar:-0.5,exp"))
	}},
	{"eltwise_chain_fp32", func(b *ir.Builder) []*ir.Value {
		return one(b.EltwiseChain(fcIn(b, "x", ir.FP32, 12, 32), "sigmoid,square,add_scalar:0.25,rsqrt"))
	}},
	{"eltwise_chain_tiles", func(b *ir.Builder) []*ir.Value {
		return one(b.EltwiseChain(fcIn(b, "x", ir.BF16, 2, 40, 70), "silu,mul_scalar:3,sigmoid"))
	}},
	{"embedding_reshape_view", func(b *ir.Builder) []*ir.Value {
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 3)), fcW(b, "embed", ir.BF16, 100, 64), []int{1, 3, 64}))
	}},
	{"embedding_reshape_users", func(b *ir.Builder) []*ir.Value {
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 3)), fcW(b, "embed", ir.BF16, 100, 64), []int{3, 1, 64}))
	}},
	{"embedding_reshape_row_major_table", func(b *ir.Builder) []*ir.Value {
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 1)), b.Weight("embed", rowMajor(ir.BF16, 50, 128)), []int{1, 1, 128}))
	}},
	{"embedding_reshape_long_prompt", func(b *ir.Builder) []*ir.Value {
		// a prompt whose ids row (4,200 x 4 bytes) is more than one NoC
		// packet: its read is split (blocks.ReadPageTo)
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 4200)), fcW(b, "embed", ir.BF16, 100, 64), []int{1, 4200, 64}))
	}},
	{"embedding_reshape_long_prompt_row_major_table", func(b *ir.Builder) []*ir.Value {
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 4200)), b.Weight("embed", rowMajor(ir.BF16, 50, 128)), []int{1, 4200, 128}))
	}},
	{"embedding_reshape_regroup", func(b *ir.Builder) []*ir.Value {
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 3)), fcW(b, "embed", ir.BF16, 100, 64), []int{2, 96}))
	}},
	{"embedding_reshape_users_ids", func(b *ir.Builder) []*ir.Value {
		// tiny-mlp's device loop: the argmax's [B,1] ids, one page per
		// user, regrouped into [B, H].
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 3, 1)), fcW(b, "embed", ir.BF16, 100, 64), []int{3, 64}))
	}},
	{"embedding_reshape_heads", func(b *ir.Builder) []*ir.Value {
		return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 2)), fcW(b, "embed", ir.FP32, 40, 128), []int{2, 4, 32}))
	}},
}

// TestFusedCommonVariants runs the hand-built variants on the full grid
// and, with TCC_LONG=1, on a 2-core grid too.
func TestFusedCommonVariants(t *testing.T) {
	srcs := newFCSources(t)
	for i, tc := range fcVariants {
		op := fcBuild(t, tc.build)
		t.Run(tc.name, func(t *testing.T) { fcRun(t, target.Blackhole(), op, uint64(i)+300, srcs) })
		t.Run(tc.name+"/2x1", func(t *testing.T) {
			longtest.Skip(t, "the variants on a 2-core grid (~2 CPU-s)")
			fcRun(t, smallGrid(), op, uint64(i)+400, nil)
		})
	}
	srcs.check(t)
}

// fc27B are ops at the 27B's per-device shapes on a 1x2 mesh (hidden 5120,
// in-projections 2560 + 1536 + 12 + 12 columns, MLP 4352 columns per
// device, bfp8 and bfp4 weights). The whole MLP, down projection and
// lm_head take too long on the simulator (tens of thousands of tile
// products per program and more); they are lowered and validated, and the
// MLP and down projection run with their K and formats on 8 output tile
// columns.
var fc27B = []struct {
	name  string
	run   bool // run on the simulator (else lower and validate only)
	build func(b *ir.Builder) []*ir.Value
}{
	{"matmul4_in_proj", true, func(b *ir.Builder) []*ir.Value {
		return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 1, 5120), fcW(b, "qkv", ir.BFP8B, 5120, 2560), fcW(b, "z", ir.BFP8B, 5120, 1536),
			fcW(b, "a_proj", ir.BFP8B, 5120, 12), fcW(b, "b_proj", ir.BFP8B, 5120, 12))
	}},
	{"add_rmsnorm_hidden", true, func(b *ir.Builder) []*ir.Value {
		return b.AddRMSNorm(fcIn(b, "a", ir.BF16, 1, 1, 5120), fcIn(b, "b", ir.BF16, 1, 1, 5120), fcW(b, "w", ir.BF16, 5120), 1e-6, 1)
	}},
	{"matmul_swiglu_mlp", false, func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 1, 5120), fcW(b, "gate", ir.BFP4B, 5120, 4352), fcW(b, "up", ir.BFP4B, 5120, 4352)))
	}},
	{"matmul_swiglu_mlp_columns", true, func(b *ir.Builder) []*ir.Value {
		// The MLP's K and weight format, 8 of its 136 output tile columns.
		return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 1, 5120), fcW(b, "gate", ir.BFP4B, 5120, 256), fcW(b, "up", ir.BFP4B, 5120, 256)))
	}},
	{"matmul_add_down_proj_columns", true, func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 1, 4352), fcW(b, "down", ir.BFP8B, 4352, 256), fcIn(b, "r", ir.BF16, 1, 1, 256)))
	}},
	{"matmul_add_down_proj", false, func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 1, 4352), fcW(b, "down", ir.BFP8B, 4352, 5120), fcIn(b, "r", ir.BF16, 1, 1, 5120)))
	}},
	{"rmsnorm_matmul_lm_head", false, func(b *ir.Builder) []*ir.Value {
		return one(b.RMSNormMatmul(fcIn(b, "x", ir.BF16, 1, 1, 5120), fcW(b, "norm", ir.BF16, 5120), fcW(b, "lm_head", ir.BFP8B, 5120, 124160), 1e-6, 1))
	}},
}

// TestFusedCommon27B lowers the 27B per-device shapes (they must fit L1
// and validate) and runs the in-projection matmul4 and add_rmsnorm on the
// simulator (not in -short mode).
func TestFusedCommon27B(t *testing.T) {
	for i, tc := range fc27B {
		t.Run(tc.name, func(t *testing.T) {
			op := fcBuild(t, tc.build)
			if !tc.run || testing.Short() || !longtest.Enabled() {
				p, err := Lower(op, NewContext(target.Blackhole()))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d cores (%s tiles per core)", tc.name, len(p.Cores()), p.Kernel("compute").Defines["MM_TILES_PER_CORE"])
				return
			}
			fcRun(t, target.Blackhole(), op, uint64(i)+700, nil)
		})
	}
}

// TestFusedMatmulPlan: with one weight and no prologue or epilogue the
// fused plan is PlanMatmul's; sibling matmuls split the columns of all
// weights together; swiglu columns cost both weights.
func TestFusedMatmulPlan(t *testing.T) {
	for _, s := range []struct{ kt, nt int }{{1, 40}, {4, 8}, {160, 80}, {160, 3880}, {8, 1}} {
		mm := fcBuild(t, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 1, 32*s.kt), fcW(b, "w", ir.BFP8B, 32*s.kt, 32*s.nt), fcIn(b, "r", ir.BF16, 1, 32*s.nt)))
		})
		f := &fusedMatmul{op: mm, act: mm.Operands[0], parts: []mmPart{{weights: mm.Operands[1:2], out: mm.Result()}}}
		if err := f.check(); err != nil {
			t.Fatal(err)
		}
		got, want := f.planSplit(110, ir.HiFi4), PlanMatmul(s.kt, s.nt, 110, ir.BFP8B, ir.BF16, ir.HiFi4)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("kt %d nt %d: fused plan differs from PlanMatmul (-want +got):\n%s", s.kt, s.nt, diff)
		}
	}
	// matmul2 of 40 + 8 one-K-tile columns: as PlanMatmul over 48 columns.
	op := fcBuild(t, func(b *ir.Builder) []*ir.Value {
		return b.Matmul2(fcIn(b, "a", ir.BF16, 1, 32), fcW(b, "w0", ir.BF16, 32, 1280), fcW(b, "w1", ir.BF16, 32, 256))
	})
	p, err := Lower(op, NewContext(target.Blackhole()))
	if err != nil {
		t.Fatal(err)
	}
	want := PlanMatmul(1, 48, 110, ir.BF16, ir.BF16, ir.HiFi4)
	if got := len(p.Cores()); got != want.Cores {
		t.Errorf("matmul2 40+8 columns runs on %d cores, PlanMatmul over 48 columns gives %d", got, want.Cores)
	}
	// Per-core (start, count) of both parts cover each part exactly once.
	rd := p.Kernel("reader")
	covered := [2][]int{make([]int, 40), make([]int, 8)}
	for _, c := range kir.CoresOf(rd.Cores) {
		vals := rd.RuntimeValuesOn(c)
		for part := range 2 {
			s, n := argU32(t, vals[2*part]), argU32(t, vals[2*part+1])
			for j := s; j < s+n; j++ {
				covered[part][j]++
			}
		}
	}
	for part, cov := range covered {
		for j, n := range cov {
			if n != 1 {
				t.Errorf("part %d column %d is computed by %d cores, want 1", part, j, n)
			}
		}
	}
	// The 27B attention's q/k/v columns (192 + 16 + 16 tiles, 3 per core):
	// every part starts on a core of its own, so no core straddles two.
	qkv := fcBuild(t, func(b *ir.Builder) []*ir.Value {
		return b.Matmul3(fcIn(b, "a", ir.BF16, 1, 1, 5120), fcW(b, "q", ir.BFP8B, 5120, 6144), fcW(b, "k", ir.BFP8B, 5120, 512), fcW(b, "v", ir.BFP8B, 5120, 512))
	})
	qp, err := Lower(qkv, NewContext(target.Blackhole()))
	if err != nil {
		t.Fatal(err)
	}
	qrd := qp.Kernel("reader")
	for _, c := range kir.CoresOf(qrd.Cores) {
		vals, parts := qrd.RuntimeValuesOn(c), 0
		for part := range 3 {
			if argU32(t, vals[2*part+1]) > 0 {
				parts++
			}
		}
		if parts != 1 {
			t.Errorf("matmul3 q/k/v: core %v computes columns of %d parts, want 1", c, parts)
		}
	}
	// swiglu: each column costs the products of both weights.
	sw := fcBuild(t, func(b *ir.Builder) []*ir.Value {
		return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 320), fcW(b, "g", ir.BFP8B, 320, 640), fcW(b, "u", ir.BFP8B, 320, 640)))
	})
	f := &fusedMatmul{op: sw, act: sw.Operands[0], epi: &epiSwiGLU{}, parts: []mmPart{{weights: sw.Operands[1:3], out: sw.Result()}}}
	if err := f.check(); err != nil {
		t.Fatal(err)
	}
	if got, want := f.costs(ir.HiFi4).colCycles, 2*10*(64+2*59)+2*32; got != want {
		t.Errorf("swiglu column cost %d cycles, want %d (2 weights x 10 K tiles x (64 + 2 unpacks of 59) + 2 eltwise tiles)", got, want)
	}
}

// argU32 is the value of a constant runtime argument.
func argU32(t *testing.T, v kir.ArgValue) int {
	t.Helper()
	if v.Kind != kir.ValConst {
		t.Fatalf("argument %s is not a constant", v)
	}
	return int(v.Const)
}

func TestPartRange(t *testing.T) {
	tests := []struct{ s, n, off, nt, start, count int }{
		{0, 5, 0, 3, 0, 3},  // covers the part and more
		{2, 5, 0, 3, 2, 1},  // tail of the part
		{2, 5, 3, 10, 0, 4}, // head of the next part
		{8, 5, 3, 2, 0, 0},  // past the part
		{0, 2, 3, 2, 0, 0},  // before the part
		{4, 1, 3, 2, 1, 1},  // inside
	}
	for _, tc := range tests {
		s, n := partRange(tc.s, tc.n, tc.off, tc.nt)
		if s != tc.start || n != tc.count {
			t.Errorf("partRange(%d, %d, %d, %d) = %d, %d; want %d, %d", tc.s, tc.n, tc.off, tc.nt, s, n, tc.start, tc.count)
		}
	}
}

// TestFusedCommonErrors: shapes a lowering cannot handle are errors naming
// the op and the rule.
func TestFusedCommonErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *ir.Builder) []*ir.Value
		rule  string
	}{
		{"matmul2_k_not_tiles", func(b *ir.Builder) []*ir.Value {
			return b.Matmul2(fcIn(b, "a", ir.BF16, 1, 40), fcW(b, "w0", ir.BF16, 40, 64), fcW(b, "w1", ir.BF16, 40, 64))
		}, "rule matmul-k"},
		{"add_rmsnorm_hidden_not_tiles", func(b *ir.Builder) []*ir.Value {
			return b.AddRMSNorm(fcIn(b, "a", ir.BF16, 1, 40), fcIn(b, "b", ir.BF16, 1, 40), fcW(b, "w", ir.BF16, 40), 1e-6, 0)
		}, "rule rmsnorm-hidden"},
		{"embedding_reshape_row_major_regroup", func(b *ir.Builder) []*ir.Value {
			return one(b.EmbeddingReshape(b.Input("ids", rowMajor(ir.UInt32, 2)), b.Weight("embed", rowMajor(ir.BF16, 50, 64)), []int{2, 1, 64}))
		}, "rule embedding-reshape-view"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := fcBuild(t, tc.build)
			_, err := Lower(op, NewContext(target.Blackhole()))
			if err == nil {
				t.Fatal("Lower succeeded, want an error")
			}
			for _, want := range []string{op.Where(), tc.rule} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}
