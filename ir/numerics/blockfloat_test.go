package numerics

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
)

// tileOf builds a face-order tile from (row, col) -> value; the rest is 0.
func tileOf(vals map[[2]int]float32) []float32 {
	t := make([]float32, TileElems)
	for rc, v := range vals {
		t[FaceIndex(rc[0], rc[1])] = v
	}
	return t
}

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

// handTile is the tile both hand-computed block-float tests pack.
//
// Group 0 (face 0, row 0) holds 3.0, 1.0, -0.75, 0.1, 2.5. Their fp32
// exponents are 128, 127, 126, 123, 128, so the shared exponent is 128
// (0x80). Group 1 (face 0, row 1) holds only 1.0: exponent 127 (0x7F).
// Group 16 (face 1, row 0) holds -6.0: exponent 129 (0x81). Group 63
// (face 3, row 15) holds 0.5 at (31, 31): exponent 126 (0x7E).
var handTile = tileOf(map[[2]int]float32{
	{0, 0}: 3.0, {0, 1}: 1.0, {0, 2}: -0.75, {0, 3}: 0.1, {0, 4}: 2.5,
	{1, 0}:   1.0,
	{0, 16}:  -6.0,
	{31, 31}: 0.5,
})

// handExponents writes the expected exponent section of handTile: four
// exponents per little-endian word, group 0 in the low byte.
func handExponents(b []byte) {
	// word 0 = groups 0..3 = 0x80, 0x7F, 0, 0
	binary.LittleEndian.PutUint32(b[0:], 0x00007F80)
	// word 4 = groups 16..19 = 0x81, 0, 0, 0
	binary.LittleEndian.PutUint32(b[16:], 0x00000081)
	// word 15 = groups 60..63 = 0, 0, 0, 0x7E
	binary.LittleEndian.PutUint32(b[60:], 0x7E000000)
}

func TestPackBFP8HandTile(t *testing.T) {
	want := make([]byte, 1088)
	handExponents(want)
	// Mantissas, one byte per value in face order after the 64 exponents.
	// Magnitude = 24-bit significand >> ((shared - own) + 17), RNE.
	//   3.0  : sig 0xC00000, shift 17      -> 0x60
	//   1.0  : sig 0x800000, shift 18      -> 0x20
	//  -0.75 : sig 0xC00000, shift 19      -> 0x18 | sign 0x80 = 0x98
	//   0.1  : sig 0xCCCCCD, shift 22      -> 3 (remainder 0x0CCCCD < half 0x200000) = 0x03
	// so word 16 (bytes 64..67) = 0x03982060.
	binary.LittleEndian.PutUint32(want[64:], 0x03982060)
	want[64+4] = 0x50    //  2.5 : sig 0xA00000, shift 17 -> 0x50
	want[64+16] = 0x40   //  1.0 in group 1 (shared 127): shift 17 -> 0x40
	want[64+256] = 0xE0  // -6.0 in group 16 (shared 129): 0xC00000 >> 17 = 0x60, sign -> 0xE0
	want[64+1023] = 0x40 //  0.5 in group 63 (shared 126): 0x40
	got, err := PackTile(ir.BFP8B, handTile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PackTile(bfp8_b) mismatch (-want +got):\n%s", diff)
	}
	if w := binary.LittleEndian.Uint32(got[0:]); w != 0x00007F80 {
		t.Errorf("exponent word 0 = %#08x, want 0x00007f80", w)
	}

	// Decoding: m * 2^(shared-133). 0.1 -> 3 * 2^-5 = 0.09375.
	wantVals := tileOf(map[[2]int]float32{
		{0, 0}: 3.0, {0, 1}: 1.0, {0, 2}: -0.75, {0, 3}: 0.09375, {0, 4}: 2.5,
		{1, 0}: 1.0, {0, 16}: -6.0, {31, 31}: 0.5,
	})
	vals, err := UnpackTile(ir.BFP8B, got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantVals, vals); diff != "" {
		t.Errorf("UnpackTile(bfp8_b) mismatch (-want +got):\n%s", diff)
	}
}

