package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// F8E4M3ToFloat32 decodes one float8_e4m3fn byte: sign, 4 exponent bits
// (bias 7), 3 mantissa bits; no infinities; 0x7F and 0xFF are NaN.
func F8E4M3ToFloat32(b uint8) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	e := int(b>>3) & 0xF
	m := int(b & 7)
	switch {
	case e == 0xF && m == 7:
		return float32(math.NaN())
	case e == 0:
		return sign * float32(math.Ldexp(float64(m), -9)) // subnormal: m/8 * 2^-6
	}
	return sign * float32(math.Ldexp(float64(8+m), e-10))
}

// F16ToFloat32 decodes an IEEE half.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	e := int(h>>10) & 0x1F
	m := uint32(h & 0x3FF)
	switch {
	case e == 0x1F:
		return math.Float32frombits(sign | 0xFF<<23 | m<<13)
	case e == 0:
		v := float32(math.Ldexp(float64(m), -24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | uint32(e-15+127)<<23 | m<<13)
}

// ToFloat32 decodes raw little-endian data of dtype d to float32 values.
// Every dtype decodes exactly except I32 beyond 2^24.
func ToFloat32(d DType, b []byte) ([]float32, error) {
	sz := d.Size()
	if sz == 0 || len(b)%sz != 0 {
		return nil, fmt.Errorf("safetensors: cannot decode %d bytes as %s", len(b), d)
	}
	out := make([]float32, len(b)/sz)
	for i := range out {
		switch d {
		case BF16:
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		case F16:
			out[i] = F16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		case F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case F8E4M3:
			out[i] = F8E4M3ToFloat32(b[i])
		case U8:
			out[i] = float32(b[i])
		case I32:
			out[i] = float32(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return out, nil
}

// FromFloat32 encodes values as dtype d (BF16 and F16 round to nearest
// even; F8_E4M3 rounds to nearest even and saturates to ±448; U8 and I32
// take the integer part).
func FromFloat32(d DType, v []float32) ([]byte, error) {
	sz := d.Size()
	if sz == 0 {
		return nil, fmt.Errorf("safetensors: unknown dtype %q", d)
	}
	out := make([]byte, len(v)*sz)
	for i, x := range v {
		switch d {
		case BF16:
			binary.LittleEndian.PutUint16(out[2*i:], bf16(x))
		case F16:
			binary.LittleEndian.PutUint16(out[2*i:], f16(x))
		case F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		case F8E4M3:
			out[i] = Float32ToF8E4M3(x)
		case U8:
			out[i] = uint8(x)
		case I32:
			binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(x)))
		}
	}
	return out, nil
}

func bf16(x float32) uint16 {
	b := math.Float32bits(x)
	if x != x {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

func f16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	a := math.Abs(float64(x))
	switch {
	case x != x:
		return sign | 0x7E00
	case a >= 65520:
		return sign | 0x7C00
	case a < math.Ldexp(1, -14):
		return sign | uint16(math.RoundToEven(a*math.Ldexp(1, 24)))
	}
	e := math.Ilogb(a)
	m := math.RoundToEven(math.Ldexp(a, 10-e)) // in [1024, 2048]
	if m == 2048 {
		m, e = 1024, e+1
	}
	return sign | uint16(e+15)<<10 | uint16(m-1024)
}

// Float32ToF8E4M3 rounds x to the nearest float8_e4m3fn (ties to even),
// saturating to ±448; NaN becomes 0x7F.
func Float32ToF8E4M3(x float32) uint8 {
	if x != x {
		return 0x7F
	}
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	a := math.Abs(float64(x))
	if a >= 448 {
		return sign | 0x7E
	}
	if a < math.Ldexp(1, -6) { // subnormal step 2^-9
		return sign | uint8(math.RoundToEven(a*512))
	}
	e := math.Ilogb(a)
	m := math.RoundToEven(math.Ldexp(a, 3-e)) // in [8, 16]
	if m == 16 {
		m, e = 8, e+1
	}
	return sign | uint8(e+7)<<3 | uint8(m-8)
}
