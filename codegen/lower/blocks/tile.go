package blocks

import (
	"math"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// TileDim is the edge of a tile; FaceDim the edge of a face.
const (
	TileDim = ir.TileSize
	FaceDim = 16
)

// Image is the tile view of a tile-layout tensor of shape Dims: B matrices
// (the product of the leading dims; a rank-1 shape is one 1 x n matrix) of
// R x C elements, each padded to Rt x Ct tiles. Page (b, tr, tc) of the
// tensor's buffer is (b*Rt + tr)*Ct + tc.
type Image struct {
	Dims        ir.Shape
	B, R, C     int
	Rt, Ct      int
	Pages       int
	TilesPerMat int
}

// ImageOf is the tile view of shape s.
func ImageOf(s ir.Shape) Image {
	im := Image{Dims: s.Clone(), B: 1, R: 1, C: 1}
	switch s.Rank() {
	case 0:
	case 1:
		im.C = s[0]
	default:
		im.R, im.C = s[s.Rank()-2], s[s.Rank()-1]
		im.B = s.Numel() / max(1, im.R*im.C)
		if im.R*im.C == 0 {
			im.B = 0
		}
	}
	im.Rt = (im.R + TileDim - 1) / TileDim
	im.Ct = (im.C + TileDim - 1) / TileDim
	im.TilesPerMat = im.Rt * im.Ct
	im.Pages = im.B * im.TilesPerMat
	return im
}

// Rows2D is the number of rows of the flattened 2-D view, B*R.
func (im Image) Rows2D() int { return im.B * im.R }

// Page is the page holding element (row, col) of the flattened 2-D view
// (row < B*R), as an expression.
func (im Image) Page(row, col kir.Expr) kir.Expr {
	b := kir.Div(row, kir.Ci(im.R))
	r := kir.Mod(row, kir.Ci(im.R))
	return kir.Add(kir.Mul(kir.Add(kir.Mul(b, kir.Ci(im.Rt)), kir.Div(r, kir.Ci(TileDim))), kir.Ci(im.Ct)), kir.Div(col, kir.Ci(TileDim)))
}

// InTile is the byte offset of element (row, col) of the flattened 2-D view
// inside its tile, for elements of eb bytes.
func (im Image) InTile(row, col kir.Expr, eb int) kir.Expr {
	return FaceOffset(kir.Mod(kir.Mod(row, kir.Ci(im.R)), kir.Ci(TileDim)), kir.Mod(col, kir.Ci(TileDim)), eb)
}

// FaceOffset is the byte offset of element (r, c), 0 <= r, c < 32, inside a
// tile of eb-byte elements: ((r/16)*2 + c/16)*256 + (r%16)*16 + c%16
// elements.
func FaceOffset(r, c kir.Expr, eb int) kir.Expr {
	face := kir.Add(kir.Mul(kir.Div(r, kir.C(FaceDim)), kir.C(2)), kir.Div(c, kir.C(FaceDim)))
	elem := kir.Add(kir.Mul(face, kir.C(256)), kir.Add(kir.Mul(kir.Mod(r, kir.C(FaceDim)), kir.C(FaceDim)), kir.Mod(c, kir.C(FaceDim))))
	return kir.Mul(elem, kir.Ci(eb))
}

// FaceOffsetConst is FaceOffset for constants.
func FaceOffsetConst(r, c, eb int) int {
	return (((r/FaceDim)*2+c/FaceDim)*256 + (r%FaceDim)*FaceDim + c%FaceDim) * eb
}

// ElemBytes is the element size data movement works with: 2 for bf16, 4
// for fp32, uint32 and int32, 0 for block floats (which data movement
// cannot split).
func ElemBytes(dt ir.DType) int {
	if dt.IsBlockFloat() {
		return 0
	}
	return dt.ElemBytes()
}

// Bits is the storage bit pattern of v in dt (bf16 round to nearest even,
// fp32 as is, integers converted), in the low bits.
func Bits(dt ir.DType, v float32) uint32 {
	switch dt {
	case ir.BF16:
		return uint32(numerics.BF16Bits(v))
	case ir.UInt32:
		return uint32(v)
	case ir.Int32:
		return uint32(int32(v))
	}
	return math.Float32bits(v)
}

// FillWord is the 32-bit word repeating v in dt (two bf16 copies, or one
// fp32 value).
func FillWord(dt ir.DType, v float32) uint32 {
	b := Bits(dt, v)
	if ElemBytes(dt) == 2 {
		return b<<16 | b
	}
	return b
}

// SegFor is the largest power of two <= 16 dividing every value: the run
// length (in elements) that keeps runs inside face rows and source rows
// when every run start is a multiple of it.
func SegFor(values ...int) int {
	seg := FaceDim
	for _, v := range values {
		for seg > 1 && v%seg != 0 {
			seg /= 2
		}
	}
	return seg
}
