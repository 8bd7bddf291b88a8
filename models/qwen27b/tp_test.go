package qwen27b

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/config"
)

func smallOptions(t *testing.T) Options {
	t.Helper()
	o, err := OptionsFrom(models.Args{"config": "testdata/small.json", "batch": "2", "max-seq": "32", "mode": "decode", "seq": "1"})
	if err != nil {
		t.Fatal(err)
	}
	return o
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
