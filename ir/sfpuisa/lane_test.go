package sfpuisa

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each instruction's effect on one lane, hand-derived from ttsim's
// TENSIX_EXECUTE_<op> (src/tensix.cpp).
func TestExec(t *testing.T) {
	type regs = map[uint8]uint32
	for _, c := range []struct {
		name   string
		init   regs
		cc     bool // the condition code before (enabled)
		in     Insn
		env    Env
		want   regs
		wantCC bool
		store  uint32 // Dest[0] after
	}{
		{name: "load fp32", in: Insn{Op: SFPLOAD, D: 1}, env: Env{Dest: [3]uint32{0x3f812345}, FP32: true}, want: regs{1: 0x3f812345}, cc: true, wantCC: true, store: 0x3f812345},
		{name: "load bf16 DEST drops the low half", in: Insn{Op: SFPLOAD, D: 1}, env: Env{Dest: [3]uint32{0x3f812345}}, want: regs{1: 0x3f810000}, cc: true, wantCC: true, store: 0x3f812345},
		{name: "store bf16 truncates", init: regs{2: 0x3f81ffff}, in: Insn{Op: SFPSTORE, D: 2}, want: regs{2: 0x3f81ffff}, cc: true, wantCC: true, store: 0x3f810000},
		{name: "store flushes a denormal", init: regs{2: 0x807fffff}, in: Insn{Op: SFPSTORE, D: 2}, env: Env{FP32: true}, want: regs{2: 0x807fffff}, cc: true, wantCC: true, store: 0x80000000},
		{name: "store masked off", init: regs{2: 5}, in: Insn{Op: SFPSTORE, D: 2}, env: Env{Dest: [3]uint32{7}, FP32: true}, want: regs{2: 5}, store: 7},
		{name: "loadi bf16", in: Insn{Op: SFPLOADI, D: 3, Imm: 0x3fc0}, want: regs{3: 0x3fc00000}, cc: true, wantCC: true},
		{name: "loadi fp16", in: Insn{Op: SFPLOADI, D: 3, Mod: 1, Imm: 0x3c00}, want: regs{3: 0x3f800000}, cc: true, wantCC: true},
		{name: "loadi upper half", init: regs{3: 0x1234}, in: Insn{Op: SFPLOADI, D: 3, Mod: 8, Imm: 0x4049}, want: regs{3: 0x40491234}, cc: true, wantCC: true},
		{name: "loadi lower half", init: regs{3: 0x40490000}, in: Insn{Op: SFPLOADI, D: 3, Mod: 10, Imm: 0x0fdb}, want: regs{3: 0x40490fdb}, cc: true, wantCC: true},
		{name: "loadi sint16", in: Insn{Op: SFPLOADI, D: 3, Mod: 4, Imm: 0xffff}, want: regs{3: 0xffffffff}, cc: true, wantCC: true},
		{name: "loadi param", in: Insn{Op: SFPLOADI, D: 3, Mod: 8, Arg: ArgParamHi}, env: Env{Param: 0x40490fdb}, want: regs{3: 0x40490000}, cc: true, wantCC: true},
		{name: "mad", init: regs{0: 0x40000000, 1: 0x40400000, 2: 0x3f800000}, in: Insn{Op: SFPMAD, A: 0, B: 1, C: 2, D: 3}, want: regs{0: 0x40000000, 1: 0x40400000, 2: 0x3f800000, 3: 0x40e00000}, cc: true, wantCC: true},
		{name: "mad negated a and c", init: regs{0: 0x40000000, 1: 0x40400000, 2: 0x3f800000}, in: Insn{Op: SFPMAD, A: 0, B: 1, C: 2, D: 3, Mod: 3}, want: regs{0: 0x40000000, 1: 0x40400000, 2: 0x3f800000, 3: 0xc0e00000}, cc: true, wantCC: true},
		{name: "mad masked off", init: regs{0: 0x40000000}, in: Insn{Op: SFPMAD, A: 0, B: 0, C: 9, D: 0}, want: regs{0: 0x40000000}},
		{name: "add", init: regs{1: 0x40000000, 2: 0x3f800000}, in: Insn{Op: SFPADD, A: LConst1, B: 1, C: 2, D: 1}, want: regs{1: 0x40400000, 2: 0x3f800000}, cc: true, wantCC: true},
		{name: "mul", init: regs{1: 0x40000000}, in: Insn{Op: SFPMUL, A: 1, B: 1, C: LConst0, D: 2}, want: regs{1: 0x40000000, 2: 0x40800000}, cc: true, wantCC: true},
		{name: "muli", init: regs{1: 0x40000000}, in: Insn{Op: SFPMULI, D: 1, Imm: 0x3f00}, want: regs{1: 0x3f800000}, cc: true, wantCC: true},
		{name: "addi", init: regs{1: 0x40000000}, in: Insn{Op: SFPADDI, D: 1, Imm: 0x3f80}, want: regs{1: 0x40400000}, cc: true, wantCC: true},
		{name: "exexp debiased", init: regs{1: 0x3e800000}, in: Insn{Op: SFPEXEXP, C: 1, D: 2}, want: regs{1: 0x3e800000, 2: 0xfffffffe}, cc: true, wantCC: true},
		{name: "exexp sets cc when negative", init: regs{1: 0x3e800000}, in: Insn{Op: SFPEXEXP, C: 1, D: 2, Mod: 2}, want: regs{1: 0x3e800000, 2: 0xfffffffe}, cc: true, wantCC: true},
		{name: "exexp mod 10 clears cc when negative", init: regs{1: 0x3e800000}, in: Insn{Op: SFPEXEXP, C: 1, D: 2, Mod: 10}, want: regs{1: 0x3e800000, 2: 0xfffffffe}, cc: true, wantCC: false},
		{name: "exman", init: regs{1: 0xbfc00000}, in: Insn{Op: SFPEXMAN, C: 1, D: 2}, want: regs{1: 0xbfc00000, 2: 0xc00000}, cc: true, wantCC: true},
		{name: "iadd imm sets cc on negative", init: regs{1: 3}, in: Insn{Op: SFPIADD, C: 1, D: 2, Mod: 1, Imm: 0xffc}, want: regs{1: 3, 2: 0xffffffff}, cc: true, wantCC: true},
		{name: "iadd sub, cc kept", init: regs{1: 3, 2: 1}, in: Insn{Op: SFPIADD, C: 1, D: 2, Mod: 6}, want: regs{1: 3, 2: 2}, cc: true, wantCC: true},
		{name: "iadd cc inverted", init: regs{1: 3}, in: Insn{Op: SFPIADD, C: 1, D: 2, Mod: 9, Imm: 0xffc}, want: regs{1: 3, 2: 0xffffffff}, cc: true, wantCC: false},
		{name: "shft left imm", init: regs{2: 3}, in: Insn{Op: SFPSHFT, D: 2, Mod: 1, Imm: 23}, want: regs{2: 3 << 23}, cc: true, wantCC: true},
		{name: "shft right arith", init: regs{2: 0x80000000}, in: Insn{Op: SFPSHFT, D: 2, Mod: 3, Imm: 0xfff}, want: regs{2: 0xc0000000}, cc: true, wantCC: true},
		{name: "shft right logical from c", init: regs{1: 0x80000000}, in: Insn{Op: SFPSHFT, C: 1, D: 2, Mod: 5, Imm: 0xfff}, want: regs{1: 0x80000000, 2: 0x40000000}, cc: true, wantCC: true},
		{name: "setcc lt0", init: regs{1: 0x3f800000}, in: Insn{Op: SFPSETCC, C: 1}, want: regs{1: 0x3f800000}, cc: true, wantCC: false},
		{name: "setcc only narrows", init: regs{1: 0xbf800000}, in: Insn{Op: SFPSETCC, C: 1}, want: regs{1: 0xbf800000}, cc: false, wantCC: false},
		{name: "setcc eq0", init: regs{1: 0}, in: Insn{Op: SFPSETCC, C: 1, Mod: 6}, want: regs{}, cc: true, wantCC: true},
		{name: "mov negate", init: regs{1: 0x3f800000}, in: Insn{Op: SFPMOV, C: 1, D: 2, Mod: 1}, want: regs{1: 0x3f800000, 2: 0xbf800000}, cc: true, wantCC: true},
		{name: "mov all lanes ignores cc", init: regs{1: 7}, in: Insn{Op: SFPMOV, C: 1, D: 2, Mod: 2}, want: regs{1: 7, 2: 7}},
		{name: "abs float keeps -NaN", init: regs{1: 0xffc00000}, in: Insn{Op: SFPABS, C: 1, D: 2, Mod: 1}, want: regs{1: 0xffc00000, 2: 0xffc00000}, cc: true, wantCC: true},
		{name: "abs float", init: regs{1: 0xbf800000}, in: Insn{Op: SFPABS, C: 1, D: 2, Mod: 1}, want: regs{1: 0xbf800000, 2: 0x3f800000}, cc: true, wantCC: true},
		{name: "and", init: regs{1: 0xff00, 2: 0x0ff0}, in: Insn{Op: SFPAND, C: 1, D: 2}, want: regs{1: 0xff00, 2: 0x0f00}, cc: true, wantCC: true},
		{name: "setexp imm", init: regs{1: 0xc0490fdb}, in: Insn{Op: SFPSETEXP, C: 1, D: 2, Mod: 1, Imm: 127}, want: regs{1: 0xc0490fdb, 2: 0xbfc90fdb}, cc: true, wantCC: true},
		{name: "setexp from d's low bits", init: regs{1: 0x40490fdb, 2: 126}, in: Insn{Op: SFPSETEXP, C: 1, D: 2}, want: regs{1: 0x40490fdb, 2: 0x3f490fdb}, cc: true, wantCC: true},
		{name: "setsgn imm", init: regs{1: 0x3f800000}, in: Insn{Op: SFPSETSGN, C: 1, D: 2, Mod: 1, Imm: 1}, want: regs{1: 0x3f800000, 2: 0xbf800000}, cc: true, wantCC: true},
		{name: "divp2 add", init: regs{1: 0x3f800000}, in: Insn{Op: SFPDIVP2, C: 1, D: 2, Mod: 1, Imm: 0xfff}, want: regs{1: 0x3f800000, 2: 0x3f000000}, cc: true, wantCC: true},
		{name: "cast int", init: regs{1: 5}, in: Insn{Op: SFPCAST, C: 1, D: 2}, want: regs{1: 5, 2: 0x40a00000}, cc: true, wantCC: true},
		{name: "cast rounds to nearest even", init: regs{1: 0x1000001}, in: Insn{Op: SFPCAST, C: 1, D: 2}, want: regs{1: 0x1000001, 2: 0x4b800000}, cc: true, wantCC: true},
		{name: "cast two's complement to sign-magnitude", init: regs{1: 0xfffffffb}, in: Insn{Op: SFPCAST, C: 1, D: 2, Mod: 3}, want: regs{1: 0xfffffffb, 2: 0x80000005}, cc: true, wantCC: true},
		{name: "swap min max", init: regs{1: 0x40000000, 2: 0xbf800000}, in: Insn{Op: SFPSWAP, C: 1, D: 2, Mod: 1}, want: regs{1: 0x40000000, 2: 0xbf800000}, cc: true, wantCC: true},
		{name: "swap min max swaps", init: regs{1: 0xbf800000, 2: 0x40000000}, in: Insn{Op: SFPSWAP, C: 1, D: 2, Mod: 1}, want: regs{1: 0x40000000, 2: 0xbf800000}, cc: true, wantCC: true},
		{name: "arecip keeps the sign", init: regs{1: 0xc0000000}, in: Insn{Op: SFPARECIP, C: 1, D: 2}, want: regs{1: 0xc0000000, 2: 0xbeff0000}, cc: true, wantCC: true}, // 2^(253-128-127) * 1.1111111b
		{name: "lz", init: regs{1: 0x00010000}, in: Insn{Op: SFPLZ, C: 1, D: 2}, want: regs{1: 0x10000, 2: 15}, cc: true, wantCC: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLane()
			for r, v := range c.init {
				l.R[r] = v
			}
			l.CC = c.cc
			env := c.env
			if err := l.Exec(c.in, &env); err != nil {
				t.Fatal(err)
			}
			got := regs{}
			for r := uint8(0); r < 8; r++ {
				if l.R[r] != 0 {
					got[r] = l.R[r]
				}
			}
			want := regs{}
			for r, v := range c.want {
				if v != 0 {
					want[r] = v
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("LREGs (-want +got):\n%s", d)
			}
			if l.CC != c.wantCC {
				t.Errorf("CC = %v, want %v", l.CC, c.wantCC)
			}
			if env.Dest[0] != c.store {
				t.Errorf("Dest[0] = %08x, want %08x", env.Dest[0], c.store)
			}
		})
	}
}