func TestPackBFP4HandTile(t *testing.T) {
	want := make([]byte, 576)
	handExponents(want)
	// Nibbles, two values per byte (element 0 low), shift = (shared-own)+21:
	//   3.0  : 0xC00000 >> 21 = 6                                    -> 0x6
	//   1.0  : 0x800000 >> 22 = 2                                    -> 0x2
	//  -0.75 : 0xC00000 >> 23 = 1, remainder 0x400000 == half: tie,
	//          1 is odd so it rounds up to 2; sign -> 0x8|0x2        -> 0xA
	//   0.1  : 0xCCCCCD >> 26 rounds to 0                           -> 0x0
	//   2.5  : 0xA00000 >> 21 = 5                                    -> 0x5
	// so word 16 (bytes 64..67) = 0x00050A26.
	binary.LittleEndian.PutUint32(want[64:], 0x00050A26)
	want[64+16/2] = 0x04   // 1.0 in group 1: 4, low nibble (element 16 is even)
	want[64+256/2] = 0x0E  // -6.0: 6 | sign 8
	want[64+1023/2] = 0x40 // 0.5 in group 63: 4 in the high nibble (element 1023 is odd)
	got, err := PackTile(ir.BFP4B, handTile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PackTile(bfp4_b) mismatch (-want +got):\n%s", diff)
	}
	// Decoding: m * 2^(shared-129). -0.75 became -2 * 2^-1 = -1.
	wantVals := tileOf(map[[2]int]float32{
		{0, 0}: 3.0, {0, 1}: 1.0, {0, 2}: -1.0, {0, 4}: 2.5,
		{1, 0}: 1.0, {0, 16}: -6.0, {31, 31}: 0.5,
	})
	vals, err := UnpackTile(ir.BFP4B, got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantVals, vals); diff != "" {
		t.Errorf("UnpackTile(bfp4_b) mismatch (-want +got):\n%s", diff)
	}
}

// codeOf packs a tile whose group 0 is vals and returns the shared exponent
// and the sign|magnitude code of element idx.
func codeOf(t *testing.T, dt ir.DType, vals []float32, idx int) (exp uint8, code uint8) {
	t.Helper()
	tile := make([]float32, TileElems)
	copy(tile, vals)
	b, err := PackTile(dt, tile)
	if err != nil {
		t.Fatal(err)
	}
	if dt == ir.BFP8B {
		return b[0], b[64+idx]
	}
	return b[0], b[64+idx/2] >> (4 * uint(idx%2)) & 0xF
}

