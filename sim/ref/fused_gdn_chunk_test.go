package ref

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// gdnChunkDims are the sizes of one gdn_chunk_step case.
type gdnChunkDims struct{ B, H, N, L, Dk, Dv, chunk int }

// gdnChunkGraph builds chunk step d.chunk of the GDN prefill loop over
// inputs u, wk, qg, qk, k, g and state of dtype f: composed as
// models/nn.GDNPrefill writes it (slices, bmm, sub, add, mul, exp,
// reshapes, transpose) or fused into one gdn_chunk_step. Outputs o and S'.
func gdnChunkGraph(t *testing.T, d gdnChunkDims, f ir.DType, fused bool) *ir.Graph {
	t.Helper()
	B, H, N, L, Dk, Dv := d.B, d.H, d.N, d.L, d.Dk, d.Dv
	b := ir.NewBuilder("gdn_chunk")
	in := func(name string, s ...int) *ir.Value { return b.Input(name, ir.T(f, s...)) }
	u, wk, qg := in("u", B, H, N, L, Dv), in("wk", B, H, N, L, Dk), in("qg", B, H, N, L, Dk)
	qk, k, g := in("qk", B, H, N, L, L), in("k", B, H, N, L, Dk), in("g", B, H, N, L)
	s := in("state", B, H, 1, Dk, Dv)
	b.Region("gdn", 0)
	if fused {
		b.Output(b.GDNChunkStep(u, wk, qg, qk, k, g, s, d.chunk)...)
	} else {
		chunk := func(v *ir.Value) *ir.Value {
			sh := v.Type.Shape
			begin, end := make([]int, sh.Rank()), sh.Clone()
			begin[2], end[2] = d.chunk, d.chunk+1
			return b.Slice(v, begin, end)
		}
		vNew := b.Sub(chunk(u), b.BMM(chunk(wk), s))
		o := b.Add(b.BMM(chunk(qg), s), b.BMM(chunk(qk), vNew))
		gi := chunk(g)
		gl := b.Slice(gi, []int{0, 0, 0, L - 1}, []int{B, H, 1, L})
		kd := b.Mul(chunk(k), b.Reshape(b.Exp(b.Sub(gl, gi)), []int{B, H, 1, L, 1}))
		sNew := b.Add(b.Mul(s, b.Reshape(b.Exp(gl), []int{B, H, 1, 1, 1})), b.BMM(b.Transpose(kd, -1, -2), vNew))
		b.Output(o, sNew)
	}
	gr, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return gr
}

// TestGDNChunkStepEqualsComposed: the fused op equals the composed chunk
// step bit for bit, with random operands, at storage formats (Composed or
// not) and in exact math, for an fp32 and a bf16 state, first, middle and
// last chunk, with g a decreasing cumulative sum of log decays as in the
// model.
func TestGDNChunkStepEqualsComposed(t *testing.T) {
	cases := []struct {
		name string
		d    gdnChunkDims
		f    ir.DType
	}{
		{"fp32 middle", gdnChunkDims{B: 1, H: 2, N: 3, L: 32, Dk: 64, Dv: 64, chunk: 1}, ir.FP32},
		{"fp32 first batch2", gdnChunkDims{B: 2, H: 1, N: 2, L: 32, Dk: 32, Dv: 64, chunk: 0}, ir.FP32},
		{"fp32 short chunk", gdnChunkDims{B: 1, H: 1, N: 1, L: 6, Dk: 32, Dv: 32, chunk: 0}, ir.FP32},
		{"bf16 last", gdnChunkDims{B: 1, H: 2, N: 3, L: 32, Dk: 32, Dv: 32, chunk: 2}, ir.BF16},
	}
	opts := map[string]Options{"storage": DefaultOptions(), "composed": {StorageFormats: true, Fidelity: ir.HiFi4, Composed: true}, "exact": ExactOptions()}
	for _, c := range cases {
		composed, fused := gdnChunkGraph(t, c.d, c.f, false), gdnChunkGraph(t, c.d, c.f, true)
		rng := rand.New(rand.NewPCG(7, uint64(c.d.N)))
		data := make([][]float32, len(composed.Inputs))
		for i, v := range composed.Inputs {
			data[i] = make([]float32, v.Type.Shape.Numel())
			for j := range data[i] {
				data[i][j] = float32(rng.NormFloat64() * 0.5)
			}
		}
		// g: per (user, head, chunk) the running sum of negative log decays.
		gd := data[5]
		for j := range gd {
			step := -float32(math.Abs(rng.NormFloat64())) * 0.1
			if j%c.d.L == 0 {
				gd[j] = step
			} else {
				gd[j] = gd[j-1] + step
			}
		}
		for on, o := range opts {
			t.Run(c.name+"/"+on, func(t *testing.T) {
				run := func(g *ir.Graph) []Tensor {
					env := map[*ir.Value]Tensor{}
					for i, v := range g.Inputs {
						env[v] = Tensor{Shape: v.Type.Shape, Data: data[i]}
					}
					vals, err := Eval(g, env, o)
					if err != nil {
						t.Fatal(err)
					}
					return []Tensor{vals[g.Outputs[0]], vals[g.Outputs[1]]}
				}
				want, got := run(composed), run(fused)
				for r, name := range []string{"o", "new state"} {
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

// TestGDNChunkStepEvalErrors: operands the shape rule would refuse are
// errors naming the rule, not panics.
func TestGDNChunkStepEvalErrors(t *testing.T) {
	d := gdnChunkDims{B: 1, H: 1, N: 2, L: 32, Dk: 32, Dv: 32, chunk: 1}
	op := gdnChunkGraph(t, d, ir.FP32, true).Regions[0].Ops[0]
	args := func() []Tensor {
		var out []Tensor
		for _, v := range op.Operands {
			out = append(out, NewTensor(v.Type.Shape))
		}
		return out
	}
	cases := []struct {
		name string
		edit func(op *ir.Op, a []Tensor)
		rule string
	}{
		{"chunk past end", func(op *ir.Op, _ []Tensor) { op.Attrs["chunk"] = 2 }, "gdn-chunk-index"},
		{"state rank", func(_ *ir.Op, a []Tensor) { a[6] = NewTensor(ir.Shape{1, 1, 32, 32}) }, "gdn-chunk-state"},
		{"qk shape", func(_ *ir.Op, a []Tensor) { a[3] = NewTensor(ir.Shape{1, 1, 2, 32, 64}) }, "gdn-chunk-operand"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := *op
			o.Attrs = ir.Attrs{"chunk": 1}
			a := args()
			c.edit(&o, a)
			_, err := evalGDNChunkStep(&o, a, DefaultOptions())
			if err == nil || !strings.Contains(err.Error(), "rule "+c.rule) {
				t.Errorf("error %v, want rule %s", err, c.rule)
			}
		})
	}
}
