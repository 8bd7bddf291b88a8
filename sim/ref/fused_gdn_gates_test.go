package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// gdnGatesGraph builds the GDN prefill gates of a and b [B, S, H] of dtype
// in with a_log and dt_bias [H] bf16: composed as models/nn.GDNPrefill
// writes them with an fp32 state (typecasts, add, softplus, exp,
// mul_scalar(-1), mul, sigmoid) or as one gdn_prefill_gates. Outputs g
// and beta.
func gdnGatesGraph(t *testing.T, B, S, H int, in ir.DType, fused bool) *ir.Graph {
	t.Helper()
	b := ir.NewBuilder("gdn_gates")
	a, bv := b.Input("a", ir.T(in, B, S, H)), b.Input("b", ir.T(in, B, S, H))
	al, dt := b.Weight("A_log", ir.T(ir.BF16, H)), b.Weight("dt_bias", ir.T(ir.BF16, H))
	b.Region("gdn", 0)
	if fused {
		b.Output(b.GDNPrefillGates(a, bv, al, dt, ir.FP32)...)
	} else {
		f := func(v *ir.Value) *ir.Value { return b.Typecast(v, ir.FP32) }
		negA := b.MulScalar(b.Exp(f(al)), -1)
		b.Output(b.Mul(b.Softplus(b.Add(f(a), f(dt))), negA), f(b.Sigmoid(bv)))
	}
	gr, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return gr
}

// TestGDNPrefillGatesEqualsComposed: gdn_prefill_gates equals its composed
// chain bit for bit on random operands (a and b N(0, 2), A_log in [-1,
// 2.5], dt_bias N(0, 1), stored as their dtypes), at the storage formats
// (Composed or not: the op computes as its program does, which is as the
// composed ops do) and in exact math, for bf16 and fp32 operands, one
// user or two, 24 or 48 heads, whole and partial tile rows.
func TestGDNPrefillGatesEqualsComposed(t *testing.T) {
	cases := []struct {
		name    string
		B, S, H int
		in      ir.DType
	}{
		{"bf16 27b 1x2", 1, 256, 24, ir.BF16},
		{"bf16 48 heads 2 users", 2, 33, 48, ir.BF16},
		{"fp32", 1, 64, 12, ir.FP32},
	}
	opts := map[string]Options{"storage": DefaultOptions(), "composed": {StorageFormats: true, Fidelity: ir.HiFi4, Composed: true}, "exact": ExactOptions()}
	for ci, c := range cases {
		composed, fused := gdnGatesGraph(t, c.B, c.S, c.H, c.in, false), gdnGatesGraph(t, c.B, c.S, c.H, c.in, true)
		rng := rand.New(rand.NewPCG(23, uint64(ci)))
		vals := append(append([]*ir.Value(nil), composed.Inputs...), composed.Weights...)
		data := make([][]float32, len(vals))
		for i, v := range vals {
			data[i] = make([]float32, v.Type.Shape.Numel())
			for j := range data[i] {
				x := rng.NormFloat64() * 2
				switch i {
				case 2:
					x = rng.Float64()*3.5 - 1
				case 3:
					x = rng.NormFloat64()
				}
				data[i][j] = float32(x)
				if v.Type.DType == ir.BF16 {
					data[i][j] = numerics.FromBF16Bits(numerics.PackerBF16(float32(x)))
				}
			}
		}
		for on, o := range opts {
			t.Run(c.name+"/"+on, func(t *testing.T) {
				run := func(g *ir.Graph) []Tensor {
					env := map[*ir.Value]Tensor{}
					for i, v := range append(append([]*ir.Value(nil), g.Inputs...), g.Weights...) {
						env[v] = Tensor{Shape: v.Type.Shape, Data: data[i]}
					}
					vals, err := Eval(g, env, o)
					if err != nil {
						t.Fatal(err)
					}
					return []Tensor{vals[g.Outputs[0]], vals[g.Outputs[1]]}
				}
				want, got := run(composed), run(fused)
				for r, name := range []string{"g", "beta"} {
					n := 0
					for i, w := range want[r].Data {
						if math.Float32bits(w) != math.Float32bits(got[r].Data[i]) {
							if n++; n <= 3 {
								t.Errorf("%s[%d] = %g, composed %g", name, i, got[r].Data[i], w)
							}
						}
					}
					if n > 0 {
						t.Errorf("%s: %d of %d elements differ from the composed chain", name, n, len(want[r].Data))
					}
				}
			})
		}
	}
}
