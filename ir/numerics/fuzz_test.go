package numerics

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// fuzzTile turns arbitrary bytes into a tile: the first len(data)/4 values
// are the little-endian float32 bit patterns in data; the rest repeat them
// with their bits scrambled so every group is non-trivial.
func fuzzTile(data []byte) []float32 {
	tile := make([]float32, TileElems)
	n := min(len(data)/4, TileElems)
	if n == 0 {
		return tile
	}
	for i := range tile {
		bits := binary.LittleEndian.Uint32(data[4*(i%n):])
		if i >= n {
			bits ^= uint32(i) * 0x9E3779B9
		}
		tile[i] = math.Float32frombits(bits)
	}
	return tile
}

// FuzzBFPRoundTrip asserts that pack -> unpack -> pack is the identity on
// bytes for bfp8_b and bfp4_b, and that unpack -> pack -> unpack keeps
// every value bit for bit.
func FuzzBFPRoundTrip(f *testing.F) {
	le := func(vals ...uint32) []byte {
		b := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], v)
		}
		return b
	}
	f.Add(le(0x3F800000))                                     // 1.0
	f.Add(le(0x3F800000, 0x3FFF0000, 0xBF830000))             // saturation and ties
	f.Add(le(0x7FC00000, 0x7F800000, 0xFF800001, 0x7F7FFFFF)) // NaN, Inf, max
	f.Add(le(0x00000001, 0x00400000, 0x80000000))             // subnormals, -0
	f.Add(le(0, 0, 0, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		tile := fuzzTile(data)
		for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
			checkIdempotent(t, dt, tile)
			b, _ := PackTile(dt, tile)
			v1, _ := UnpackTile(dt, b)
			b2, _ := PackTile(dt, v1)
			v2, _ := UnpackTile(dt, b2)
			for i := range v1 {
				if math.Float32bits(v1[i]) != math.Float32bits(v2[i]) {
					t.Fatalf("%s: element %d decodes to %#08x then %#08x", dt, i, math.Float32bits(v1[i]), math.Float32bits(v2[i]))
				}
			}
		}
	})
}
