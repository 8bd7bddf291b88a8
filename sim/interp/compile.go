package interp

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// Code is a kernel compiled once for all the cores it runs on.
type Code[S any] struct {
	Instrs []Instr[S]
	// Stmts[i] is the instruction statement Instrs[i] runs, nil for control
	// flow (assignments, loop heads and steps, branches and jumps).
	Stmts []kir.Stmt
	// Slots is the number of variable slots, MaxOps the most operands of
	// one instruction.
	Slots, MaxOps int
}

// Compiler compiles one kernel for one machine. Machines see it in
// Machine.Instruction.
type Compiler[S any] struct {
	k   *kir.Kernel
	cfg *Config
	m   Machine[S]
	// defs holds the value each variable was last given by a Let or
	// Assign: nil once it is assigned twice.
	defs  map[string]kir.Expr
	slots map[string]int
	types map[string]kir.Type
	args  map[string]int // arg name -> row in k.Args
	code  Code[S]
}

// NewCompiler returns a compiler of kernel k for machine m.
func NewCompiler[S any](k *kir.Kernel, cfg *Config, m Machine[S]) *Compiler[S] {
	c := &Compiler[S]{k: k, cfg: cfg, m: m, defs: map[string]kir.Expr{}, slots: map[string]int{}, types: map[string]kir.Type{}, args: map[string]int{}}
	for i, a := range k.Args {
		c.args[a.Name] = i
	}
	return c
}

// Compile compiles k's body for machine m. Its errors are a *Fault
// (kir.RuleMalformed: a variable used before its declaration or with
// another type, an unknown argument, a call of the wrong kernel class, a
// missing operand) or the machine's.
func Compile[S any](k *kir.Kernel, cfg *Config, m Machine[S]) (*Code[S], error) {
	c := NewCompiler(k, cfg, m)
	if err := c.Block(k.Body); err != nil {
		return nil, err
	}
	return c.Code(), nil
}

// Code returns what was compiled so far.
func (c *Compiler[S]) Code() *Code[S] {
	code := c.code
	code.Slots = len(c.slots)
	return &code
}

// Kernel is the kernel being compiled.
func (c *Compiler[S]) Kernel() *kir.Kernel { return c.k }

// Config is the device configuration the kernel is compiled for.
func (c *Compiler[S]) Config() *Config { return c.cfg }

// Def is the one value variable name was given by a Let or Assign so far,
// or nil when it was assigned more than once (or is a loop variable).
func (c *Compiler[S]) Def(name string) kir.Expr { return c.defs[name] }

// Arg is the row of the kernel's argument table called name.
func (c *Compiler[S]) Arg(name string) (kir.Arg, bool) {
	i, ok := c.args[name]
	if !ok {
		return kir.Arg{}, false
	}
	return c.k.Args[i], true
}

func malformed(format string, args ...any) *Fault {
	return faultf(kir.RuleMalformed, kir.NoCB, format, args...)
}

func (c *Compiler[S]) emit(s kir.Stmt, in Instr[S]) int {
	c.code.Instrs = append(c.code.Instrs, in)
	c.code.Stmts = append(c.code.Stmts, s)
	return len(c.code.Instrs) - 1
}

// here is the index of the next instruction.
func (c *Compiler[S]) here() int { return len(c.code.Instrs) }

func (c *Compiler[S]) slot(v kir.Var, declare bool) (int, error) {
	if s, ok := c.slots[v.Name]; ok {
		if c.types[v.Name] != v.Type {
			return 0, malformed("variable %q used as %s, declared %s", v.Name, v.Type, c.types[v.Name])
		}
		return s, nil
	}
	if !declare {
		return 0, malformed("variable %q is used before its declaration", v.Name)
	}
	c.slots[v.Name] = len(c.slots)
	c.types[v.Name] = v.Type
	return c.slots[v.Name], nil
}

