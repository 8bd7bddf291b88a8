package kir

import "github.com/tcc-dev/tcc/ir"

// Persist describes a persistent program (codegen/persist): a device's
// whole step as one program whose kernels run, per core and RISC, the
// phases (the step's per-op programs) that core takes part in, each between
// a PhaseBegin and a PhaseEnd. A program with Persist set has no CBs or
// Semaphores of its own: each phase's are installed by PhaseBegin.
type Persist struct {
	// Ctl names the control buffer: an L1-sharded buffer of the program
	// (one CtlBytes page on every worker core) holding the done and count
	// words of every phase and the phases' semaphores (CtlLayout).
	Ctl      string
	CtlBytes int
	// EthCtl is the L1 address of the same control block on ethernet
	// cores (the top EthCtl..EthCtl+CtlBytes of their kernel L1).
	EthCtl uint32
	// SemSlots is the number of semaphore words after the phase words.
	SemSlots int
	Phases   []Phase
	// Steps, when above 1, is the number of steps one launch runs: every
	// merged kernel repeats its phases that many times (codegen/persist's
	// step loop), so each core begins its phases again, in the same
	// order, every step.
	Steps int `json:",omitempty"`
	// Early lists the RISCs that begin a phase before their core's other
	// RISCs end the phase before it (EarlyBegin).
	Early []EarlyBegin `json:",omitempty"`
}

// EarlyBegin lets one RISC of some cores begin phase Phase early: on each
// core of Cores, the thread of Processor, after its part of phase Prev
// (the phase before Phase on the core), only arrives at tcc_phase_end(Prev)
// and at tcc_phase_begin(Phase) and goes on without waiting for the
// core's other threads; its tcc_phase_begin(Phase) installs Phase's CBs
// CBs at once (the core's other threads do not name them in Prev, and
// they lie outside Prev's CBs: Phase.CBBase), and the full barrier of
// tcc_phase_begin(Phase), when the other threads arrive, installs the
// rest and keeps these.
type EarlyBegin struct {
	Phase, Prev int
	Processor   Processor
	Cores       []Core
	CBs         []int
}

// EarlyOn returns the early begin of phase p by processor proc on core c,
// or nil.
func (ps *Persist) EarlyOn(p int, proc Processor, c Core) *EarlyBegin {
	for i := range ps.Early {
		e := &ps.Early[i]
		if e.Phase == p && e.Processor == proc && inCoreList(e.Cores, c) {
			return e
		}
	}
	return nil
}

// ArrivesOnly reports whether processor proc of core c only arrives at
// tcc_phase_end(p) (it begins the next phase early).
func (ps *Persist) ArrivesOnly(p int, proc Processor, c Core) bool {
	for i := range ps.Early {
		e := &ps.Early[i]
		if e.Prev == p && e.Processor == proc && inCoreList(e.Cores, c) {
			return true
		}
	}
	return false
}

func inCoreList(cs []Core, c Core) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// Phase is one phase of a persistent program: the source program's CBs,
// semaphores and compute configurations.
type Phase struct {
	// Name is the source program's name.
	Name string
	CBs  []CB
	// Semaphores are the source program's semaphores; semaphore ID lives in
	// control word SemSlot+ID (Persist.SemWord) on every core of Cores,
	// initialised to Initial at launch.
	Semaphores []Semaphore
	SemSlot    int
	// Kernels describe the source program's kernels (the merged kernels
	// take each one's NoC and compute configuration while it runs).
	Kernels []PhaseKernel
	// Cores are the cores taking part in the phase, row-major.
	Cores []Core
	// CBBase, when not 0, is the L1 address the CBs EarlyCBs are placed
	// from (kir.PlaceCBs), above every CB of the phases before it on the
	// cores that begin it early (EarlyBegin); its other CBs are placed from
	// the target's L1UnreservedBase around them (they are installed only
	// once the phase before has ended on the whole core).
	CBBase   uint32 `json:",omitempty"`
	EarlyCBs []int  `json:",omitempty"`
}

// PhaseKernel is one kernel of a phase's source program.
type PhaseKernel struct {
	Name      string
	Processor Processor
	NoC       int
	Cores     []ir.CoreRange
	Compute   ComputeConfig
	// Defines are the kernel's preprocessor defines.
	Defines map[string]string `json:",omitempty"`
}

// CtlStride is the distance between control words (a semaphore's).
const CtlStride = 16

// DoneWord is the offset in the control block of phase p's done word:
// non-zero once every core of p finished it.
func (ps *Persist) DoneWord(p int) uint32 { return uint32(p * CtlStride) }

// CountWord is the offset of phase p's count word on the phase's leader
// (its first core): the participants that finished p.
func (ps *Persist) CountWord(p int) uint32 { return uint32((len(ps.Phases) + p) * CtlStride) }

// SemWord is the offset of control semaphore slot s.
func (ps *Persist) SemWord(s int) uint32 { return uint32((2*len(ps.Phases) + s) * CtlStride) }

// CtlSize is the control block's size in bytes for n phases and s
// semaphore slots.
func CtlSize(n, s int) int { return (2*n + s) * CtlStride }

// KernelOn returns the kernel of phase p for processor proc on core c, or
// nil when the phase has none there.
func (p *Phase) KernelOn(c Core, proc Processor) *PhaseKernel {
	for i := range p.Kernels {
		if k := &p.Kernels[i]; k.Processor == proc && InRanges(k.Cores, c) {
			return k
		}
	}
	return nil
}