func TestBlockFloatRounding(t *testing.T) {
	inf := float32(math.Inf(1))
	tests := []struct {
		name     string
		dt       ir.DType
		group    []float32 // group 0; the element under test is the last one
		wantExp  uint8
		wantCode uint8
		wantVal  float32
	}{
		// bfp8_b, shared exponent 127 from the leading 1.0 (shift 17 at 127).
		{"bfp8 tie to even down", ir.BFP8B, []float32{1, f32(0x3F810000)}, 127, 0x40, 1},              // 1+2^-7: 0x810000>>17 = 0x40 rem half
		{"bfp8 tie to even up", ir.BFP8B, []float32{1, f32(0x3F830000)}, 127, 0x42, 1.03125},          // 0x41 rem half -> 0x42
		{"bfp8 above tie", ir.BFP8B, []float32{1, f32(0x3F810001)}, 127, 0x41, 1.015625},              // rem > half
		{"bfp8 negative tie up", ir.BFP8B, []float32{1, f32(0xBF830000)}, 127, 0xC2, -1.03125},        // sign | 0x42
		{"bfp8 shifted tie down", ir.BFP8B, []float32{1, f32(0x3F020000)}, 127, 0x20, 0.5},            // 0.5078125: 0x820000>>18 = 0x20 rem half
		{"bfp8 shifted tie up", ir.BFP8B, []float32{1, f32(0x3F060000)}, 127, 0x22, 0.53125},          // 0.5234375: 0x21 rem half -> 0x22
		{"bfp8 saturates on tie", ir.BFP8B, []float32{f32(0x3FFF0000)}, 127, 0x7F, 1.984375},          // 1.9921875: 127 rem half -> 128 -> 0x7F
		{"bfp8 saturates above tie", ir.BFP8B, []float32{f32(0x3FFFFFFF)}, 127, 0x7F, 1.984375},       // 1.9999999 -> 128 -> 0x7F
		{"bfp8 negative saturates", ir.BFP8B, []float32{f32(0xBFFF0000)}, 127, 0xFF, -1.984375},       // sign | 0x7F
		{"bfp8 sign cleared at zero", ir.BFP8B, []float32{1, -0x1p-10}, 127, 0x00, 0},                 // shift 27 -> 0, not 0x80
		{"bfp8 negative zero", ir.BFP8B, []float32{1, float32(math.Copysign(0, -1))}, 127, 0x00, 0},   //
		{"bfp8 rounds up to one ulp", ir.BFP8B, []float32{1, f32(0x3C000001)}, 127, 0x01, 0.015625},   // 2^-7+: 0x800001>>24, rem > half -> 1
		{"bfp8 exact tie to zero", ir.BFP8B, []float32{1, 0x1p-7}, 127, 0x00, 0},                      // 0x800000>>24: rem == half, 0 even
		{"bfp8 Inf", ir.BFP8B, []float32{1, inf}, 255, 0x40, inf},                                     // shared 255; 1.0 shifts out
		{"bfp8 -Inf", ir.BFP8B, []float32{-inf}, 255, 0xC0, -inf},                                     //
		{"bfp8 finite beside Inf", ir.BFP8B, []float32{inf, 0x1p127}, 255, 0x20, 0x1p127},             // 0x800000>>18
		{"bfp8 subnormal group", ir.BFP8B, []float32{f32(0x00400000)}, 1, 0x20, f32(0x00400000)},      // exp 1, sig 0x400000>>17
		{"bfp8 all round to zero", ir.BFP8B, []float32{f32(0x00000001), f32(0x00010000)}, 0, 0x00, 0}, // sig <= 0x10000 >> 17 -> 0: exponent stored as 0
		{"bfp4 tie to even down", ir.BFP4B, []float32{1, 1.125}, 127, 0x4, 1},                         // 0x900000>>21 = 4 rem half
		{"bfp4 tie to even up", ir.BFP4B, []float32{1, 1.375}, 127, 0x6, 1.5},                         // 0xB00000>>21 = 5 rem half -> 6
		{"bfp4 negative tie up", ir.BFP4B, []float32{1, -1.375}, 127, 0xE, -1.5},                      // sign 8 | 6
		{"bfp4 saturates on tie", ir.BFP4B, []float32{1.875}, 127, 0x7, 1.75},                         // 0xF00000>>21 = 7 rem half -> 8 -> 7
		{"bfp4 saturates above tie", ir.BFP4B, []float32{1.9375}, 127, 0x7, 1.75},                     // rem > half -> 8 -> 7
		{"bfp4 sign cleared at zero", ir.BFP4B, []float32{1, -0.0625}, 127, 0x0, 0},                   // shift 25 -> 0, not 0x8
		{"bfp4 quarter", ir.BFP4B, []float32{1, -0.25}, 127, 0x9, -0.25},                              // 0x800000>>23 = 1
		{"bfp4 Inf", ir.BFP4B, []float32{inf}, 255, 0x4, inf},                                         //
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := len(tt.group) - 1
			exp, code := codeOf(t, tt.dt, tt.group, idx)
			if exp != tt.wantExp || code != tt.wantCode {
				t.Errorf("exponent, code = %#02x, %#02x; want %#02x, %#02x", exp, code, tt.wantExp, tt.wantCode)
			}
			tile := make([]float32, TileElems)
			copy(tile, tt.group)
			got := Quantize(tt.dt, tile)[idx]
			if got != tt.wantVal || math.Signbit(float64(got)) != math.Signbit(float64(tt.wantVal)) {
				t.Errorf("decoded value = %v, want %v", got, tt.wantVal)
			}
		})
	}
}

