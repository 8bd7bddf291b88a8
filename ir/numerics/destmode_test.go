package numerics

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFPUAddDestModes: an ELWADD or ELWSUB of two bf16 values gives the
// same bf16 result with a 16-bit DEST as with fp32 DEST and the packer's
// rounding to a bf16 CB. codegen/persist (destmode.go) relies on it to run
// the ring all-reduce's bf16 adders with fp32 DEST in a persistent
// program bit for bit as the per-program build runs them. Half the pairs
// share b's exponent range with a (the sums that round), the rest are
// any two finite bf16 values.
func TestFPUAddDestModes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bf16 := func() float32 { return math.Float32frombits(uint32(r.IntN(1<<16)) << 16) }
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	for _, op := range []struct {
		name string
		f    func(a, b float32, fp32 bool) float32
	}{{"add", FPUAdd}, {"sub", FPUSub}} {
		t.Run(op.name, func(t *testing.T) {
			n, bad := 0, 0
			for i := 0; i < 400_000; i++ {
				a, b := bf16(), bf16()
				if i%2 == 0 { // b within 2^10 of a's exponent, either sign
					b = math.Float32frombits(math.Float32bits(a)&0x7F800000 - uint32(r.IntN(11))<<23 | uint32(r.IntN(1<<7))<<16 | uint32(r.IntN(2))<<31)
				}
				if !finite(a) || !finite(b) {
					continue
				}
				n++
				want := op.f(a, b, false)
				got := FromBF16Bits(PackerBF16(op.f(a, b, true)))
				if math.Float32bits(want) != math.Float32bits(got) {
					if bad++; bad <= 5 {
						t.Errorf("%g %s %g: 16-bit DEST %g, fp32 DEST packed to bf16 %g", a, op.name, b, want, got)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d pairs differ", bad, n)
			}
		})
	}
}
