package tinymlp

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
)

func TestBuildDefault(t *testing.T) {
	m, err := models.Lookup("tiny-mlp")
	if err != nil {
		t.Fatal(err)
	}
	a, err := models.DefaultArgs(m, map[string]string{"layers": "3"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Build(a, ir.Mesh{Rows: 1, Cols: 1})
	if err != nil {
		t.Fatal(err)
	}
	// embed 1 + per layer (7 norm: square, mean, +eps, rsqrt, mul, 1+w, mul;
	// 6 mlp: gate, silu, up, mul, down, residual add) + head (7 norm + lm_head + argmax).
	if got, want := g.NumOps(), 1+3*13+9; got != want {
		t.Errorf("NumOps = %d, want %d", got, want)
	}
	if got := len(g.Layers()); got != 3 {
		t.Errorf("layers = %d, want 3", got)
	}
	if len(g.Outputs) != 2 || g.Outputs[0].Type.Shape[1] != 512 || g.Outputs[1].Type.DType != ir.UInt32 {
		t.Errorf("outputs = %v", g.Outputs)
	}
}

func TestBadSizes(t *testing.T) {
	m := Model{}
	tests := []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"hidden": "100"}, "multiples of 32"},
		{map[string]string{"layers": "0"}, "--layers"},
		{map[string]string{"batch": "40"}, "--batch"},
		{map[string]string{"vocab": "x"}, "not an integer"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			a, err := models.DefaultArgs(m, tc.set)
			if err == nil {
				_, err = m.Build(a, ir.Mesh{Rows: 1, Cols: 1})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := models.DefaultArgs(m, map[string]string{"nope": "1"}); err == nil {
		t.Error("unknown parameter accepted")
	}
	if _, err := m.Build(models.Args{"layers": "1", "hidden": "32", "intermediate": "32", "vocab": "32", "batch": "1"}, ir.Mesh{Rows: 1, Cols: 2}); err == nil {
		t.Error("mesh 1x2 accepted")
	}
}