func TestBlockFloatNaN(t *testing.T) {
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		tile := make([]float32, TileElems)
		tile[0] = f32(0x7FC00000) // quiet NaN
		tile[1] = 1
		tile[16] = f32(0xFFC00000) // negative quiet NaN in group 1
		got := Quantize(dt, tile)
		if !math.IsNaN(float64(got[0])) || !math.IsNaN(float64(got[16])) {
			t.Errorf("%s: NaN became %v, %v", dt, got[0], got[16])
		}
		if got[1] != 0 {
			t.Errorf("%s: 1.0 beside NaN = %v, want 0 (shifted out by exponent 255)", dt, got[1])
		}
		if !math.Signbit(float64(got[16])) {
			t.Errorf("%s: negative NaN lost its sign", dt)
		}
	}
}

func TestBlockFloatAllZero(t *testing.T) {
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		b, err := PackTile(dt, make([]float32, TileElems))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(make([]byte, dt.TileBytes()), b); diff != "" {
			t.Errorf("%s: zero tile is not all zero bytes (-want +got):\n%s", dt, diff)
		}
		// A zero group beside a non-zero one keeps exponent 0.
		tile := make([]float32, TileElems)
		tile[FaceIndex(0, 0)] = 8
		b, _ = PackTile(dt, tile)
		if b[0] != 130 || b[1] != 0 {
			t.Errorf("%s: exponents = %d, %d; want 130, 0", dt, b[0], b[1])
		}
	}
}

// representableTile returns a tile whose every group has a random shared
// exponent and random sign|magnitude codes, so it is exactly representable
// in the block format with magBits magnitude bits.
func representableTile(r *rand.Rand, magBits uint) []float32 {
	tile := make([]float32, TileElems)
	for g := 0; g < GroupsPerTile; g++ {
		e := 100 + r.IntN(60)
		for j := 0; j < FaceDim; j++ {
			m := r.IntN(1 << magBits)
			if j == 0 {
				m |= 1 << (magBits - 1) // the group maximum keeps its hidden bit
			}
			v := float32(math.Ldexp(float64(m), e-127-int(magBits-1)))
			if r.IntN(2) == 0 {
				v = -v
			}
			if m == 0 {
				v = 0
			}
			tile[g*FaceDim+j] = v
		}
	}
	return tile
}

func TestBlockFloatRoundTripRepresentable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		dt      ir.DType
		magBits uint
	}{{ir.BFP8B, 7}, {ir.BFP4B, 3}}
	for _, tt := range tests {
		t.Run(tt.dt.String(), func(t *testing.T) {
			for i := 0; i < 20; i++ {
				tile := representableTile(r, tt.magBits)
				b, err := PackTile(tt.dt, tile)
				if err != nil {
					t.Fatal(err)
				}
				got, err := UnpackTile(tt.dt, b)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tile, got); diff != "" {
					t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestBlockFloatIdempotentRandomBits runs the fuzz property over random
// bit patterns (every exponent, NaN and Inf included) and over tiles with a
// narrow exponent spread.
func TestBlockFloatIdempotentRandomBits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		tile := make([]float32, TileElems)
		for j := range tile {
			bits := r.Uint32()
			if i%2 == 1 { // exponents within 127 +- 8
				bits = bits&0x807FFFFF | uint32(119+r.IntN(17))<<23
			}
			tile[j] = math.Float32frombits(bits)
		}
		for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
			checkIdempotent(t, dt, tile)
		}
	}
}

func checkIdempotent(t *testing.T, dt ir.DType, tile []float32) {
	t.Helper()
	b1, err := PackTile(dt, tile)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := UnpackTile(dt, b1)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := PackTile(dt, vals)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b1, b2); diff != "" {
		t.Fatalf("%s: pack(unpack(pack(x))) != pack(x) (-first +second):\n%s", dt, diff)
	}
}