// Block compiles a statement list.
func (c *Compiler[S]) Block(body []kir.Stmt) error {
	for _, s := range body {
		if err := c.Stmt(s); err != nil {
			return err
		}
	}
	return nil
}

// Stmt compiles one statement.
func (c *Compiler[S]) Stmt(s kir.Stmt) error {
	switch s := s.(type) {
	case kir.Let:
		return c.assign(s.Var, s.Value, true)
	case kir.Assign:
		return c.assign(s.Var, s.Value, false)
	case kir.For:
		return c.loop(s)
	case kir.If:
		return c.branch(s)
	case kir.Comment:
		return nil
	}
	if c.k.Role == kir.RoleCompute {
		if kir.IsDataMovementOnly(s) {
			return malformed("%s is a data-movement call in a compute kernel", kir.APIName(s))
		}
	} else if kir.IsComputeOnly(s) {
		return malformed("%s is a compute call in a %s kernel", kir.APIName(s), c.k.Role)
	}
	return c.instruction(s)
}

func (c *Compiler[S]) assign(v kir.Var, e kir.Expr, declare bool) error {
	val, err := c.expr(e)
	if err != nil {
		return err
	}
	slot, err := c.slot(v, declare)
	if err != nil {
		return err
	}
	if _, seen := c.defs[v.Name]; seen && !declare {
		c.defs[v.Name] = nil // reassigned: no single definition
	} else {
		c.defs[v.Name] = e
	}
	mask, sc := maskOf(v.Type), c.cfg.ScalarCycles
	c.emit(nil, func(t *Thread[S]) int {
		x := val(t)
		if t.Err != nil {
			return Failed
		}
		t.Vars[slot] = x & mask
		t.Clock += sc
		return t.PC + 1
	})
	return nil
}

// loop compiles `for (v = Start; v < End; v += Step)`: the start, the
// head (which tests the end each iteration), the body and the step, which
// jumps back to the head.
func (c *Compiler[S]) loop(s kir.For) error {
	start, err := c.expr(s.Start)
	if err != nil {
		return err
	}
	slot, err := c.slot(s.Var, true)
	if err != nil {
		return err
	}
	end, err := c.expr(s.End)
	if err != nil {
		return err
	}
	var step Expr[S]
	if s.Step != nil {
		if step, err = c.expr(s.Step); err != nil {
			return err
		}
	}
	const mask = 0xffffffff // loop variables are uint32_t
	sc := c.cfg.ScalarCycles
	c.emit(nil, func(t *Thread[S]) int {
		x := start(t)
		if t.Err != nil {
			return Failed
		}
		t.Vars[slot] = x & mask
		return t.PC + 1
	})
	var exit int
	head := c.emit(nil, func(t *Thread[S]) int {
		t.Clock += sc
		e := end(t)
		if t.Err != nil {
			return Failed
		}
		if t.Vars[slot] < e {
			return t.PC + 1
		}
		return exit
	})
	if err := c.Block(s.Body); err != nil {
		return err
	}
	if step == nil {
		c.emit(nil, func(t *Thread[S]) int {
			t.Vars[slot] = (t.Vars[slot] + 1) & mask
			return head
		})
	} else {
		c.emit(nil, func(t *Thread[S]) int {
			st := step(t)
			if t.Err != nil {
				return Failed
			}
			t.Vars[slot] = (t.Vars[slot] + st) & mask
			return head
		})
	}
	exit = c.here()
	return nil
}

// branch compiles if/else: the test jumps to the else part when the
// condition is 0; the then part ends with a jump past the else part
// (also when there is none).
func (c *Compiler[S]) branch(s kir.If) error {
	cond, err := c.expr(s.Cond)
	if err != nil {
		return err
	}
	var elseAt, endAt int
	sc := c.cfg.ScalarCycles
	c.emit(nil, func(t *Thread[S]) int {
		t.Clock += sc
		x := cond(t)
		if t.Err != nil {
			return Failed
		}
		if x != 0 {
			return t.PC + 1
		}
		return elseAt
	})
	if err := c.Block(s.Then); err != nil {
		return err
	}
	c.emit(nil, func(*Thread[S]) int { return endAt })
	elseAt = c.here()
	if err := c.Block(s.Else); err != nil {
		return err
	}
	endAt = c.here()
	return nil
}

