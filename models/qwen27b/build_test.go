package qwen27b

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/config"
)

func mesh(n int) ir.Mesh { return ir.Mesh{Rows: 1, Cols: n} }

func build27B(t testing.TB, n int) (*ir.Graph, *Counts) {
	t.Helper()
	g, c, err := BuildGraph(DefaultOptions(), mesh(n))
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

// TestWeightNames27B checks the 851 checkpoint names: 2 + 1 + 48*(9+2+3) +
// 16*(6+2+3), each once.
func TestWeightNames27B(t *testing.T) {
	g, _ := build27B(t, 2)
	if got, want := len(g.Weights), 2+1+48*(9+2+3)+16*(6+2+3); got != want || want != 851 {
		t.Fatalf("%d weights, want %d (= 851)", got, want)
	}
	var want []string
	want = append(want, "model.language_model.embed_tokens.weight", "model.language_model.norm.weight", "lm_head.weight")
	for i := 0; i < 64; i++ {
		p := fmt.Sprintf("model.language_model.layers.%d.", i)
		want = append(want, p+"input_layernorm.weight", p+"post_attention_layernorm.weight",
			p+"mlp.gate_proj.weight", p+"mlp.up_proj.weight", p+"mlp.down_proj.weight")
		if i%4 == 3 {
			for _, s := range []string{"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "q_norm.weight", "k_norm.weight"} {
				want = append(want, p+"self_attn."+s)
			}
		} else {
			for _, s := range []string{"in_proj_qkv.weight", "in_proj_z.weight", "in_proj_a.weight", "in_proj_b.weight", "conv1d.weight", "A_log", "dt_bias", "norm.weight", "out_proj.weight"} {
				want = append(want, p+"linear_attn."+s)
			}
		}
	}
	var got []string
	seen := map[string]bool{}
	for _, w := range g.Weights {
		if seen[w.Name] {
			t.Errorf("duplicate weight %q", w.Name)
		}
		seen[w.Name] = true
		got = append(got, w.Name)
	}
	sort.Strings(want)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("weight names (-want +got):\n%s", diff)
	}
	if got := len(g.States); got != 48*2+16*2 {
		t.Errorf("%d states, want %d", got, 48*2+16*2)
	}
}

// TestLayerCounts1x2 compares the per-device op counts at mesh 1x2 with the
// measured composed path (71 per GDN mixer, 44 per attention mixer, 7 per
// MLP; 4,560 programs per step for mixers and MLPs). The exact values are
// the ones explained in doc.go.
func TestLayerCounts1x2(t *testing.T) {
	g, c := build27B(t, 2)
	if g.NumOps() != c.Total() {
		t.Fatalf("graph has %d ops, counts add to %d", g.NumOps(), c.Total())
	}
	mixerMLP := 0
	for _, l := range c.Layers {
		mixerMLP += l.Mixer + l.MLP
	}
	gdn, attn := c.Layers[0], c.Layers[3]
	t.Logf("per device at 1x2: GDN layer: mixer %d (measured 71), MLP %d (7), norms+residuals %d, total %d", gdn.Mixer, gdn.MLP, gdn.NormResidual, gdn.Total())
	t.Logf("attention layer: mixer %d (measured 44), MLP %d (7), norms+residuals %d, total %d", attn.Mixer, attn.MLP, attn.NormResidual, attn.Total())
	t.Logf("GDN parts %v", gdn.Parts)
	t.Logf("attention parts %v", attn.Parts)
	t.Logf("mixers+MLPs %d (measured 4,560); whole step %d (embed %d, head %d)", mixerMLP, c.Total(), c.Embed, c.Head)
	for _, l := range c.Layers {
		ref := map[config.LayerKind]LayerCount{config.GDN: gdn, config.Attention: attn}[l.Kind]
		if l.Mixer != ref.Mixer || l.MLP != ref.MLP || l.NormResidual != ref.NormResidual {
			t.Errorf("layer %d (%s) counts %d/%d/%d differ from layer %d's", l.Index, l.Kind, l.Mixer, l.MLP, l.NormResidual, ref.Index)
		}
	}
	checks := []struct {
		name          string
		got, lo, hi   int
		exact, actual int
	}{
		{"GDN mixer", gdn.Mixer, 60, 76, 63, gdn.Mixer},
		{"attention mixer", attn.Mixer, 38, 48, 41, attn.Mixer},
		{"MLP", gdn.MLP, 7, 7, 7, attn.MLP},
		{"norms and residuals", gdn.NormResidual, 4, 6, 5, attn.NormResidual},
		{"mixers+MLPs", mixerMLP, 4100, 4700, 4128, mixerMLP},
		{"whole step", c.Total(), 4300, 4800, 4454, c.Total()},
	}
	for _, ch := range checks {
		if ch.got < ch.lo || ch.got > ch.hi {
			t.Errorf("%s: %d ops, outside %d..%d", ch.name, ch.got, ch.lo, ch.hi)
		}
		if ch.actual != ch.exact {
			t.Errorf("%s: %d ops, doc.go explains %d", ch.name, ch.actual, ch.exact)
		}
	}
	if c.Embed != 2 || c.Head != 4 {
		t.Errorf("embed %d ops (want 2: embedding, reshape), head %d (want 4: norm, lm_head, all_gather, argmax)", c.Embed, c.Head)
	}
}

