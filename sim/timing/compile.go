package timing

import (
	"errors"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// The timing model is a machine of the interpreter core (sim/interp): the
// core compiles kernels, evaluates expressions and arguments and keeps the
// CB and semaphore books, exactly as for the simulator; the model adds
// every instruction's cost (Instruction: calls.go), a clock per thread and
// the times at which CB pages and L1 words become ready.
type (
	ithread = interp.Thread[*thread] // the core's view of a thread
	op      = interp.Op[*thread]     // an instruction's cost
)

// compileKernel flattens k's body into instructions (loops and branches
// become jumps), as sim/kexec does, so the timed run follows exactly the
// statements the kernel prints. labels[i] names what instruction i does
// for the busy profile: the call's tt-metal name, "l1_store" for an L1
// word store, "scalar" for control statements.
func compileKernel(m *machine, k *kir.Kernel) (*interp.Code[*thread], []string, error) {
	code, err := interp.Compile(k, m.cfg, interp.Machine[*thread](m))
	if err != nil {
		return nil, nil, fmt.Errorf("program %q: kernel %s: %w", m.prog.Name, k.Name, err)
	}
	labels := make([]string, len(code.Stmts))
	for i, s := range code.Stmts {
		switch {
		case s == nil:
			labels[i] = "scalar"
		case kir.APIName(s) == "":
			labels[i] = "l1_store" // L1Write32, a volatile store
		default:
			labels[i] = kir.APIName(s)
		}
	}
	return code, labels, nil
}

// ReadL1 implements interp.Machine: the value of an L1 word (0 until
// written); data is not modelled, except the known contents a NoC read
// brought (Options.Contents).
func (m *machine) ReadL1(t *ithread, addr uint64, _ string) uint64 {
	if w, ok := t.S.core.mem[uint32(addr)]; ok {
		return uint64(w.v)
	}
	return 0
}

// Block implements interp.Machine: the thread sleeps until the CB's other
// side or a write of the word wakes it.
func (m *machine) Block(t *ithread, w interp.Wait) {
	th := t.S
	switch w.Kind {
	case interp.WaitFree:
		q := th.core.q[w.CB]
		th.block(&q.prod, q.reserve)
	case interp.WaitFilled:
		q := th.core.q[w.CB]
		th.block(&q.cons, q.wait)
	case interp.WaitPhase:
		m.blockPhase(t)
	default:
		th.block(&th.core.word(uint32(w.Addr)).waiters, "noc_semaphore_wait")
	}
}

// fault completes an error of the core with the program, kernel and core.
func (th *thread) fault(err error) error {
	var f *interp.Fault
	if errors.As(err, &f) {
		return fmt.Errorf("program %q: kernel %s on %s: %s", th.m.prog.Name, th.k.Name, th.core.C, f.Msg)
	}
	return err
}
