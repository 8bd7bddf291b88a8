package kexec

import (
	"errors"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// The executor is a machine of the interpreter core (sim/interp): the core
// compiles kernels, evaluates expressions and arguments and keeps the CB
// and semaphore books; the executor adds every instruction's effect
// (Instruction: dataflow.go, compute.go), reads L1 words and records what
// a blocked kernel waits for. A kernel on a core is a thread of the core,
// an instruction's effect an op.
type thread = interp.Thread[*kstate]

type op = interp.Op[*kstate]

// config is the core's view of the run's device: no cycles are counted.
func (r *run) config() *interp.Config {
	return &interp.Config{Target: r.t, SemaphoreBase: uint64(r.d.SemaphoreBase()), EthSemaphoreBase: uint64(r.d.EthSemaphoreBase())}
}

func compileKernel(r *run, k *kir.Kernel) (*interp.Code[*kstate], error) {
	code, err := interp.Compile(k, r.cfg, interp.Machine[*kstate](r))
	var f *interp.Fault
	if errors.As(err, &f) {
		return nil, r.ruleErr(f.Rule, k.Name, nil, f.CB, "%s", f.Msg)
	}
	return code, err
}

// Instruction implements interp.Machine: the effect of instruction s.
func (r *run) Instruction(c *interp.Compiler[*kstate], s kir.Stmt) (op, error) {
	switch s := s.(type) {
	case kir.PhaseBegin:
		if r.p.Persist == nil || s.Phase < 0 || s.Phase >= len(r.p.Persist.Phases) {
			return nil, r.malformed(c.Kernel(), "tcc_phase_begin(%d) names no phase of the program", s.Phase)
		}
		return r.phaseOp(s.Phase, c.Kernel()), nil
	case kir.PhaseEnd:
		return nil, nil
	}
	if o, ok, err := r.dataflow(c, s); ok || err != nil {
		return o, err
	}
	return r.compute(c, s)
}

// ReadL1 implements interp.Machine: a word of the kernel's core's L1.
func (r *run) ReadL1(t *thread, addr uint64, call string) uint64 {
	ks := t.S
	if err := ks.checkL1(addr, 4, call, false); err != nil {
		t.Fail(err)
		return 0
	}
	return uint64(ks.core.mem.read32(addr))
}

// Block implements interp.Machine: the kernel waits for w.
func (r *run) Block(t *thread, w interp.Wait) { t.S.wait = w }

// malformed is a compile error of kernel k.
func (r *run) malformed(k *kir.Kernel, format string, args ...any) error {
	return r.ruleErr(kir.RuleMalformed, k.Name, nil, kir.NoCB, format, args...)
}

// targetBuffer is the DRAM buffer a NoC address expression is built on:
// the one buffer-address argument its bank offset refers to (through
// variables with a single definition), or "" when that is not one buffer.
func targetBuffer(c *interp.Compiler[*kstate], e kir.Expr) string {
	seen := map[string]bool{}
	var find func(e kir.Expr) kir.Expr
	find = func(e kir.Expr) kir.Expr { // the DRAMBankAddr behind e
		switch x := e.(type) {
		case kir.DRAMBankAddr:
			return x
		case kir.Var:
			if d := c.Def(x.Name); d != nil && !seen[x.Name] {
				seen[x.Name] = true
				return find(d)
			}
		case kir.Bin:
			if a := find(x.X); a != nil {
				return a
			}
			return find(x.Y)
		}
		return nil
	}
	da, ok := find(e).(kir.DRAMBankAddr)
	if !ok {
		return ""
	}
	names := map[string]bool{}
	var collect func(e kir.Expr)
	collect = func(e kir.Expr) {
		kir.InspectExpr(e, func(e kir.Expr) bool {
			switch x := e.(type) {
			case kir.ArgRef:
				if a, ok := c.Arg(x.Name); ok && a.Kind != kir.RuntimeArg && a.Value.Kind == kir.ValBufferAddr {
					names[a.Value.Buffer] = true
				}
			case kir.Var:
				if d := c.Def(x.Name); d != nil && !seen["o:"+x.Name] {
					seen["o:"+x.Name] = true
					collect(d)
				}
			}
			return true
		})
	}
	collect(da.Offset)
	if len(names) != 1 {
		return ""
	}
	for n := range names {
		return n
	}
	return ""
}
