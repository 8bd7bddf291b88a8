package numerics

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Transposed tiles (ir.TensorType.TilesTransposed): a weight fed to SrcB
// is stored with every 32x32 tile transposed, the tiles in their usual
// order, so a block float's shared-exponent group (one face row as
// stored) is 16 consecutive rows of one column of the logical matrix:
// along K of a [K, N] matmul weight, where the tile layout groups along N.

// TransposeTiles returns consecutive face-order tiles (len(tiles) a
// multiple of TileElems) each transposed: element (r, c) of tile t of the
// result is element (c, r) of tile t of tiles. It is its own inverse. It
// panics if len(tiles) is not a multiple of TileElems.
func TransposeTiles(tiles []float32) []float32 {
	if len(tiles)%TileElems != 0 {
		panic(fmt.Sprintf("numerics.TransposeTiles: %d values are not whole tiles of %d", len(tiles), TileElems))
	}
	out := make([]float32, len(tiles))
	for t := 0; t < len(tiles); t += TileElems {
		src, dst := tiles[t:t+TileElems], out[t:t+TileElems]
		for r := 0; r < TileDim; r++ {
			for c := 0; c < TileDim; c++ {
				dst[FaceIndex(r, c)] = src[FaceIndex(c, r)]
			}
		}
	}
	return out
}

// TilizeTransposed is Tilize with every tile transposed
// (TransposeTiles(Tilize(data, rows, cols))): the tiles a [rows, cols]
// matrix stored in transposed tiles holds, in storage order. It panics as
// Tilize does.
func TilizeTransposed(data []float32, rows, cols int) []float32 {
	return TransposeTiles(Tilize(data, rows, cols))
}

// UntilizeTransposed is the inverse of TilizeTransposed. It panics as
// Untilize does.
func UntilizeTransposed(tiles []float32, rows, cols int) []float32 {
	return Untilize(TransposeTiles(tiles), rows, cols)
}

// QuantizeMatrixTransposed rounds a row-major [rows, cols] matrix through
// dt's storage in transposed tiles and returns it row-major: for a block
// float each shared exponent covers 16 consecutive, 16-aligned rows of one
// column (QuantizeMatrix groups 16 columns of one row), so it equals
// transpose(QuantizeMatrix(dt, transpose(data), cols, rows)). Formats
// without shared exponents round as QuantizeMatrix does. It panics as
// QuantizeMatrix does.
func QuantizeMatrixTransposed(dt ir.DType, data []float32, rows, cols int) []float32 {
	checkMatrix("QuantizeMatrixTransposed", len(data), rows, cols)
	if !dt.IsBlockFloat() {
		return Quantize(dt, data)
	}
	return UntilizeTransposed(Quantize(dt, TilizeTransposed(data, rows, cols)), rows, cols)
}

// MatmulSrcB returns the row-major [m, n] product of row-major a [m, k]
// (the activation) and w [k, n] (the weight) as the device computes it
// with the weight on SrcB (ir.WeightsOnSrcB): C^T = W^T X^T, in0 = w^T
// (SrcB) and in1 = a^T (SrcA, transposed on unpack) through Matmul's
// datapath into an fp32 DEST from +0, each result tile transposed back in
// DEST (transpose_wh_dest moves values unchanged). Its phases round apart
// from Matmul(a, w, ...) (the same products fall into other fidelity
// phases). It panics as Matmul does.
func MatmulSrcB(a, w []float32, m, k, n int, f ir.MathFidelity) []float32 {
	checkMatrix("MatmulSrcB (a)", len(a), m, k)
	checkMatrix("MatmulSrcB (w)", len(w), k, n)
	return transpose(Matmul(transpose(w, k, n), transpose(a, m, k), n, k, m, f), n, m)
}

// transpose is the row-major [cols, rows] transpose of row-major x
// [rows, cols].
func transpose(x []float32, rows, cols int) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = x[r*cols+c]
		}
	}
	return out
}
