package blocks

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Rows of bfp8_b tiles. A bfp8_b tile is GroupsPerTile = 64 shared
// exponent bytes (one per 16-value face row: face f row r at byte
// f*16 + r) then 1024 mantissa bytes (face f row r at 64 + f*256 + r*16,
// one byte per value): tile row r is the face rows r%16 of faces
// 2*(r/16) and 2*(r/16)+1, two exponent bytes and two 16-byte mantissa
// runs, independent of every other row. The mantissa part is laid out as
// a tile of 1-byte elements, so the row helpers of 2- and 4-byte tiles
// apply to it with eb = 1.

// BFPExpBytes is the exponent part of a bfp8_b tile, the tile's first
// bytes.
const BFPExpBytes = 64

// BFPExpOffset is the byte offset, in a bfp8_b tile, of the shared
// exponent of row r's face row in face column half (0: columns 0..15,
// 1: 16..31).
func BFPExpOffset(r kir.Expr, half int) kir.Expr {
	return kir.Add(kir.Mul(kir.Add(kir.Mul(kir.Div(r, kir.C(FaceDim)), kir.C(2)), kir.Ci(half)), kir.C(FaceDim)), kir.Mod(r, kir.C(FaceDim)))
}

// BFPMantOffset is the byte offset, in a bfp8_b tile, of the 16 mantissa
// bytes of row r in face column half.
func BFPMantOffset(r kir.Expr, half int) kir.Expr {
	return kir.Add(kir.Ci(BFPExpBytes), FaceOffset(r, kir.Ci(half*FaceDim), 1))
}

// CopyByte copies the byte at L1 address src to L1 address dst of this
// core (a read-modify-write of dst's 32-bit word).
func CopyByte(b *kir.Builder, src, dst kir.Expr) {
	sw := kir.L1Read32{Addr: kir.And(src, kir.C(^uint32(3)))}
	v := kir.And(kir.Shr(sw, kir.Mul(kir.And(src, kir.C(3)), kir.C(8))), kir.C(0xFF))
	wa := b.Let("bw", kir.And(dst, kir.C(^uint32(3))))
	sh := b.Let("bsh", kir.Mul(kir.And(dst, kir.C(3)), kir.C(8)))
	keep := kir.And(kir.L1Read32{Addr: wa}, kir.Bin{Op: kir.OpXor, X: kir.Shl(kir.C(0xFF), sh), Y: kir.C(0xFFFFFFFF)})
	b.L1Write32(wa, kir.Or(keep, kir.Shl(v, sh)))
}

// ZeroRowsFromDT is ZeroRowsFrom for a tile of dt: bf16 and fp32 as
// ZeroRowsFrom; bfp8_b clears the mantissas of rows [from, 32) (a zero
// mantissa is the value 0 whatever its shared exponent, and the other
// rows share no byte with them).
func ZeroRowsFromDT(b *kir.Builder, tile, zero, from kir.Expr, dt ir.DType) {
	if dt == ir.BFP8B {
		ZeroRowsFrom(b, kir.Add(tile, kir.Ci(BFPExpBytes)), zero, from, 1)
		return
	}
	ZeroRowsFrom(b, tile, zero, from, ElemBytes(dt))
}

// RowsMovable reports whether data movement can move or clear single
// rows of dt tiles: bf16, fp32 and the 32-bit integers element by
// element, bfp8_b by its rows' exponent bytes and mantissa runs.
func RowsMovable(dt ir.DType) bool { return ElemBytes(dt) != 0 || dt == ir.BFP8B }
