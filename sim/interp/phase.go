package interp

import "github.com/tcc-dev/tcc/codegen/kir"

// PlacedCB is one CB of a phase of a persistent program as a core installs
// it: the configuration and its ring's L1 address.
type PlacedCB struct {
	Config *kir.CB
	Base   uint64
}

// Phases is the books a core keeps for a persistent program
// (kir.Persist): its threads, the CBs of each phase it takes part in and
// the barrier PhaseBegin and PhaseEnd share.
type Phases struct {
	// Threads is the number of threads (kernels) on the core; every one
	// runs every PhaseBegin and PhaseEnd of the core.
	Threads int
	// CBs holds, by phase, the CBs installed when the phase begins.
	CBs map[int][]PlacedCB
	// Current is the phase begun last (-1 before the first).
	Current int
	// Loop is set when the program repeats its phases (kir.Persist.Steps
	// above 1): a phase may then begin again after later ones.
	Loop    bool
	epoch   uint64
	arrived int
}

// NewPhases returns the books of a core running threads threads.
func NewPhases(threads int) *Phases {
	return &Phases{Threads: threads, CBs: map[int][]PlacedCB{}, Current: -1}
}

// barrier is PhaseBegin (begin) or PhaseEnd of phase p on t's core: the
// thread arrives once; the last to arrive releases the others (and, for a
// begin, installs the phase's CBs). It reports whether t may go on.
func (t *Thread[S]) barrier(p int, begin bool) (bool, *Fault) {
	c := t.Core
	ph := c.Phases
	if ph == nil {
		return false, faultf(kir.RuleMalformed, kir.NoCB, "tcc_phase_%s(%d) runs outside a persistent program", map[bool]string{true: "begin", false: "end"}[begin], p)
	}
	if !t.inBarrier {
		if begin && p <= ph.Current && !ph.Loop {
			return false, faultf(kir.RuleMalformed, kir.NoCB, "tcc_phase_begin(%d) after phase %d: phases run in increasing order", p, ph.Current)
		}
		t.inBarrier, t.barrierEpoch = true, ph.epoch
		ph.arrived++
		if ph.arrived == ph.Threads {
			ph.arrived = 0
			ph.epoch++
			if begin {
				if f := c.enterPhase(p); f != nil {
					return false, f
				}
			}
		}
	}
	if ph.epoch > t.barrierEpoch {
		t.inBarrier = false
		return true, nil
	}
	return false, nil
}

// enterPhase makes the core's CBs phase p's (fresh books: empty rings).
func (c *Core) enterPhase(p int) *Fault {
	for i := range c.CBs {
		c.CBs[i] = nil
	}
	for _, pc := range c.Phases.CBs[p] {
		if _, f := c.AddCB(pc.Config, pc.Base); f != nil {
			return f
		}
	}
	c.Phases.Current = p
	return nil
}

// phaseInstr compiles PhaseBegin and PhaseEnd: the core's barrier, then
// the machine's op.
func (c *Compiler[S]) phaseInstr(s kir.Stmt, op Op[S]) Instr[S] {
	var p int
	begin := false
	switch s := s.(type) {
	case kir.PhaseBegin:
		p, begin = s.Phase, true
	case kir.PhaseEnd:
		p = s.Phase
	}
	call, m := kir.APIName(s), c.m
	return func(t *Thread[S]) int {
		ok, f := t.barrier(p, begin)
		if f != nil {
			t.Fail(f)
			return Failed
		}
		if !ok {
			ph := t.Core.Phases
			m.Block(t, Wait{Kind: WaitPhase, Call: call, CB: kir.NoCB, Want: uint64(ph.Threads), Have: uint64(ph.arrived)})
			return Blocked
		}
		return t.finish(op, nil)
	}
}
