package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// TestPrefillFusedBMMs predicts the GDN prefill's fused products at 4,096
// tokens (one card's 24 heads, 128 chunks of 32 tokens, fp32) against the
// programs they replace: bmm_transpose_b_mul (q k^T * Γ) against
// bmm_transpose_b and mul, bmm_scale_b (T (beta v)) against mul and bmm,
// unary_mul (silu(z) * o, [4096, 3072]) against silu and mul. Each fused
// program must be predicted below the sum of its parts, and under a bound
// that holds because it reads each inner step's tiles under one barrier
// (268.0 and 460.2 us; a barrier per tile, as the plain bmm reads, took
// the two fused bmms 286.1 and 479.7 us).
func TestPrefillFusedBMMs(t *testing.T) {
	in := func(b *ir.Builder, name string, dt ir.DType, s ...int) *ir.Value {
		return b.Input(name, ir.T(dt, s...))
	}
	const H, N, L, D = 24, 128, 32, 128
	for _, tc := range []struct {
		name  string
		fused func(b *ir.Builder) *ir.Value
		parts []func(b *ir.Builder) *ir.Value
		maxUS float64
	}{
		{"bmm_transpose_b_mul", func(b *ir.Builder) *ir.Value {
			return b.BMMTransposeBMul(in(b, "q", ir.FP32, 1, H, N, L, D), in(b, "k", ir.FP32, 1, H, N, L, D), in(b, "g", ir.FP32, 1, H, N, L, L))
		}, []func(b *ir.Builder) *ir.Value{
			func(b *ir.Builder) *ir.Value {
				return b.BMMTransposeB(in(b, "q", ir.FP32, 1, H, N, L, D), in(b, "k", ir.FP32, 1, H, N, L, D))
			},
			func(b *ir.Builder) *ir.Value {
				return b.Mul(in(b, "p", ir.FP32, 1, H, N, L, L), in(b, "g", ir.FP32, 1, H, N, L, L))
			},
		}, 275},
		{"bmm_scale_b", func(b *ir.Builder) *ir.Value {
			return b.BMMScaleB(in(b, "t", ir.FP32, 1, H, N, L, L), in(b, "v", ir.FP32, 1, H, N, L, D), in(b, "beta", ir.FP32, 1, H, N, L, 1))
		}, []func(b *ir.Builder) *ir.Value{
			func(b *ir.Builder) *ir.Value {
				return b.Mul(in(b, "v", ir.FP32, 1, H, N, L, D), in(b, "beta", ir.FP32, 1, H, N, L, 1))
			},
			func(b *ir.Builder) *ir.Value {
				return b.BMM(in(b, "t", ir.FP32, 1, H, N, L, L), in(b, "vb", ir.FP32, 1, H, N, L, D))
			},
		}, 470},
		{"unary_mul", func(b *ir.Builder) *ir.Value {
			return b.UnaryMul(in(b, "z", ir.BF16, 1, 4096, 3072), in(b, "o", ir.FP32, 1, 4096, 3072), "silu")
		}, []func(b *ir.Builder) *ir.Value{
			func(b *ir.Builder) *ir.Value { return b.SiLU(in(b, "z", ir.BF16, 1, 4096, 3072)) },
			func(b *ir.Builder) *ir.Value {
				return b.Mul(in(b, "s", ir.BF16, 1, 4096, 3072), in(b, "o", ir.FP32, 1, 4096, 3072))
			},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := predictOp(t, tc.fused)
			var parts float64
			for _, p := range tc.parts {
				parts += predictOp(t, p)
			}
			t.Logf("%s: %.1f us predicted, its parts %.1f us", tc.name, us, parts)
			if us >= parts {
				t.Errorf("predicted %.1f us, want less than its parts' %.1f", us, parts)
			}
			if tc.maxUS > 0 && us > tc.maxUS {
				t.Errorf("predicted %.1f us, want at most %.0f", us, tc.maxUS)
			}
		})
	}
}
