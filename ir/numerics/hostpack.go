package numerics

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
)

// This file is the host-side block-float packer of the pinned tt-metal
// release (tt_metal/impl/data_format/blockfloat_common.cpp: get_max_exp
// and convert_u32_to_bfp<Bfp8_b|Bfp4_b, false>), written from its
// behaviour. It differs from the exactly rounded packer (pack) in three
// ways:
//
//   - the shared exponent is the largest raw exponent field of the 16
//     values (zeros and subnormals contribute 0), even when every code
//     of the group ends up zero;
//   - a value below the shared exponent is first truncated by the
//     exponent gap (its 24-bit significand shifted right, the shifted-out
//     bits dropped) and only then rounded to nearest even on the
//     17 (bfp8_b) or 21 (bfp4_b) low bits that remain, so a value whose
//     dropped bits were non-zero and whose remaining bits are exactly a
//     tie rounds to even instead of up;
//   - subnormal inputs (exponent field 0) encode as 0.
//
// Weights converted for a device use this packer so the bytes equal what
// tt-metal's host would write for the same float32 values.

// hostPackGroup encodes 16 values the tt-metal way.
func (f blockFormat) hostPackGroup(vals []float32, codes []uint8) (exp uint8) {
	var shared uint32
	for _, v := range vals {
		shared = max(shared, math.Float32bits(v)>>23&0xFF)
	}
	shift := uint32(f.baseShift())
	roundMask := uint32(1)<<shift - 1
	tie := uint32(1) << (shift - 1)
	for i, v := range vals {
		b := math.Float32bits(v)
		e := b >> 23 & 0xFF
		if e == 0 { // zero or subnormal
			codes[i] = 0
			continue
		}
		m := b&0x7FFFFF | 1<<23
		if gap := shared - e; gap > 0 {
			if gap > 31 {
				m = 0
			} else {
				m >>= gap
			}
		}
		r := m & roundMask
		m >>= shift
		if r > tie || (r == tie && m&1 == 1) {
			m++
		}
		m = min(m, f.maxMag())
		if m == 0 {
			codes[i] = 0
			continue
		}
		codes[i] = uint8((b>>31)<<f.magBits | m)
	}
	return uint8(shared)
}

// hostPack encodes one tile (face order) with hostPackGroup.
func (f blockFormat) hostPack(tile []float32, dst []byte) {
	var codes [FaceDim]uint8
	mant := dst[GroupsPerTile:]
	clear(mant)
	perByte := 8 / int(f.codeBits())
	for g := 0; g < GroupsPerTile; g++ {
		dst[g] = f.hostPackGroup(tile[g*FaceDim:(g+1)*FaceDim], codes[:])
		for j, c := range codes {
			idx := g*FaceDim + j
			mant[idx/perByte] |= c << (uint(idx%perByte) * f.codeBits())
		}
	}
}

// PackTilesHost is PackTiles with tt-metal's host packer for bfp8_b and
// bfp4_b (see above); other dtypes pack as PackTiles does. The result
// has len(tiles)/TileElems * dt.TileBytes() bytes and unpacks with
// UnpackTiles.
func PackTilesHost(dt ir.DType, tiles []float32) ([]byte, error) {
	if !dt.IsBlockFloat() {
		return PackTiles(dt, tiles)
	}
	if len(tiles)%TileElems != 0 {
		return nil, fmt.Errorf("numerics: cannot pack %d values as %s tiles: not a multiple of %d", len(tiles), dt, TileElems)
	}
	f := bfp8b
	if dt == ir.BFP4B {
		f = bfp4b
	}
	n := f.tileBytes()
	out := make([]byte, len(tiles)/TileElems*n)
	for t := 0; t*TileElems < len(tiles); t++ {
		f.hostPack(tiles[t*TileElems:(t+1)*TileElems], out[t*n:(t+1)*n])
	}
	return out, nil
}
