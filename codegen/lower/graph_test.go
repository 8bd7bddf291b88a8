package lower_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
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
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/ref"
)

// smallGraph builds the unfused decode graph of the small test config on
// a 1 x cols mesh.
func smallGraph(t *testing.T, cols int) *ir.Graph { return smallGraphMode(t, cols, qwen27b.Decode) }

// smallGraphMode builds the small config's graph of a decode step or of a
// 32-token prefill.
func smallGraphMode(t *testing.T, cols int, mode qwen27b.Mode) *ir.Graph {
	t.Helper()
	c, err := config.Load("../../models/qwen27b/testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	o := qwen27b.DefaultOptions()
	o.Config = c
	o.Mode = mode
	g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// testPos is the decode position of the graph tests (inside the second
// tile of the 128-long cache).
const testPos = 37

// randomEnv draws the graph's inputs, weights and states: token ids below
// the vocabulary, pos = testPos, RoPE tables of random angles, N(0, s)
// weights with s = 1/sqrt(rows) for matrices (unit-scale activations) and
// 0.1 for vectors, N(0, 0.5) states.
func randomEnv(g *ir.Graph, seed uint64) map[*ir.Value]ref.Tensor {
	rng := rand.New(rand.NewPCG(seed, 3))
	env := map[*ir.Value]ref.Tensor{}
	normal := func(n int, s float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * s)
		}
		return out
	}
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			n := v.Type.Shape.Numel()
			var data []float32
			switch {
			case v.Name == "tokens":
				data = make([]float32, n)
				for i := range data {
					data[i] = float32(rng.IntN(200))
				}
			case v.Name == "pos": // a word per user in decode
				data = make([]float32, n)
				for i := range data {
					data[i] = testPos
				}
			case v.Name == "rope.cos" || v.Name == "rope.sin":
				data = make([]float32, n)
				for i := range data {
					a := rng.Float64() * 2 * math.Pi
					if v.Name == "rope.cos" {
						data[i] = float32(math.Cos(a))
					} else {
						data[i] = float32(math.Sin(a))
					}
				}
			case v.Kind == ir.KindWeight && v.Type.Shape.Rank() == 2 && v.Type.Shape[0] > 4:
				data = normal(n, 1/math.Sqrt(float64(v.Type.Shape[0])))
			case v.Kind == ir.KindWeight && strings.HasSuffix(v.Name, "embed_tokens.weight"):
				data = normal(n, 1)
			case v.Kind == ir.KindWeight:
				data = normal(n, 0.1)
			default:
				data = normal(n, 0.5)
			}
			env[v] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: data}
		}
	}
	return env
}

// exactKinds reproduce the reference bit for bit: they move or convert
// values without arithmetic.
var exactKinds = map[ir.OpKind]bool{
	ir.OpReshape: true, ir.OpSlice: true, ir.OpConcat: true, ir.OpPad: true, ir.OpRepeatInterleave: true,
	ir.OpTranspose: true, ir.OpToMemory: true, ir.OpTypecast: true, ir.OpUpdateCache: true,
	ir.OpEmbedding: true, ir.OpArgmax: true, ir.OpTril: true, ir.OpFillCache: true,
}