// Keeps reports whether the core keeps the books of instruction s (the CB
// calls and the semaphore waits), so a machine's Op for it may be nil.
func Keeps(s kir.Stmt) bool {
	switch s.(type) {
	case kir.CBReserveBack, kir.CBPushBack, kir.CBWaitFront, kir.CBPopFront,
		kir.NoCSemaphoreWait, kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWait, kir.EthNoCSemaphoreWaitMin,
		kir.PhaseBegin, kir.PhaseEnd:
		return true
	}
	return false
}

// instruction compiles an instruction statement: its operands, the
// machine's op and, for the calls the core keeps the books of, the core's
// part before it.
func (c *Compiler[S]) instruction(s kir.Stmt) error {
	ops, err := c.exprs(kir.StmtExprs(s)...)
	if err != nil {
		return err
	}
	c.code.MaxOps = max(c.code.MaxOps, len(ops))
	op, err := c.m.Instruction(c, s)
	if err != nil {
		return err
	}
	if op == nil && !Keeps(s) {
		return fmt.Errorf("interp: the machine compiled %s to nothing", kir.APIName(s))
	}
	var in Instr[S]
	switch s := s.(type) {
	case kir.CBReserveBack:
		in = c.cbInstr("cb_reserve_back", s.CB, ops, op)
	case kir.CBPushBack:
		in = c.cbInstr("cb_push_back", s.CB, ops, op)
	case kir.CBWaitFront:
		in = c.cbInstr("cb_wait_front", s.CB, ops, op)
	case kir.CBPopFront:
		in = c.cbInstr("cb_pop_front", s.CB, ops, op)
	case kir.NoCSemaphoreWait, kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWait, kir.EthNoCSemaphoreWaitMin:
		in = c.semWait(s, ops, op)
	case kir.PhaseBegin, kir.PhaseEnd:
		in = c.phaseInstr(s, op)
	default:
		in = func(t *Thread[S]) int {
			v := t.eval(ops)
			if t.Err != nil {
				return Failed
			}
			return t.finish(op, v)
		}
	}
	c.emit(s, in)
	return nil
}

// semWait compiles noc_semaphore_wait(_min) and their eth_ forms: the word
// at the address (Machine.ReadL1) must equal (or reach) the value, else
// the thread blocks. The plain forms may not run on an ethernet core,
// where they would starve the base firmware.
func (c *Compiler[S]) semWait(s kir.Stmt, ops []Expr[S], op Op[S]) Instr[S] {
	call, m := kir.APIName(s), c.m
	var exact, plain bool
	switch s.(type) {
	case kir.NoCSemaphoreWait:
		exact, plain = true, true
	case kir.NoCSemaphoreWaitMin:
		plain = true
	case kir.EthNoCSemaphoreWait:
		exact = true
	}
	return func(t *Thread[S]) int {
		if plain && t.Core.Eth {
			t.Faultf(kir.RuleEthWait, kir.NoCB, "%s on ethernet core %s spins without run_routing, starving the base firmware that shares ERISC0; use eth_%s", call, t.Core.C, call)
			return Failed
		}
		v := t.eval(ops)
		if t.Err != nil {
			return Failed
		}
		have, want := m.ReadL1(t, v[0], call), v[1]&0xffffffff
		if t.Err != nil {
			return Failed
		}
		if exact && have != want || !exact && have < want {
			m.Block(t, Wait{Kind: WaitWord, Call: call, CB: kir.NoCB, Addr: v[0], Want: want, Have: have, Exact: exact})
			return Blocked
		}
		return t.finish(op, v)
	}
}
