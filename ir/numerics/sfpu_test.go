package numerics

import (
	"math"
	"testing"
)

func TestSFPU(t *testing.T) {
	inf := float32(math.Inf(1))
	tests := []struct {
		name string
		got  float32
		want float32
	}{
		{"Exp(0)", Exp(0), 1},
		{"Exp(1)", Exp(1), float32(math.E)},
		{"Exp(-200) underflows", Exp(-200), 0},
		{"Exp(100) overflows", Exp(100), inf},
		{"Sigmoid(0)", Sigmoid(0), 0.5},
		{"Sigmoid(2)", Sigmoid(2), float32(1 / (1 + math.Exp(-2)))},
		{"Sigmoid(-1000)", Sigmoid(-1000), 0},
		{"Sigmoid(1000)", Sigmoid(1000), 1},
		{"Sigmoid(-Inf)", Sigmoid(-inf), 0},
		{"SiLU(0)", SiLU(0), 0},
		{"SiLU(1)", SiLU(1), float32(1 / (1 + math.Exp(-1)))},
		{"SiLU(-1)", SiLU(-1), float32(-1 / (1 + math.Exp(1)))},
		{"SiLU(100)", SiLU(100), 100},
		{"Rsqrt(4)", Rsqrt(4), 0.5},
		{"Rsqrt(0)", Rsqrt(0), inf},
		{"Rsqrt(Inf)", Rsqrt(inf), 0},
		{"Recip(4)", Recip(4), 0.25},
		{"Recip(-0)", Recip(float32(math.Copysign(0, -1))), -inf},
		{"Recip(3)", Recip(3), float32(1.0 / 3)},
		{"Softplus(0)", Softplus(0, 1, 20), float32(math.Ln2)},
		{"Softplus above threshold is x", Softplus(25, 1, 20), 25},
		{"Softplus at threshold uses formula", Softplus(1, 1, 1), float32(math.Log1p(math.E))}, // 1.3132616
		{"Softplus beta", Softplus(1, 2, 20), float32(math.Log1p(math.Exp(2)) / 2)},
		{"Softplus very negative", Softplus(-100, 1, 20), float32(math.Exp(-100))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %.9g, want %.9g", tt.got, tt.want)
			}
		})
	}
	if !math.IsNaN(float64(Rsqrt(-1))) {
		t.Errorf("Rsqrt(-1) is not NaN")
	}
	if !math.IsNaN(float64(Sigmoid(float32(math.NaN())))) {
		t.Errorf("Sigmoid(NaN) is not NaN")
	}
}
