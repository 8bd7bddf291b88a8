package qwen27b

import (
	"hash/fnv"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	model "github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/ref"
)

// fullLayer is one decoder layer of the full-size 27B fused decode graph at
// mesh 1x2, as a standalone graph, with per-device weights, state and
// inputs drawn like the model's (whole tensors cut per card).
type fullLayer struct {
	g    *ir.Graph
	envs []map[*ir.Value][]float32
}

func buildFullLayer(tb testing.TB, index int) fullLayer {
	return buildFullLayerAt(tb, index, model.DefaultOptions().MaxSeq, 5)
}

// buildFullLayerAt is buildFullLayer with a KV cache of maxSeq positions
// (random, like every state) and the step at position pos.
func buildFullLayerAt(tb testing.TB, index, maxSeq, pos int) fullLayer {
	tb.Helper()
	o := model.DefaultOptions()
	o.MaxSeq = maxSeq
	mesh := ir.Mesh{Rows: 1, Cols: 2}
	g, _, err := model.BuildGraph(o, mesh)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := passes.Run(g, passes.Options{}); err != nil {
		tb.Fatal(err)
	}
	whole, _, err := model.BuildGraph(o, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		tb.Fatal(err)
	}
	wholeByName := map[string]*ir.Value{}
	for _, v := range append(append([]*ir.Value(nil), whole.Weights...), whole.States...) {
		wholeByName[v.Name] = v
	}
	sub, _, err := ir.ExtractRegion(g, g.Layers()[index])
	if err != nil {
		tb.Fatal(err)
	}
	envs := []map[*ir.Value][]float32{{}, {}}
	for _, v := range append(append([]*ir.Value(nil), sub.Weights...), sub.States...) {
		wv := wholeByName[v.Name]
		h := fnv.New64a()
		h.Write([]byte(v.Name))
		data := model.Model{}.InitWeight(wv, rand.New(rand.NewSource(int64(h.Sum64()))))
		share, err := model.ShareOf(o.Config, v.Name, 2)
		if err != nil {
			tb.Fatal(err)
		}
		for d := 0; d < 2; d++ {
			cut, _, err := share.Cut(data, wv.Type.Shape, d, 2)
			if err != nil {
				tb.Fatal(err)
			}
			envs[d][v] = cut
		}
	}
	rng := rand.New(rand.NewSource(7))
	cos, sin := model.RopeTables(o.Config.RotaryDim(), o.Config.RopeTheta, pos, 1)
	for _, v := range sub.Inputs {
		var data []float32
		switch v.Name {
		case "pos":
			data = []float32{float32(pos)}
		case "rope.cos":
			data = cos
		case "rope.sin":
			data = sin
		default: // the residual stream from the previous layer
			data = make([]float32, v.Type.Shape.Numel())
			for i := range data {
				data[i] = float32(rng.NormFloat64())
			}
		}
		envs[0][v], envs[1][v] = data, data
	}
	return fullLayer{g: sub, envs: envs}
}

// run compiles the layer, runs its programs on a simulated 1x2 mesh and
// returns device 0's outputs and the wall time of the run.
func (l fullLayer) run(tb testing.TB) ([][]float32, time.Duration) {
	tb.Helper()
	b, err := codegen.Compile(l.g, target.Blackhole())
	if err != nil {
		tb.Fatal(err)
	}
	mesh, err := runtime.Open("sim", l.g.Mesh)
	if err != nil {
		tb.Fatal(err)
	}
	exe, err := runtime.Load(mesh, b)
	if err != nil {
		tb.Fatal(err)
	}
	for d, env := range l.envs {
		for v, data := range env {
			if err := exe.UploadTo(d, v, data); err != nil {
				tb.Fatal(err)
			}
		}
	}
	start := time.Now()
	if err := exe.Run(); err != nil {
		tb.Fatal(err)
	}
	took := time.Since(start)
	var outs [][]float32
	for _, v := range l.checked() {
		if s, ok := v.(*ir.Value); ok {
			got, err := exe.DownloadFrom(0, s) // device 0's shard, as check compares
			if err != nil {
				tb.Fatal(err)
			}
			outs = append(outs, got)
		}
	}
	return outs, took
}

