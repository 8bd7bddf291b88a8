package sfpu

import (
	"fmt"
	"math"
	"slices"

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
	// touched marks the LREGs the body has used so far: a hoisted
	// constant needs one it has not (Setup's load would be overwritten
	// from the second iteration on).
	touched [8]bool
	// hoisted maps a constant's bits to the LREG Setup loads it into.
	hoisted map[uint32]uint8
	// inline loads hoist's constants in the body instead, where first
	// used, into LREGs that endStep frees (a chain whose ops' constants
	// do not fit the LREGs for the whole program); local maps them.
	inline bool
	local  map[uint32]uint8
	// inlineK are constants loaded inline even when inline is false;
	// order lists the constants hoisted to Setup, in the order hoisted.
	inlineK map[uint32]bool
	order   []uint32
	// seen lists every constant hoist was asked for, in first-asked order.
	seen []uint32
}

// endStep frees the LREGs of the constants hoist loaded inline since the
// last call.
func (a *asm) endStep() {
	for _, r := range a.local {
		a.free(r)
	}
	a.local = nil
}

// hoist is an LREG holding fp32 bits b for the whole program, loaded once
// per face in Setup (the LREG stays allocated), in one the body has not
// used before; when there is none (or inline, or inlineK has b) the
// constant is loaded in the body where first used instead, in an LREG
// that endStep frees.
func (a *asm) hoist(b uint32) uint8 {
	if r, ok := a.hoisted[b]; ok {
		return r
	}
	if !slices.Contains(a.seen, b) {
		a.seen = append(a.seen, b)
	}
	r := uint8(8)
	for i := range a.used {
		if !a.used[i] && !a.touched[i] {
			r = uint8(i)
			break
		}
	}
	if a.inline || a.inlineK[b] || r == 8 {
		if r, ok := a.local[b]; ok {
			return r
		}
		if a.local == nil {
			a.local = map[uint32]uint8{}
		}
		r := a.reg()
		a.local[b] = r
		a.setK(r, b)
		return r
	}
	if a.hoisted == nil {
		a.hoisted = map[uint32]uint8{}
	}
	a.used[r], a.touched[r] = true, true
	a.hoisted[b] = r
	a.order = append(a.order, b)
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
			a.used[r], a.touched[r] = true, true
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
func (p *Program) Eval(x, y float32) float32 { return p.EvalDest(x, y, true) }

// EvalDest is Eval in a DEST that is fp32 (fp32_dest_acc_en) or not: in
// a 16-bit DEST x and y are bf16 values and the result is what SFPSTORE
// leaves there (denormals flushed, the low half dropped).
func (p *Program) EvalDest(x, y float32, fp32 bool) float32 {
	l := isa.NewLane()
	env := isa.Env{FP32: fp32}
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
