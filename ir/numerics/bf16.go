package numerics

import "math"

// BF16Bits converts x to bfloat16 with round-to-nearest-even and returns the
// 16-bit pattern. NaN stays NaN (sign and top payload kept, quiet bit set);
// ±Inf stays ±Inf; finite values whose rounding exceeds the largest bf16
// become ±Inf; subnormals are rounded like any other value.
func BF16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 { // NaN: truncating could turn it into Inf
		return uint16(b>>16) | 0x0040
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// FromBF16Bits returns the float32 whose top 16 bits are b (exact).
func FromBF16Bits(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// RoundBF16 rounds x to the nearest bf16 value, ties to even, and returns it
// as a float32: FromBF16Bits(BF16Bits(x)).
func RoundBF16(x float32) float32 {
	return FromBF16Bits(BF16Bits(x))
}

// IsBF16 reports whether x is exactly representable in bf16 (its low 16
// bits are zero).
func IsBF16(x float32) bool {
	return math.Float32bits(x)&0xFFFF == 0
}

// TruncTF32 reduces x to tf32 (8-bit exponent, 10-bit mantissa) the way the
// unpacker does when it moves fp32 data into SrcA/SrcB: the low 13 mantissa
// bits are dropped (truncation toward zero) and subnormals flush to signed
// zero. NaN stays NaN. bf16 values are returned unchanged except subnormals.
func TruncTF32(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		return x
	}
	if b&0x7F800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return math.Float32frombits(b &^ 0x1FFF)
}
