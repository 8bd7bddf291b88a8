package sfpuisa

import "fmt"

// Lane is one SFPU lane: its 16 LREGs, its condition code, whether
// condition codes are enabled, and the 8-deep condition stack (ttsim
// sim.h CC_STACK_SIZE). The zero Lane is not reset: use NewLane.
type Lane struct {
	R    [16]uint32
	CCEn bool // lanes are masked by CC only while enabled
	CC   bool
	sp   int
	st   [8]struct{ en, cc bool }
}

// NewLane is a lane after reset (ttsim tensix_init): LREGs 0-7 zero, the
// constant and programmable LREGs at their reset values, condition codes
// enabled and set.
func NewLane() Lane {
	var l Lane
	copy(l.R[8:], resetLRegs[:])
	l.CCEn, l.CC = true, true
	return l
}

// Env is what a program reads and writes outside the lane: DEST's values
// at the operands (fp32 bit patterns; in a 16-bit DEST, bf16 values whose
// low 16 bits are zero), the scalar parameter, and DEST's mode.
type Env struct {
	// Dest holds the first operand (the only one of a unary op, which
	// stores back to it), the second operand and the output tile.
	Dest  [3]uint32
	Param uint32
	// FP32 is fp32_dest_acc_en: SFPLOAD and SFPSTORE with instr_mod0 0
	// (the default format) then move fp32; otherwise bf16.
	FP32 bool
}

func (e *Env) slot(in Insn, store bool) *uint32 {
	switch in.Arg {
	case ArgIn1:
		return &e.Dest[1]
	case ArgOut:
		return &e.Dest[2]
	}
	return &e.Dest[0]
}

// denormalsAsZeros flushes a denormal to a zero of its sign (ttsim
// tensix.cpp denormals_as_zeros).
func denormalsAsZeros(u uint32) uint32 {
	if u&0x7fffffff < 0x800000 {
		return u & 0x80000000
	}
	return u
}

func sext12(v uint16) int32 { return int32(uint32(v)<<20) >> 20 }

// active is whether this lane executes a masked instruction.
func (l *Lane) active() bool { return !l.CCEn || l.CC }

