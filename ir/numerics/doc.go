// Package numerics is the exact Blackhole numerics shared by the kernel
// simulator and the graph reference evaluator: tile layout, the storage
// formats, the fidelity-limited FPU multiply, the SFPU helper functions and
// the accuracy metrics used to judge outputs.
//
// # Tiles and faces
//
// A tile is 32x32 values stored as four 16x16 faces in the order top-left,
// top-right, bottom-left, bottom-right, each face row-major. Element (r, c)
// of a tile sits at [FaceIndex](r, c) =
// ((r/16)*2 + c/16)*256 + (r%16)*16 + c%16. [Tilize] turns a row-major
// matrix into tiles in row-major tile order (zero padding to whole tiles);
// [Untilize] is its inverse and drops the padding.
//
// # Storage formats
//
// Every format is described for one tile of 1024 values in face order; the
// byte size of a tile is ir.DType.TileBytes.
//
//   - fp32: 1024 IEEE float32 values, little endian (4096 bytes).
//   - bf16: 1024 bfloat16 values, little endian (2048 bytes). The conversion
//     from float32 rounds to nearest, ties to even ([RoundBF16]); NaN stays
//     NaN (quieted), infinities stay infinite, and finite values past the
//     largest bf16 round to infinity as IEEE rounding says.
//   - bfp8_b (1088 bytes) and bfp4_b (576 bytes): block float. Each 16-value
//     face row is a group with one shared 8-bit exponent, the largest biased
//     fp32 exponent (bias 127) in the group. The 64 exponents come first, one
//     byte per group in face order (four per little-endian 32-bit word, group
//     0 in the low byte). Then the mantissas follow face by face, row-major,
//     i.e. in face order: for bfp8_b one byte per value, sign<<7 | 7-bit
//     magnitude (four per word, element 0 in the low byte); for bfp4_b one
//     nibble per value, sign<<3 | 3-bit magnitude (eight per word, element 0
//     in the low nibble). A magnitude is the value's 24-bit significand
//     (hidden 1 included) shifted right by (shared_exp - own_exp) + 17 for
//     bfp8_b or + 21 for bfp4_b, rounded to nearest even on the bits shifted
//     out, and saturated at 0x7F (bfp8_b) or 0x7 (bfp4_b). A value whose
//     magnitude is 0 is stored as 0 (the sign is cleared). A stored magnitude
//     m with shared exponent e decodes to ±m * 2^(e-127-6) for bfp8_b and
//     ±m * 2^(e-127-2) for bfp4_b.
//   - int32 / uint32: the raw 32-bit pattern of the integer value, little
//     endian (4096 bytes). The float32 handed to [PackTile] must hold an
//     integer in the type's range.
//
// Conventions this package fixes where the hardware documents nothing
// (chosen so that pack -> unpack -> pack is the identity on bytes):
//
//   - Block floats take fp32 subnormals at their exact value (exponent 1,
//     no hidden bit) instead of flushing them; zeros do not take part in the
//     shared exponent.
//   - A group whose every magnitude rounds to 0 stores exponent 0, so an
//     all-zero group is 64 zero bits of exponent and zero mantissas.
//   - A group with shared exponent 255 (it holds an Inf or NaN) decodes a
//     magnitude with its top bit set as Inf (no other bit set) or NaN (other
//     bits set), exactly as the unpacker's bit-level expansion to bf16 does.
//     A quiet NaN (0x7FC00000) therefore survives; a NaN whose top mantissa
//     bits are all zero may round to Inf.
//   - Decoding is exact: tiny shared exponents give fp32 subnormals rather
//     than the hardware's undefined underflow.
//
// # FPU
//
// The matrix engine multiplies one operand from SrcA by one from SrcB.
// Operands are first reduced to the source-register format: bf16 and block
// float data arrive as bf16 (exact); fp32 data is truncated to tf32 (10
// mantissa bits) by [TruncTF32]; subnormals flush to zero. The multiplier is
// 5 bits (SrcA) by 7 bits (SrcB), so the product runs in up to four
// fidelity phases over the operand splits
//
//	A_hi = hidden bit + top 4 mantissa bits of SrcA, A_lo = next 5 bits
//	B_hi = hidden bit + top 6 mantissa bits of SrcB, B_lo = next 4 bits
//
// LoFi computes A_hi*B_hi; HiFi2 adds A_lo*B_hi; HiFi3 adds A_hi*B_lo; HiFi4
// adds A_lo*B_lo, which for bf16 operands is the exact bf16 product. For a
// tf32 SrcA operand the least significant mantissa bit is never used.
// [FidelityMul] takes SrcA first. Eltwise multiply feeds in0 to SrcA and in1
// to SrcB; matmul is the reverse: in0 feeds SrcB and in1 feeds SrcA, which
// [MatmulTile] and [Matmul] follow.
//
// [FidelityMul] is the product alone. How the device sums and rounds is
// the datapath (datapath.go), bit for bit as Tenstorrent's ttsim models
// it and checked against vectors computed by it: [FPUAdd], [FPUSub],
// [FPUMul], [MatmulTile] and [Matmul] align their terms in integer
// mantissas with round-half-up steps (MVMUL sums its sixteen products in
// two groups of eight aligned to the group's largest), and the packer
// writes an fp32 DEST value to bf16 rounding half away from zero
// ([PackerBF16]). None of it is IEEE arithmetic: a tile matmul differs
// from float32 sums of the same products by up to about 2^-11 of the
// largest product of a group.
//
// # SFPU
//
// [Sigmoid], [SiLU], [Exp], [Rsqrt], [Recip] and [Softplus] are the float32
// functions the evaluator and the simulator share for SFPU ops: each is
// evaluated in float64 with the standard library and rounded once to
// float32, the SFPU's working precision in DEST.
//
// # Accuracy
//
// [PCC] is the Pearson correlation coefficient and [MaxRelErr] the largest
// element-wise relative error with a floor at 1e-3 of the largest reference
// magnitude; both are computed in float64 and never return NaN.
package numerics
