package qwen27b

import (
	"math/rand"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models/nn/nntest"
)

// TestPrefillMatchesDecode prefills five tokens per user of the small
// config (on one and two devices) and checks the last token's logits, the
// next token and every state against five decode steps on one device.
func TestPrefillMatchesDecode(t *testing.T) {
	const seq = 5
	dec := smallOptions(t)
	pre := dec
	pre.Mode, pre.Seq = Prefill, seq
	gd, _, err := BuildGraph(dec, mesh(1))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(3))
	whole := map[string][]float32{}
	envD := nntest.Env{}
	for _, list := range [][]*ir.Value{gd.Weights, gd.States} {
		for _, v := range list {
			whole[v.Name] = Model{}.InitWeight(v, rng)
			envD[v] = nntest.FromF32(v.Type.Shape, whole[v.Name])
		}
	}
	tokens := [][]int{{1, 7, 300, 2047, 9}, {4, 4, 1000, 5, 6}}
	c := dec.Config
	for s := 0; s < seq; s++ {
		stepInputs(t, gd, []nntest.Env{envD}, c, []int{tokens[0][s], tokens[1][s]}, s)
		if err := nntest.Run(gd, []nntest.Env{envD}); err != nil {
			t.Fatal(err)
		}
		for st, v := range gd.StateUpdates {
			envD[st] = envD[v]
		}
	}
	for _, n := range []int{1, 2} {
		t.Run(mesh(n).String(), func(t *testing.T) {
			gp, counts, err := BuildGraph(pre, mesh(n))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("prefill %d tokens on %s: %d ops per device", seq, mesh(n), counts.Total())
			envs := make([]nntest.Env, n)
			cos, sin := RopePrefillTables(c.RotaryDim(), c.RopeTheta, 0, seq)
			for d := range envs {
				envs[d] = nntest.Env{}
				for _, list := range [][]*ir.Value{gp.Weights, gp.States} {
					for _, v := range list {
						sh, err := ShareOf(c, v.Name, n)
						if err != nil {
							t.Fatal(err)
						}
						part, shape, err := sh.Cut(whole[v.Name], valueByName(gd, v.Name).Type.Shape, d, n)
						if err != nil {
							t.Fatal(err)
						}
						envs[d][v] = nntest.FromF32(shape, part)
					}
				}
				for _, v := range gp.Inputs {
					switch v.Name {
					case "tokens":
						tt := nntest.New(2, seq)
						for b, row := range tokens {
							for s, id := range row {
								tt.Data[b*seq+s] = float64(id)
							}
						}
						envs[d][v] = tt
					case "pos":
						envs[d][v] = nntest.Tensor{Shape: ir.Shape{1}, Data: []float64{0}}
					case "rope.cos":
						envs[d][v] = nntest.FromF32(v.Type.Shape, cos)
					case "rope.sin":
						envs[d][v] = nntest.FromF32(v.Type.Shape, sin)
					}
				}
			}
			if err := nntest.Run(gp, envs); err != nil {
				t.Fatal(err)
			}
			for d, env := range envs {
				assertClose(t, "logits", envD[gd.Outputs[0]].Data, env[gp.Outputs[0]].Data)
				assertClose(t, "next token", envD[gd.Outputs[1]].Data, env[gp.Outputs[1]].Data)
				for _, s := range gp.States {
					want := envD[valueByName(gd, s.Name)]
					f := make([]float32, len(want.Data))
					for i, x := range want.Data {
						f[i] = float32(x)
					}
					sh, _ := ShareOf(c, s.Name, n)
					part, _, err := sh.Cut(f, want.Shape, d, n)
					if err != nil {
						t.Fatal(err)
					}
					wf := make([]float64, len(part))
					for i, x := range part {
						wf[i] = float64(x)
					}
					assertClose(t, s.Name, wf, env[gp.StateUpdates[s]].Data)
				}
			}
		})
	}
}

func TestPrefill27B(t *testing.T) {
	o := DefaultOptions()
	o.Mode, o.Seq = Prefill, 128
	g, c, err := BuildGraph(o, mesh(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("27B prefill of 128 tokens at 1x2: %d ops per device; GDN layer %d (mixer %d), attention layer %d (mixer %d)",
		c.Total(), c.Layers[0].Total(), c.Layers[0].Mixer, c.Layers[3].Total(), c.Layers[3].Mixer)
	if c.Total() != 7062 {
		t.Errorf("%d ops, doc.go says 7,062", c.Total())
	}
	if tok := valueByName(g, "tokens").Type.Shape; !tok.Equal(ir.Shape{1, 128}) {
		t.Errorf("tokens %s", tok)
	}
	if !g.Outputs[0].Type.Shape.Equal(ir.Shape{1, 1, 248320}) {
		t.Errorf("logits %s", g.Outputs[0].Type.Shape)
	}
}
