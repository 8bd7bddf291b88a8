package sfpuisa

import "fmt"

// Opcode is a Tensix instruction opcode (ckernel_ops.h's TT_OP_* first
// argument).
type Opcode uint8

// The SFPU opcodes the model executes.
const (
	SFPLOAD   Opcode = 0x70
	SFPLOADI  Opcode = 0x71
	SFPSTORE  Opcode = 0x72
	SFPMULI   Opcode = 0x74
	SFPADDI   Opcode = 0x75
	SFPDIVP2  Opcode = 0x76
	SFPEXEXP  Opcode = 0x77
	SFPEXMAN  Opcode = 0x78
	SFPIADD   Opcode = 0x79
	SFPSHFT   Opcode = 0x7a
	SFPSETCC  Opcode = 0x7b
	SFPMOV    Opcode = 0x7c
	SFPABS    Opcode = 0x7d
	SFPAND    Opcode = 0x7e
	SFPOR     Opcode = 0x7f
	SFPNOT    Opcode = 0x80
	SFPLZ     Opcode = 0x81
	SFPSETEXP Opcode = 0x82
	SFPSETMAN Opcode = 0x83
	SFPMAD    Opcode = 0x84
	SFPADD    Opcode = 0x85
	SFPMUL    Opcode = 0x86
	SFPPUSHC  Opcode = 0x87
	SFPPOPC   Opcode = 0x88
	SFPSETSGN Opcode = 0x89
	SFPENCC   Opcode = 0x8a
	SFPCOMPC  Opcode = 0x8b
	SFPXOR    Opcode = 0x8d
	SFPNOP    Opcode = 0x8f
	SFPCAST   Opcode = 0x90
	SFPSWAP   Opcode = 0x92
	SFPARECIP Opcode = 0x99
)

// form is how an opcode's fields are laid out (ckernel_ops.h).
type form uint8

const (
	formLoadStore form = iota // (lreg_ind, instr_mod0, sfpu_addr_mode, dest_reg_addr)
	formLoadI                 // (lreg_ind, instr_mod0, imm16)
	formMAD                   // (lreg_src_a, lreg_src_b, lreg_src_c, lreg_dest, instr_mod1)
	formImm16                 // (imm16_math, lreg_dest, instr_mod1)
	formImm12                 // (imm12_math, lreg_c, lreg_dest, instr_mod1)
	formCast                  // (lreg_src_c, lreg_dest, instr_mod1)
	formNone                  // no operands
)

var opInfo = map[Opcode]struct {
	name string
	form form
}{
	SFPLOAD: {"SFPLOAD", formLoadStore}, SFPLOADI: {"SFPLOADI", formLoadI}, SFPSTORE: {"SFPSTORE", formLoadStore},
	SFPMULI: {"SFPMULI", formImm16}, SFPADDI: {"SFPADDI", formImm16}, SFPDIVP2: {"SFPDIVP2", formImm12},
	SFPEXEXP: {"SFPEXEXP", formImm12}, SFPEXMAN: {"SFPEXMAN", formImm12}, SFPIADD: {"SFPIADD", formImm12},
	SFPSHFT: {"SFPSHFT", formImm12}, SFPSETCC: {"SFPSETCC", formImm12}, SFPMOV: {"SFPMOV", formImm12},
	SFPABS: {"SFPABS", formImm12}, SFPAND: {"SFPAND", formImm12}, SFPOR: {"SFPOR", formImm12},
	SFPNOT: {"SFPNOT", formImm12}, SFPLZ: {"SFPLZ", formImm12}, SFPSETEXP: {"SFPSETEXP", formImm12},
	SFPSETMAN: {"SFPSETMAN", formImm12}, SFPMAD: {"SFPMAD", formMAD}, SFPADD: {"SFPADD", formMAD},
	SFPMUL: {"SFPMUL", formMAD}, SFPPUSHC: {"SFPPUSHC", formImm12}, SFPPOPC: {"SFPPOPC", formImm12},
	SFPSETSGN: {"SFPSETSGN", formImm12}, SFPENCC: {"SFPENCC", formImm12}, SFPCOMPC: {"SFPCOMPC", formImm12},
	SFPXOR: {"SFPXOR", formImm12}, SFPNOP: {"SFPNOP", formNone}, SFPCAST: {"SFPCAST", formCast},
	SFPSWAP: {"SFPSWAP", formImm12}, SFPARECIP: {"SFPARECIP", formImm12},
}

func (o Opcode) String() string {
	if i, ok := opInfo[o]; ok {
		return i.name
	}
	return fmt.Sprintf("op%#02x", uint8(o))
}

// The LREGs with fixed contents (ckernel_instr_params.h p_sfpu; ttsim
// tensix_init): 8 is 0.8373, 9 is 0, 10 is 1, 11 is -1 (programmable, its
// reset value), 12-14 programmable (reset values below), 15 the lane id
// times two.
const (
	LConst0_8373 = 8
	LConst0      = 9
	LConst1      = 10
	LConstNeg1   = 11
	LTileID      = 15
)

// resetLRegs are LREGs 8-15 after reset (ttsim tensix_init), lane id 0.
var resetLRegs = [8]uint32{0x3F56594B, 0, 0x3F800000, 0xBF800000, 0x3B000000, 0xBF2CC4C7, 0xBEB08FF9, 0}

// Arg is where an instruction's runtime field comes from: most fields are
// constants of the program; a scalar parameter's halves and a binary op's
// DEST offsets are the kernel's arguments.
type Arg uint8

