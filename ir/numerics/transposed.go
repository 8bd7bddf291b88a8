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
