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
// its barriers (one per phase and kind: PhaseBegin, PhaseEnd).
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
	Loop bool
	// Early holds the core's early begins (kir.Persist.Early) by phase
	// and processor; Arrive the phase ends their threads only arrive at.
	Early  map[[2]int]*kir.EarlyBegin
	Arrive map[[2]int]bool
	bars   map[PhaseKey]*phaseBar
	// early holds, by phase, the CB indices early begins installed for it
	// (kept when the phase begins on the whole core).
	early map[int]map[int]bool
}

// PhaseKey names one barrier of a core: PhaseBegin(Phase) or PhaseEnd.
// Barriers are counted apart, so a thread that began a phase early may
// arrive at its end while the core's other threads still end the phase
// before.
type PhaseKey struct {
	Phase int
	Begin bool
}

// phaseBar is one barrier's count: arrivals and completions so far.
type phaseBar struct {
	arrived int
	gen     uint64
}

// NewPhases returns the books of a core running threads threads.
func NewPhases(threads int) *Phases {
	return &Phases{Threads: threads, CBs: map[int][]PlacedCB{}, Current: -1}
}

// SetEarly records the early begins of ps on core c (Early, Arrive).
func (ph *Phases) SetEarly(ps *kir.Persist, c kir.Core) {
	for i := range ps.Early {
		e := &ps.Early[i]
		for _, x := range e.Cores {
			if x != c {
				continue
			}
			if ph.Early == nil {
				ph.Early, ph.Arrive = map[[2]int]*kir.EarlyBegin{}, map[[2]int]bool{}
			}
			ph.Early[[2]int{e.Phase, int(e.Processor)}] = e
			ph.Arrive[[2]int{e.Prev, int(e.Processor)}] = true
		}
	}
}

func (ph *Phases) bar(k PhaseKey) *phaseBar {
	if ph.bars == nil {
		ph.bars = map[PhaseKey]*phaseBar{}
	}
	b := ph.bars[k]
	if b == nil {
		b = &phaseBar{}
		ph.bars[k] = b
	}
	return b
}

// Pass says how a thread passed a phase barrier: released after waiting,
// as the thread whose arrival completed it, or early (an EarlyBegin thread
// arriving without waiting).
type Pass int

const (
	PassReleased Pass = iota
	PassCompleted
	PassEarly
)

// barrier is PhaseBegin (begin) or PhaseEnd of phase p on t's core: the
// thread arrives once; the last to arrive releases the others (and, for a
// begin, installs the phase's CBs). It reports whether t may go on.
//
// A thread of an early begin (kir.EarlyBegin, proc on this core) passes
// tcc_phase_end(Prev) and tcc_phase_begin(Phase) without waiting: it
// counts as arrived at both, and its begin installs the early CBs.
func (t *Thread[S]) barrier(p int, begin bool, proc kir.Processor) (bool, *Fault) {
	c := t.Core
	ph := c.Phases
	if ph == nil {
		return false, faultf(kir.RuleMalformed, kir.NoCB, "tcc_phase_%s(%d) runs outside a persistent program", map[bool]string{true: "begin", false: "end"}[begin], p)
	}
	key := PhaseKey{p, begin}
	if !t.inBarrier {
		if begin && p <= ph.Current && !ph.Loop {
			return false, faultf(kir.RuleMalformed, kir.NoCB, "tcc_phase_begin(%d) after phase %d: phases run in increasing order", p, ph.Current)
		}
		b := ph.bar(key)
		b.arrived++
		full := b.arrived == ph.Threads
		if begin {
			if e := ph.Early[[2]int{p, int(proc)}]; e != nil {
				// Early begin: arrived, the early CBs installed, on.
				if f := c.installEarly(p, e.CBs); f != nil {
					return false, f
				}
				t.Pass = PassEarly
				if full {
					t.Pass = PassCompleted
					if f := c.complete(key); f != nil {
						return false, f
					}
				}
				return true, nil
			}
		}
		if full {
			t.Pass = PassCompleted
			return true, c.complete(key)
		}
		if !begin && ph.Arrive[[2]int{p, int(proc)}] {
			t.Pass = PassEarly
			return true, nil
		}
		t.inBarrier, t.barrierKey, t.barrierEpoch = true, key, b.gen
	}
	if ph.bar(t.barrierKey).gen > t.barrierEpoch {
		t.inBarrier = false
		t.Pass = PassReleased
		return true, nil
	}
	return false, nil
}

// complete ends barrier k: a begin makes the core's CBs phase k.Phase's.
func (c *Core) complete(k PhaseKey) *Fault {
	b := c.Phases.bar(k)
	b.arrived = 0
	b.gen++
	if k.Begin {
		return c.enterPhase(k.Phase)
	}
	return nil
}

// installEarly installs phase p's CBs idx (an early begin) now, in place
// of whatever the running phase had there (no thread of the core names
// them until p begins).
func (c *Core) installEarly(p int, idx []int) *Fault {
	ph := c.Phases
	if ph.early == nil {
		ph.early = map[int]map[int]bool{}
	}
	if ph.early[p] == nil {
		ph.early[p] = map[int]bool{}
	}
	for _, i := range idx {
		if ph.early[p][i] {
			continue
		}
		for _, pc := range ph.CBs[p] {
			if pc.Config.Index != i {
				continue
			}
			if i >= 0 && i < len(c.CBs) {
				c.CBs[i] = nil
			}
			if _, f := c.AddCB(pc.Config, pc.Base); f != nil {
				return f
			}
			ph.early[p][i] = true
		}
	}
	return nil
}

// enterPhase makes the core's CBs phase p's (fresh books: empty rings),
// keeping the CBs early begins of p, or of a later phase, installed.
func (c *Core) enterPhase(p int) *Fault {
	kept := map[int]bool{}
	for q, idx := range c.Phases.early {
		if q >= p {
			for i := range idx {
				kept[i] = true
			}
		}
	}
	for i := range c.CBs {
		if !kept[i] {
			c.CBs[i] = nil
		}
	}
	own := c.Phases.early[p]
	for _, pc := range c.Phases.CBs[p] {
		if own[pc.Config.Index] {
			continue
		}
		if _, f := c.AddCB(pc.Config, pc.Base); f != nil {
			return f
		}
	}
	delete(c.Phases.early, p)
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
	call, m, proc := kir.APIName(s), c.m, c.k.Processor
	return func(t *Thread[S]) int {
		ok, f := t.barrier(p, begin, proc)
		if f != nil {
			t.Fail(f)
			return Failed
		}
		if !ok {
			ph := t.Core.Phases
			m.Block(t, Wait{Kind: WaitPhase, Call: call, CB: kir.NoCB, Want: uint64(ph.Threads), Have: uint64(ph.bar(t.barrierKey).arrived)})
			return Blocked
		}
		return t.finish(op, nil)
	}
}