const (
	ArgNone    Arg = iota
	ArgParamHi     // SFPLOADI imm16: the parameter's upper 16 bits
	ArgParamLo     // SFPLOADI imm16: the parameter's lower 16 bits
	ArgIn0         // SFPLOAD/SFPSTORE dest_reg_addr: the first operand tile's rows
	ArgIn1         // ... the second operand tile's rows
	ArgOut         // ... the output tile's rows
)

// Insn is one SFPU instruction: its opcode and fields (those its form
// uses; the rest are zero). Imm is imm12, imm16 or dest_reg_addr.
type Insn struct {
	Op         Opcode
	A, B, C, D uint8 // lreg_src_a, lreg_src_b, lreg_c, lreg_dest (lreg_ind)
	Mod        uint8 // instr_mod0 / instr_mod1
	Imm        uint16
	Arg        Arg
}

// AddrMod is the address mode tcc's loads and stores use: ADDR_MOD_7,
// which _llk_math_eltwise_unary_sfpu_init_ sets to no increment
// (llk_math_eltwise_unary_sfpu.h eltwise_unary_sfpu_configure_addrmod).
const AddrMod = 7

// Word is the instruction's 32-bit encoding (ckernel_ops.h TT_OP_*), with
// runtime fields as zero.
func (in Insn) Word() uint32 {
	f := opInfo[in.Op].form
	w := uint32(in.Op) << 24
	switch f {
	case formLoadStore:
		w += uint32(in.D)<<20 + uint32(in.Mod)<<16 + AddrMod<<13 + uint32(in.Imm)
	case formLoadI:
		w += uint32(in.D)<<20 + uint32(in.Mod)<<16 + uint32(in.Imm)
	case formMAD:
		w += uint32(in.A)<<16 + uint32(in.B)<<12 + uint32(in.C)<<8 + uint32(in.D)<<4 + uint32(in.Mod)
	case formImm16:
		w += uint32(in.Imm)<<8 + uint32(in.D)<<4 + uint32(in.Mod)
	case formImm12:
		w += uint32(in.Imm)<<12 + uint32(in.C)<<8 + uint32(in.D)<<4 + uint32(in.Mod)
	case formCast:
		w += uint32(in.C)<<8 + uint32(in.D)<<4 + uint32(in.Mod)
	}
	return w
}

// Macro is the instruction as a tt-llk macro call: TTI_<OP>(...) with
// constant fields, or TT_<OP>(...) when a field is a runtime argument,
// whose C++ expression args gives (args[ArgParamHi] etc.).
func (in Insn) Macro(args map[Arg]string) string {
	name := opInfo[in.Op].name
	imm := fmt.Sprint(in.Imm)
	if in.Op == SFPLOADI && in.Arg == ArgNone {
		imm = fmt.Sprintf("0x%04x", in.Imm)
	}
	prefix := "TTI_"
	if in.Arg != ArgNone {
		prefix = "TT_"
		imm = args[in.Arg]
	}
	switch opInfo[in.Op].form {
	case formLoadStore:
		return fmt.Sprintf("%s%s(%d, %d, ADDR_MOD_7, %s)", prefix, name, in.D, in.Mod, imm)
	case formLoadI:
		return fmt.Sprintf("%s%s(%d, %d, %s)", prefix, name, in.D, in.Mod, imm)
	case formMAD:
		return fmt.Sprintf("%s%s(%d, %d, %d, %d, %d)", prefix, name, in.A, in.B, in.C, in.D, in.Mod)
	case formImm16:
		return fmt.Sprintf("%s%s(0x%04x, %d, %d)", prefix, name, in.Imm, in.D, in.Mod)
	case formImm12:
		return fmt.Sprintf("%s%s(%s, %d, %d, %d)", prefix, name, imm, in.C, in.D, in.Mod)
	case formCast:
		return fmt.Sprintf("%s%s(%d, %d, %d)", prefix, name, in.C, in.D, in.Mod)
	}
	return prefix + name
}

func (in Insn) String() string { return in.Macro(argNames) }

var argNames = map[Arg]string{ArgParamHi: "param>>16", ArgParamLo: "param&0xffff", ArgIn0: "in0", ArgIn1: "in1", ArgOut: "out"}

// IsMAD reports whether the instruction is on the MAD unit, whose result
// is ready one cycle later (an instruction reading it right after waits).
func (in Insn) IsMAD() bool {
	switch in.Op {
	case SFPMAD, SFPADD, SFPMUL, SFPMULI, SFPADDI:
		return true
	}
	return false
}

// Writes is the LREG the instruction writes (ok false when none).
func (in Insn) Writes() (reg uint8, ok bool) {
	switch in.Op {
	case SFPSTORE, SFPSETCC, SFPPUSHC, SFPPOPC, SFPENCC, SFPCOMPC, SFPNOP:
		return 0, false
	}
	return in.D, true
}

// Reads lists the LREGs the instruction reads.
func (in Insn) Reads() []uint8 {
	switch in.Op {
	case SFPSTORE:
		return []uint8{in.D}
	case SFPMAD:
		return []uint8{in.A, in.B, in.C}
	case SFPADD, SFPMUL:
		return []uint8{in.A, in.B, in.C}
	case SFPMULI, SFPADDI:
		return []uint8{in.D}
	case SFPLOAD, SFPLOADI, SFPPUSHC, SFPPOPC, SFPENCC, SFPCOMPC, SFPNOP:
		return nil
	case SFPIADD, SFPSETEXP, SFPSETMAN, SFPSETSGN, SFPAND, SFPOR, SFPXOR, SFPSHFT, SFPSWAP:
		return []uint8{in.C, in.D}
	}
	return []uint8{in.C}
}
