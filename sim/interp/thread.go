package interp

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Instr is one flat instruction of a compiled kernel. It runs on t and
// returns the next program counter, Blocked or Failed.
type Instr[S any] func(t *Thread[S]) int

const (
	// Blocked: the thread must wait; t.PC is unchanged (the instruction
	// runs again when the thread is resumed) and the machine has been told
	// what it waits for.
	Blocked = -1
	// Failed: the instruction failed; t.Err says why.
	Failed = -2
)

// Op is a machine's part of one instruction: the simulator's effect or
// the timing model's cost. v holds the instruction's operand values in
// kir.StmtExprs order and is valid until Op returns. Op returns wait when
// the thread must wait (the Op has then recorded what for; the whole
// instruction runs again on resumption) and a non-nil error when the
// instruction fails.
type Op[S any] func(t *Thread[S], v []uint64) (wait bool, err error)

// Machine is an interpreter built on the core: what it adds to every
// instruction and how it reads memory and waits.
type Machine[S any] interface {
	// Instruction compiles the machine's part of instruction statement s.
	// For an instruction whose books the core keeps (Keeps) the Op runs
	// after the core's part succeeded and may be nil; for any other it
	// must not be nil. c describes the kernel being compiled.
	Instruction(c *Compiler[S], s kir.Stmt) (Op[S], error)
	// ReadL1 returns the 32-bit word at L1 address addr of t's core, for
	// L1Read32 (call "L1 load") and semaphore waits (call: the wait); it
	// records an error with t.Fail when the read is not allowed.
	ReadL1(t *Thread[S], addr uint64, call string) uint64
	// Block records that t waits for w (a CB call or a semaphore wait the
	// core keeps the books of). The instruction runs again when t resumes.
	Block(t *Thread[S], w Wait)
}

// Config is what the core needs to know about the device.
type Config struct {
	Target *target.Target
	// SemaphoreBase and EthSemaphoreBase are the L1 addresses of semaphore
	// 0 on worker and on ethernet cores (get_semaphore and
	// get_semaphore<ProgrammableCoreType::ACTIVE_ETH>).
	SemaphoreBase, EthSemaphoreBase uint64
	// ScalarCycles is added to a thread's Clock for every control
	// statement it executes.
	ScalarCycles float64
	// Straddle lets CB blocks cross the end of the ring, which the card's
	// CB pointers do not (kir.RuleCBFlow): the timing model, which moves
	// no data, follows such programs; the simulator refuses them.
	Straddle bool
}

// Thread is one kernel on one core as the core runs it. S is the
// machine's own per-thread state (usually a pointer to the struct that
// embeds the Thread).
type Thread[S any] struct {
	// PC is the index of the next instruction in Code.
	PC   int
	Code []Instr[S]
	// Vars are the variable slots, Args the argument values by row of the
	// kernel's argument table.
	Vars, Args []uint64
	Core       *Core
	// Clock is the thread's time in cycles: control statements add
	// Config.ScalarCycles, machine Ops the rest.
	Clock float64
	// Err is the first error of the thread (set by Fail).
	Err error
	S   S
	ops []uint64 // operand values of the running instruction
	// inBarrier: the thread has arrived at phase barrier barrierKey,
	// which has not released it yet (it arrived in the barrier's
	// generation barrierEpoch).
	inBarrier    bool
	barrierKey   PhaseKey
	barrierEpoch uint64
	// Pass is how the thread passed its last phase barrier (for the
	// machine's op of PhaseBegin and PhaseEnd).
	Pass Pass
}

// PhaseKey is the phase barrier the thread waits at (valid while it is
// blocked at one).
func (t *Thread[S]) PhaseKey() PhaseKey { return t.barrierKey }

// Start readies t to run code on core with argument values args (see
// ResolveArgs) and machine state s: PC 0, variables 0, Clock 0, no error.
func (t *Thread[S]) Start(code *Code[S], core *Core, args []uint64, s S) {
	t.Code, t.Core, t.Args, t.S = code.Instrs, core, args, s
	t.Vars = make([]uint64, code.Slots)
	t.ops = make([]uint64, code.MaxOps)
	t.PC, t.Clock, t.Err = 0, 0, nil
	t.inBarrier = false
}

