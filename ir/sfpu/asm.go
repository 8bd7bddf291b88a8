package sfpu

import (
	"fmt"
	"math"

	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// Program is tcc's own SFPU code for an op: the instructions one
// iteration runs on 32 DEST values (a load, the arithmetic, a store),
// which the C++ header repeats 8 times per face, 4 faces per tile, and
// the simulator and the reference evaluator run per value (Eval). The
// instruction list is the one source of the op's semantics, its C++ and
// its cycles.
type Program struct {
	// Setup runs once per face before the iterations: it loads constants
	// into LREGs that Body reads and never writes.
	Setup []isa.Insn
	Body  []isa.Insn
}

// asm builds a Program: LREG allocation (tcc's: the lowest free of
// LREG0-7), constant loads and the NOP after a MAD-class instruction whose
// result the next instruction reads.
type asm struct {
	setup []isa.Insn
	body  []isa.Insn
	used  [8]bool
	// hoisted maps a constant's bits to the LREG Setup loads it into.
	hoisted map[uint32]uint8
}

// hoist is an LREG holding fp32 bits b for the whole program, loaded once
// per face in Setup (the LREG stays allocated).
func (a *asm) hoist(b uint32) uint8 {
	if r, ok := a.hoisted[b]; ok {
		return r
	}
	if a.hoisted == nil {
		a.hoisted = map[uint32]uint8{}
	}
	r := a.reg()
	a.hoisted[b] = r
	body := a.body
	a.body = nil
	a.setK(r, b)
	a.setup, a.body = append(a.setup, a.body...), body
	return r
}

// reg allocates a free LREG; a program needing more than 8 at once is a
// bug of its builder (TestPrograms runs every builder).
func (a *asm) reg() uint8 {
	for r := range a.used {
		if !a.used[r] {
			a.used[r] = true
			return uint8(r)
		}
	}
	panic("sfpu: program needs more than 8 LREGs")
}

// free releases LREGs for reuse.
func (a *asm) free(rs ...uint8) {
	for _, r := range rs {
		if r < 8 {
			a.used[r] = false
		}
	}
}

func (a *asm) emit(in isa.Insn) {
	if n := len(a.body); n > 0 && a.body[n-1].IsMAD() {
		w, _ := a.body[n-1].Writes()
		for _, r := range in.Reads() {
			if r == w {
				a.body = append(a.body, isa.Insn{Op: isa.SFPNOP})
				break
			}
		}
	}
	a.body = append(a.body, in)
}

// konst loads an fp32 constant into a new LREG: one SFPLOADI when its
// low half is zero (bf16-exact), else the upper and the lower half.
func (a *asm) konst(v float32) uint8 {
	r := a.reg()
	a.setK(r, math.Float32bits(v))
	return r
}

// setK loads fp32 bits into LREG r.
func (a *asm) setK(r uint8, b uint32) {
	if b&0xffff == 0 {
		a.emit(isa.Insn{Op: isa.SFPLOADI, D: r, Mod: 0, Imm: uint16(b >> 16)})
		return
	}
	a.emit(isa.Insn{Op: isa.SFPLOADI, D: r, Mod: 8, Imm: uint16(b >> 16)})
	a.emit(isa.Insn{Op: isa.SFPLOADI, D: r, Mod: 10, Imm: uint16(b)})
}

// mad emits d = a*b + c (neg: SFPMAD's instr_mod1, 1 negates a, 2 c).
func (a *asm) mad(d, x, y, z uint8, neg uint8) {
	a.emit(isa.Insn{Op: isa.SFPMAD, A: x, B: y, C: z, D: d, Mod: neg})
}

// mul emits d = x*y.
func (a *asm) mul(d, x, y uint8) { a.emit(isa.Insn{Op: isa.SFPMUL, A: x, B: y, C: isa.LConst0, D: d}) }

// add emits d = x + y (neg 2: x - y).
func (a *asm) add(d, x, y uint8, neg uint8) {
	a.emit(isa.Insn{Op: isa.SFPADD, A: isa.LConst1, B: x, C: y, D: d, Mod: neg})
}

func (a *asm) mov(d, c uint8) { a.emit(isa.Insn{Op: isa.SFPMOV, C: c, D: d}) }

// ifBegin opens a conditional block: lanes stay enabled where cond,
// emitted by the caller between ifBegin and the block's body, holds.
func (a *asm) push() { a.emit(isa.Insn{Op: isa.SFPPUSHC}) }
func (a *asm) pop()  { a.emit(isa.Insn{Op: isa.SFPPOPC}) }

// setcc narrows the enabled lanes to those where LREG c (as a signed
// integer, i.e. by its sign bit for floats) satisfies mode: ccLT0,
// ccNE0, ccGE0, ccEQ0.
func (a *asm) setcc(c, mode uint8) { a.emit(isa.Insn{Op: isa.SFPSETCC, C: c, Mod: mode}) }

const (
	ccLT0 = 0
	ccNE0 = 2
	ccGE0 = 4
	ccEQ0 = 6
)

// load and store move DEST's value at operand arg to and from LREG r, in
// DEST's own format (instr_mod0 0).
func (a *asm) load(r uint8, arg isa.Arg) {
	a.emit(isa.Insn{Op: isa.SFPLOAD, D: r, Arg: arg})
}
func (a *asm) store(r uint8, arg isa.Arg) {
	a.emit(isa.Insn{Op: isa.SFPSTORE, D: r, Arg: arg})
}

// program is the built program, its body scheduled (schedule) unless
// noSchedule.
func (a *asm) program() *Program {
	if noSchedule {
		return &Program{Setup: a.setup, Body: a.body}
	}
	return &Program{Setup: a.setup, Body: schedule(a.body)}
}

// noSchedule keeps the builders' source order (the tests' reference).
var noSchedule bool

// Eval runs the program on one value x (and y, a binary op's second
// operand, or the scalar parameter of an op that takes one) in an fp32
// DEST and returns the value it stores. A bf16 DEST's result is this
// value with denormals flushed and the low half dropped (SFPSTORE
// truncates), which is what the kernel executor's storeSFPU applies;
// the program's loads see a bf16 DEST's values unchanged.
func (p *Program) Eval(x, y float32) float32 {
	l := isa.NewLane()
	env := isa.Env{FP32: true}
	env.Dest[0] = math.Float32bits(x)
	env.Dest[1] = math.Float32bits(y)
	env.Param = math.Float32bits(y)
	err := l.Run(p.Setup, &env)
	if err == nil {
		err = l.Run(p.Body, &env)
	}
	if err != nil {
		// Every program runs in TestPrograms: an error is tcc's bug.
		panic(fmt.Sprintf("sfpu: program fails: %v", err))
	}
	out := env.Dest[0]
	for _, in := range p.Body {
		if in.Op == isa.SFPSTORE && in.Arg == isa.ArgOut {
			out = env.Dest[2]
		}
	}
	return math.Float32frombits(out)
}

// FaceCycles is the cycles of Setup, once per face.
func (p *Program) FaceCycles() float64 { return float64(len(p.Setup)) }

// Cycles is the program's cycles per iteration: one per instruction
// (every SFPU instruction issues in one cycle, the NOPs after MADs are in
// the body) plus one for the INCRWC that advances DEST.
func (p *Program) Cycles() float64 {
	n := 1.0
	for _, in := range p.Body {
		n++
		if in.Op == isa.SFPSWAP {
			n++ // SFPSWAP takes two cycles (cycles.go)
		}
	}
	return n
}
