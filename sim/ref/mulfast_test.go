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
// from subnormal to overflowing products, and falls back where it must.
func TestDeviceMulFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	opts := DefaultOptions()
	for i := 0; i < 200000; i++ {
		a := numerics.RoundBF16(float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(260)-130))))
		b := numerics.RoundBF16(float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(260)-130))))
		want := numerics.FPUMul(numerics.TruncTF32(a), numerics.TruncTF32(b), 0, ir.HiFi4, true)
		if got := deviceMul(a, b, opts); math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) && !(got != got && want != want) {
			t.Fatalf("deviceMul(%g, %g) = %g, FPUMul = %g", a, b, got, want)
		}
	}
}
