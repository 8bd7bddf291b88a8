package sfpuisa

import "math/bits"

// FMA is Blackhole's SFPU fused multiply-add x*y + z on fp32 bit patterns,
// as ttsim models it bit for bit (ttsim src/fma.cpp, fma_model_bh; this is
// tcc's own Go from that description, not a copy). It is not IEEE 754:
//
//   - denormal inputs are zeros (their mantissa is dropped), and a
//     denormal result is flushed to a zero of the result's sign;
//   - the product's 48-bit mantissa keeps 3 guard bits above the addend's
//     alignment and the rest as one sticky bit (it is truncated before the
//     addition), and a product whose exponent is below the smallest normal
//     is dropped (the result is z);
//   - alignment shifts keep a sticky bit only when bits survive the shift;
//   - the sum rounds to nearest even on the guard, round and sticky bits;
//   - every NaN result is the canonical 0x7fc00000; Inf*0 and Inf-Inf are
//     NaN.
func FMA(x, y, z uint32) uint32 {
	xe, xm := unpackDAZ(x)
	ye, ym := unpackDAZ(y)
	ze, zm := unpackDAZ(z)
	zSign := z & 0x80000000
	pSign := (x ^ y) & 0x80000000

	pm := uint64(xm) * uint64(ym) << 3
	pe := xe + ye - 23 - 127
	zm <<= 3
	// Realign the product to the addend's 23 fraction bits, with a sticky bit.
	pm = pm>>23 | b2u64(pm&0x7fffff != 0)
	pe += 23

	if xe == 255 || ye == 255 || pe >= 255 || ze == 255 {
		switch {
		case xe == 255 && (xm != 0x800000 || ym == 0),
			ye == 255 && (ym != 0x800000 || xm == 0),
			ze == 255 && zm != 0x4000000,
			ze == 255 && (xe == 255 || ye == 255) && zSign != pSign:
			return 0x7fc00000
		case ze == 255:
			return z
		default:
			return pSign | 0x7f800000
		}
	}
	if pm == 0 || pe < 0 {
		if zm != 0 {
			return z
		}
		return zSign & pSign
	}

	re := max(pe, ze)
	p32 := uint32(semiSticky64(pm, re-pe))
	z32 := semiSticky32(zm, re-ze)
	rSign := zSign
	if uint64(p32) >= uint64(z32) {
		rSign = pSign
	}
	if zSign != rSign {
		z32 = ^z32
	}
	if pSign != rSign {
		p32 = ^p32
	}
	rm := z32 + p32 + b2u32(pSign != zSign)
	if rm == 0 {
		return zSign & pSign
	}
	// Normalise to 5 zero bits, a one and 26 fraction bits.
	n := int32(5 - bits.LeadingZeros32(rm))
	re += n
	if re >= 255 {
		return rSign | 0x7f800000
	}
	if re <= 0 {
		n++
		re = 0
	}
	if n <= 0 {
		rm <<= uint(-n)
	} else {
		rm = rm>>uint(n) | b2u32(rm&uint32(n|1) != 0)
	}
	r := uint32(re)<<23 + (rm>>3)&0x7fffff
	r += b2u32((rm&7)+(r&1) > 4)
	if r>>23 == 0 {
		r = 0
	}
	return rSign | r
}

// unpackDAZ splits an fp32 pattern into its biased exponent and its
// mantissa with the hidden bit; a denormal's mantissa is zero.
func unpackDAZ(v uint32) (e int32, m uint32) {
	e = int32(v>>23) & 255
	m = v&0x7fffff | 0x800000
	if e == 0 {
		m = 0
	}
	return e, m
}

// semiSticky64 shifts v right by s, or-ing a sticky bit of the lost bits
// into a non-zero result (a zero result stays zero).
func semiSticky64(v uint64, s int32) uint64 {
	if s <= 0 {
		return v
	}
	if s >= 64 {
		return 0
	}
	r := v >> uint(s)
	if r != 0 {
		r |= b2u64(r<<uint(s) != v)
	}
	return r
}

func semiSticky32(v uint32, s int32) uint32 {
	if s <= 0 {
		return v
	}
	if s >= 32 {
		return 0
	}
	r := v >> uint(s)
	if r != 0 {
		r |= b2u32(r<<uint(s) != v)
	}
	return r
}

func b2u32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func b2u64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// ApproxRecip is SFPARECIP's estimate of 1/|x| for the magnitude bits x
// (sign clear), as ttsim models it (src/tensix.cpp approx_recip, Blackhole
// only): zero and denormals give +Inf, x >= 2^126 (Inf and NaN included)
// gives 0, otherwise the exponent 253-e and a 7-bit mantissa from a
// 128-entry table indexed by x's top 7 mantissa bits.
func ApproxRecip(x uint32) uint32 {
	switch {
	case x < 0x800000:
		return 0x7f800000
	case x < 0x7e800000:
		return (253-x>>23)<<23 | uint32(recipLUT[x>>16&0x7f])<<16
	default:
		return 0
	}
}

// recipLUT is the mantissa table of SFPARECIP (ttsim src/tensix.cpp
// approx_recip): entry i is the top 7 mantissa bits of the estimate for
// mantissas 1.i... (entry 0 = 127, the last 0).
var recipLUT = [128]uint8{
	127, 125, 123, 121, 119, 117, 116, 114, 112, 110, 109, 107, 105, 104, 102, 100, 99,
	97, 96, 94, 93, 91, 90, 88, 87, 85, 84, 83, 81, 80, 79, 77, 76, 75, 74, 72, 71, 70,
	69, 68, 66, 65, 64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48,
	47, 46, 45, 44, 43, 42, 41, 40, 40, 39, 38, 37, 36, 35, 35, 34, 33, 32, 31, 31, 30,
	29, 28, 28, 27, 26, 25, 25, 24, 23, 23, 22, 21, 21, 20, 19, 19, 18, 17, 17, 16, 15,
	15, 14, 14, 13, 12, 12, 11, 11, 10, 9, 9, 8, 8, 7, 7, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1,
	1, 0,
}
