package blocks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

func TestCoresFrom(t *testing.T) {
	tgt := target.Blackhole() // 11 x 10 workers
	for _, tc := range []struct {
		start, n int
		ranges   []ir.CoreRange
	}{
		{0, 3, []ir.CoreRange{{X0: 0, Y0: 0, X1: 2, Y1: 0}}},
		{8, 5, []ir.CoreRange{{X0: 8, Y0: 0, X1: 10, Y1: 0}, {X0: 0, Y0: 1, X1: 1, Y1: 1}}},
		{0, 25, []ir.CoreRange{{X0: 0, Y0: 0, X1: 10, Y1: 1}, {X0: 0, Y0: 2, X1: 2, Y1: 2}}},
		{10, 13, []ir.CoreRange{{X0: 10, Y0: 0, X1: 10, Y1: 0}, {X0: 0, Y0: 1, X1: 10, Y1: 1}, {X0: 0, Y0: 2, X1: 0, Y1: 2}}},
	} {
		cores, rs := CoresFrom(tgt, tc.start, tc.n)
		if diff := cmp.Diff(tc.ranges, rs); diff != "" {
			t.Errorf("CoresFrom(%d, %d) ranges (-want +got):\n%s", tc.start, tc.n, diff)
		}
		if diff := cmp.Diff(cores, kir.CoresOf(rs)); diff != "" {
			t.Errorf("CoresFrom(%d, %d): the ranges do not cover exactly the cores (-cores +ranges):\n%s", tc.start, tc.n, diff)
		}
		if cores[0] != (kir.Core{X: tc.start % 11, Y: tc.start / 11}) {
			t.Errorf("CoresFrom(%d, %d) starts at %s", tc.start, tc.n, cores[0])
		}
	}
}
