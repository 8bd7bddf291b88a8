package kexec

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// loadPersist loads the phases of a persistent program (kir.Persist): each
// phase's CBs are placed as the standalone program's would be (placeCBs,
// below the lowest L1 buffer, the control buffer included) and kept in the
// core's interp.Phases for PhaseBegin to install; the control block is
// cleared on every worker core and every ethernet core of the program and
// each phase's semaphores are set to their initial values in it, as the
// host writes the block before the launch; a multi-step program's doorbell
// (kir.StepProtocol) rings every step and the stop, since a launch here
// runs to its end.
func (r *run) loadPersist() error {
	ps := r.p.Persist
	db, ok := r.bufDev[ps.Ctl]
	if !ok || db.Mem.Kind.IsDRAM() {
		return fmt.Errorf("program %q: control buffer %q is not an L1 buffer of the program", r.p.Name, ps.Ctl)
	}
	if db.PerCore*db.Stride < ps.CtlBytes {
		return fmt.Errorf("program %q: control buffer %q holds %d bytes per core; the control block needs %d", r.p.Name, ps.Ctl, db.PerCore*db.Stride, ps.CtlBytes)
	}
	if hi := uint64(ps.EthCtl) + uint64(ps.CtlBytes); ps.EthCtl != 0 && (r.t.Eth == nil || uint64(ps.EthCtl) < uint64(r.t.Eth.L1UnreservedBase) || hi > uint64(r.t.Eth.L1Top)) {
		return fmt.Errorf("program %q: the ethernet control block %#x..%#x is outside the ethernet cores' kernel L1", r.p.Name, ps.EthCtl, hi)
	}
	zero := make([]byte, ps.CtlBytes)
	for _, c := range db.Cores {
		r.d.coreMem(c).write(uint64(db.Addr), zero)
	}
	ctlOf := func(c kir.Core) (*memory, uint64) {
		if c.IsEth() {
			return r.d.eth(c.X).mem, uint64(ps.EthCtl)
		}
		return r.d.coreMem(c), uint64(db.Addr)
	}
	if lp := ps.Loop; lp != nil {
		// A launch runs to its end here: every step and the stop are rung.
		at, err := r.core(lp.Leader)
		if err != nil {
			return err
		}
		if !inCoreList(db.Cores, lp.Leader) {
			return fmt.Errorf("program %q: step leader %s holds no control block", r.p.Name, lp.Leader)
		}
		at.mem.write32(uint64(db.Addr)+uint64(lp.Doorbell), kir.DoorbellStop|uint32(ps.Steps))
	}
	cleared := map[kir.Core]bool{}
	for i := range ps.Phases {
		ph := &ps.Phases[i]
		for _, c := range ph.Cores {
			if c.IsEth() && !cleared[c] {
				if !r.t.InEth(c.X) {
					return fmt.Errorf("program %q: phase %d (%s): ethernet core %s does not exist", r.p.Name, i, ph.Name, c)
				}
				cleared[c] = true
				m, a := ctlOf(c)
				m.write(a, zero)
			}
		}
		name := fmt.Sprintf("%d (%s)", i, ph.Name)
		err := r.placeCBsFrom(ph.CBBase, ph.EarlyCBs, ph.CBs, name, func(cs *coreState, cb *kir.CB, addr uint64) *interp.Fault {
			if cs.Phases == nil {
				cs.Phases = interp.NewPhases(0)
			}
			for _, o := range cs.Phases.CBs[i] {
				if o.Config.Index == cb.Index {
					return &interp.Fault{Rule: kir.RuleCBCount, CB: cb.Index, Msg: fmt.Sprintf("CB index %d is configured more than once on this core", cb.Index)}
				}
			}
			cs.Phases.CBs[i] = append(cs.Phases.CBs[i], interp.PlacedCB{Config: cb, Base: addr})
			return nil
		})
		if err != nil {
			return err
		}
		for _, s := range ph.Semaphores {
			if s.ID < 0 || ph.SemSlot+s.ID >= ps.SemSlots {
				return r.ruleErr(kir.RuleSemaphore, "", nil, kir.NoCB, "phase %s: semaphore %d is outside its %d control slots", name, s.ID, ps.SemSlots-ph.SemSlot)
			}
			for _, c := range kir.CoresOf(s.Cores) {
				m, a := ctlOf(c)
				m.write32(a+uint64(ps.SemWord(ph.SemSlot+s.ID)), s.Initial)
			}
		}
	}
	return nil
}

func inCoreList(cs []kir.Core, c kir.Core) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// countThreads tells every core of a persistent program how many threads
// its phase barriers wait for.
func (r *run) countThreads() {
	for _, ks := range r.kernels {
		if ks.core.Phases == nil {
			ks.core.Phases = interp.NewPhases(0)
		}
		ks.core.Phases.Threads++
		ks.core.Phases.Loop = r.p.Persist.Steps > 1
		if ks.core.Phases.Threads == 1 {
			ks.core.Phases.SetEarly(r.p.Persist, ks.core.C)
		}
	}
}

// phaseOp is the executor's part of PhaseBegin(p): the kernel takes the
// name, NoC and compute configuration of the phase's kernel on its core
// and processor (errors then name the phase's kernel); a compute kernel's
// state is reinitialised (DEST cleared, no reduce mask), as the card's
// compute kernel reinitialises its unpack, math and pack state at a phase
// boundary.
func (r *run) phaseOp(p int, merged *kir.Kernel) op {
	ph := &r.p.Persist.Phases[p]
	return func(t *thread, _ []uint64) (bool, error) {
		ks := t.S
		kc := *merged
		kc.Name = fmt.Sprintf("%s [phase %d %s]", merged.Name, p, ph.Name)
		if pk := ph.KernelOn(ks.core.C, merged.Processor); pk != nil {
			kc.Name = fmt.Sprintf("%s [phase %d %s: %s]", merged.Name, p, ph.Name, pk.Name)
			kc.NoC, kc.Compute = pk.NoC, pk.Compute
		}
		ks.k = &kc
		if kc.Role == kir.RoleCompute {
			ks.comp = newComputeState(r, ks.k)
		}
		return false, nil
	}
}
