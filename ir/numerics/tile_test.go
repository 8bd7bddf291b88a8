package numerics

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFaceIndex(t *testing.T) {
	tests := []struct {
		r, c, want int
	}{
		{0, 0, 0},
		{0, 15, 15},
		{1, 0, 16},
		{15, 15, 255},
		{0, 16, 256},   // first element of the top-right face
		{5, 20, 340},   // face 1: 256 + 5*16 + 4
		{16, 0, 512},   // first element of the bottom-left face
		{16, 16, 768},  // first element of the bottom-right face
		{17, 18, 786},  // face 3: 768 + 1*16 + 2
		{31, 31, 1023}, // last element
		{31, 0, 752},   // face 2: 512 + 15*16
		{0, 31, 256 + 15},
	}
	for _, tt := range tests {
		if got := FaceIndex(tt.r, tt.c); got != tt.want {
			t.Errorf("FaceIndex(%d, %d) = %d, want %d", tt.r, tt.c, got, tt.want)
		}
	}
}

func TestFacePosInvertsFaceIndex(t *testing.T) {
	seen := make([]bool, TileElems)
	for r := 0; r < TileDim; r++ {
		for c := 0; c < TileDim; c++ {
			i := FaceIndex(r, c)
			if seen[i] {
				t.Fatalf("FaceIndex(%d, %d) = %d is not unique", r, c, i)
			}
			seen[i] = true
			if gr, gc := FacePos(i); gr != r || gc != c {
				t.Errorf("FacePos(%d) = (%d, %d), want (%d, %d)", i, gr, gc, r, c)
			}
		}
	}
}

func TestTilizeHandTile(t *testing.T) {
	// A [2, 3] matrix fills rows 0 and 1, columns 0..2 of one tile: face 0,
	// positions 0..2 and 16..18; everything else is padding.
	data := []float32{1, 2, 3, 4, 5, 6}
	want := make([]float32, TileElems)
	copy(want[0:], []float32{1, 2, 3})
	copy(want[16:], []float32{4, 5, 6})
	got := Tilize(data, 2, 3)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tilize mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(data, Untilize(got, 2, 3)); diff != "" {
		t.Errorf("Untilize mismatch (-want +got):\n%s", diff)
	}
}

func TestTilizeRoundTripWithPadding(t *testing.T) {
	tests := []struct{ rows, cols int }{
		{1, 1}, {32, 32}, {33, 40}, {64, 17}, {5, 96}, {0, 7},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			data := make([]float32, tt.rows*tt.cols)
			for r := 0; r < tt.rows; r++ {
				for c := 0; c < tt.cols; c++ {
					data[r*tt.cols+c] = float32(r*100 + c + 1) // never 0
				}
			}
			tiles := Tilize(data, tt.rows, tt.cols)
			if want := TilesFor(tt.rows, tt.cols) * TileElems; len(tiles) != want {
				t.Fatalf("len(Tilize) = %d, want %d", len(tiles), want)
			}
			nonzero := 0
			for _, v := range tiles {
				if v != 0 {
					nonzero++
				}
			}
			if nonzero != len(data) {
				t.Errorf("Tilize has %d non-zero values, want %d (padding must be 0)", nonzero, len(data))
			}
			if diff := cmp.Diff(data, Untilize(tiles, tt.rows, tt.cols)); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTilizeTileOrder(t *testing.T) {
	// [33, 40] is 2x2 tiles in row-major tile order. Element (32, 39) is in
	// tile (1, 1) = tile 3 at tile position (0, 7).
	rows, cols := 33, 40
	data := make([]float32, rows*cols)
	for i := range data {
		data[i] = float32(i/cols*100 + i%cols + 1)
	}
	tiles := Tilize(data, rows, cols)
	tests := []struct {
		name string
		idx  int
		want float32
	}{
		{"(32,39) in tile 3", 3*TileElems + FaceIndex(0, 7), 3240},
		{"(0,32) in tile 1", 1*TileElems + FaceIndex(0, 0), 33},
		{"(17,33) in tile 1", 1*TileElems + FaceIndex(17, 1), 1734},
		{"(32,0) in tile 2", 2*TileElems + FaceIndex(0, 0), 3201},
		{"padding column 40", 1*TileElems + FaceIndex(0, 8), 0},
		{"padding row 33", 2*TileElems + FaceIndex(1, 0), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tiles[tt.idx]; got != tt.want {
				t.Errorf("tiles[%d] = %v, want %v", tt.idx, got, tt.want)
			}
		})
	}
}

func TestTilizeBatchRoundTrip(t *testing.T) {
	batch, rows, cols := 3, 5, 33
	data := make([]float32, batch*rows*cols)
	for i := range data {
		data[i] = float32(i + 1)
	}
	tiles := TilizeBatch(data, batch, rows, cols)
	if want := batch * 2 * TileElems; len(tiles) != want {
		t.Fatalf("len(TilizeBatch) = %d, want %d", len(tiles), want)
	}
	// Batch 1 starts a fresh tile: its (0, 0) is data[rows*cols].
	if got, want := tiles[2*TileElems], data[rows*cols]; got != want {
		t.Errorf("batch 1 first value = %v, want %v", got, want)
	}
	if diff := cmp.Diff(data, UntilizeBatch(tiles, batch, rows, cols)); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestTilizePanicsOnBadShape(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
	}{
		{"Tilize", func() { Tilize(make([]float32, 5), 2, 3) }},
		{"Untilize", func() { Untilize(make([]float32, 5), 2, 3) }},
		{"TilizeBatch", func() { TilizeBatch(make([]float32, 5), 2, 1, 3) }},
		{"UntilizeBatch", func() { UntilizeBatch(make([]float32, TileElems), 2, 1, 3) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, tt.name) {
					t.Errorf("panic = %v, want a message naming %s", r, tt.name)
				}
			}()
			tt.fn()
		})
	}
}
