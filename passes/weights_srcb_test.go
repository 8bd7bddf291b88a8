package passes

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
)

// WeightsOnSrcB lists a block-float weight only matmuls read as a weight;
// a weight an exp also reads, a bf16 weight and a rank-1 weight keep
// tile layout; StoreWeightsOnSrcB marks the named ones and the graph
// still verifies, its matmul then at HiFi2.
func TestWeightsOnSrcBTable(t *testing.T) {
	b := ir.NewBuilder("t")
	x := b.Input("x", ir.T(ir.BF16, 32, 64))
	only := b.Weight("only", ir.T(ir.BFP8B, 64, 64))
	shared := b.Weight("shared", ir.T(ir.BFP8B, 64, 64))
	plain := b.Weight("plain", ir.T(ir.BF16, 64, 64))
	norm := b.Weight("norm", ir.T(ir.BF16, 64))
	b.Region("mlp", 0)
	y := b.Matmul(x, only)
	z := b.Matmul(b.RMSNorm(y, norm, 1e-6, 0), shared)
	b.Output(b.Matmul(z, plain))
	b.Output(b.Exp(shared))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range WeightsOnSrcB(g) {
		got = append(got, w.Name)
	}
	if diff := cmp.Diff([]string{"only"}, got); diff != "" {
		t.Errorf("WeightsOnSrcB (-want +got):\n%s", diff)
	}
	if n := StoreWeightsOnSrcB(g, []string{"only", "shared"}); n != 1 || !only.Type.TilesTransposed || shared.Type.TilesTransposed {
		t.Errorf("StoreWeightsOnSrcB marked %d (only %v, shared %v); want 1: only", n, only.Type.TilesTransposed, shared.Type.TilesTransposed)
	}
	if err := ir.Verify(g); err != nil {
		t.Error(err)
	}
	if f, err := ir.OpFidelity(y.Def, ir.HiFi4); err != nil || f != ir.HiFi2 {
		t.Errorf("OpFidelity of the matmul reading only = %v, %v; want HiFi2", f, err)
	}
}

// qwen27b's table (small config, mesh 1x2, prefill and decode graphs
// after the default pipeline): every projection of the GDN, attention and
// MLP blocks, and not lm_head (the decode graph reads it in a fused head),
// a norm, the convolution or the embedding.
func TestWeightNamesOnSrcBQwen(t *testing.T) {
	var gs []*ir.Graph
	for _, mode := range []string{"decode", "prefill"} {
		seq := map[string]string{"decode": "1", "prefill": "64"}[mode]
		o, err := qwen27b.OptionsFrom(models.Args{"config": "../models/qwen27b/testdata/small.json", "batch": "1", "max-seq": "128", "mode": mode, "seq": seq})
		if err != nil {
			t.Fatal(err)
		}
		g, _, err := qwen27b.BuildGraph(o, ir.Mesh{Rows: 1, Cols: 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(g, Options{}); err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	names := WeightNamesOnSrcB(gs...)
	const p = "model.language_model.layers."
	var layer0, layer3 []string
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, p+"0."):
			layer0 = append(layer0, strings.TrimPrefix(n, p+"0."))
		case strings.HasPrefix(n, p+"3."):
			layer3 = append(layer3, strings.TrimPrefix(n, p+"3."))
		case !strings.HasPrefix(n, p):
			t.Errorf("%s is not a decoder layer's projection", n)
		}
	}
	mlp := []string{"mlp.down_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight"}
	wantGDN := append([]string{"linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight", "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.out_proj.weight"}, mlp...)
	wantAttn := append(slices.Clone(mlp), "self_attn.k_proj.weight", "self_attn.o_proj.weight", "self_attn.q_proj.weight", "self_attn.v_proj.weight")
	if diff := cmp.Diff(wantGDN, layer0); diff != "" {
		t.Errorf("layer 0 (GDN) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantAttn, layer3); diff != "" {
		t.Errorf("layer 3 (attention) (-want +got):\n%s", diff)
	}
	if got := WeightsOnSrcB(gs[1]); len(got) != len(names)+1 || got[len(got)-1].Name != "lm_head.weight" {
		t.Errorf("prefill alone lists %d weights, want the %d of both graphs and lm_head last", len(got), len(names))
	}
	for _, g := range gs {
		if n := StoreWeightsOnSrcB(g, names); n != len(names) {
			t.Errorf("StoreWeightsOnSrcB marked %d, want %d", n, len(names))
		}
		if err := ir.Verify(g); err != nil {
			t.Error(err)
		}
	}
}
