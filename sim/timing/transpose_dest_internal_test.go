package timing

import "testing"

// TestTransposeDestCycles: transpose_wh_dest costs its instructions (tt-llk
// llk_math_transpose_dest.h, counted by hand: 16-bit DEST 16 MOVD2B, 4
// TRNSPSRCB, 12 MOVB2D, 4 MOVB2A, 2 MOVA2D and 4 set-up instructions = 42;
// fp32 DEST 82 replayed moves, 4 set-up and 12 config read-modify-write
// instructions = 98) at dest_move cycles each.
func TestTransposeDestCycles(t *testing.T) {
	p := Default()
	for _, tc := range []struct {
		name  string
		fp32  bool
		insns float64
	}{
		{"16-bit DEST", false, 42},
		{"fp32 DEST", true, 98},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := transposeDestCycles(p, tc.fp32)
			if want := tc.insns * p.DestMoveCycles; got != want {
				t.Errorf("transpose_wh_dest costs %g cycles, want %g (%g instructions)", got, want, tc.insns)
			}
		})
	}
}
