package numerics

import "math"

// blockFormat describes one shared-exponent format: magBits bits of
// magnitude (hidden bit included) plus one sign bit per value.
type blockFormat struct {
	magBits uint // 7 for bfp8_b, 3 for bfp4_b
}

var (
	bfp8b = blockFormat{magBits: 7}
	bfp4b = blockFormat{magBits: 3}
)

func (f blockFormat) maxMag() uint32     { return 1<<f.magBits - 1 }
func (f blockFormat) codeBits() uint     { return f.magBits + 1 }
func (f blockFormat) baseShift() int     { return 24 - int(f.magBits) } // 17 or 21
func (f blockFormat) mantissaBytes() int { return TileElems * int(f.codeBits()) / 8 }
func (f blockFormat) tileBytes() int     { return GroupsPerTile + f.mantissaBytes() }

// rneShift returns sig >> shift rounded to nearest, ties to even. sig is at
// most 24 bits; shift >= 0.
func rneShift(sig uint32, shift int) uint32 {
	if shift == 0 {
		return sig
	}
	if shift > 25 { // sig < 2^24 <= half: rounds to 0
		return 0
	}
	s := uint64(sig)
	q := s >> uint(shift)
	rem := s & (1<<uint(shift) - 1)
	half := uint64(1) << uint(shift-1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return uint32(q)
}

// split returns the sign bit, effective biased exponent and 24-bit
// significand of x. Zero reports ok == false. Subnormals use exponent 1 and
// no hidden bit, so sig * 2^(exp-150) is always the exact magnitude.
func split(x float32) (sign uint32, exp int, sig uint32, ok bool) {
	b := math.Float32bits(x)
	sign = b >> 31
	e := int(b>>23) & 0xFF
	m := b & 0x7FFFFF
	if e == 0 {
		if m == 0 {
			return sign, 0, 0, false
		}
		return sign, 1, m, true
	}
	return sign, e, m | 1<<23, true
}

// packGroup encodes 16 values into one shared exponent and 16 sign|magnitude
// codes.
func (f blockFormat) packGroup(vals []float32, codes []uint8) (exp uint8) {
	shared := 0
	for _, v := range vals {
		if _, e, _, ok := split(v); ok && e > shared {
			shared = e
		}
	}
	nonzero := false
	for i, v := range vals {
		codes[i] = 0
		sign, e, sig, ok := split(v)
		if !ok {
			continue
		}
		q := rneShift(sig, shared-e+f.baseShift())
		if q > f.maxMag() {
			q = f.maxMag()
		}
		if q != 0 {
			codes[i] = uint8(sign<<f.magBits | q)
			nonzero = true
		}
	}
	if !nonzero {
		return 0
	}
	return uint8(shared)
}

// decode returns the float32 value of one sign|magnitude code under shared
// exponent e: ±m * 2^(e-127-(magBits-1)), exact. With e == 255 a magnitude
// whose top bit is set decodes to Inf or NaN as the bit-level expansion to
// bf16 gives.
func (f blockFormat) decode(code uint8, e uint8) float32 {
	sign := uint32(code>>f.magBits) & 1
	m := uint32(code) & f.maxMag()
	if m == 0 {
		return math.Float32frombits(sign << 31)
	}
	top := uint32(1) << (f.magBits - 1)
	if e == 0xFF && m&top != 0 {
		frac := (m << uint(f.baseShift())) & 0x7FFFFF
		return math.Float32frombits(sign<<31 | 0xFF<<23 | frac)
	}
	v := float32(math.Ldexp(float64(m), int(e)-127-int(f.magBits-1)))
	if sign != 0 {
		v = -v
	}
	return v
}

// pack encodes one tile (TileElems values in face order) into dst, which
// must be f.tileBytes() long.
func (f blockFormat) pack(tile []float32, dst []byte) {
	var codes [FaceDim]uint8
	mant := dst[GroupsPerTile:]
	for i := range mant {
		mant[i] = 0
	}
	perByte := 8 / int(f.codeBits())
	for g := 0; g < GroupsPerTile; g++ {
		dst[g] = f.packGroup(tile[g*FaceDim:(g+1)*FaceDim], codes[:])
		for j, c := range codes {
			idx := g*FaceDim + j
			mant[idx/perByte] |= c << (uint(idx%perByte) * f.codeBits())
		}
	}
}

// unpack decodes one tile from src (f.tileBytes() long) into dst
// (TileElems values in face order).
func (f blockFormat) unpack(src []byte, dst []float32) {
	mant := src[GroupsPerTile:]
	perByte := 8 / int(f.codeBits())
	mask := uint8(1<<f.codeBits() - 1)
	for idx := range dst[:TileElems] {
		code := mant[idx/perByte] >> (uint(idx%perByte) * f.codeBits()) & mask
		dst[idx] = f.decode(code, src[idx/FaceDim])
	}
}