// opKinds lists the op kinds of g with their counts, sorted by name.
func opKinds(g *ir.Graph) string {
	n := map[string]int{}
	for _, op := range g.Ops() {
		n[op.Name()]++
	}
	names := make([]string, 0, len(n))
	for k := range n {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

// opStats accumulates per-kind accuracy figures.
type opStats struct {
	n        int
	worstPCC float64
	worstRel float64
}

func record(stats map[string]*opStats, kind string, pcc, rel float64) {
	s := stats[kind]
	if s == nil {
		s = &opStats{worstPCC: 1}
		stats[kind] = s
	}
	s.n++
	s.worstPCC = math.Min(s.worstPCC, pcc)
	s.worstRel = math.Max(s.worstRel, rel)
}

func logStats(t *testing.T, stats map[string]*opStats) {
	names := make([]string, 0, len(stats))
	for k := range stats {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s := stats[k]
		t.Logf("%-18s %3d programs  worst PCC %.6f  worst max rel err %.3g", k, s.n, s.worstPCC, s.worstRel)
	}
}

// compareOp checks one op's device result against the reference.
func compareOp(t *testing.T, op *ir.Op, want, got []float32, stats map[string]*opStats) {
	t.Helper()
	if exactKinds[op.Kind] {
		for i := range want {
			if want[i] != got[i] && !(math.IsNaN(float64(want[i])) && math.IsNaN(float64(got[i]))) {
				t.Errorf("%s: element %d: device %v, reference %v (exact)", op.Where(), i, got[i], want[i])
				return
			}
		}
		record(stats, op.Name(), 1, 0)
		return
	}
	pcc, rel := numerics.PCC(want, got), numerics.MaxRelErr(want, got)
	record(stats, op.Name(), pcc, rel)
	if pcc < 0.999 {
		t.Errorf("%s %s: PCC %.6f (want >= 0.999), max rel err %.3g", op.Where(), op.Result().Type.Shape, pcc, rel)
	}
}

// TestUnfusedDecodeGraph compiles the whole unfused decode graph of the
// small config at mesh 1x1 (placed: every value DRAM interleaved, as
// codegen.Compile requires) and runs it on the simulator program by
// program: each program gets the reference values of its operands and its
// result must match the reference (ref.Eval over the whole graph): bit for
// bit for data movement and conversions, PCC >= 0.999 otherwise. Then the
// whole graph runs chained from the inputs alone and the logits and the
// greedy token are compared.
func TestUnfusedDecodeGraph(t *testing.T) {
	longtest.Skip(t, "every program of the small decode graph on the simulator (~7 CPU-s)")
	checkCompiledGraph(t, smallGraph(t, 1))
}

// TestUnfusedPrefillGraph is TestUnfusedDecodeGraph for a 32-token prefill
// (conv_depthwise, cumsum, tril, tril_inverse, fill_cache, sdpa_prefill).
func TestUnfusedPrefillGraph(t *testing.T) {
	longtest.Skip(t, "every program of the small prefill graph on the simulator (~20 CPU-s)")
	checkCompiledGraph(t, smallGraphMode(t, 1, qwen27b.Prefill))
}

func checkCompiledGraph(t *testing.T, g *ir.Graph) {
	t.Logf("op kinds: %s", opKinds(g))
	passes.Place(g, nil)
	tgt := target.Blackhole()
	b, err := codegen.Compile(g, tgt)
	if err != nil {
		t.Fatal(err)
	}
	env := randomEnv(g, 1)
	vals, err := ref.Eval(g, env, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Open("sim", g.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	// Load reads and writes each value in its own layout, also where
	// intermediates share a buffer.
	e, err := runtime.Load(m, b)
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]*opStats{}
	for i, p := range b.Programs {
		if err := kir.Validate(p.Kernel, tgt); err != nil {
			t.Fatalf("%s: %v", p.Op.Where(), err)
		}
		for _, k := range p.Kernel.Kernels {
			if _, err := cpp.PrintKernel(p.Kernel, k); err != nil {
				t.Fatalf("%s: printing kernel %s: %v", p.Op.Where(), k.Name, err)
			}
		}
		for _, v := range p.Op.Operands {
			if err := e.UploadTo(0, v, vals[v].Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.RunProgram(i); err != nil {
			t.Fatalf("%s: %v", p.Op.Where(), err)
		}
		got, err := e.DownloadFrom(0, p.Op.Result())
		if err != nil {
			t.Fatal(err)
		}
		compareOp(t, p.Op, vals[p.Op.Result()].Data, got, stats)
	}
	logStats(t, stats)
	t.Logf("%d programs", len(b.Programs))

	// Chained: inputs, weights and states once, then every program.
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			if err := e.UploadTo(0, v, vals[v].Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	logits, next := g.Outputs[0], g.Outputs[1]
	gl, err := e.DownloadFrom(0, logits)
	if err != nil {
		t.Fatal(err)
	}
	gn, err := e.DownloadFrom(0, next)
	if err != nil {
		t.Fatal(err)
	}
	pcc := numerics.PCC(vals[logits].Data, gl)
	t.Logf("chained run: logits PCC %.6f, max rel err %.3g; next token device %v, reference %v", pcc, numerics.MaxRelErr(vals[logits].Data, gl), gn, vals[next].Data)
	if pcc < 0.99 {
		t.Errorf("chained logits PCC %.6f (want >= 0.99)", pcc)
	}
}

// TestUnfusedDecodeGraphPlacements lowers every op of the unfused decode
// graph with the placements the model gives it (L1 interleaved and L1
// height-sharded values included) at meshes 1x1 and 1x2, and runs each
// program against the reference. The collectives of the 1x2 graph are
// skipped (they need the other device; their lowering is tested
// separately).
func TestUnfusedDecodeGraphPlacements(t *testing.T) {
	longtest.Skip(t, "the small decode graph at two placements on the simulator (~8 CPU-s)")
	for _, cols := range []int{1, 2} {
		t.Run(fmt.Sprintf("1x%d", cols), func(t *testing.T) {
			g := smallGraph(t, cols)
			tgt := target.Blackhole()
			ctx := lower.NewContext(tgt)
			envs := make([]map[*ir.Value]ref.Tensor, cols)
			for d := range envs {
				envs[d] = randomEnv(g, uint64(10+d))
			}
			all, err := ref.EvalMesh(g, envs, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			vals := all[0]
			m, err := runtime.Open("sim", ir.Mesh{Rows: 1, Cols: 1})
			if err != nil {
				t.Fatal(err)
			}
			alloc := func(v *ir.Value) string {
				n := ctx.BufferName(v)
				ps, pages, err := lower.PageLayout(v.Type)
				if err != nil {
					t.Fatal(err)
				}
				tn := runtime.Tensor{Buffer: kir.Buffer{Name: n, Mem: v.Type.Mem, DType: v.Type.DType, Layout: v.Type.Layout, PageSize: ps, Pages: pages}, Shape: v.Type.Shape}
				if err := m.Alloc(tn); err != nil {
					t.Fatal(err)
				}
				return n
			}
			stats := map[string]*opStats{}
			skipped := map[string]int{}
			for _, op := range g.Ops() {
				switch op.Kind {
				case ir.OpAllReduce, ir.OpReduceScatter, ir.OpAllGather:
					skipped[op.Name()]++
					continue
				}
				p, err := lower.Lower(op, ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range op.Operands {
					if err := m.Upload(0, alloc(v), vals[v].Data); err != nil {
						t.Fatal(err)
					}
				}
				out := alloc(op.Result())
				if _, err := m.Launch(0, p); err != nil {
					t.Fatalf("%s: %v", op.Where(), err)
				}
				got, err := m.Download(0, out)
				if err != nil {
					t.Fatal(err)
				}
				compareOp(t, op, vals[op.Result()].Data, got, stats)
			}
			logStats(t, stats)
			if len(skipped) > 0 {
				t.Logf("collectives skipped: %v", skipped)
			}
		})
	}
}

// TestKernelsSyntax prints every kernel of the small config's decode and
// prefill graphs (each distinct source once) and checks it is valid C++17
// against the tt-metal API declarations (cpp.SyntaxCheck; skipped without
// g++).
func TestKernelsSyntax(t *testing.T) {
	longtest.Skip(t, "g++ on every kernel of the small unfused graphs (~10 CPU-s; kernels_gen checks the fused builds' kernels in every run)")
	dir := t.TempDir()
	sources := map[string]cpp.Source{}
	seen := map[string]bool{}
	for _, mode := range []qwen27b.Mode{qwen27b.Decode, qwen27b.Prefill} {
		g := smallGraphMode(t, 1, mode)
		passes.Place(g, nil)
		b, err := codegen.Compile(g, target.Blackhole())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range b.Programs {
			for _, k := range p.Kernel.Kernels {
				src, err := cpp.PrintKernel(p.Kernel, k)
				if err != nil {
					t.Fatalf("%s: %v", p.Op.Where(), err)
				}
				if seen[string(src)] {
					continue
				}
				seen[string(src)] = true
				f := filepath.Join(dir, fmt.Sprintf("k%04d_%s_%s.cpp", len(seen), p.Kernel.Name, k.Name))
				if err := os.WriteFile(f, src, 0o644); err != nil {
					t.Fatal(err)
				}
				sources[f] = cpp.Source{Processor: k.Processor, Defines: k.Defines}
			}
		}
	}
	lower.CheckKernelSyntax(t, "generated kernels", dir, sources, false)
}