// checked lists what is compared: the outputs, then each state (read back
// from its buffer, updated in place) in declaration order.
func (l fullLayer) checked() []any {
	var vs []any
	for _, v := range l.g.Outputs {
		vs = append(vs, v)
	}
	for _, s := range l.g.States {
		if _, ok := l.g.StateUpdates[s]; ok {
			vs = append(vs, s)
		}
	}
	return vs
}

// check compares the layer's device outputs with the reference evaluator
// at the same formats.
func (l fullLayer) check(t *testing.T, outs [][]float32) {
	envs := make([]map[*ir.Value]ref.Tensor, len(l.envs))
	for d, env := range l.envs {
		envs[d] = map[*ir.Value]ref.Tensor{}
		for v, data := range env {
			envs[d][v] = ref.Tensor{Shape: v.Type.Shape.Clone(), Data: data}
		}
	}
	want, err := ref.EvalMesh(l.g, envs, ref.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range l.checked() {
		v := c.(*ir.Value)
		w := want[0][v].Data
		if nv, ok := l.g.StateUpdates[v]; ok {
			w = want[0][nv].Data
		}
		pcc := numerics.PCC(w, outs[i])
		t.Logf("%s %s %q %s: PCC %.6f, max rel err %.3g", l.g.Name, v.Kind, v.Name, v.Type.Shape, pcc, numerics.MaxRelErr(w, outs[i]))
		if pcc < 0.999 {
			t.Errorf("%s %s %q: PCC %.6f < 0.999", l.g.Name, v.Kind, v.Name, pcc)
		}
	}
}

// EnvFullWidth, set to 1, runs the full-size layer tests. Each takes
// about 3 minutes of simulator time and 7 GB, beyond `go test ./...`'s budget
// (5 minutes, 4 GB on two cores), so they are off by default; .ci/run
// runs them, one after the other (BenchmarkFullWidthLayers reports their
// time).
const EnvFullWidth = "TCC_FULL_WIDTH"

func fullWidth(t *testing.T) {
	if testing.Short() || os.Getenv(EnvFullWidth) != "1" {
		t.Skipf("a full-width 27B layer on the simulator (~3 min, ~7 GB): run with %s=1 (.ci/run does)", EnvFullWidth)
	}
}

func TestFullWidthGDNLayer(t *testing.T) {
	fullWidth(t)
	l := buildFullLayer(t, 0)
	outs, took := l.run(t)
	t.Logf("GDN layer 0, 27B, mesh 1x2: %d programs per card in %v on the sim", l.g.NumOps(), took)
	l.check(t, outs)
}

func TestFullWidthAttentionLayer(t *testing.T) {
	fullWidth(t)
	l := buildFullLayer(t, 3)
	outs, took := l.run(t)
	t.Logf("attention layer 3, 27B, mesh 1x2: %d programs per card in %v on the sim", l.g.NumOps(), took)
	l.check(t, outs)
}

// TestFullWidthAttentionLayerLongContext runs the attention layer at
// position 3,001 of a 4,096-token cache: the flash-decoding SDPA splits
// 94 visible cache tiles per kv head over its group of cores.
func TestFullWidthAttentionLayerLongContext(t *testing.T) {
	fullWidth(t)
	l := buildFullLayerAt(t, 3, 4096, 3001)
	outs, took := l.run(t)
	t.Logf("attention layer 3, 27B, mesh 1x2, position 3001 of 4096: %d programs per card in %v on the sim", l.g.NumOps(), took)
	l.check(t, outs)
}

// BenchmarkFullWidthLayers reports the simulator's time for one full-size
// GDN and one attention decoder layer (both cards of mesh 1x2).
func BenchmarkFullWidthLayers(b *testing.B) {
	for _, c := range []struct {
		name  string
		index int
	}{{"gdn", 0}, {"attention", 3}} {
		b.Run(c.name, func(b *testing.B) {
			l := buildFullLayer(b, c.index)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, took := l.run(b)
				b.ReportMetric(took.Seconds(), "sim-s/layer")
			}
		})
	}
}
