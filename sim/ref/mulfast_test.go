package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// TestDeviceMulFastPath: deviceMul's fast path for bf16 operands at HiFi4
// gives the FPU's product (numerics.FPUMul) bit for bit, across exponents
// from subnormal to overflowing products, and falls back where it must;
// zeros by sign too (operands that round to ±0 give the FPU's +0).
func TestDeviceMulFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	opts := DefaultOptions()
	for i := 0; i < 200000; i++ {
		a := numerics.RoundBF16(float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(260)-130))))
		b := numerics.RoundBF16(float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(260)-130))))
		want := numerics.FPUMul(numerics.TruncTF32(a), numerics.TruncTF32(b), 0, ir.HiFi4, true)
		if got := deviceMul(a, b, opts); math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("deviceMul(%g, %g) = %g, FPUMul = %g", a, b, got, want)
		}
	}
}

// TestDeviceMulZeroSign: a product with a zero operand is +0 whatever the
// signs, as the FPU's ELWMUL writes it (numerics.FPUMul; the FPU never
// writes -0), at every fidelity and for bf16 and fp32 operands, where
// IEEE float32 gives -0. gdn_chunk_prep's qk = r(q k^T) * Γ met it: an
// exactly bf16 negative product times Γ's zero upper triangle was -0 in
// the reference and +0 in the program.
func TestDeviceMulZeroSign(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	tests := []struct {
		name string
		a, b float32
	}{
		{"neg_bf16_times_zero", -1.5, 0},
		{"zero_times_neg_bf16", 0, -0.25},
		{"neg_fp32_times_zero", -1.2345678, 0},
		{"neg_zero_times_pos", negZero, 3},
		{"neg_zero_times_neg_zero", negZero, negZero},
		{"pos_times_neg_zero", 2, negZero},
		{"neg_subnormal_times_pos", -0x1p-140, 1},
	}
	for _, tc := range tests {
		for _, f := range []ir.MathFidelity{ir.LoFi, ir.HiFi2, ir.HiFi4} {
			t.Run(tc.name+"/"+f.String(), func(t *testing.T) {
				want := numerics.FPUMul(numerics.TruncTF32(tc.a), numerics.TruncTF32(tc.b), 0, f, true)
				if math.Float32bits(want) != 0 {
					t.Fatalf("FPUMul(%g, %g) = %g (%#08x), want +0", tc.a, tc.b, want, math.Float32bits(want))
				}
				got := deviceMul(tc.a, tc.b, Options{StorageFormats: true, Fidelity: f})
				if math.Float32bits(got) != 0 {
					t.Errorf("deviceMul(%g, %g) = %g (%#08x), want +0 as the FPU writes it", tc.a, tc.b, got, math.Float32bits(got))
				}
			})
		}
	}
}

// TestSubOuterZeroSign: a - b with a [n, 1] and b [1, m] (both broadcast,
// b along rows) is -(rows(b) - a) on the device, the SFPU's sign flip
// last (codegen/lower/eltwise.go lowerBinary), so a[i] == b[j] gives -0
// and the reference gives it too; the other broadcasts keep a - b's +0.
func TestSubOuterZeroSign(t *testing.T) {
	const n = 4
	col, row := make([]float32, n), make([]float32, n)
	for i := range n {
		col[i], row[i] = float32(i)-1.5, float32(i)-1.5
	}
	tests := []struct {
		name     string
		a, b     Tensor
		wantZero uint32 // bits of element (1, 1): a and b equal there
	}{
		{"cols_minus_rows", tensor(ir.Shape{n, 1}, col...), tensor(ir.Shape{1, n}, row...), 0x80000000},
		{"rows_minus_cols", tensor(ir.Shape{1, n}, row...), tensor(ir.Shape{n, 1}, col...), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := gdnOp(t, func(b *ir.Builder, in []*ir.Value) []*ir.Value { return []*ir.Value{b.Sub(in[0], in[1])} },
				ir.T(ir.FP32, tc.a.Shape...), ir.T(ir.FP32, tc.b.Shape...))
			got, err := EvalOpData(op, [][]float32{tc.a.Data, tc.b.Data}, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if g := math.Float32bits(got[0].Data[1*n+1]); g != tc.wantZero {
				t.Errorf("element (1, 1) = %#08x, want %#08x", g, tc.wantZero)
			}
			at := func(x Tensor, i, j int) float32 { // x broadcast to [n, n]
				if x.Shape[0] == 1 {
					return x.Data[j]
				}
				return x.Data[i]
			}
			for i := range n { // the other elements: a - b (exact here)
				for j := range n {
					if want, g := at(tc.a, i, j)-at(tc.b, i, j), got[0].Data[i*n+j]; want != 0 && g != want {
						t.Errorf("element (%d, %d) = %g, want %g", i, j, g, want)
					}
				}
			}
		})
	}
}