// The condition stack: v_if / v_else / v_endif as SFPPUSHC, SFPSETCC,
// SFPCOMPC, SFPPOPC (ttsim's semantics: COMPC complements against the
// stack top).
func TestConditionStack(t *testing.T) {
	for _, c := range []struct {
		name     string
		x        uint32
		then, el bool
	}{{"negative takes then", 0xbf800000, true, false}, {"positive takes else", 0x3f800000, false, true}} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLane()
			l.R[1] = c.x
			env := Env{}
			prog := []Insn{{Op: SFPPUSHC}, {Op: SFPSETCC, C: 1}, {Op: SFPLOADI, D: 2, Mod: 2, Imm: 1}, {Op: SFPCOMPC}, {Op: SFPLOADI, D: 3, Mod: 2, Imm: 1}, {Op: SFPPOPC}}
			if err := l.Run(prog, &env); err != nil {
				t.Fatal(err)
			}
			if (l.R[2] == 1) != c.then || (l.R[3] == 1) != c.el || !l.CC || l.sp != 0 {
				t.Errorf("then %v else %v cc %v sp %d", l.R[2] == 1, l.R[3] == 1, l.CC, l.sp)
			}
		})
	}
}

// SFPCOMPC inside an enclosing condition complements against the stack
// top: a lane the outer condition disabled stays disabled in the inner
// else (ttsim TENSIX_EXECUTE_SFPCOMPC).
func TestNestedElse(t *testing.T) {
	for _, c := range []struct {
		name     string
		outer    uint32 // LREG1: the outer condition is LREG1 < 0
		inner    uint32 // LREG2: the inner condition is LREG2 == 0
		elseRuns bool
	}{
		{"outer false: else stays off", 0x3f800000, 5, false},
		{"outer true, inner false: else runs", 0xbf800000, 5, true},
		{"outer true, inner true: else off", 0xbf800000, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLane()
			l.R[1], l.R[2] = c.outer, c.inner
			prog := []Insn{{Op: SFPPUSHC}, {Op: SFPSETCC, C: 1}, {Op: SFPPUSHC}, {Op: SFPSETCC, C: 2, Mod: 6},
				{Op: SFPCOMPC}, {Op: SFPLOADI, D: 3, Mod: 2, Imm: 1}, {Op: SFPPOPC}, {Op: SFPPOPC}}
			if err := l.Run(prog, &Env{}); err != nil {
				t.Fatal(err)
			}
			if got := l.R[3] == 1; got != c.elseRuns {
				t.Errorf("else ran: %v, want %v", got, c.elseRuns)
			}
		})
	}
}

