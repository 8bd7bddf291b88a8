package runtime_test

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/models/tinymlp"
)

// loopModels are device-loop graphs: their steps take no host input.
var loopModels = []stepModel{
	{"tiny-mlp", tinymlp.Model{}, map[string]string{"device-loop": "true"}, ir.Mesh{Rows: 1, Cols: 1}, 3},
	{"qwen27b-small-1x1", qwen27b.Model{}, map[string]string{"config": "../models/qwen27b/testdata/small.json", "device-loop": "true"}, ir.Mesh{Rows: 1, Cols: 1}, 3},
	{"qwen27b-small-1x2", qwen27b.Model{}, map[string]string{"config": "../models/qwen27b/testdata/small.json", "device-loop": "true"}, ir.Mesh{Rows: 1, Cols: 2}, 2},
}

// loopRunner is the device-loop part of a model's runner.
type loopRunner interface {
	LoopState(args models.Args, g *ir.Graph, tokens [][]int, pos int) ([]map[*ir.Value][]float32, error)
}

// startLoop writes the device loop's first tokens and position.
func (r *stepRun) startLoop(t *testing.T, tokens [][]int) {
	t.Helper()
	lr, ok := r.runner.(loopRunner)
	if !ok {
		t.Fatalf("runner %T has no device loop", r.runner)
	}
	loop, err := lr.LoopState(r.args, r.g, tokens, 0)
	if err != nil {
		t.Fatal(err)
	}
	for d, m := range loop {
		for v, data := range m {
			if err := r.exe.UploadTo(d, v, data); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// state is every output and state of r, device by device.
func (r *stepRun) state(t *testing.T) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	vals := append(append([]*ir.Value{}, r.g.Outputs...), r.g.States...)
	for i, v := range vals {
		for d := 0; d < r.exe.Mesh.Devices(); d++ {
			data, err := r.exe.DownloadFrom(d, v)
			if err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%d %s@%d", i, v.Name, d)] = data
		}
	}
	return out
}

// TestPersistentLoopIsBitIdentical: ONE launch of the multi-step
// persistent program (BuildLoop) runs the steps the per-program device
// loop runs one launch per program: the token history holds every step's
// tokens as the per-program run produced them, and the final outputs and
// state are bit-identical.
func TestPersistentLoopIsBitIdentical(t *testing.T) {
	for _, sm := range loopModels {
		t.Run(sm.name, func(t *testing.T) {
			if sm.name != "tiny-mlp" {
				longtest.Skip(t, "the small qwen27b config's steps in one launch (~14 CPU-s each; tiny-mlp runs in the default run)")
			}
			ref, per := loadModel(t, sm, false), loadModel(t, sm, false)
			if len(ref.g.Inputs) != 0 {
				t.Fatalf("%s: the device-loop graph takes %d inputs, want none", sm.name, len(ref.g.Inputs))
			}
			if _, err := per.exe.LoadPersistentLoop(sm.steps, per.g.Outputs[1]); err != nil {
				t.Fatal(err)
			}
			start := [][]int{{3}}
			if b := ref.g.Outputs[1].Type.Shape[0]; b > 1 {
				start = make([][]int, b)
				for i := range start {
					start[i] = []int{i + 1}
				}
			}
			ref.startLoop(t, start)
			per.startLoop(t, start)
			var want [][]float32
			for s := 0; s < sm.steps; s++ {
				if err := ref.exe.Run(); err != nil {
					t.Fatalf("per-program step %d: %v", s, err)
				}
				next, err := ref.exe.Download(ref.g.Outputs[1])
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, next)
			}
			if err := per.exe.RunPersistent(); err != nil {
				t.Fatal(err)
			}
			for d := 0; d < per.exe.Mesh.Devices(); d++ {
				got, err := per.exe.History(d)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("device %d: token history %v, per-program steps' tokens %v", d, got, want)
				}
			}
			if d := firstDiff(ref.state(t), per.state(t)); d != "" {
				t.Errorf("after %d steps in one launch: %s", sm.steps, d)
			}
		})
	}
}
