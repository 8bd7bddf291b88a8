package qwen27b

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/config"
	"github.com/tcc-dev/tcc/models/nn/nntest"
)

func smallOptions(t *testing.T) Options {
	t.Helper()
	o, err := OptionsFrom(models.Args{"config": "testdata/small.json", "batch": "2", "max-seq": "32", "mode": "decode", "seq": "1"})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// step feeds one decode step's inputs into every device env.
func stepInputs(t *testing.T, g *ir.Graph, envs []nntest.Env, c *config.Config, tokens []int, pos int) {
	t.Helper()
	cos, sin := RopeTables(c.RotaryDim(), c.RopeTheta, pos, len(tokens))
	for _, env := range envs {
		for _, v := range g.Inputs {
			switch v.Name {
			case "tokens":
				tt := nntest.New(len(tokens))
				for i, id := range tokens {
					tt.Data[i] = float64(id)
				}
				env[v] = tt
			case "pos":
				env[v] = nntest.Tensor{Shape: ir.Shape{1}, Data: []float64{float64(pos)}}
			case "rope.cos":
				env[v] = nntest.FromF32(v.Type.Shape, cos)
			case "rope.sin":
				env[v] = nntest.FromF32(v.Type.Shape, sin)
			default:
				t.Fatalf("unexpected input %q", v.Name)
			}
		}
	}
}

// TestTensorParallelMatchesOneDevice runs three decode steps of the small
// config on meshes 1x1, 1x2 and 1x4 with the same whole weights (each
// device gets ShareOf's cut) and checks that the logits, the greedy tokens
// and every state agree. This checks the collectives, the shares and the
// vocab padding of the whole model.
func TestTensorParallelMatchesOneDevice(t *testing.T) {
	o := smallOptions(t)
	one, _, err := BuildGraph(o, mesh(1))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	whole := map[string][]float32{}
	for _, list := range [][]*ir.Value{one.Weights, one.States} {
		for _, v := range list {
			whole[v.Name] = Model{}.InitWeight(v, rng)
		}
	}
	type run struct {
		g    *ir.Graph
		envs []nntest.Env
	}
	var runs []run
	for _, n := range []int{1, 2, 4} {
		g, _, err := BuildGraph(o, mesh(n))
		if err != nil {
			t.Fatal(err)
		}
		envs := make([]nntest.Env, n)
		for d := range envs {
			envs[d] = nntest.Env{}
			for _, list := range [][]*ir.Value{g.Weights, g.States} {
				for _, v := range list {
					s, err := ShareOf(o.Config, v.Name, n)
					if err != nil {
						t.Fatal(err)
					}
					wv := valueByName(one, v.Name)
					part, shape, err := s.Cut(whole[v.Name], wv.Type.Shape, d, n)
					if err != nil {
						t.Fatalf("%s: %v", v.Name, err)
					}
					if !shape.Equal(v.Type.Shape) {
						t.Fatalf("%s: share %s, declared %s", v.Name, shape, v.Type.Shape)
					}
					envs[d][v] = nntest.FromF32(shape, part)
				}
			}
		}
		runs = append(runs, run{g, envs})
	}
	one = runs[0].g
	tokens := []int{5, 2000}
	for step := 0; step < 3; step++ {
		for _, r := range runs {
			stepInputs(t, r.g, r.envs, o.Config, tokens, step)
			if err := nntest.Run(r.g, r.envs); err != nil {
				t.Fatal(err)
			}
		}
		ref := runs[0].envs[0]
		logits := ref[one.Outputs[0]].Data
		next := ref[one.Outputs[1]].Data
		for row := 0; row < len(tokens); row++ {
			best := 0
			for j := 1; j < o.Config.VocabSize; j++ {
				if logits[row*o.Config.VocabSize+j] > logits[row*o.Config.VocabSize+best] {
					best = j
				}
			}
			if int(next[row]) != best {
				t.Errorf("step %d user %d: token %v, argmax of logits %d", step, row, next[row], best)
			}
		}
		for _, r := range runs[1:] {
			for d, env := range r.envs {
				assertClose(t, "logits", logits, env[r.g.Outputs[0]].Data)
				for i, tok := range env[r.g.Outputs[1]].Data {
					if tok != next[i] {
						t.Errorf("mesh %s device %d step %d: token %v, one device %v", r.g.Mesh, d, step, tok, next[i])
					}
				}
			}
		}
		// Feed the state updates back and pick the next tokens.
		for _, r := range runs {
			for _, env := range r.envs {
				for s, v := range r.g.StateUpdates {
					env[s] = env[v]
				}
			}
		}
		for i := range tokens {
			tokens[i] = int(next[i])
		}
	}
	// The state updates agree too: compare each device's state with its
	// share of the one-device state.
	for _, r := range runs[1:] {
		n := r.g.Mesh.Devices()
		for d, env := range r.envs {
			for _, s := range r.g.States {
				w := valueByName(one, s.Name)
				f := make([]float32, w.Type.Shape.Numel())
				for i, x := range runs[0].envs[0][w].Data {
					f[i] = float32(x)
				}
				sh, _ := ShareOf(o.Config, s.Name, n)
				want, _, err := sh.Cut(f, w.Type.Shape, d, n)
				if err != nil {
					t.Fatal(err)
				}
				got := env[s].Data
				wf := make([]float64, len(want))
				for i, x := range want {
					wf[i] = float64(x)
				}
				assertClose(t, s.Name, wf, got)
			}
		}
	}
}

// assertClose allows float32 rounding of the state comparison and 1e-9
// of the largest magnitude otherwise.
func assertClose(t *testing.T, what string, want, got []float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 1e-30
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	for i := range want {
		if math.Abs(want[i]-got[i]) > 1e-6*scale {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestShareOfErrors(t *testing.T) {
	c := config.Default27B()
	for _, name := range []string{"nope", "model.language_model.layers.64.mlp.up_proj.weight", "model.language_model.layers.3.linear_attn.A_log", "state.layers.x.conv"} {
		if _, err := ShareOf(c, name, 2); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	if _, err := ShareOf(c, "lm_head.weight", 5); err == nil {
		t.Error("mesh 1x5 accepted")
	}
	s, err := ShareOf(c, "model.language_model.layers.3.self_attn.k_proj.weight", 8)
	if err != nil || s.Parts != 4 || s.Axis != 1 {
		t.Errorf("k_proj on 1x8: %+v, %v; want 4 parts on axis 1", s, err)
	}
}

func TestRopeTables(t *testing.T) {
	cos, sin := RopeTables(4, 100, 3, 2)
	// inv_freq = [1, 100^-0.5 = 0.1], repeated: angles 3, 0.3, 3, 0.3.
	want := []float64{math.Cos(3), math.Cos(0.3), math.Cos(3), math.Cos(0.3)}
	for b := 0; b < 2; b++ {
		for i, w := range want {
			if math.Abs(float64(cos[b*4+i])-w) > 1e-6 {
				t.Errorf("cos[%d][%d] = %v, want %v", b, i, cos[b*4+i], w)
			}
		}
	}
	if math.Abs(float64(sin[1])-math.Sin(0.3)) > 1e-6 {
		t.Errorf("sin[0][1] = %v, want %v", sin[1], math.Sin(0.3))
	}
	cos0, sin0 := RopeTables(64, 1e7, 0, 1)
	for i := range cos0 {
		if cos0[i] != 1 || sin0[i] != 0 {
			t.Fatalf("position 0: cos %v sin %v at %d", cos0[i], sin0[i], i)
		}
	}
}

func TestInitWeight(t *testing.T) {
	g, _, err := BuildGraph(smallOptions(t), mesh(1))
	if err != nil {
		t.Fatal(err)
	}
	mean := func(x []float32) (m, sd float64) {
		for _, v := range x {
			m += float64(v)
		}
		m /= float64(len(x))
		for _, v := range x {
			sd += (float64(v) - m) * (float64(v) - m)
		}
		return m, math.Sqrt(sd / float64(len(x)))
	}
	p := "model.language_model.layers.0."
	tests := []struct {
		name           string
		mean, sd, tolM float64
		lo, hi         float64 // bounds on every value when lo < hi
	}{
		{p + "linear_attn.A_log", 0, 0, -1, 0, math.Log(16)},
		{p + "linear_attn.norm.weight", 1, 0.1, 0.05, 0, 0},
		{p + "input_layernorm.weight", 0, 0.1, 0.03, 0, 0},
		{p + "linear_attn.conv1d.weight", 0, 0.5, 0.03, 0, 0},
		{p + "linear_attn.in_proj_qkv.weight", 0, 1 / math.Sqrt(256), 0.01, 0, 0},
		{p + "mlp.down_proj.weight", 0, 1 / math.Sqrt(512), 0.01, 0, 0},
		{"state.layers.0.recurrent", 0, 1 / math.Sqrt(32), 0.01, 0, 0},
	}
	for _, tc := range tests {
		v := valueByName(g, tc.name)
		x := Model{}.InitWeight(v, rand.New(rand.NewSource(1)))
		if len(x) != v.Type.Shape.Numel() {
			t.Fatalf("%s: %d values for %s", tc.name, len(x), v.Type.Shape)
		}
		y := Model{}.InitWeight(v, rand.New(rand.NewSource(1)))
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s: not deterministic", tc.name)
			}
		}
		m, sd := mean(x)
		if tc.tolM >= 0 && (math.Abs(m-tc.mean) > tc.tolM || math.Abs(sd-tc.sd) > 0.2*tc.sd) {
			t.Errorf("%s: mean %.3f sd %.3f, want %.3f and %.3f", tc.name, m, sd, tc.mean, tc.sd)
		}
		if tc.lo < tc.hi {
			for _, v := range x {
				if float64(v) < tc.lo || float64(v) > tc.hi {
					t.Fatalf("%s: %v outside [%v, %v]", tc.name, v, tc.lo, tc.hi)
				}
			}
		}
	}
}
