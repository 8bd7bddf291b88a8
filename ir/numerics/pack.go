package numerics

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
)

// PackTile encodes one tile (TileElems values in face order) into the byte
// layout of dt (see the package documentation): fp32 little endian; bf16
// little endian, rounded to nearest even; bfp8_b and bfp4_b with 64 shared
// exponents first, then mantissas in face order; int32 and uint32 as the
// raw bits of the integer each float32 holds.
// On success len(result) == dt.TileBytes(). It fails when len(tile) is not
// TileElems, when dt is not a storage format, or when an int32/uint32 value
// is not an integer in the type's range.
func PackTile(dt ir.DType, tile []float32) ([]byte, error) {
	if len(tile) != TileElems {
		return nil, fmt.Errorf("numerics: cannot pack %d values as one %s tile: a tile holds exactly %d values", len(tile), dt, TileElems)
	}
	out := make([]byte, dt.TileBytes())
	switch dt {
	case ir.FP32:
		for i, v := range tile {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case ir.BF16:
		for i, v := range tile {
			binary.LittleEndian.PutUint16(out[2*i:], BF16Bits(v))
		}
	case ir.BFP8B:
		bfp8b.pack(tile, out)
	case ir.BFP4B:
		bfp4b.pack(tile, out)
	case ir.Int32, ir.UInt32:
		lo, hi := intRange(dt)
		for i, v := range tile {
			f := float64(v)
			if f != math.Trunc(f) || f < lo || f > hi {
				r, c := FacePos(i)
				return nil, fmt.Errorf("numerics: cannot pack %v at tile element (%d, %d) as %s: values must be integers in [%.0f, %.0f]", v, r, c, dt, lo, hi)
			}
			var bits uint32
			if dt == ir.Int32 {
				bits = uint32(int32(f))
			} else {
				bits = uint32(f)
			}
			binary.LittleEndian.PutUint32(out[4*i:], bits)
		}
	default:
		return nil, fmt.Errorf("numerics: cannot pack a tile as %s: not a storage format (want one of fp32, bf16, bfp8_b, bfp4_b, int32, uint32)", dt)
	}
	return out, nil
}

// intRange is the closed range of integers dt holds.
func intRange(dt ir.DType) (lo, hi float64) {
	if dt == ir.Int32 {
		return math.MinInt32, math.MaxInt32
	}
	return 0, math.MaxUint32
}

// UnpackTile decodes one tile stored as dt and returns TileElems values in
// face order. Decoding is exact except int32/uint32 values beyond 2^24 in
// magnitude, which round to the nearest float32. It fails when len(b) is not
// dt.TileBytes() or dt is not a storage format.
func UnpackTile(dt ir.DType, b []byte) ([]float32, error) {
	if dt.TileBytes() == 0 {
		return nil, fmt.Errorf("numerics: cannot unpack a tile as %s: not a storage format (want one of fp32, bf16, bfp8_b, bfp4_b, int32, uint32)", dt)
	}
	if len(b) != dt.TileBytes() {
		return nil, fmt.Errorf("numerics: cannot unpack %d bytes as one %s tile: a %s tile is exactly %d bytes", len(b), dt, dt, dt.TileBytes())
	}
	out := make([]float32, TileElems)
	switch dt {
	case ir.FP32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case ir.BF16:
		for i := range out {
			out[i] = FromBF16Bits(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case ir.BFP8B:
		bfp8b.unpack(b, out)
	case ir.BFP4B:
		bfp4b.unpack(b, out)
	case ir.Int32:
		for i := range out {
			out[i] = float32(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case ir.UInt32:
		for i := range out {
			out[i] = float32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return out, nil
}

// PackTiles packs consecutive tiles (len(tiles) a multiple of TileElems) and
// concatenates their encodings.
func PackTiles(dt ir.DType, tiles []float32) ([]byte, error) {
	if len(tiles)%TileElems != 0 {
		return nil, fmt.Errorf("numerics: cannot pack %d values as %s tiles: not a multiple of %d", len(tiles), dt, TileElems)
	}
	out := make([]byte, 0, len(tiles)/TileElems*dt.TileBytes())
	for t := 0; t < len(tiles); t += TileElems {
		b, err := PackTile(dt, tiles[t:t+TileElems])
		if err != nil {
			return nil, fmt.Errorf("tile %d: %w", t/TileElems, err)
		}
		out = append(out, b...)
	}
	return out, nil
}

// UnpackTiles decodes consecutive dt tiles (len(b) a multiple of
// dt.TileBytes()) and returns their values, tile after tile in face order.
func UnpackTiles(dt ir.DType, b []byte) ([]float32, error) {
	n := dt.TileBytes()
	if n == 0 || len(b)%n != 0 {
		return nil, fmt.Errorf("numerics: cannot unpack %d bytes as %s tiles: not a multiple of the tile size %d", len(b), dt, n)
	}
	out := make([]float32, 0, len(b)/n*TileElems)
	for off := 0; off < len(b); off += n {
		t, err := UnpackTile(dt, b[off:off+n])
		if err != nil {
			return nil, err
		}
		out = append(out, t...)
	}
	return out, nil
}

// Quantize returns tile rounded through dt's storage. For one tile of valid
// values it equals UnpackTile(dt, PackTile(dt, tile)). Other lengths are
// accepted: block floats treat the values as consecutive face-order tiles,
// the last one zero padded. For int32/uint32, values that PackTile would
// reject are rounded to the nearest integer (ties to even) and saturated to
// the float32 values inside the type's range; NaN becomes 0. It panics if dt
// is not a storage format.
func Quantize(dt ir.DType, tile []float32) []float32 {
	out := make([]float32, len(tile))
	switch dt {
	case ir.FP32:
		copy(out, tile)
	case ir.BF16:
		for i, v := range tile {
			out[i] = RoundBF16(v)
		}
	case ir.BFP8B, ir.BFP4B:
		f := bfp8b
		if dt == ir.BFP4B {
			f = bfp4b
		}
		buf := make([]byte, f.tileBytes())
		var pad [TileElems]float32
		for t := 0; t < len(tile); t += TileElems {
			src := tile[t:min(t+TileElems, len(tile))]
			if len(src) < TileElems {
				copy(pad[:], src)
				src = pad[:]
			}
			var dec [TileElems]float32
			f.pack(src, buf)
			f.unpack(buf, dec[:])
			copy(out[t:], dec[:])
		}
	case ir.Int32, ir.UInt32:
		lo, hi := intRange(dt)
		hi = float64(math.Nextafter32(float32(hi), 0)) // largest float32 <= hi
		for i, v := range tile {
			x := math.RoundToEven(float64(v))
			switch {
			case math.IsNaN(x):
				x = 0
			case x < lo:
				x = lo
			case x > hi:
				x = hi
			}
			out[i] = float32(x)
		}
	default:
		panic(fmt.Sprintf("numerics.Quantize: %s is not a storage format", dt))
	}
	return out
}

// QuantizeMatrix rounds a row-major [rows, cols] matrix through dt's storage
// and returns it row-major. Block floats are tilized first (zero padding
// does not change any shared exponent), so the shared-exponent groups are
// the face rows of the tile layout. It panics if len(data) != rows*cols or
// dt is not a storage format.
func QuantizeMatrix(dt ir.DType, data []float32, rows, cols int) []float32 {
	checkMatrix("QuantizeMatrix", len(data), rows, cols)
	if !dt.IsBlockFloat() {
		return Quantize(dt, data)
	}
	return Untilize(Quantize(dt, Tilize(data, rows, cols)), rows, cols)
}

// QuantizeShape rounds a row-major tensor of the given shape through dt's
// storage, as it would be stored in tile layout. Because a shared-exponent
// group is 16 consecutive, 16-aligned columns of one row, padding rows to
// whole tiles never changes a group, so this equals QuantizeMatrix over the
// flattened [shape.Rows2D(), shape.Cols2D()] view. It panics if len(data) !=
// shape.Numel() or dt is not a storage format.
func QuantizeShape(dt ir.DType, data []float32, shape ir.Shape) []float32 {
	if len(data) != shape.Numel() {
		panic(fmt.Sprintf("numerics.QuantizeShape: %d values do not fill shape %s (%d elements)", len(data), shape, shape.Numel()))
	}
	if shape.Numel() == 0 {
		return []float32{}
	}
	return QuantizeMatrix(dt, data, shape.Rows2D(), shape.Cols2D())
}
