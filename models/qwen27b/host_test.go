package qwen27b

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
)

// TestStepInputsBounded: inputs for a step past the KV cache are an error
// naming the position and the cache length.
func TestStepInputsBounded(t *testing.T) {
	m := Model{}
	args, err := models.DefaultArgs(m, map[string]string{"config": "testdata/small.json", "max-seq": "32"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Build(args, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.StepInputs(args, g, [][]int{{1}}, 31); err != nil {
		t.Fatalf("position 31 of 32: %v", err)
	}
	_, err = m.StepInputs(args, g, [][]int{{1}}, 32)
	if err == nil || !strings.Contains(err.Error(), "position 32") || !strings.Contains(err.Error(), "--max-seq 32") {
		t.Errorf("position 32 of a 32-token cache: err = %v", err)
	}
}

// TestDTypePolicy: the default (fast) keeps MLP gate/up bfp4_b; accurate
// makes them bfp8_b; every other weight's dtype is the same under both.
func TestDTypePolicy(t *testing.T) {
	dtypes := func(policy string) map[string]ir.DType {
		set := map[string]string{"config": "testdata/small.json"}
		if policy != "" {
			set["dtype-policy"] = policy
		}
		a, err := models.DefaultArgs(Model{}, set)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Model{}.Build(a, ir.Mesh{Rows: 1, Cols: 2})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]ir.DType{}
		for _, v := range g.Weights {
			out[v.Name] = v.Type.DType
		}
		return out
	}
	def, fast, acc := dtypes(""), dtypes("fast"), dtypes("accurate")
	gate := LayerPrefix(0) + "mlp.gate_proj.weight"
	up := LayerPrefix(5) + "mlp.up_proj.weight"
	for _, tt := range []struct {
		name string
		got  map[string]ir.DType
		want ir.DType
	}{{"default", def, ir.BFP4B}, {"fast", fast, ir.BFP4B}, {"accurate", acc, ir.BFP8B}} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got[gate] != tt.want || tt.got[up] != tt.want {
				t.Errorf("gate %s, up %s; want %s", tt.got[gate], tt.got[up], tt.want)
			}
			for n, dt := range tt.got {
				if strings.Contains(n, "gate_proj") || strings.Contains(n, "up_proj") {
					continue
				}
				if dt != def[n] {
					t.Errorf("%s: %s, default %s", n, dt, def[n])
				}
			}
		})
	}
	a, _ := models.DefaultArgs(Model{}, map[string]string{"dtype-policy": "tiny"})
	if _, err := OptionsFrom(a); err == nil || !strings.Contains(err.Error(), "--dtype-policy") {
		t.Errorf("bad policy: %v", err)
	}
}

// TestCheckpointNames27B: the full 27B graph reads exactly the 851 text
// tensors of the checkpoint (each once), every source a distinct name.
func TestCheckpointNames27B(t *testing.T) {
	a, err := models.DefaultArgs(Model{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Model{}.Build(a, ir.Mesh{Rows: 1, Cols: 2})
	if err != nil {
		t.Fatal(err)
	}
	info, err := Model{}.HostInfo(a)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range g.Weights {
		src, err := info.WeightSource(v.Name, 2)
		if err != nil {
			t.Fatal(err)
		}
		if seen[src.Tensor] {
			t.Errorf("%s read twice", src.Tensor)
		}
		seen[src.Tensor] = true
	}
	if len(seen) != 851 {
		t.Errorf("%d checkpoint tensors, want the 27B's 851", len(seen))
	}
}
