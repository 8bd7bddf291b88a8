package lower_test

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestBcastColsByRows: the 27B GDN prefill's chunked mul of [1,24,8,32,128]
// fp32 by a broadcast column [1,24,8,32,1] runs by result tile rows,
// reading the column's tile once per row of 4 tiles, with the row's reads
// in flight at once and its writes too, on 64 cores: 16.2 us predicted
// (30.6 us on 29 cores when every result tile read its pair of tiles and
// wrote itself, one barrier each).
func TestBcastColsByRows(t *testing.T) {
	tests := []struct {
		name  string
		a, b  ir.Shape
		maxUS float64
	}{
		{name: "27B gdn chunk column", a: ir.Shape{1, 24, 8, 32, 128}, b: ir.Shape{1, 24, 8, 32, 1}, maxUS: 18},
	}
	tgt := target.Blackhole()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("mul")
			b.Region("gdn", 0)
			out := b.Mul(b.Input("a", ir.T(ir.FP32, tc.a...)), b.Input("b", ir.T(ir.FP32, tc.b...)))
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
