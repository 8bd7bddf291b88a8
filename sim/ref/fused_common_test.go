package ref

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// commonCase is one fused op of the common families evaluated on small
// hand-written operands, with results computed by hand from its Doc line.
type commonCase struct {
	name  string
	in    []ir.TensorType
	args  [][]float32
	build func(b *ir.Builder, in []*ir.Value) []*ir.Value
	want  [][]float64
}

func TestFusedCommonHandComputed(t *testing.T) {
	f32 := func(dims ...int) ir.TensorType { return ir.T(ir.FP32, dims...) }
	u32 := ir.TensorType{Shape: ir.Shape{2}, DType: ir.UInt32, Layout: ir.RowMajorLayout}
	rms := 1 / math.Sqrt((25.0+49)/2) // of h = [5, 7]
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	cases := []commonCase{
		{name: "matmul2 two products",
			in:    []ir.TensorType{f32(1, 2), f32(2, 1), f32(2, 2)},
			args:  [][]float32{{1, 2}, {1, 1}, {2, 0, 0, 3}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value { return b.Matmul2(in[0], in[1], in[2]) },
			want:  [][]float64{{3}, {2, 6}}},
		{name: "matmul4 four products",
			in:   []ir.TensorType{f32(1, 2), f32(2, 1), f32(2, 1), f32(2, 1), f32(2, 1)},
			args: [][]float32{{1, 2}, {1, 0}, {0, 1}, {1, 1}, {-1, 1}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return b.Matmul4(in[0], in[1], in[2], in[3], in[4])
			},
			want: [][]float64{{1}, {2}, {3}, {1}}},
		{name: "matmul_add residual after the product",
			in:    []ir.TensorType{f32(1, 2), f32(2, 1), f32(1, 1)},
			args:  [][]float32{{1, 2}, {1, 2}, {0.5}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value { return []*ir.Value{b.MatmulAdd(in[0], in[1], in[2])} },
			want:  [][]float64{{5.5}}},
		{name: "rmsnorm_matmul norm then product",
			in:   []ir.TensorType{f32(1, 2), f32(2), f32(2, 1)},
			args: [][]float32{{3, 4}, {1, 0.5}, {1, 2}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return []*ir.Value{b.RMSNormMatmul(in[0], in[1], in[2], 0, 0)}
			},
			// n = [3, 4] / sqrt(12.5) * [1, 0.5]; n @ [1, 2]
			want: [][]float64{{(3*1*1 + 4*0.5*2) / math.Sqrt(12.5)}}},
		{name: "matmul_swiglu silu(gate) * up",
			in:   []ir.TensorType{f32(1, 1), f32(1, 2), f32(1, 2)},
			args: [][]float32{{1}, {2, -1}, {3, 4}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return []*ir.Value{b.MatmulSwiGLU(in[0], in[1], in[2])}
			},
			want: [][]float64{{2 * sig(2) * 3, -1 * sig(-1) * 4}}},
		{name: "add_rmsnorm h and norm(h) with (1+w)",
			in:   []ir.TensorType{f32(1, 2), f32(1, 2), f32(2)},
			args: [][]float32{{4, 3}, {1, 4}, {0, 1}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return b.AddRMSNorm(in[0], in[1], in[2], 0, 1)
			},
			want: [][]float64{{5, 7}, {5 * rms, 7 * rms * 2}}},
		{name: "all_reduce_add over one device",
			in:    []ir.TensorType{f32(2), f32(2)},
			args:  [][]float32{{1, 2}, {3, 4}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value { return []*ir.Value{b.AllReduceAdd(in[0], in[1], 1)} },
			want:  [][]float64{{4, 6}}},
		{name: "all_reduce_add_rmsnorm over one device",
			in:   []ir.TensorType{f32(2), f32(2), f32(2)},
			args: [][]float32{{2, 3}, {3, 4}, {1, 1}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return b.AllReduceAddRMSNorm(in[0], in[1], in[2], 1, 0, 0)
			},
			want: [][]float64{{5, 7}, {5 * rms, 7 * rms}}},
		{name: "eltwise_chain -exp(x) then +1",
			in:   []ir.TensorType{f32(3)},
			args: [][]float32{{0, 1, -1}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return []*ir.Value{b.EltwiseChain(in[0], "exp,mul_scalar:-1,add_scalar:1")}
			},
			want: [][]float64{{0, 1 - math.E, 1 - 1/math.E}}},
		{name: "eltwise_chain square, rsqrt, sigmoid, silu, softplus",
			in:   []ir.TensorType{f32(2)},
			args: [][]float32{{2, -0.5}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return []*ir.Value{b.EltwiseChain(in[0], "square,rsqrt,sigmoid,silu,softplus")}
			},
			want: [][]float64{{chain64(2), chain64(-0.5)}}},
		{name: "embedding_reshape rows in id order",
			in:   []ir.TensorType{u32, ir.T(ir.FP32, 3, 2)},
			args: [][]float32{{2, 0}, {10, 11, 20, 21, 30, 31}},
			build: func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return []*ir.Value{b.EmbeddingReshape(in[0], in[1], []int{2, 1, 2})}
			},
			want: [][]float64{{30, 31, 10, 11}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("common")
			var ins []*ir.Value
			env := map[*ir.Value]Tensor{}
			for i, ty := range tc.in {
				v := b.Input("in", ty)
				ins = append(ins, v)
				env[v] = Tensor{Shape: ty.Shape.Clone(), Data: tc.args[i]}
			}
			b.Region("mlp", 0)
			outs := tc.build(b, ins)
			b.Output(outs...)
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			vals, err := Eval(g, env, ExactOptions())
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != len(tc.want) {
				t.Fatalf("%d results, want %d", len(outs), len(tc.want))
			}
			for k, o := range outs {
				got := vals[o].Data
				for i, w := range tc.want[k] {
					if math.Abs(float64(got[i])-w) > 1e-5*max(1, math.Abs(w)) {
						t.Errorf("result %d[%d] = %g, want %g", k, i, got[i], w)
					}
				}
			}
		})
	}
}

// chain64 is softplus(silu(sigmoid(rsqrt(x^2)))) in float64.
func chain64(x float64) float64 {
	v := 1 / math.Sqrt(x*x)
	v = 1 / (1 + math.Exp(-v))
	v = v / (1 + math.Exp(-v))
	return math.Log1p(math.Exp(v))
}

// TestFusedMeshAllReduceAdd: two devices' partial sums are added, then each
// device adds its residual (and normalises).
func TestFusedMeshAllReduceAdd(t *testing.T) {
	b := ir.NewBuilder("mesh")
	x := b.Input("x", ir.T(ir.FP32, 1, 2))
	r := b.Input("r", ir.T(ir.FP32, 1, 2))
	w := b.Input("w", ir.T(ir.FP32, 2))
	b.Region("mlp", 0)
	hn := b.AllReduceAddRMSNorm(x, r, w, 2, 0, 1)
	h2 := b.AllReduceAdd(x, r, 2)
	b.Output(append(hn, h2)...)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	ops := g.Ops()
	args := [][]Tensor{
		{{Shape: ir.Shape{1, 2}, Data: []float32{1, 2}}, {Shape: ir.Shape{1, 2}, Data: []float32{1, 1}}, {Shape: ir.Shape{2}, Data: []float32{0, 1}}},
		{{Shape: ir.Shape{1, 2}, Data: []float32{3, 4}}, {Shape: ir.Shape{1, 2}, Data: []float32{0, 0}}, {Shape: ir.Shape{2}, Data: []float32{0, 1}}},
	}
	outs, err := FusedMeshOp(ops[0], args, ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	// s = [4, 6]; device 0: h = [5, 7], device 1: h = [4, 6]
	for d, h := range [][]float64{{5, 7}, {4, 6}} {
		inv := 1 / math.Sqrt((h[0]*h[0]+h[1]*h[1])/2)
		want := [][]float64{h, {h[0] * inv, h[1] * inv * 2}}
		for k := range want {
			for i, wv := range want[k] {
				if got := float64(outs[d][k].Data[i]); math.Abs(got-wv) > 1e-5 {
					t.Errorf("device %d result %d[%d] = %g, want %g", d, k, i, got, wv)
				}
			}
		}
	}
	two, err := FusedMeshOp(ops[1], [][]Tensor{args[0][:2], args[1][:2]}, ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	if two[0][0].Data[0] != 5 || two[1][0].Data[1] != 6 {
		t.Errorf("all_reduce_add: device 0 %v, device 1 %v; want [5 7], [4 6]", two[0][0].Data, two[1][0].Data)
	}

	// Errors: a two-device op on one device, the wrong number of devices.
	if _, err := EvalOp(ops[1], args[0][:2], ExactOptions()); err == nil || !strings.Contains(err.Error(), "FusedMeshOp") {
		t.Errorf("EvalOp of a 2-device all_reduce_add: %v, want an error pointing to FusedMeshOp", err)
	}
	if _, err := FusedMeshOp(ops[1], [][]Tensor{args[0][:2]}, ExactOptions()); err == nil || !strings.Contains(err.Error(), "spans 2 devices") {
		t.Errorf("FusedMeshOp with 1 device's operands: %v, want a collective-mesh error", err)
	}
	if _, err := FusedMeshOp(ops[1], [][]Tensor{args[0], args[1]}, ExactOptions()); err == nil || !strings.Contains(err.Error(), "operands") {
		t.Errorf("FusedMeshOp with 3 operands per device: %v, want an operand-count error", err)
	}
}

// TestFusedCommonRoundingPoints: at storage formats matmul_swiglu and
// add_rmsnorm equal the composed ops bit for bit (they round where the
// composed ops store), and skipping those roundings would change bf16
// results (so the comparison can tell).
func TestFusedCommonRoundingPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	randT := func(s ...int) Tensor {
		x := NewTensor(ir.Shape(s))
		for i := range x.Data {
			x.Data[i] = float32(rng.NormFloat64())
		}
		return x
	}
	bf := func(s ...int) ir.TensorType { return ir.T(ir.BF16, s...) }
	type build func(b *ir.Builder, in []*ir.Value) []*ir.Value
	for _, tc := range []struct {
		name           string
		in             []ir.TensorType
		fused, compose build
	}{
		{"matmul_swiglu", []ir.TensorType{bf(2, 64), ir.T(ir.BFP8B, 64, 96), ir.T(ir.BFP8B, 64, 96)},
			func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return []*ir.Value{b.MatmulSwiGLU(in[0], in[1], in[2])}
			},
			func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				return []*ir.Value{b.Mul(b.SiLU(b.Matmul(in[0], in[1])), b.Matmul(in[0], in[2]))}
			}},
		{"add_rmsnorm", []ir.TensorType{bf(2, 64), bf(2, 64), bf(64)},
			func(b *ir.Builder, in []*ir.Value) []*ir.Value { return b.AddRMSNorm(in[0], in[1], in[2], 1e-6, 1) },
			func(b *ir.Builder, in []*ir.Value) []*ir.Value {
				h := b.Add(in[0], in[1])
				return []*ir.Value{h, b.RMSNorm(h, in[2], 1e-6, 1)}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []Tensor
			for _, ty := range tc.in {
				args = append(args, randT(ty.Shape...))
			}
			run := func(f build, opts Options) [][]float32 {
				b := ir.NewBuilder(tc.name)
				env := map[*ir.Value]Tensor{}
				var ins []*ir.Value
				for i, ty := range tc.in {
					v := b.Input("in", ty)
					ins = append(ins, v)
					env[v] = args[i]
				}
				b.Region("mlp", 0)
				outs := f(b, ins)
				b.Output(outs...)
				g, err := b.Finish()
				if err != nil {
					t.Fatal(err)
				}
				vals, err := Eval(g, env, opts)
				if err != nil {
					t.Fatal(err)
				}
				var res [][]float32
				for _, o := range outs {
					res = append(res, vals[o].Data)
				}
				return res
			}
			fused, composed := run(tc.fused, DefaultOptions()), run(tc.compose, DefaultOptions())
			for k := range fused {
				for i := range fused[k] {
					if fused[k][i] != composed[k][i] {
						t.Fatalf("result %d[%d]: fused %g, composed %g; want bit-equal at storage formats", k, i, fused[k][i], composed[k][i])
					}
				}
			}
			// Exact math, rounded only at the end, differs from the stored chain.
			exact := run(tc.fused, ExactOptions())
			last := len(fused) - 1
			differs := false
			for i, v := range exact[last] {
				if numerics.RoundBF16(v) != fused[last][i] {
					differs = true
				}
			}
			if !differs {
				t.Errorf("no element changes with the intermediate roundings; the test cannot tell")
			}
		})
	}
}
