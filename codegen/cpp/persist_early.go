package cpp

import "github.com/tcc-dev/tcc/codegen/kir"

// Early begins (kir.EarlyBegin, codegen/persist's early.go) as printed: on
// the cores of an early begin, the RISC that begins phase p early ends the
// phase before with tcc_phase_end_arrive (it counts at that barrier without
// waiting) and begins p with tcc_phase_begin_early, which counts at p's
// begin barrier without waiting and installs only p's early CBs: the
// phase's record masked by the merged indices (kir.Persist.CBMap) of
// kir.Phase.EarlyCBs (tcc_persist.h). The other RISCs print the plain
// tcc_phase_end / tcc_phase_begin, which wait for every RISC's count and
// install the whole record. This is the simulator's ordering
// (sim/interp's phase barriers, counted one by one): the early thread is
// counted as arrived at both barriers, the barrier completes when the last
// RISC arrives.

// earlyRole reports whether this merged kernel begins phase p early
// (kir.Persist.EarlyOn) and whether it only arrives at p's end because it
// begins the next phase early (kir.Persist.ArrivesOnly). Every core of the
// kernel must agree (codegen/persist groups cores so); a kernel whose
// cores disagree is an error naming the phase and the two cores.
func (pr *printer) earlyRole(p int) (begin, arrive bool) {
	ps := pr.p.Persist
	if ps == nil || len(ps.Early) == 0 || pr.k.OnEth() {
		return false, false
	}
	cores := kir.CoresOf(pr.k.Cores)
	for i, c := range cores {
		b := ps.EarlyOn(p, pr.k.Processor, c) != nil
		a := ps.ArrivesOnly(p, pr.k.Processor, c)
		if i == 0 {
			begin, arrive = b, a
			continue
		}
		if b != begin || a != arrive {
			pr.fail("phase %d begins or ends early on core %s but not on core %s (early begin %v/%v, arrive only %v/%v): the cores of a merged kernel run the same barriers", p, cores[0], c, begin, b, arrive, a)
			return false, false
		}
	}
	return begin, arrive
}

// earlyMask is the merged-index mask (indices 0..31, 32..63) of phase p's
// early CBs, which tcc_phase_begin_early installs.
func (pr *printer) earlyMask(p int) (lo, hi uint32) {
	ph := &pr.p.Persist.Phases[p]
	for _, i := range ph.EarlyCBs {
		m, ok := pr.pers.cbMap[p][i]
		if !ok {
			pr.fail("phase %d's early CB c_%d has no merged index (it is not one of the phase's CBs)", p, i)
			return 0, 0
		}
		switch {
		case m < 32:
			lo |= 1 << uint(m)
		case m < kir.MergedCBs:
			hi |= 1 << uint(m-32)
		default:
			pr.fail("phase %d's early CB c_%d has merged index %d, beyond the %d a binary has", p, i, m, kir.MergedCBs)
		}
	}
	if lo == 0 && hi == 0 {
		pr.fail("phase %d begins early with no early CBs (kir.Phase.EarlyCBs)", p)
	}
	return lo, hi
}