// TestMeshes builds the 27B on every supported mesh and checks the
// collectives and the per-device head counts; unsupported meshes fail with
// a message naming the rule.
func TestMeshes(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(mesh(n).String(), func(t *testing.T) {
			g, c := build27B(t, n)
			if g.Mesh != mesh(n) {
				t.Errorf("graph mesh %s", g.Mesh)
			}
			byOp := map[string]int{}
			for _, op := range g.Ops() {
				byOp[op.Name()]++
			}
			coll := 0
			if n > 1 {
				coll = 1
			}
			want := map[string]int{"all_reduce": 64 * coll, "reduce_scatter": 64 * coll, "all_gather": 65 * coll}
			got := map[string]int{"all_reduce": byOp["all_reduce"], "reduce_scatter": byOp["reduce_scatter"], "all_gather": byOp["all_gather"]}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("collectives (-want +got):\n%s", diff)
			}
			rec := valueByName(g, "state.layers.0.recurrent").Type.Shape
			if rec[1] != 48/n {
				t.Errorf("recurrent state %s, want %d value heads", rec, 48/n)
			}
			kc := valueByName(g, "state.layers.3.k_cache").Type.Shape
			if want := max(1, 4/n); kc[1] != want {
				t.Errorf("k cache %s, want %d kv heads", kc, want)
			}
			t.Logf("1x%d: %d ops per device", n, c.Total())
			wantCounts := map[bool][4]int{true: {62, 40, 6, 4261}, false: {63, 41, 7, 4454}}[n == 1]
			if got := [4]int{c.Layers[0].Mixer, c.Layers[3].Mixer, c.Layers[0].MLP, c.Total()}; got != wantCounts {
				t.Errorf("GDN mixer, attention mixer, MLP, total = %v, doc.go says %v", got, wantCounts)
			}
		})
	}
	for _, tc := range []struct {
		m    ir.Mesh
		want string
	}{
		{mesh(5), "mesh 1x5: num_attention_heads 24 is not divisible by 5 devices"},
		{mesh(3), "mesh 1x3: num_key_value_heads 4 is neither divisible by 3 devices nor replicable"},
		{mesh(16), "mesh 1x16: num_attention_heads 24 is not divisible by 16 devices"},
		{ir.Mesh{Rows: 2, Cols: 2}, "mesh 2x2: only 1xN meshes"},
	} {
		t.Run(tc.m.String(), func(t *testing.T) {
			_, _, err := BuildGraph(DefaultOptions(), tc.m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func valueByName(g *ir.Graph, name string) *ir.Value {
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			if v.Name == name {
				return v
			}
		}
	}
	return nil
}

// TestPerDeviceShapes1x2 checks the per-card shapes of reference/qwen27b.md.
func TestPerDeviceShapes1x2(t *testing.T) {
	g, _ := build27B(t, 2)
	p := "model.language_model.layers."
	split1, split0, split2 := ir.Dist{Axis: 1}, ir.Dist{Axis: 0}, ir.Dist{Axis: 2}
	tests := []struct {
		name  string
		shape ir.Shape
		dt    ir.DType
		dist  ir.Dist
	}{
		{p + "0.linear_attn.in_proj_qkv.weight", ir.Shape{5120, 5120}, ir.BFP8B, split1}, // q|k|v 1024|1024|3072
		{p + "0.linear_attn.in_proj_z.weight", ir.Shape{5120, 3072}, ir.BFP8B, split1},
		{p + "0.linear_attn.in_proj_a.weight", ir.Shape{5120, 24}, ir.BFP8B, split1},
		{p + "0.linear_attn.in_proj_b.weight", ir.Shape{5120, 24}, ir.BFP8B, split1},
		{p + "0.linear_attn.conv1d.weight", ir.Shape{4, 5120}, ir.BF16, split1},
		{p + "0.linear_attn.A_log", ir.Shape{24}, ir.BF16, split0},
		{p + "0.linear_attn.norm.weight", ir.Shape{128}, ir.BF16, ir.Replicated},
		{p + "0.linear_attn.out_proj.weight", ir.Shape{3072, 5120}, ir.BFP8B, split0},
		{p + "3.self_attn.q_proj.weight", ir.Shape{5120, 6144}, ir.BFP8B, split1}, // q and gate, 12 heads
		{p + "3.self_attn.k_proj.weight", ir.Shape{5120, 512}, ir.BFP8B, split1},
		{p + "3.self_attn.o_proj.weight", ir.Shape{3072, 5120}, ir.BFP8B, split0},
		{p + "3.self_attn.q_norm.weight", ir.Shape{256}, ir.BF16, ir.Replicated},
		{p + "5.mlp.gate_proj.weight", ir.Shape{5120, 8704}, ir.BFP4B, split1},
		{p + "5.mlp.down_proj.weight", ir.Shape{8704, 5120}, ir.BFP8B, split0},
		{p + "5.input_layernorm.weight", ir.Shape{5120}, ir.BF16, ir.Replicated},
		{"model.language_model.embed_tokens.weight", ir.Shape{248320, 5120}, ir.BF16, ir.Replicated},
		{"lm_head.weight", ir.Shape{5120, 124160}, ir.BFP8B, split1},
		{"state.layers.0.conv", ir.Shape{1, 3, 5120}, ir.BF16, ir.Dist{Axis: 2}},
		{"state.layers.0.recurrent", ir.Shape{1, 24, 128, 128}, ir.FP32, split1},
		{"state.layers.3.v_cache", ir.Shape{1, 2, 128, 256}, ir.BF16, split1},
		{"tokens", ir.Shape{1}, ir.UInt32, ir.Replicated},
		{"pos", ir.Shape{1}, ir.UInt32, ir.Replicated},
		{"rope.cos", ir.Shape{1, 64}, ir.BF16, ir.Replicated},
	}
	for _, tc := range tests {
		v := valueByName(g, tc.name)
		if v == nil {
			t.Errorf("%s: not declared", tc.name)
			continue
		}
		if !v.Type.Shape.Equal(tc.shape) || v.Type.DType != tc.dt || v.Type.Dist != tc.dist {
			t.Errorf("%s: %s %s %s, want %s %s %s", tc.name, v.Type.Shape, v.Type.DType, v.Type.Dist, tc.shape, tc.dt, tc.dist)
		}
	}
	// The logits are each card's vocab shard, joined on the host (the
	// argmax runs sharded: no logits all_gather on the cards).
	if len(g.Outputs) != 2 || !g.Outputs[0].Type.Shape.Equal(ir.Shape{1, 1, 124160}) || g.Outputs[0].Type.Dist != split2 || g.Outputs[1].Type.DType != ir.UInt32 || !g.Outputs[1].Type.Shape.Equal(ir.Shape{1, 1, 1}) {
		t.Errorf("outputs %v %v", g.Outputs[0].Type, g.Outputs[1].Type)
	}
}

func TestRegions(t *testing.T) {
	g, _ := build27B(t, 2)
	rs := g.Regions
	if len(rs) != 66 || rs[0].Kind != "embed" || rs[0].Index != -1 || rs[65].Kind != "head" || rs[65].Index != -1 {
		t.Fatalf("regions: %d, first %s, last %s", len(rs), rs[0].Label(), rs[len(rs)-1].Label())
	}
	for i, r := range g.Layers() {
		want := ir.RegionKind("gdn")
		if i%4 == 3 {
			want = "attention"
		}
		if r.Index != i || r.Kind != want {
			t.Errorf("layer region %d is %s, want layer %d (%s)", i, r.Label(), i, want)
		}
		// The layer's norms, residual adds and MLP live in its region:
		// it starts with the input norm and ends with the second residual add.
		first, last := r.Ops[0], r.Ops[len(r.Ops)-1]
		if first.Kind != ir.OpRMSNorm || last.Kind != ir.OpAdd {
			t.Errorf("%s runs %s..%s, want rms_norm..add", r.Label(), first.Name(), last.Name())
		}
	}
}

func TestSmallConfig(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(mesh(n).String(), func(t *testing.T) {
			m, _ := models.Lookup("qwen27b")
			a, err := models.DefaultArgs(m, map[string]string{"config": "testdata/small.json", "batch": "2", "max-seq": "64"})
			if err != nil {
				t.Fatal(err)
			}
			g, err := m.Build(a, mesh(n))
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Layers()) != 8 || len(g.Weights) != 2+1+6*14+2*11 {
				t.Errorf("%d layers, %d weights", len(g.Layers()), len(g.Weights))
			}
		})
	}
	o, err := OptionsFrom(models.Args{"config": "testdata/small.json", "batch": "1", "max-seq": "64", "mode": "decode", "seq": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := BuildGraph(o, mesh(8)); err == nil || !strings.Contains(err.Error(), "mesh 1x8: linear_num_key_heads 4 is not divisible by 8 devices") {
		t.Errorf("small config on 1x8: %v", err)
	}
}

func TestOptionErrors(t *testing.T) {
	m := Model{}
	tests := []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"batch": "0"}, "--batch 0"},
		{map[string]string{"batch": "33"}, "--batch 33"},
		{map[string]string{"batch": "x"}, "not an integer"},
		{map[string]string{"max-seq": "100"}, "--max-seq 100 must be a positive multiple of 32"},
		{map[string]string{"max-seq": "524288"}, "exceeds the model's max_position_embeddings 262144"},
		{map[string]string{"mode": "train"}, `--mode "train"`},
		{map[string]string{"mode": "prefill", "seq": "0"}, "--seq 0"},
		{map[string]string{"mode": "prefill", "seq": "256"}, "--seq 256 must be in 1..--max-seq 128"},
		{map[string]string{"config": "testdata/missing.json"}, "missing.json"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			a, err := models.DefaultArgs(m, tc.set)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Build(a, mesh(2))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// BenchmarkBuild27B builds and verifies the full 64-layer decode graph at
// mesh 1x2 (BuildGraph verifies through Builder.Finish).
func BenchmarkBuild27B(b *testing.B) {
	o := DefaultOptions()
	for b.Loop() {
		g, _, err := BuildGraph(o, mesh(2))
		if err != nil {
			b.Fatal(err)
		}
		if err := ir.Verify(g); err != nil {
			b.Fatal(err)
		}
	}
}
