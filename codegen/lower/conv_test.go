package lower_test

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/timing"
)

// TestConvDepthwiseWholeTiles: the 27B GDN prefill conv of 256 tokens per
// device (x [1,259,5120] bf16, 4 taps) reads whole x tiles and builds the
// shifted windows in L1, so the timing model puts it under 50 us (189 us
// when the reader fetched the shifted windows row by row, with a barrier
// per source page).
func TestConvDepthwiseWholeTiles(t *testing.T) {
	tests := []struct {
		name  string
		x     ir.Shape
		taps  int
		maxUS float64
	}{
		{name: "27B prefill 256", x: ir.Shape{1, 259, 5120}, taps: 4, maxUS: 50},
	}
	tgt := target.Blackhole()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("conv")
			b.Region("gdn", 0)
			x := b.Input("x", ir.T(ir.BF16, tc.x...))
			w := b.Weight("w", ir.T(ir.BF16, tc.taps, tc.x[len(tc.x)-1]))
			out := b.ConvDepthwise(x, w)
			b.Output(out)
			if _, err := b.Finish(); err != nil {
				t.Fatal(err)
			}
			if us := predictedUS(t, tgt, out.Def); us > tc.maxUS {
				t.Errorf("%.1f us, want under %.0f", us, tc.maxUS)
			}
		})
	}
}

// predictedUS lowers op alone on tgt and returns the timing model's
// prediction of its program, logging its cores and time.
func predictedUS(t *testing.T, tgt *target.Target, op *ir.Op) float64 {
	t.Helper()
	p, err := lower.Lower(op, lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cores, %.1f us", len(p.Cores()), pt.US())
	return pt.US()
}
