package numerics

import "fmt"

// Tile geometry.
const (
	TileDim       = 32                  // edge of a tile
	FaceDim       = 16                  // edge of a face
	TileElems     = TileDim * TileDim   // values per tile (1024)
	FaceElems     = FaceDim * FaceDim   // values per face (256)
	GroupsPerTile = TileElems / FaceDim // shared-exponent groups (face rows) per tile (64)
)

// FaceIndex returns the position of element (r, c), 0 <= r, c < 32, of a
// 32x32 tile in face order:
// ((r/16)*2 + c/16)*256 + (r%16)*16 + c%16.
func FaceIndex(r, c int) int {
	return ((r/FaceDim)*2+c/FaceDim)*FaceElems + (r%FaceDim)*FaceDim + c%FaceDim
}

// FacePos is the inverse of FaceIndex: FaceIndex(FacePos(i)) == i for
// 0 <= i < TileElems.
func FacePos(i int) (r, c int) {
	face, off := i/FaceElems, i%FaceElems
	return (face/2)*FaceDim + off/FaceDim, (face%2)*FaceDim + off%FaceDim
}

// TilesFor returns how many tiles a [rows, cols] matrix occupies once both
// dimensions are padded to multiples of 32.
func TilesFor(rows, cols int) int {
	return ceilTiles(rows) * ceilTiles(cols)
}

func ceilTiles(n int) int { return (n + TileDim - 1) / TileDim }

// checkMatrix panics when a caller passes a slice that does not match the
// shape it claims; that is a programming error, not bad user input.
func checkMatrix(fn string, n, rows, cols int) {
	if rows < 0 || cols < 0 || n != rows*cols {
		panic(fmt.Sprintf("numerics.%s: %d values do not form a [%d, %d] matrix (want rows*cols values, rows and cols >= 0)", fn, n, rows, cols))
	}
}

// Tilize converts a row-major [rows, cols] matrix into tiles in row-major
// tile order, each tile TileElems values in face order. rows and cols need
// not be multiples of 32: the padding is 0.
// len(result) == TilesFor(rows, cols)*TileElems.
// It panics if len(data) != rows*cols.
func Tilize(data []float32, rows, cols int) []float32 {
	checkMatrix("Tilize", len(data), rows, cols)
	tc := ceilTiles(cols)
	out := make([]float32, TilesFor(rows, cols)*TileElems)
	for r := 0; r < rows; r++ {
		rowBase := (r / TileDim) * tc * TileElems
		for c := 0; c < cols; c++ {
			out[rowBase+(c/TileDim)*TileElems+FaceIndex(r%TileDim, c%TileDim)] = data[r*cols+c]
		}
	}
	return out
}

// Untilize is the inverse of Tilize: it reads tiles in row-major tile order
// (face order inside each tile) and returns the row-major [rows, cols]
// matrix, dropping the padding. It panics if
// len(tiles) != TilesFor(rows, cols)*TileElems.
func Untilize(tiles []float32, rows, cols int) []float32 {
	if rows < 0 || cols < 0 || len(tiles) != TilesFor(rows, cols)*TileElems {
		panic(fmt.Sprintf("numerics.Untilize: %d values are not the %d tiles of a [%d, %d] matrix", len(tiles), TilesFor(max(rows, 0), max(cols, 0)), rows, cols))
	}
	tc := ceilTiles(cols)
	out := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		rowBase := (r / TileDim) * tc * TileElems
		for c := 0; c < cols; c++ {
			out[r*cols+c] = tiles[rowBase+(c/TileDim)*TileElems+FaceIndex(r%TileDim, c%TileDim)]
		}
	}
	return out
}

// TilizeBatch tilizes batch independent [rows, cols] matrices stored one
// after the other, padding each to whole tiles as a tile-layout tensor of
// shape [batch, rows, cols] does. It panics if
// len(data) != batch*rows*cols.
func TilizeBatch(data []float32, batch, rows, cols int) []float32 {
	checkMatrix("TilizeBatch", len(data), batch, rows*cols)
	per := rows * cols
	out := make([]float32, 0, batch*TilesFor(rows, cols)*TileElems)
	for b := 0; b < batch; b++ {
		out = append(out, Tilize(data[b*per:(b+1)*per], rows, cols)...)
	}
	return out
}

// UntilizeBatch is the inverse of TilizeBatch. It panics if
// len(tiles) != batch*TilesFor(rows, cols)*TileElems.
func UntilizeBatch(tiles []float32, batch, rows, cols int) []float32 {
	per := TilesFor(rows, cols) * TileElems
	if batch < 0 || rows < 0 || cols < 0 || len(tiles) != batch*per {
		panic(fmt.Sprintf("numerics.UntilizeBatch: %d values are not the tiles of %d [%d, %d] matrices", len(tiles), batch, rows, cols))
	}
	out := make([]float32, 0, batch*rows*cols)
	for b := 0; b < batch; b++ {
		out = append(out, Untilize(tiles[b*per:(b+1)*per], rows, cols)...)
	}
	return out
}
