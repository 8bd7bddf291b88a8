package ref

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// gdnOp builds a one-op graph with the given operand types and returns
// the op (results from the shape rule).
func gdnOp(t *testing.T, emit func(b *ir.Builder, in []*ir.Value) []*ir.Value, types ...ir.TensorType) *ir.Op {
	t.Helper()
	b := ir.NewBuilder("gdn")
	var in []*ir.Value
	for i, ty := range types {
		in = append(in, b.Input(string(rune('a'+i)), ty))
	}
	b.Region("gdn", 0)
	b.Output(emit(b, in)...)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g.Regions[0].Ops[0]
}

func tensor(shape ir.Shape, vals ...float32) Tensor { return Tensor{Shape: shape, Data: vals} }

var approx = cmpopts.EquateApprox(1e-6, 1e-7)

// TestGDNConvGatesHand: K = 2 taps, C = 2 channels, H = 1 value head, in
// exact math: conv[c] = silu(state[c]*taps[0,c] + qkv[c]*taps[1,c]), the
// new state is qkv, beta = sigmoid(b), g = -exp(a_log)*softplus(a + dt).
func TestGDNConvGatesHand(t *testing.T) {
	f := func(dt ir.DType, s ...int) ir.TensorType { return ir.T(dt, s...) }
	op := gdnOp(t, func(b *ir.Builder, in []*ir.Value) []*ir.Value {
		return b.GDNConvGates(in[0], in[1], in[2], in[3], in[4], in[5], in[6])
	}, f(ir.FP32, 1, 1, 2), f(ir.FP32, 1, 1, 2), f(ir.FP32, 2, 2), f(ir.FP32, 1, 1, 1), f(ir.FP32, 1, 1, 1), f(ir.FP32, 1), f(ir.FP32, 1))
	args := []Tensor{
		tensor(ir.Shape{1, 1, 2}, 1, 2),           // conv_state
		tensor(ir.Shape{1, 1, 2}, 3, -1),          // qkv
		tensor(ir.Shape{2, 2}, 0.5, 1, 2, -1),     // taps
		tensor(ir.Shape{1, 1, 1}, 0.5),            // a
		tensor(ir.Shape{1, 1, 1}, -2),             // b
		tensor(ir.Shape{1}, float32(math.Log(3))), // a_log
		tensor(ir.Shape{1}, 0.5),                  // dt_bias
	}
	got, err := EvalOp(op, args, ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	silu := func(x float64) float64 { return x / (1 + math.Exp(-x)) }
	want := [][]float64{
		{silu(1*0.5 + 3*2), silu(2*1 + -1*-1)},
		{3, -1},
		{1 / (1 + math.Exp(2))},
		{-3 * math.Log(1+math.E)},
	}
	for i := range want {
		g := make([]float64, len(got[i].Data))
		for j, v := range got[i].Data {
			g[j] = float64(v)
		}
		if diff := cmp.Diff(want[i], g, approx); diff != "" {
			t.Errorf("result %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestGDNConvGatesRoundsProducts: with storage formats each tap product is
// rounded to bf16 before the sum (as the composed mul stores it):
// 1.00390625 (bf16: 1 + 2^-8 rounds to 1) times 1, plus 0 gives silu(1),
// where the unrounded product would give silu(1.00390625).
func TestGDNConvGatesRoundsProducts(t *testing.T) {
	f := func(s ...int) ir.TensorType { return ir.T(ir.BF16, s...) }
	op := gdnOp(t, func(b *ir.Builder, in []*ir.Value) []*ir.Value {
		return b.GDNConvGates(in[0], in[1], in[2], in[3], in[4], in[5], in[6])
	}, f(1, 1, 1), f(1, 1, 1), ir.T(ir.FP32, 2, 1), f(1, 1, 1), f(1, 1, 1), f(1), f(1))
	// taps are fp32 operands; the product 1 * 1.00390625 = 1 + 2^-8 is a
	// bf16 tie, which the packer rounds away from zero to 1 + 2^-7.
	args := []Tensor{
		tensor(ir.Shape{1, 1, 1}, 0), tensor(ir.Shape{1, 1, 1}, 1),
		tensor(ir.Shape{2, 1}, 0, 1.00390625),
		tensor(ir.Shape{1, 1, 1}, 0), tensor(ir.Shape{1, 1, 1}, 0), tensor(ir.Shape{1}, 0), tensor(ir.Shape{1}, 0),
	}
	got, err := EvalOp(op, args, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if want := packedBF16(numerics.SiLU(1 + 0x1p-7)); got[0].Data[0] != want {
		t.Errorf("conv = %v, want %v (silu of the bf16-rounded product)", got[0].Data[0], want)
	}
	exact, err := EvalOp(op, args, ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	if want := numerics.SiLU(1.00390625); exact[0].Data[0] != want {
		t.Errorf("exact conv = %v, want %v", exact[0].Data[0], want)
	}
}

// recurrenceHand is one user, one key and one value head, Dk = Dv = 2:
// q = [3,4] -> [0.6,0.8], k = [0,2] -> [0,1] (l2_eps 0, l2_scale 2^-1/2,
// scale 1), g = 0, beta = 0.5, S = [[1,2],[3,4]], v = [5,6]:
// k^T S = [3,4], delta = [2,2], S' = S + 0.5*k delta^T = [[1,2],[4,5]],
// o = q^T S' = [3.8,5.2], rmsnorm(o)*[1,2] times silu(z), z = [0,1].
func TestGDNRecurrenceHand(t *testing.T) {
	f := func(s ...int) ir.TensorType { return ir.T(ir.FP32, s...) }
	for _, heads := range []int{1, 2} {
		// With 2 value heads per key head, head 1 reads key head 0 (GQA
		// addressing) and must give the same result as head 0.
		H := heads
		op := gdnOp(t, func(b *ir.Builder, in []*ir.Value) []*ir.Value {
			return b.GDNRecurrence(in[0], in[1], in[2], in[3], in[4], in[5], 0, 1/math.Sqrt2, 1, 0)
		}, f(1, 1, 4+2*H), f(H, 1), f(H, 1), f(1, H, 2, 2), f(1, 1, 2*H), f(2))
		qkv := []float32{3, 4, 0, 2}
		var beta, g, s, z []float32
		for range H {
			qkv = append(qkv, 5, 6)
			beta, g = append(beta, 0.5), append(g, 0)
			s = append(s, 1, 2, 3, 4)
			z = append(z, 0, 1)
		}
		args := []Tensor{
			tensor(ir.Shape{1, 1, 4 + 2*H}, qkv...), tensor(ir.Shape{H, 1}, beta...), tensor(ir.Shape{H, 1}, g...),
			tensor(ir.Shape{1, H, 2, 2}, s...), tensor(ir.Shape{1, 1, 2 * H}, z...), tensor(ir.Shape{2}, 1, 2),
		}
		got, err := EvalOp(op, args, ExactOptions())
		if err != nil {
			t.Fatal(err)
		}
		r := math.Sqrt((3.8*3.8 + 5.2*5.2) / 2)
		sig1 := 1 / (1 + math.Exp(-1))
		var wantOut, wantS []float64
		for range H {
			wantOut = append(wantOut, 0, sig1*5.2*2/r)
			wantS = append(wantS, 1, 2, 4, 5)
		}
		for i, want := range [][]float64{wantOut, wantS} {
			g := make([]float64, len(got[i].Data))
			for j, v := range got[i].Data {
				g[j] = float64(v)
			}
			if diff := cmp.Diff(want, g, approx); diff != "" {
				t.Errorf("H=%d result %d (-want +got):\n%s", H, i, diff)
			}
		}
	}
}

// TestGDNEvalErrors: malformed operands are errors naming the rule, not
// panics.
func TestGDNEvalErrors(t *testing.T) {
	f := func(s ...int) ir.TensorType { return ir.T(ir.FP32, s...) }
	conv := gdnOp(t, func(b *ir.Builder, in []*ir.Value) []*ir.Value {
		return b.GDNConvGates(in[0], in[1], in[2], in[3], in[4], in[5], in[6])
	}, f(1, 1, 2), f(1, 1, 2), f(2, 2), f(1, 1, 1), f(1, 1, 1), f(1), f(1))
	rec := gdnOp(t, func(b *ir.Builder, in []*ir.Value) []*ir.Value {
		return b.GDNRecurrence(in[0], in[1], in[2], in[3], in[4], in[5], 0, 1, 1, 0)
	}, f(1, 1, 6), f(1, 1), f(1, 1), f(1, 1, 2, 2), f(1, 1, 2), f(2))
	for _, c := range []struct {
		name string
		op   *ir.Op
		args []Tensor
		want string
	}{
		{"conv taps", conv, []Tensor{NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{3, 2}), NewTensor(ir.Shape{1, 1, 1}), NewTensor(ir.Shape{1, 1, 1}), NewTensor(ir.Shape{1}), NewTensor(ir.Shape{1})}, "rule gdn-conv-taps"},
		{"conv gates", conv, []Tensor{NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{2, 2}), NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{1, 1, 1}), NewTensor(ir.Shape{1}), NewTensor(ir.Shape{1})}, "rule gdn-gates"},
		{"recurrence heads", rec, []Tensor{NewTensor(ir.Shape{1, 1, 5}), NewTensor(ir.Shape{1, 1}), NewTensor(ir.Shape{1, 1}), NewTensor(ir.Shape{1, 1, 2, 2}), NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{2})}, "rule gdn-recurrence-heads"},
		{"recurrence state", rec, []Tensor{NewTensor(ir.Shape{1, 1, 6}), NewTensor(ir.Shape{1, 1}), NewTensor(ir.Shape{1, 1}), NewTensor(ir.Shape{1, 2, 2}), NewTensor(ir.Shape{1, 1, 2}), NewTensor(ir.Shape{2})}, "rule gdn-recurrence-state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// runOp skips EvalOp's declared-shape rounding, so the
			// evaluator itself sees the malformed shapes.
			_, err := runOp(c.op, c.args, ExactOptions())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
