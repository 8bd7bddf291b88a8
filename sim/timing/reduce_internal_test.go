package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// TestReduceMathCycles: reduce_tile costs its pool instructions (tt-llk
// llk_math_reduce.h, Blackhole) at 4 cycles each (a LoFi tile product's
// 16 over 4 faces): a MAX is one GMPOOL per face whatever the fidelity,
// a SUM one GAPOOL per face and fidelity phase (LoFi: 1), and a scalar
// reduce pools a fifth time.
func TestReduceMathCycles(t *testing.T) {
	p := Default()
	for _, tc := range []struct {
		name  string
		op    kir.ReduceOp
		dim   kir.ReduceDim
		f     ir.MathFidelity
		pools float64
	}{
		{"max row HiFi4", kir.ReduceMax, kir.ReduceRow, ir.HiFi4, 4},
		{"max row HiFi2", kir.ReduceMax, kir.ReduceRow, ir.HiFi2, 4},
		{"max row LoFi", kir.ReduceMax, kir.ReduceRow, ir.LoFi, 4},
		{"max scalar HiFi4", kir.ReduceMax, kir.ReduceScalar, ir.HiFi4, 5},
		{"sum row HiFi4", kir.ReduceSum, kir.ReduceRow, ir.HiFi4, 16},
		{"sum col HiFi3", kir.ReduceSum, kir.ReduceCol, ir.HiFi3, 12},
		{"sum col HiFi2", kir.ReduceSum, kir.ReduceCol, ir.HiFi2, 8},
		{"sum row LoFi", kir.ReduceSum, kir.ReduceRow, ir.LoFi, 4},
		{"sum scalar HiFi4", kir.ReduceSum, kir.ReduceScalar, ir.HiFi4, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reduceMathCycles(p, tc.op, tc.dim, tc.f)
			if want := tc.pools * 4; got != want {
				t.Errorf("reduce_tile costs %g math cycles, want %g (%g pool instructions)", got, want, tc.pools)
			}
		})
	}
	// A SUM row reduce keeps the cost the model was calibrated with.
	for _, f := range []ir.MathFidelity{ir.LoFi, ir.HiFi2, ir.HiFi3, ir.HiFi4} {
		if got, want := reduceMathCycles(p, kir.ReduceSum, kir.ReduceRow, f), p.MatmulCycles[f]; got != want {
			t.Errorf("SUM row reduce at %v costs %g cycles, want MatmulCycles %g", f, got, want)
		}
	}
}
