package numerics

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
)

// transposeMatrix is the row-major [cols, rows] transpose of a row-major
// [rows, cols] matrix.
func transposeMatrix(m []float32, rows, cols int) []float32 {
	out := make([]float32, len(m))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = m[r*cols+c]
		}
	}
	return out
}

// A weight stored in transposed tiles shares its block-float exponents
// down columns (along K): a 32x32 tile whose column c holds values of
// binade c-16, each with at most the format's fraction bits, is stored
// exactly, where today's layout (exponents along rows, 16 binades in a
// group) loses the small columns' low bits.
func TestQuantizeMatrixTransposedGroupsAlongColumns(t *testing.T) {
	for _, tc := range []struct {
		dt   ir.DType
		frac int // fraction bits the format keeps
	}{{ir.BFP8B, 6}, {ir.BFP4B, 2}} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			w := make([]float32, TileElems)
			for r := 0; r < TileDim; r++ {
				for c := 0; c < TileDim; c++ {
					m := 1 + float64(r%(1<<tc.frac))/float64(int(1)<<tc.frac)
					if (r+c)%3 == 0 {
						m = -m
					}
					w[r*TileDim+c] = float32(m * math.Exp2(float64(c-16)))
				}
			}
			if diff := cmp.Diff(w, QuantizeMatrixTransposed(tc.dt, w, TileDim, TileDim)); diff != "" {
				t.Errorf("transposed tiles: want the tile stored exactly (-want +got):\n%s", diff)
			}
			if cmp.Equal(w, QuantizeMatrix(tc.dt, w, TileDim, TileDim)) {
				t.Error("today's tile layout stores the tile exactly too; the test does not tell the layouts apart")
			}
		})
	}
}

// On random matrices (not whole tiles, over many binades) quantizing in
// transposed tiles equals transpose(QuantizeMatrix(transpose(w))), and
// the bytes TilizeTransposed packs unpack to the same values.
func TestQuantizeMatrixTransposedIsTransposeOfQuantize(t *testing.T) {
	const rows, cols = 40, 72
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B, ir.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(dt)))
			w := make([]float32, rows*cols)
			for i := range w {
				w[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(12)-6)))
			}
			want := transposeMatrix(QuantizeMatrix(dt, transposeMatrix(w, rows, cols), cols, rows), cols, rows)
			got := QuantizeMatrixTransposed(dt, w, rows, cols)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("QuantizeMatrixTransposed (-want +got):\n%s", diff)
			}
			b, err := PackTiles(dt, TilizeTransposed(w, rows, cols))
			if err != nil {
				t.Fatal(err)
			}
			tiles, err := UnpackTiles(dt, b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, UntilizeTransposed(tiles, rows, cols)); diff != "" {
				t.Errorf("packed transposed tiles, unpacked (-want +got):\n%s", diff)
			}
			if dt.IsBlockFloat() && cmp.Equal(want, QuantizeMatrix(dt, w, rows, cols)) {
				t.Error("today's layout gives the same values; the random matrix does not tell the layouts apart")
			}
		})
	}
}

// MatmulSrcB is the swapped tile product of TestExactMatmulFidelityOnSrcB
// (swappedDiffs: MatmulTile with in0 = the weight's tile transposed, in1 =
// the activation's tile transposed, accumulated over k tiles in fp32 DEST,
// the result tile transposed back), not today's Matmul; at HiFi2 it
// equals its HiFi4 for bfp8_b weights.
func TestMatmulSrcBIsTheSwappedTileProduct(t *testing.T) {
	const m, k, n = 32, 64, 64 // 2 k tiles, 2 output tiles
	r := rand.New(rand.NewPCG(9, 9))
	x := make([]float32, m*k)
	w := make([]float32, k*n)
	for i := range x {
		x[i] = RoundBF16(float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4))))
	}
	for i := range w {
		w[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4)))
	}
	w = QuantizeMatrixTransposed(ir.BFP8B, w, k, n)
	xt, wt := Tilize(x, m, k), Tilize(w, k, n) // tiles [mt][kt], [kt][nt]
	want := make([]float32, 0, m*n)
	for j := 0; j < n/TileDim; j++ {
		acc := make([]float32, TileElems)
		for p := 0; p < k/TileDim; p++ {
			wTile := wt[(p*(n/TileDim)+j)*TileElems:][:TileElems]
			xTile := xt[p*TileElems:][:TileElems]
			MatmulTile(acc, transposeTile(wTile), transposeTile(xTile), ir.HiFi4, true)
		}
		want = append(want, transposeTile(acc)...)
	}
	want = Untilize(want, m, n)
	got := MatmulSrcB(x, w, m, k, n, ir.HiFi4)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MatmulSrcB (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(got, MatmulSrcB(x, w, m, k, n, ir.HiFi2)); diff != "" {
		t.Errorf("MatmulSrcB at HiFi2 differs from HiFi4 for bfp8_b weights (-HiFi4 +HiFi2):\n%s", diff)
	}
	if cmp.Equal(got, Matmul(x, w, m, k, n, ir.HiFi4)) {
		t.Error("MatmulSrcB equals today's Matmul bit for bit; the test does not tell the placements apart")
	}
}
