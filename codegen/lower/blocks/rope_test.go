package blocks

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewRopeMatrix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		R, width int
		want     []RopeTile
	}{
		{
			// 16 rotary dims in one tile: cos on the diagonal, -sin[i] at
			// row i+8 for i < 8, +sin[i] at row i-8 for 8 <= i < 16, ones
			// on the diagonal of the pass-through columns 16..31.
			name: "R16_in_one_tile", R: 16, width: 32,
			want: []RopeTile{{Row: 0, Col: 0, runs: []ropeRun{
				{src: ropeCos, i0: 0, i1: 16},
				{src: ropeSin, i0: 0, i1: 8, delta: 8, neg: true},
				{src: ropeSin, i0: 8, i1: 16, delta: -8},
				{src: ropeOne, i0: 16, i1: 32, delta: 0},
			}}},
		},
		{
			// 64 rotary dims over two tiles: the halves swap tiles.
			name: "R64_two_tiles", R: 64, width: 64,
			want: []RopeTile{
				{Row: 0, Col: 0, runs: []ropeRun{{src: ropeCos, i0: 0, i1: 32}}},
				{Row: 1, Col: 0, runs: []ropeRun{{src: ropeSin, i0: 0, i1: 32, delta: 32, neg: true}}},
				{Row: 0, Col: 1, runs: []ropeRun{{src: ropeSin, i0: 32, i1: 64, delta: -32}}},
				{Row: 1, Col: 1, runs: []ropeRun{{src: ropeCos, i0: 32, i1: 64}}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewRopeMatrix(tc.R, tc.width)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, m.Tiles, cmp.AllowUnexported(RopeTile{}, ropeRun{})); diff != "" {
				t.Errorf("tiles (-want +got):\n%s", diff)
			}
		})
	}
	m, err := NewRopeMatrix(64, 64)
	if err != nil {
		t.Fatal(err)
	}
	wantRot := []RopeTile{
		{Row: 1, Col: 0, runs: []ropeRun{{src: ropeOne, i0: 0, i1: 32, delta: 32, neg: true}}},
		{Row: 0, Col: 1, runs: []ropeRun{{src: ropeOne, i0: 32, i1: 64, delta: -32}}},
	}
	if diff := cmp.Diff(wantRot, m.RotateHalf().Tiles, cmp.AllowUnexported(RopeTile{}, ropeRun{})); diff != "" {
		t.Errorf("RotateHalf tiles (-want +got):\n%s", diff)
	}
	if got := (RopeMatrix{Width: 64, Tiles: []RopeTile{{Row: 0, Col: 0}, {Row: 1, Col: 0}, {Row: 1, Col: 1}}}).RowsFor(0); !cmp.Equal(got, []int{0, 1}) {
		t.Errorf("RowsFor(0) = %v, want [0 1]", got)
	}
	for _, bad := range [][2]int{{0, 32}, {3, 32}, {64, 32}, {16, 48}} {
		if _, err := NewRopeMatrix(bad[0], bad[1]); err == nil {
			t.Errorf("NewRopeMatrix(%d, %d) accepted", bad[0], bad[1])
		}
	}
}