// What ttsim refuses is an error naming the instruction.
func TestExecErrors(t *testing.T) {
	for _, c := range []struct {
		in   Insn
		want string
	}{
		{Insn{Op: SFPMAD, A: 0, B: 0, C: 0, D: 9}, "LREG9"},
		{Insn{Op: SFPADD, A: 1, B: 2, C: 3, D: 4}, "LREG10"},
		{Insn{Op: SFPMUL, A: 1, B: 2, C: 3, D: 4}, "LREG9"},
		{Insn{Op: SFPPOPC}, "underflow"},
		{Insn{Op: SFPLOADI, D: 1, Mod: 3}, "undefined"},
		{Insn{Op: 0x91}, "not modelled"},
	} {
		t.Run(c.want, func(t *testing.T) {
			l := NewLane()
			err := l.Exec(c.in, &Env{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Exec(%v) = %v, want an error with %q", c.in, err, c.want)
			}
		})
	}
}

// Word and Macro follow ckernel_ops.h's TT_OP_* layouts.
func TestEncoding(t *testing.T) {
	for _, c := range []struct {
		in    Insn
		word  uint32
		macro string
	}{
		{Insn{Op: SFPMAD, A: 1, B: 2, C: 3, D: 4, Mod: 1}, 0x84<<24 | 1<<16 | 2<<12 | 3<<8 | 4<<4 | 1, "TTI_SFPMAD(1, 2, 3, 4, 1)"},
		{Insn{Op: SFPLOAD, D: 2, Mod: 0}, 0x70<<24 | 2<<20 | 7<<13, "TTI_SFPLOAD(2, 0, ADDR_MOD_7, 0)"},
		{Insn{Op: SFPLOADI, D: 1, Mod: 8, Imm: 0x3fb8}, 0x71<<24 | 1<<20 | 8<<16 | 0x3fb8, "TTI_SFPLOADI(1, 8, 0x3fb8)"},
		{Insn{Op: SFPIADD, C: 1, D: 2, Mod: 5, Imm: 0xfff}, 0x79<<24 | 0xfff<<12 | 1<<8 | 2<<4 | 5, "TTI_SFPIADD(4095, 1, 2, 5)"},
		{Insn{Op: SFPMULI, D: 3, Imm: 0x3f00}, 0x74<<24 | 0x3f00<<8 | 3<<4, "TTI_SFPMULI(0x3f00, 3, 0)"},
		{Insn{Op: SFPCAST, C: 1, D: 2}, 0x90<<24 | 1<<8 | 2<<4, "TTI_SFPCAST(1, 2, 0)"},
		{Insn{Op: SFPNOP}, 0x8f << 24, "TTI_SFPNOP"},
		{Insn{Op: SFPLOADI, D: 1, Mod: 8, Arg: ArgParamHi}, 0x71<<24 | 1<<20 | 8<<16, "TT_SFPLOADI(1, 8, param>>16)"},
	} {
		t.Run(c.macro, func(t *testing.T) {
			if got := c.in.Word(); got != c.word {
				t.Errorf("Word() = %08x, want %08x", got, c.word)
			}
			if got := c.in.String(); got != c.macro {
				t.Errorf("Macro = %q, want %q", got, c.macro)
			}
		})
	}
}
