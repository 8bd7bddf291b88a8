package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

func mlpBlock(t *testing.T, hidden, inter, devices int) block {
	return buildBlock(t, devices, func(c Ctx) *ir.Value {
		x := c.B.Input("x", ir.T(ir.BF16, 2, 1, hidden))
		w := DeclareMLP(c.B, "l.", hidden, inter, c.TP)
		return c.TP.Gather(c.B, SwiGLU(c, x, w))
	})
}

// TestSwiGLU checks the MLP against down(silu(x gate) * (x up)) and its
// split over two devices, with a reduce_scatter (hidden 64) and with the
// all_reduce fallback (hidden 48 does not split into whole tiles).
func TestSwiGLU(t *testing.T) {
	const inter = 128
	for _, hidden := range []int{64, 48} {
		one := mlpBlock(t, hidden, inter, 1)
		rng := rand.New(rand.NewSource(3))
		w := whole{}
		for _, name := range one.names() {
			s := one.byName[name].Type.Shape
			w[name] = randTensor(rng, s, 0, 1/math.Sqrt(float64(s[0])))
		}
		w["x"] = randTensor(rng, one.byName["x"].Type.Shape, 0, 1)
		many := mlpBlock(t, hidden, inter/2, 2)
		for _, m := range modes {
			t.Run(fmt.Sprintf("hidden%d/%s", hidden, m.name), func(t *testing.T) {
				res := one.eval1(t, w, m.opts)
				in := one.stored(res)
				var want []float64
				for b := 0; b < 2; b++ {
					xb := in["x"][b*hidden : (b+1)*hidden]
					g := vecMat(xb, in["l.mlp.gate_proj.weight"], inter)
					u := vecMat(xb, in["l.mlp.up_proj.weight"], inter)
					for i := range g {
						g[i] = silu(g[i]) * u[i]
					}
					want = append(want, vecMat(g, in["l.mlp.down_proj.weight"], hidden)...)
				}
				m.compare(t, "mlp", want, res[one.out].Data)
				tpMatches(t, m, one, many, w, MLPShares(2))
			})
		}
		wantOps := map[int]string{
			64: "to_memory matmul silu matmul mul matmul reduce_scatter all_gather",
			48: "to_memory matmul silu matmul mul matmul all_reduce",
		}[hidden]
		if got := opNames(many.g); got != wantOps {
			t.Errorf("hidden %d ops = %q, want %q", hidden, got, wantOps)
		}
	}
}

// TestNorms checks RMSNorm (composed op, offsets 1 and 0), its seven-op
// decomposition and L2Norm against their equations.
func TestNorms(t *testing.T) {
	const rows, n, eps = 4, 64, 1e-6
	tests := []struct {
		name string
		emit func(b *ir.Builder, x, w *ir.Value) *ir.Value
		want func(x, w []float64) []float64
	}{
		{"rms_norm (1+w)", func(b *ir.Builder, x, w *ir.Value) *ir.Value { return RMSNorm(b, x, w, eps, 1) },
			func(x, w []float64) []float64 { return scaled(rmsRow(x, eps), w, 1) }},
		{"rms_norm w", func(b *ir.Builder, x, w *ir.Value) *ir.Value { return RMSNorm(b, x, w, eps, 0) },
			func(x, w []float64) []float64 { return scaled(rmsRow(x, eps), w, 0) }},
		{"rms_norm decomposed", func(b *ir.Builder, x, w *ir.Value) *ir.Value { return RMSNormDecomposed(b, x, w, eps, 1) },
			func(x, w []float64) []float64 { return scaled(rmsRow(x, eps), w, 1) }},
		{"l2norm", func(b *ir.Builder, x, _ *ir.Value) *ir.Value { return L2Norm(b, x, eps) },
			func(x, _ []float64) []float64 { return l2Row(x, eps) }},
	}
	for _, tc := range tests {
		bl := buildBlock(t, 1, func(c Ctx) *ir.Value {
			x := c.B.Input("x", ir.T(ir.BF16, rows, n))
			w := c.B.Weight("w", ir.T(ir.BF16, n))
			return tc.emit(c.B, x, w)
		})
		rng := rand.New(rand.NewSource(4))
		w := whole{"x": randTensor(rng, ir.Shape{rows, n}, 0.5, 2), "w": randTensor(rng, ir.Shape{n}, 0, 0.3)}
		for _, m := range modes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				res := bl.eval1(t, w, m.opts)
				in := bl.stored(res)
				var want []float64
				for r := 0; r < rows; r++ {
					want = append(want, tc.want(in["x"][r*n:(r+1)*n], in["w"])...)
				}
				m.compare(t, "norm", want, res[bl.out].Data)
			})
		}
	}
}

// scaled returns x[i] * (w[i] + offset).
func scaled(x, w []float64, offset float64) []float64 {
	out := make([]float64, len(x))
	for i := range x {
		out[i] = x[i] * (w[i] + offset)
	}
	return out
}