// Exec executes one instruction on the lane, as ttsim's
// TENSIX_EXECUTE_<op> (src/tensix.cpp) does for one lane of the 32. Its
// postconditions: the destination LREG and the condition state change as
// ttsim's would; an instruction or field combination ttsim refuses, or
// that this model does not implement, is an error naming it, with the lane
// unchanged.
func (l *Lane) Exec(in Insn, env *Env) error {
	if w, ok := in.Writes(); ok && w >= 8 && in.Op != SFPSWAP {
		return fmt.Errorf("%v: writes LREG%d; only LREG0-7 are writable", in, w)
	}
	act := l.active()
	switch in.Op {
	case SFPNOP:
	case SFPLOAD:
		mod, err := memMod(in, env.FP32)
		if err != nil {
			return err
		}
		if act {
			v := *env.slot(in, false)
			if mod == 2 {
				v &= 0xffff0000
			}
			l.R[in.D] = v
		}
	case SFPSTORE:
		mod, err := memMod(in, env.FP32)
		if err != nil {
			return err
		}
		if in.D >= 12 {
			return fmt.Errorf("%v: stores LREG%d; only LREG0-11 can be stored", in, in.D)
		}
		if act {
			v := denormalsAsZeros(l.R[in.D])
			if mod == 2 {
				v &= 0xffff0000 // a bf16 DEST keeps the upper half: truncation
			}
			*env.slot(in, true) = v
		}
	case SFPLOADI:
		imm := uint32(in.Imm)
		switch in.Arg {
		case ArgParamHi:
			imm = env.Param >> 16
		case ArgParamLo:
			imm = env.Param & 0xffff
		}
		if !act {
			break
		}
		switch in.Mod {
		case 0:
			l.R[in.D] = imm << 16
		case 1:
			s, em := imm&0x8000, imm&0x7fff
			l.R[in.D] = s<<16 | (em+112<<10)<<13
		case 2:
			l.R[in.D] = imm
		case 4:
			l.R[in.D] = uint32(int32(int16(uint16(imm))))
		case 8:
			l.R[in.D] = l.R[in.D]&0xffff | imm<<16
		case 10:
			l.R[in.D] = l.R[in.D]&0xffff0000 | imm
		default:
			return fmt.Errorf("%v: instr_mod0 %d is undefined", in, in.Mod)
		}
	case SFPMAD:
		if in.Mod > 3 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if act {
			a, b, c := l.R[in.A], l.R[in.B], l.R[in.C]
			if in.Mod&1 != 0 {
				a ^= 0x80000000
			}
			if in.Mod&2 != 0 {
				c ^= 0x80000000
			}
			l.R[in.D] = FMA(a, b, c)
		}
	case SFPADD:
		if in.Mod > 3 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		b := in.B
		if in.A != LConst1 {
			if in.B != LConst1 {
				return fmt.Errorf("%v: one multiplicand must be LREG10 (1.0)", in)
			}
			b = in.A
		}
		if act {
			a := uint32(0x3f800000)
			if in.Mod&1 != 0 {
				a = 0xbf800000
			}
			c := l.R[in.C]
			if in.Mod&2 != 0 {
				c ^= 0x80000000
			}
			l.R[in.D] = FMA(a, l.R[b], c)
		}
	case SFPMUL:
		if in.Mod > 1 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if in.C != LConst0 {
			return fmt.Errorf("%v: the addend must be LREG9 (0.0)", in)
		}
		if act {
			a := l.R[in.A]
			if in.Mod&1 != 0 {
				a ^= 0x80000000
			}
			l.R[in.D] = FMA(a, l.R[in.B], 0)
		}
	case SFPMULI, SFPADDI:
		if in.Mod != 0 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if act {
			imm := uint32(in.Imm) << 16
			if in.Op == SFPMULI {
				l.R[in.D] = FMA(imm, l.R[in.D], 0)
			} else {
				l.R[in.D] = FMA(imm, 0x3f800000, l.R[in.D])
			}
		}
	case SFPDIVP2:
		if in.Mod > 1 || (in.Imm > 0x7f && in.Imm < 0xf80) {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if act {
			src := l.R[in.C]
			e := src >> 23 & 255
			if in.Mod&1 != 0 {
				if e != 255 {
					e = (e + uint32(in.Imm)) & 255
				}
			} else {
				e = uint32(in.Imm) & 255
			}
			l.R[in.D] = e<<23 | src&0x807fffff
		}
	case SFPEXEXP:
		if !(in.Mod <= 2 || in.Mod == 10) || in.Mod&4 != 0 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if act {
			bias := int32(127)
			if in.Mod&1 != 0 {
				bias = 0
			}
			d := int32(l.R[in.C]>>23&255) - bias
			l.R[in.D] = uint32(d)
			switch in.Mod {
			case 10:
				l.CC = d >= 0
			case 2:
				l.CC = d < 0
			}
		}
	case SFPEXMAN:
		if in.Mod > 1 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if act {
			hidden := uint32(0x800000)
			if in.Mod != 0 {
				hidden = 0
			}
			l.R[in.D] = l.R[in.C]&0x7fffff | hidden
		}
	case SFPIADD:
		if in.Mod > 10 || in.Mod&3 > 2 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if act {
			src := l.R[in.C]
			switch {
			case in.Mod&1 != 0:
				src += uint32(sext12(in.Imm))
			case in.Mod&2 != 0:
				src -= l.R[in.D]
			default:
				src += l.R[in.D]
			}
			if in.Mod&8 != 0 {
				l.CC = src&0x80000000 == 0
			} else if in.Mod&4 == 0 {
				l.CC = src&0x80000000 != 0
			}
			l.R[in.D] = src
		}
	case SFPSHFT:
		if !(in.Mod <= 3 || in.Mod == 5 || in.Mod == 7) || (in.Mod&1 == 0 && in.Imm != 0) {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if act {
			src := l.R[in.D]
			if in.Mod&4 != 0 {
				src = l.R[in.C]
			}
			amt := int32(l.R[in.C])
			if in.Mod&1 != 0 {
				amt = sext12(in.Imm)
			}
			switch {
			case amt >= 0:
				src <<= uint32(amt) & 31
			case in.Mod&2 != 0:
				src = uint32(int32(src) >> (uint32(-amt) & 31))
			default:
				src >>= uint32(-amt) & 31
			}
			l.R[in.D] = src
		}
	case SFPSETCC:
		if in.Mod&1 != 0 || in.Mod > 6 || in.D != 0 || in.Imm != 0 {
			return fmt.Errorf("%v: unsupported fields (tcc's compares are instr_mod1 0, 2, 4, 6)", in)
		}
		if !l.CCEn {
			return fmt.Errorf("%v: condition codes are disabled", in)
		}
		if l.CC {
			src := int32(l.R[in.C])
			switch in.Mod {
			case 0:
				l.CC = src < 0
			case 2:
				l.CC = src != 0
			case 4:
				l.CC = src >= 0
			default:
				l.CC = src == 0
			}
		}
	case SFPMOV:
		if in.Mod > 2 {
			return fmt.Errorf("%v: instr_mod1 %d not modelled", in, in.Mod)
		}
		if act || in.Mod == 2 {
			src := l.R[in.C]
			if in.Mod&1 != 0 {
				src ^= 0x80000000
			}
			l.R[in.D] = src
		}
	case SFPABS:
		if in.Mod > 1 {
			return fmt.Errorf("%v: instr_mod1 %d reserved", in, in.Mod)
		}
		if act {
			src := l.R[in.C]
			if in.Mod&1 != 0 {
				if src <= 0xff800000 { // not a negative NaN
					src &= 0x7fffffff
				}
			} else if src >= 0x80000000 {
				src = -src
			}
			l.R[in.D] = src
		}
	case SFPAND, SFPOR, SFPXOR, SFPNOT:
		if in.Mod != 0 || in.Imm != 0 {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if act {
			b, c := l.R[in.D], l.R[in.C]
			switch in.Op {
			case SFPAND:
				l.R[in.D] = b & c
			case SFPOR:
				l.R[in.D] = b | c
			case SFPXOR:
				l.R[in.D] = b ^ c
			default:
				l.R[in.D] = ^c
			}
		}
	case SFPLZ:
		if in.Mod&1 != 0 || in.Mod > 4 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if act {
			src := l.R[in.C]
			if in.Mod&4 != 0 {
				src &= 0x7fffffff
			}
			n := uint32(32)
			if src != 0 {
				n = uint32(leadingZeros(src))
			}
			l.R[in.D] = n
			if in.Mod&2 != 0 {
				l.CC = src != 0
			}
		}
	case SFPSETEXP:
		if in.Mod > 2 || in.Imm > 255 || (in.Mod != 1 && in.Imm != 0) {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if act {
			src := l.R[in.C] & 0x807fffff
			var e uint32
			switch in.Mod {
			case 1:
				e = uint32(in.Imm)
			case 2:
				e = l.R[in.D] >> 23 & 0xff
			default:
				e = l.R[in.D] & 0xff
			}
			l.R[in.D] = src | e<<23
		}
	case SFPSETMAN:
		if in.Mod > 1 || in.Imm != 0 {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if act {
			src := l.R[in.C] & 0xff800000
			if in.Mod&1 == 0 {
				src |= l.R[in.D] & 0x7fffff
			}
			l.R[in.D] = src
		}
	case SFPSETSGN:
		if in.Mod > 1 || in.Imm > 1 || (in.Mod == 0 && in.Imm != 0) {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if act {
			src := l.R[in.C] & 0x7fffffff
			if in.Mod&1 != 0 {
				src |= uint32(in.Imm) << 31
			} else {
				src |= l.R[in.D] & 0x80000000
			}
			l.R[in.D] = src
		}
	case SFPPUSHC:
		if in.Mod != 0 || in.D != 0 {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if l.sp >= len(l.st) {
			return fmt.Errorf("%v: condition stack overflow (%d deep)", in, len(l.st))
		}
		l.st[l.sp].en, l.st[l.sp].cc = l.CCEn, l.CC
		l.sp++
	case SFPPOPC:
		if in.Mod != 0 || in.D != 0 {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if l.sp == 0 {
			return fmt.Errorf("%v: condition stack underflow", in)
		}
		l.sp--
		l.CCEn, l.CC = l.st[l.sp].en, l.st[l.sp].cc
	case SFPENCC:
		switch {
		case in.Mod == 0 && in.Imm == 0:
			l.CC = true
		case in.Mod == 10:
			l.CC = in.Imm>>1&1 != 0
			l.CCEn = in.Imm&1 != 0
		default:
			return fmt.Errorf("%v: unsupported fields", in)
		}
	case SFPCOMPC:
		if !l.CCEn {
			return fmt.Errorf("%v: condition codes are disabled", in)
		}
		if l.sp > 0 {
			top := l.st[l.sp-1]
			if !top.en {
				return fmt.Errorf("%v: the stack top has condition codes disabled", in)
			}
			l.CC = top.cc && !l.CC
		} else {
			l.CC = !l.CC
		}
	case SFPCAST:
		if in.Mod != 0 && in.Mod != 3 {
			return fmt.Errorf("%v: instr_mod1 %d unsupported", in, in.Mod)
		}
		if act {
			src := l.R[in.C]
			sign := src & 0x80000000
			var d uint32
			if in.Mod == 3 {
				if sign != 0 {
					d = sign | -src
				} else {
					d = src
				}
			} else {
				d = sign
				src &= 0x7fffffff
				if src != 0 {
					lz := uint32(leadingZeros(src))
					src <<= lz
					d |= (157-lz)<<23 + src>>8
					if src&0x80 != 0 && src&0x17f != 0 {
						d++
					}
				}
			}
			l.R[in.D] = d
		}
	case SFPSWAP:
		if in.Mod > 1 || in.D >= 12 {
			return fmt.Errorf("%v: instr_mod1 %d not modelled (0 swap, 1 min/max)", in, in.Mod)
		}
		if act {
			c, d := l.R[in.C], l.R[in.D]
			swap := in.Mod == 0 || totalOrder(c) < totalOrder(d)
			if swap {
				if in.C < 8 {
					l.R[in.C] = d
				}
				if in.D < 8 {
					l.R[in.D] = c
				}
			}
		}
	case SFPARECIP:
		if in.Mod != 0 || in.Imm != 0 {
			return fmt.Errorf("%v: unsupported fields", in)
		}
		if act {
			x := l.R[in.C]
			l.R[in.D] = x&0x80000000 | ApproxRecip(x&0x7fffffff)
		}
	default:
		return fmt.Errorf("%v: not modelled", in)
	}
	return nil
}

// totalOrder maps sign-magnitude fp32 bits to a signed integer of the same
// order (ttsim sign_mag32_total_order).
func totalOrder(x uint32) int32 {
	if x&0x80000000 != 0 {
		return int32(x ^ 0x7fffffff)
	}
	return int32(x)
}

func leadingZeros(x uint32) int {
	n := 0
	for x&0x80000000 == 0 {
		x <<= 1
		n++
	}
	return n
}

// Run executes a program on the lane in order; the first error stops it.
func (l *Lane) Run(prog []Insn, env *Env) error {
	for _, in := range prog {
		if err := l.Exec(in, env); err != nil {
			return err
		}
	}
	return nil
}

// memMod is the format an SFPLOAD or SFPSTORE moves (instr_mod0): 0 takes
// DEST's (3, fp32, when DEST is fp32; 2, bf16, otherwise); tcc uses only
// 0, 2 and 3.
func memMod(in Insn, fp32 bool) (uint8, error) {
	mod := in.Mod
	if mod == 0 {
		mod = 2
		if fp32 {
			mod = 3
		}
	}
	if mod != 2 && mod != 3 {
		return 0, fmt.Errorf("%v: instr_mod0 %d not modelled (tcc uses 0, 2, 3)", in, in.Mod)
	}
	return mod, nil
}
