package numerics

import (
	"math"
	"testing"
)

func TestBF16Bits(t *testing.T) {
	tests := []struct {
		name string
		in   uint32 // float32 bits
		want uint16
	}{
		{"one", 0x3F800000, 0x3F80},
		{"tie rounds down to even", 0x3F808000, 0x3F80}, // 1 + 2^-8: halfway, 0x3F80 is even
		{"tie rounds up to even", 0x3F818000, 0x3F82},   // halfway between 0x3F81 (odd) and 0x3F82
		{"negative tie up to even", 0xBF818000, 0xBF82},
		{"just above tie", 0x3F808001, 0x3F81},
		{"just below tie", 0x3F807FFF, 0x3F80},
		{"carry into exponent", 0x3FFFFFFF, 0x4000},
		{"max float32 overflows to Inf", 0x7F7FFFFF, 0x7F80},
		{"tie at max bf16 rounds to Inf", 0x7F7F8000, 0x7F80},
		{"+Inf", 0x7F800000, 0x7F80},
		{"-Inf", 0xFF800000, 0xFF80},
		{"quiet NaN", 0x7FC00000, 0x7FC0},
		{"NaN with low payload stays NaN", 0x7F800001, 0x7FC0},
		{"negative NaN", 0xFFC00001, 0xFFC0},
		{"+0", 0x00000000, 0x0000},
		{"-0", 0x80000000, 0x8000},
		{"subnormal tie down", 0x00008000, 0x0000},
		{"subnormal tie up", 0x00018000, 0x0002},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := math.Float32frombits(tt.in)
			if got := BF16Bits(x); got != tt.want {
				t.Errorf("BF16Bits(%#08x) = %#04x, want %#04x", tt.in, got, tt.want)
			}
			r := RoundBF16(x)
			if got := math.Float32bits(r); got != uint32(tt.want)<<16 {
				t.Errorf("RoundBF16(%#08x) bits = %#08x, want %#08x", tt.in, got, uint32(tt.want)<<16)
			}
			if math.IsNaN(float64(x)) != math.IsNaN(float64(r)) {
				t.Errorf("RoundBF16(%#08x) = %v: NaN-ness changed", tt.in, r)
			}
		})
	}
}

func TestFromBF16Bits(t *testing.T) {
	tests := []struct {
		in   uint16
		want float32
	}{
		{0x3F80, 1}, {0xC040, -3}, {0x3E80, 0.25}, {0x7F80, float32(math.Inf(1))}, {0x0000, 0},
	}
	for _, tt := range tests {
		if got := FromBF16Bits(tt.in); got != tt.want {
			t.Errorf("FromBF16Bits(%#04x) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if !math.IsNaN(float64(FromBF16Bits(0x7FC0))) {
		t.Errorf("FromBF16Bits(0x7fc0) is not NaN")
	}
}

func TestTruncTF32(t *testing.T) {
	tests := []struct {
		name     string
		in, want uint32
	}{
		{"drops low 13 bits", 0x3F801FFF, 0x3F800000},
		{"keeps tf32 lsb", 0x3F803FFF, 0x3F802000},
		{"negative truncates toward zero", 0xBF801FFF, 0xBF800000},
		{"bf16 value unchanged", 0x3FC10000, 0x3FC10000},
		{"subnormal flushes", 0x007FFFFF, 0x00000000},
		{"negative subnormal flushes to -0", 0x80000001, 0x80000000},
		{"Inf unchanged", 0x7F800000, 0x7F800000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := math.Float32bits(TruncTF32(math.Float32frombits(tt.in))); got != tt.want {
				t.Errorf("TruncTF32(%#08x) = %#08x, want %#08x", tt.in, got, tt.want)
			}
		})
	}
	if !math.IsNaN(float64(TruncTF32(math.Float32frombits(0x7F800001)))) {
		t.Errorf("TruncTF32 turned a low-payload NaN into a number")
	}
}
