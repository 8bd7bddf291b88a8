package numerics

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
)

// This file is the device packer's block-float path: what a Tensix packer
// writes when it packs a DEST tile into a bfp8_b or bfp4_b CB. tt-metal
// configures the packer's source format for both as Bfp8_b
// (get_single_pack_src_format), so the conversion is ttsim's
// (tenstorrent/ttsim v1.10.0 src/tensix.cpp, TENSIX_EXECUTE_PACR,
// pack_fmt_conv_mode 0x66/0x67 for a 16-bit DEST and 0x166/0x167 for an
// fp32 one), in two steps:
//
//  1. each DEST value becomes a 16-bit bf16-like word with a 6-bit
//     mantissa (PackerBFPWord): from an fp32 DEST the upper 16 bits
//     (the low 16 dropped, not rounded), from a 16-bit DEST the bf16
//     itself; NaN becomes an infinity of its sign; then the 7-bit
//     mantissa is rounded to 6 bits half up (w+1 with bit 0 cleared,
//     carrying into the exponent); a word whose exponent is 0 (zero or
//     subnormal) becomes +0 (from a 16-bit DEST before the rounding,
//     from an fp32 one after it, so there the largest subnormal bf16
//     rounds up to the smallest normal);
//  2. per 16 values the shared exponent is the largest exponent field
//     (255 included, +0 counting 0), written even when every code ends
//     up zero; each 8-bit significand (hidden bit set for a non-zero
//     exponent) is shifted right by one more than its gap to the shared
//     exponent, rounding half up, gaps of 8 or more giving 0, and 128
//     saturating to 127; bfp4_b keeps the top 3 of those 7 bits
//     (truncation); the sign is set only on a non-zero magnitude (the
//     unpacker reads sign|0 as -inf).
//
// It differs from the exactly rounded pack (round to nearest even of the
// full significand) by truncating fp32 values to 16 bits first, rounding
// twice, half up instead of to even, and truncating bfp4_b.

// PackerBFPWord is the 16-bit word (sign, 8-bit exponent, 7-bit mantissa
// whose lowest bit is 0) the packer forms from DEST value x before a
// block-float pack; fp32Dest says DEST holds fp32 (fp32_dest_acc_en),
// otherwise x is taken as the bf16 DEST holds (its low 16 bits ignored).
func PackerBFPWord(x float32, fp32Dest bool) uint16 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		b = b&0x80000000 | 0x7F800000
	}
	w := uint32(b >> 16)
	if fp32Dest {
		w = (w + 1) &^ 1
		if w&0x7FFF < 0x80 {
			w = 0
		}
		return uint16(w)
	}
	if w&0x7FFF < 0x80 {
		return 0
	}
	return uint16((w + 1) &^ 1)
}

// devicePackGroup encodes 16 packer words into a shared exponent and 16
// sign|magnitude codes as step 2 above.
func (f blockFormat) devicePackGroup(words []uint16, codes []uint8) (exp uint8) {
	var shared uint32
	for _, w := range words {
		shared = max(shared, uint32(w>>7)&0xFF)
	}
	for i, w := range words {
		e := uint32(w>>7) & 0xFF
		m := uint32(w) & 0x7F
		if e != 0 {
			m |= 0x80
		}
		if shift := shared - e; shift >= 8 {
			m = 0
		} else {
			m = (m + 1<<shift) >> (shift + 1)
			m = min(m, 127)
		}
		m >>= 7 - f.magBits
		if m != 0 {
			m |= uint32(w>>15) << f.magBits
		}
		codes[i] = uint8(m)
	}
	return uint8(shared)
}

// devicePack encodes one tile (face order) as the packer does.
func (f blockFormat) devicePack(tile []float32, fp32Dest bool, dst []byte) {
	var codes [FaceDim]uint8
	var words [FaceDim]uint16
	mant := dst[GroupsPerTile:]
	clear(mant)
	perByte := 8 / int(f.codeBits())
	for g := 0; g < GroupsPerTile; g++ {
		for j := range words {
			words[j] = PackerBFPWord(tile[g*FaceDim+j], fp32Dest)
		}
		dst[g] = f.devicePackGroup(words[:], codes[:])
		for j, c := range codes {
			idx := g*FaceDim + j
			mant[idx/perByte] |= c << (uint(idx%perByte) * f.codeBits())
		}
	}
}

// PackTileDevice is the bytes the device packer writes for one DEST tile
// (TileElems values in face order) packed into a dt CB: for bfp8_b and
// bfp4_b as described above (fp32Dest: DEST holds fp32), for every other
// dt exactly PackTile's. On success len(result) == dt.TileBytes(); it
// fails as PackTile does.
func PackTileDevice(dt ir.DType, tile []float32, fp32Dest bool) ([]byte, error) {
	if !dt.IsBlockFloat() {
		return PackTile(dt, tile)
	}
	if len(tile) != TileElems {
		return nil, fmt.Errorf("numerics: cannot pack %d values as one %s tile: a tile holds exactly %d values", len(tile), dt, TileElems)
	}
	f := bfp8b
	if dt == ir.BFP4B {
		f = bfp4b
	}
	out := make([]byte, dt.TileBytes())
	f.devicePack(tile, fp32Dest, out)
	return out, nil
}

// QuantizeMatrixDevice is QuantizeMatrix with the device packer: a
// row-major [rows, cols] matrix of fp32 DEST values (fp32Dest) or bf16
// ones, tilized with zero padding, packed as PackTileDevice packs into a
// dt CB, unpacked and returned row-major. For dtypes other than bfp8_b and
// bfp4_b it is QuantizeMatrix. Values that a device pack already wrote
// (the same groups) come back unchanged. It panics if len(data) !=
// rows*cols or dt is not a storage format.
func QuantizeMatrixDevice(dt ir.DType, data []float32, rows, cols int, fp32Dest bool) []float32 {
	checkMatrix("QuantizeMatrixDevice", len(data), rows, cols)
	if !dt.IsBlockFloat() {
		return QuantizeMatrix(dt, data, rows, cols)
	}
	f := bfp8b
	if dt == ir.BFP4B {
		f = bfp4b
	}
	tiles := Tilize(data, rows, cols)
	buf := make([]byte, f.tileBytes())
	for t := 0; t < len(tiles); t += TileElems {
		f.devicePack(tiles[t:t+TileElems], fp32Dest, buf)
		f.unpack(buf, tiles[t:t+TileElems])
	}
	return Untilize(tiles, rows, cols)
}
