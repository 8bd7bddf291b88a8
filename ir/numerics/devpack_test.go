package numerics

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/ir"
)

// TestPackerBFPWord checks the word the packer forms before a block-float
// pack (ttsim src/tensix.cpp, pack_fmt_conv_mode 0x166 and 0x66).
func TestPackerBFPWord(t *testing.T) {
	f := math.Float32frombits
	for _, tc := range []struct {
		name     string
		x        float32
		fp32Dest bool
		want     uint16
	}{
		{"one", 1, true, 0x3F80},
		{"fp32 low bits dropped, not rounded", f(0x3F80FFFF), true, 0x3F80},
		{"last mantissa bit rounds half up", f(0x3F810000), true, 0x3F82},
		{"half up even from an odd pair", f(0x3F830000), true, 0x3F84},
		{"carry into the exponent", f(0x3FFF0000), true, 0x4000},
		{"NaN to +inf", f(0x7FC00000), true, 0x7F80},
		{"negative NaN to -inf", f(0xFFC00001), true, 0xFF80},
		{"largest finite rounds to inf", f(0x7F7FFFFF), true, 0x7F80},
		{"fp32 subnormal rounds up to the smallest normal", f(0x007F0000), true, 0x0080},
		{"negative fp32 subnormal too", f(0x807F1234), true, 0x8080},
		{"smaller fp32 subnormal to +0", f(0x807E0000), true, 0},
		{"negative zero to +0", float32(math.Copysign(0, -1)), true, 0},
		{"bf16 DEST: last bit half up", f(0x3F810000), false, 0x3F82},
		{"bf16 DEST: low 16 bits ignored", f(0x3F80FFFF), false, 0x3F80},
		{"bf16 DEST: subnormal flushed before rounding", f(0x007F0000), false, 0},
		{"bf16 DEST: carry into the exponent", f(0xBFFF0000), false, 0xC000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PackerBFPWord(tc.x, tc.fp32Dest); got != tc.want {
				t.Errorf("PackerBFPWord(%#08x, %v) = %#04x, want %#04x", math.Float32bits(tc.x), tc.fp32Dest, got, tc.want)
			}
		})
	}
}

// TestPackTileDeviceGroup checks one group's shared exponent and codes
// for bfp8_b and bfp4_b against values worked by hand from ttsim's
// conversion, including where it differs from the exactly rounded pack.
func TestPackTileDeviceGroup(t *testing.T) {
	f := math.Float32frombits
	for _, tc := range []struct {
		name       string
		vals       []float32 // group 0; the rest of the group is zero
		exp        uint8
		bfp8, bfp4 []uint8 // codes of the first len(vals) values
		exact8     bool    // PackTile gives other bfp8_b bytes
		exact4     bool    // PackTile gives other bfp4_b bytes
	}{
		{"all zero: exponent 0", []float32{0, float32(math.Copysign(0, -1))}, 0, []uint8{0, 0}, []uint8{0, 0}, false, false},
		{"one and minus one", []float32{1, -1}, 127, []uint8{0x40, 0xC0}, []uint8{0x4, 0xC}, false, false},
		// 0x3F02: m8 130 after the word step, 130/4 = 32.5 rounds up
		// (exact: to even, 32).
		{"tie of the shift rounds half up", []float32{1, f(0x3F020000)}, 127, []uint8{0x40, 33}, []uint8{0x4, 0x2}, true, false},
		// 0x3F01: the word rounds to 0x3F02, then 33 again (exact: 32.25
		// to 32).
		{"double rounding", []float32{1, f(0x3F010000)}, 127, []uint8{0x40, 33}, []uint8{0x4, 0x2}, true, false},
		// 2^-7 under 2^0: 0.5 of the last place rounds up (exact: to even, 0).
		{"gap of 7: a half rounds up", []float32{1, 0x1p-7}, 127, []uint8{0x40, 1}, []uint8{0x4, 0}, true, false},
		{"gap of 8 gives 0", []float32{1, 0x1p-8}, 127, []uint8{0x40, 0}, []uint8{0x4, 0}, false, false},
		{"no sign on a zero code", []float32{1, -0x1p-9}, 127, []uint8{0x40, 0}, []uint8{0x4, 0}, false, false},
		// 1.9921875 (0x3FFF) becomes 2.0 in the word step: the shared
		// exponent is 128 (exact: 127, the magnitude saturated at 127).
		{"carry raises the shared exponent", []float32{f(0x3FFF0000), 1}, 128, []uint8{0x40, 0x20}, []uint8{0x4, 0x2}, true, true},
		// bfp4_b keeps the top 3 of 7 bits: 1.375 (0x3FB0, code 88)
		// truncates to 5 where rounding to even gives 6.
		{"bfp4_b truncates", []float32{f(0x3FB00000)}, 127, []uint8{88}, []uint8{0x5}, false, true},
		{"inf sets exponent 255", []float32{float32(math.Inf(1)), 1}, 255, []uint8{0x40, 0}, []uint8{0x4, 0}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				dt     ir.DType
				codes  []uint8
				differ bool
			}{{ir.BFP8B, tc.bfp8, tc.exact8}, {ir.BFP4B, tc.bfp4, tc.exact4}} {
				tile := make([]float32, TileElems)
				copy(tile, tc.vals)
				got, err := PackTileDevice(c.dt, tile, true)
				require.NoError(t, err)
				require.Len(t, got, c.dt.TileBytes())
				codes := make([]uint8, len(tc.vals))
				for j := range codes {
					if c.dt == ir.BFP8B {
						codes[j] = got[GroupsPerTile+j]
					} else {
						codes[j] = got[GroupsPerTile+j/2] >> (4 * uint(j%2)) & 0xF
					}
				}
				if got[0] != tc.exp {
					t.Errorf("%s: shared exponent %d, want %d", c.dt, got[0], tc.exp)
				}
				if d := cmp.Diff(c.codes, codes); d != "" {
					t.Errorf("%s: codes (-want +got):\n%s", c.dt, d)
				}
				exact, err := PackTile(c.dt, tile)
				require.NoError(t, err)
				if differ := !cmp.Equal(exact, got); differ != c.differ {
					t.Errorf("%s: PackTile differs: %v, want %v", c.dt, differ, c.differ)
				}
			}
		})
	}
}

