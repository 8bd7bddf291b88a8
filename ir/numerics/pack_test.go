package numerics

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

func TestPackTileElementwiseLayouts(t *testing.T) {
	tile := make([]float32, TileElems)
	tile[0] = 1
	tile[1] = f32(0x3F818000) // bf16 tie, rounds up to 0x3F82
	tile[1023] = -2
	tests := []struct {
		dt   ir.DType
		in   []float32
		want map[int][]byte // byte offset -> bytes
	}{
		{ir.FP32, tile, map[int][]byte{0: {0x00, 0x00, 0x80, 0x3F}, 4: {0x00, 0x80, 0x81, 0x3F}, 4092: {0x00, 0x00, 0x00, 0xC0}}},
		{ir.BF16, tile, map[int][]byte{0: {0x80, 0x3F}, 2: {0x82, 0x3F}, 2046: {0x00, 0xC0}}},
		{ir.Int32, intTile(-1, 7, -2147483648), map[int][]byte{0: {0xFF, 0xFF, 0xFF, 0xFF}, 4: {0x07, 0, 0, 0}, 4092: {0, 0, 0, 0x80}}},
		{ir.UInt32, intTile(4294967040, 7, 16777216), map[int][]byte{0: {0x00, 0xFF, 0xFF, 0xFF}, 4: {0x07, 0, 0, 0}, 4092: {0, 0, 0, 0x01}}},
	}
	for _, tt := range tests {
		t.Run(tt.dt.String(), func(t *testing.T) {
			b, err := PackTile(tt.dt, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != tt.dt.TileBytes() {
				t.Fatalf("len = %d, want %d", len(b), tt.dt.TileBytes())
			}
			want := make([]byte, len(b))
			for off, bs := range tt.want {
				copy(want[off:], bs)
			}
			if diff := cmp.Diff(want, b); diff != "" {
				t.Errorf("PackTile mismatch (-want +got):\n%s", diff)
			}
			got, err := UnpackTile(tt.dt, b)
			if err != nil {
				t.Fatal(err)
			}
			wantVals := Quantize(tt.dt, tt.in)
			if diff := cmp.Diff(wantVals, got); diff != "" {
				t.Errorf("UnpackTile mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// intTile returns a tile with first, second at elements 0, 1 and last at
// element 1023.
func intTile(first, second, last float32) []float32 {
	t := make([]float32, TileElems)
	t[0], t[1], t[1023] = first, second, last
	return t
}

func TestPackTileErrors(t *testing.T) {
	tests := []struct {
		name    string
		dt      ir.DType
		tile    []float32
		wantErr string
	}{
		{"short tile", ir.BFP8B, make([]float32, 1000), "1000 values"},
		{"long tile", ir.FP32, make([]float32, 1025), "exactly 1024"},
		{"invalid dtype", ir.InvalidDType, make([]float32, TileElems), "not a storage format"},
		{"int32 fraction", ir.Int32, intTile(0.5, 0, 0), "integers"},
		{"int32 overflow", ir.Int32, intTile(0x1p31, 0, 0), "[-2147483648, 2147483647]"},
		{"uint32 negative", ir.UInt32, intTile(0, 0, -1), "(31, 31)"},
		{"int32 NaN", ir.Int32, intTile(float32(math.NaN()), 0, 0), "int32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PackTile(tt.dt, tt.tile)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("PackTile error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestUnpackTileErrors(t *testing.T) {
	tests := []struct {
		name    string
		dt      ir.DType
		n       int
		wantErr string
	}{
		{"bfp8 one byte short", ir.BFP8B, 1087, "exactly 1088 bytes"},
		{"bfp4 too long", ir.BFP4B, 577, "exactly 576 bytes"},
		{"bf16 fp32-sized", ir.BF16, 4096, "4096 bytes"},
		{"invalid dtype", ir.DType(99), 4096, "not a storage format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := UnpackTile(tt.dt, make([]byte, tt.n))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("UnpackTile error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPackTilesRoundTrip(t *testing.T) {
	tiles := append(append([]float32{}, handTile...), handTile...)
	tiles[TileElems] = 5 // second tile differs
	for _, dt := range ir.AllDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			in := tiles
			if !dt.IsFloat() {
				in = Quantize(dt, tiles)
			}
			b, err := PackTiles(dt, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != 2*dt.TileBytes() {
				t.Fatalf("len = %d, want %d", len(b), 2*dt.TileBytes())
			}
			got, err := UnpackTiles(dt, b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(Quantize(dt, in), got); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := PackTiles(ir.BF16, make([]float32, 1500)); err == nil {
		t.Errorf("PackTiles accepted 1500 values")
	}
	if _, err := UnpackTiles(ir.BFP8B, make([]byte, 1089)); err == nil {
		t.Errorf("UnpackTiles accepted 1089 bytes")
	}
}

func TestQuantizeInts(t *testing.T) {
	in := []float32{2.5, 3.5, -2.5, 0x1p40, -0x1p40, float32(math.NaN()), -3}
	tests := []struct {
		dt   ir.DType
		want []float32
	}{
		{ir.Int32, []float32{2, 4, -2, 2147483520, -2147483648, 0, -3}},
		{ir.UInt32, []float32{2, 4, 0, 4294967040, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.dt.String(), func(t *testing.T) {
			got := Quantize(tt.dt, in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Quantize mismatch (-want +got):\n%s", diff)
			}
			// Saturated values must be packable.
			tile := make([]float32, TileElems)
			copy(tile, got)
			if _, err := PackTile(tt.dt, tile); err != nil {
				t.Errorf("PackTile(Quantize(...)) failed: %v", err)
			}
		})
	}
}

func TestQuantizePartialTile(t *testing.T) {
	// 20 values: one group of 16 plus 4 values of the next group (zero padded).
	in := make([]float32, 20)
	in[0], in[1] = 1, 0.01 // 0.01 is 7 binades below 1.0: 0xA3D70A >> 24 rounds to 1
	in[16] = 0.01          // alone in its group: kept to 7 bits
	got := Quantize(ir.BFP8B, in)
	want := make([]float32, 20)
	want[0], want[1] = 1, 0.015625 // 1 * 2^(127-133)
	want[16] = 82.0 / 8192         // 0xA3D70A >> 17 = 81.92 -> 82; * 2^(120-133)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Quantize mismatch (-want +got):\n%s", diff)
	}
}

func TestQuantizeMatrix(t *testing.T) {
	// [3, 40]: row 0 has 1.0 and 0.01 in group (0, cols 0..15) and 0.01
	// alone in group (0, cols 32..39) of the second tile.
	rows, cols := 3, 40
	data := make([]float32, rows*cols)
	data[0], data[1], data[33] = 1, 0.01, 0.01
	data[2*cols+39] = -3
	want := make([]float32, rows*cols)
	want[0], want[1], want[33] = 1, 0.015625, 82.0/8192
	want[2*cols+39] = -3
	if diff := cmp.Diff(want, QuantizeMatrix(ir.BFP8B, data, rows, cols)); diff != "" {
		t.Errorf("QuantizeMatrix(bfp8_b) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, QuantizeShape(ir.BFP8B, data, ir.Shape{1, rows, cols})); diff != "" {
		t.Errorf("QuantizeShape(bfp8_b) mismatch (-want +got):\n%s", diff)
	}
	bf := QuantizeMatrix(ir.BF16, data, rows, cols)
	if bf[1] != RoundBF16(0.01) || bf[1] == 0.01 {
		t.Errorf("QuantizeMatrix(bf16)[1] = %v, want %v", bf[1], RoundBF16(0.01))
	}
	if got := QuantizeMatrix(ir.FP32, data, rows, cols); !cmp.Equal(data, got) {
		t.Errorf("QuantizeMatrix(fp32) changed the data")
	}
	if got := QuantizeShape(ir.BFP4B, nil, ir.Shape{0, 5}); len(got) != 0 {
		t.Errorf("QuantizeShape of an empty shape = %v", got)
	}
}
