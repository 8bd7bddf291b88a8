package persist

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// TestDoneRects: the done signal's multicast rectangles cover the bounding
// box of the worker dependents, each with contiguous NoC columns and rows
// (Blackhole's worker columns 0..6 and 7..10 are NoC x 1..7 and 10..13),
// and count their cores besides the sender.
func TestDoneRects(t *testing.T) {
	tgt := target.Blackhole()
	c := func(x, y int) kir.Core { return kir.Core{X: x, Y: y} }
	for _, tc := range []struct {
		name   string
		cs     []kir.Core
		sender kir.Core
		want   []doneRect
	}{
		{"none", nil, c(0, 0), nil},
		{"one row left of the gap, sender inside", []kir.Core{c(0, 0), c(1, 0), c(3, 0)}, c(0, 0), []doneRect{{0, 0, 3, 0, 3}}},
		{"across the NoC gap", []kir.Core{c(5, 1), c(8, 2)}, c(0, 0), []doneRect{{5, 1, 6, 2, 4}, {7, 1, 8, 2, 4}}},
		{"only the sender", []kir.Core{c(2, 2)}, c(2, 2), nil},
		{"ethernet sender", []kir.Core{c(0, 0), c(1, 1)}, kir.Core{X: 3, Y: kir.EthRow}, []doneRect{{0, 0, 1, 1, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := doneRects(tgt, tc.cs, tc.sender)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(doneRect{})); diff != "" {
				t.Errorf("doneRects (-want +got):\n%s", diff)
			}
		})
	}
}