// Done reports whether t has run past its last instruction.
func (t *Thread[S]) Done() bool { return t.PC >= len(t.Code) }

// Step runs the instruction at t.PC. When it returns a program counter, t.PC
// is set to it; Blocked and Failed leave t.PC unchanged.
func (t *Thread[S]) Step() int {
	next := t.Code[t.PC](t)
	if next >= 0 {
		t.PC = next
	}
	return next
}

// Fail records err as the thread's error unless it already has one.
func (t *Thread[S]) Fail(err error) {
	if t.Err == nil {
		t.Err = err
	}
}

// Faultf records a *Fault (see Fail).
func (t *Thread[S]) Faultf(rule kir.Rule, cb int, format string, args ...any) {
	t.Fail(&Fault{Rule: rule, CB: cb, Msg: fmt.Sprintf(format, args...)})
}

// eval evaluates ops into the thread's operand buffer.
func (t *Thread[S]) eval(ops []Expr[S]) []uint64 {
	v := t.ops[:len(ops)]
	for i, e := range ops {
		v[i] = e(t)
	}
	return v
}

// finish runs the machine's op for operand values v and returns the next
// program counter, Blocked or Failed.
func (t *Thread[S]) finish(op Op[S], v []uint64) int {
	if op == nil {
		return t.PC + 1
	}
	wait, err := op(t, v)
	if err != nil {
		t.Fail(err)
		return Failed
	}
	if wait {
		return Blocked
	}
	return t.PC + 1
}

// Fault is a hardware rule (or a rule of kernel IR) that a kernel broke,
// as the core reports it: the machine adds the program, kernel and core.
type Fault struct {
	Rule kir.Rule
	// CB is the CB concerned, or kir.NoCB.
	CB  int
	Msg string
}

func (f *Fault) Error() string { return fmt.Sprintf("%s [rule %s]", f.Msg, f.Rule) }

func faultf(rule kir.Rule, cb int, format string, args ...any) *Fault {
	return &Fault{Rule: rule, CB: cb, Msg: fmt.Sprintf(format, args...)}
}

// WaitKind is what a blocked thread waits for.
type WaitKind uint8

const (
	// WaitFree: cb_reserve_back waits for free pages.
	WaitFree WaitKind = iota
	// WaitFilled: cb_wait_front waits for filled pages.
	WaitFilled
	// WaitWord: a semaphore wait waits for an L1 word's value.
	WaitWord
	// WaitPhase: PhaseBegin or PhaseEnd waits for the core's other
	// threads (Want threads, Have arrived).
	WaitPhase
)

// Wait is what a blocked instruction waits for.
type Wait struct {
	Kind WaitKind
	// Call is the tt-metal call.
	Call string
	// CB is the CB of a CB call, kir.NoCB for a semaphore wait.
	CB int
	// Addr is the L1 address of the word a semaphore wait reads.
	Addr uint64
	// Want is the pages (CB) or the value (semaphore) waited for, Have
	// the free or filled pages or the word's value.
	Want, Have uint64
	// Exact: the semaphore wait needs Have == Want, not Have >= Want.
	Exact bool
}

// Reason says what the thread waits for, e.g. "waits for 2 pages, 0 available".
func (w Wait) Reason() string {
	switch w.Kind {
	case WaitFree:
		return fmt.Sprintf("waits for %s free, %d free", pages(w.Want), w.Have)
	case WaitFilled:
		return fmt.Sprintf("waits for %s, %d available", pages(w.Want), w.Have)
	case WaitPhase:
		return fmt.Sprintf("waits for the core's %d threads at the phase barrier, %d arrived", w.Want, w.Have)
	}
	rel := "=="
	if !w.Exact {
		rel = ">="
	}
	return fmt.Sprintf("waits for value %s %d, has %d", rel, w.Want, w.Have)
}

func pages(n uint64) string {
	if n == 1 {
		return "1 page"
	}
	return fmt.Sprintf("%d pages", n)
}
