package timing

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// PhaseSpan is one phase of a persistent program on one device: from its
// first PhaseBegin to its last PhaseEnd (microseconds from the launch).
type PhaseSpan struct {
	StartUS, EndUS float64
	// Ran is false for a phase no core of the device ran.
	Ran bool
}

// phaseState is what the model keeps of a core's phase barriers: per
// barrier the threads waiting at it and the latest arrival among them; the
// phase whose CB timings are installed.
type phaseState struct {
	bars   map[interp.PhaseKey]*barTimes
	qPhase int
	// early holds, by phase, the CB indices an early begin
	// (kir.EarlyBegin) installed for it: kept when it, or an earlier
	// phase, begins on the core.
	early map[int]map[int]bool
}

// barTimes is one barrier's waiting threads and latest arrival.
type barTimes struct {
	waiters    []*thread
	arrivedMax float64
}

func (st *phaseState) bar(k interp.PhaseKey) *barTimes {
	if st.bars == nil {
		st.bars = map[interp.PhaseKey]*barTimes{}
	}
	b := st.bars[k]
	if b == nil {
		b = &barTimes{}
		st.bars[k] = b
	}
	return b
}

// loadPersist gives every core of device dev the CBs of each phase it
// takes part in (the model's fixed CB addresses: data is not modelled) and
// sets the phases' semaphores, re-homed into the control block, to their
// initial values.
func (m *machine) loadPersist(dev *device) error {
	ps := m.prog.Persist
	ctl, ok := m.bufAddr[ps.Ctl]
	if !ok {
		return fmt.Errorf("program %q: control buffer %q is not declared", m.prog.Name, ps.Ctl)
	}
	ctlOf := func(c kir.Core) uint32 {
		if c.IsEth() {
			return ps.EthCtl
		}
		return ctl
	}
	for p := range ps.Phases {
		ph := &ps.Phases[p]
		for i := range ph.CBs {
			cb := &ph.CBs[i]
			if cb.Pages <= 0 {
				return fmt.Errorf("program %q: phase %d (%s): CB c_%d has %d pages", m.prog.Name, p, ph.Name, cb.Index, cb.Pages)
			}
			for _, c := range kir.CoresOf(cb.Cores) {
				cs, err := m.core(dev, c)
				if err != nil {
					return err
				}
				if cs.Phases == nil {
					cs.Phases = interp.NewPhases(0)
				}
				cs.Phases.CBs[p] = append(cs.Phases.CBs[p], interp.PlacedCB{Config: cb, Base: uint64(cbBase + cbStride*cb.Index)})
			}
		}
		for _, s := range ph.Semaphores {
			for _, c := range kir.CoresOf(s.Cores) {
				cs, err := m.core(dev, c)
				if err != nil {
					return err
				}
				cs.word(ctlOf(c) + ps.SemWord(ph.SemSlot+s.ID)).v = s.Initial
			}
		}
	}
	return nil
}

// countThreads tells every core of a persistent program how many threads
// its phase barriers wait for.
func (m *machine) countThreads() {
	for _, th := range m.threads {
		if th.core.Phases == nil {
			th.core.Phases = interp.NewPhases(0)
		}
		th.core.Phases.Threads++
		if th.core.Phases.Threads == 1 {
			th.core.Phases.SetEarly(m.prog.Persist, th.core.C)
		}
	}
}

// phaseCost is the model's part of PhaseBegin(p) (begin) and PhaseEnd(p):
// the core-local barrier releases every thread at the latest arrival; a
// begin then installs the phase's CB timings on the core (empty rings),
// gives the thread the phase kernel's NoC and compute configuration, and
// stamps the phase's start; an end stamps its end.
func (m *machine) phaseCost(p int, begin bool, merged *kir.Kernel) op {
	ph := &m.prog.Persist.Phases[p]
	return func(t *ithread, _ []uint64) (bool, error) {
		th := t.S
		cs := th.core
		st := &cs.phase
		bt := st.bar(interp.PhaseKey{Phase: p, Begin: begin})
		switch t.Pass {
		case interp.PassEarly:
			// An early begin or an arrive-only end: the thread goes on;
			// its arrival counts for the barrier's release.
			bt.arrivedMax = max(bt.arrivedMax, th.Clock)
		case interp.PassReleased:
			th.waitUntil(th.phaseRelease, "phase barrier")
		default:
			rel := max(bt.arrivedMax, th.Clock)
			th.waitUntil(rel, "phase barrier")
			for _, w := range bt.waiters {
				w.phaseRelease = rel
			}
			m.wake(&bt.waiters)
			bt.arrivedMax = 0
		}
		th.advance(m.p.ScalarCycles)
		d := cs.dev
		if d.phases == nil {
			d.phases = make([]PhaseSpan, len(m.prog.Persist.Phases))
		}
		span := &d.phases[p]
		us := m.p.cyclesToUS(th.Clock)
		if begin {
			if !span.Ran || us < span.StartUS {
				span.StartUS = us
			}
			span.Ran = true
			if e := cs.Phases.Early[[2]int{p, int(merged.Processor)}]; e != nil && t.Pass == interp.PassEarly && st.qPhase != p {
				// The early CBs' timings, once per phase on the core.
				if st.early == nil {
					st.early = map[int]map[int]bool{}
				}
				if st.early[p] == nil {
					st.early[p] = map[int]bool{}
				}
				for _, pc := range cs.Phases.CBs[p] {
					if cb := pc.Config; containsInt(e.CBs, cb.Index) && !st.early[p][cb.Index] {
						st.early[p][cb.Index] = true
						cs.q[cb.Index] = newCBQ(cb)
					}
				}
			} else if st.qPhase != p {
				// The phase's CBs, keeping those early begins of it or of
				// a later phase installed.
				st.qPhase = p
				kept := map[int]bool{}
				own := st.early[p]
				for q, idx := range st.early {
					if q >= p {
						for i := range idx {
							kept[i] = true
						}
					}
				}
				for i := range cs.q {
					if !kept[i] {
						cs.q[i] = nil
					}
				}
				for _, pc := range cs.Phases.CBs[p] {
					if cb := pc.Config; !own[cb.Index] {
						cs.q[cb.Index] = newCBQ(cb)
					}
				}
				delete(st.early, p)
			}
			kc := *merged
			if pk := ph.KernelOn(cs.C, merged.Processor); pk != nil {
				kc.NoC, kc.Compute = pk.NoC, pk.Compute
			}
			th.k = &kc
			th.fp32 = kc.Compute.FP32DestAccEn
			th.mathPasses = float64(max(int(kc.Compute.MathFidelity), 1))
		} else {
			span.EndUS = max(span.EndUS, us)
		}
		return false, nil
	}
}

// blockPhase puts th to sleep at its core's phase barrier.
func (m *machine) blockPhase(t *ithread) {
	th := t.S
	bt := th.core.phase.bar(t.PhaseKey())
	bt.arrivedMax = max(bt.arrivedMax, th.Clock)
	th.block(&bt.waiters, "phase barrier")
}

// newCBQ is the empty timing ring of cb.
func newCBQ(cb *kir.CB) *cbq {
	return &cbq{free: make([]float64, cb.Pages),
		reserve: fmt.Sprintf("cb_reserve_back c_%d", cb.Index), wait: fmt.Sprintf("cb_wait_front c_%d", cb.Index)}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