// TestPackTileDeviceOtherFormats: formats without a shared exponent pack
// as PackTile, and a wrong length is refused.
func TestPackTileDeviceOtherFormats(t *testing.T) {
	tile := make([]float32, TileElems)
	for i := range tile {
		tile[i] = float32(i) * 0.37
	}
	for _, dt := range []ir.DType{ir.FP32, ir.BF16} {
		want, err := PackTile(dt, tile)
		require.NoError(t, err)
		got, err := PackTileDevice(dt, tile, true)
		require.NoError(t, err)
		if !cmp.Equal(want, got) {
			t.Errorf("%s: PackTileDevice differs from PackTile", dt)
		}
	}
	if _, err := PackTileDevice(ir.BFP8B, tile[:5], true); err == nil {
		t.Errorf("PackTileDevice of 5 values: no error")
	}
}

// TestQuantizeMatrixDevice: the matrix comes back as PackTileDevice's
// bytes decode, differs from QuantizeMatrix (exact rounding) on this data,
// and values a device pack wrote are unchanged by a second pack.
func TestQuantizeMatrixDevice(t *testing.T) {
	const rows, cols = 5, 40
	data := make([]float32, rows*cols)
	for i := range data {
		data[i] = float32(math.Sin(float64(i)*1.3)) * float32(1+i%9)
	}
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		t.Run(dt.String(), func(t *testing.T) {
			got := QuantizeMatrixDevice(dt, data, rows, cols, true)
			tiles := Tilize(data, rows, cols)
			var want []float32
			for i := 0; i < len(tiles); i += TileElems {
				b, err := PackTileDevice(dt, tiles[i:i+TileElems], true)
				require.NoError(t, err)
				dec, err := UnpackTile(dt, b)
				require.NoError(t, err)
				want = append(want, dec...)
			}
			if d := cmp.Diff(Untilize(want, rows, cols), got); d != "" {
				t.Errorf("(-PackTileDevice +QuantizeMatrixDevice):\n%s", d)
			}
			if cmp.Equal(QuantizeMatrix(dt, data, rows, cols), got) {
				t.Errorf("equals the exactly rounded matrix: the vectors do not tell them apart")
			}
			if d := cmp.Diff(got, QuantizeMatrixDevice(dt, got, rows, cols, true)); d != "" {
				t.Errorf("a second device pack changed values (-first +second):\n%s", d)
			}
		})
	}
}
