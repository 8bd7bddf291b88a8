package kir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/ir"
)

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
	// Loop, for a multi-step program, is where the host<->device step
	// protocol's words lie in the control block (StepProtocol).
	Loop *StepProtocol `json:",omitempty"`
	// Early lists the RISCs that begin a phase before their core's other
	// RISCs end the phase before it (EarlyBegin).
	Early []EarlyBegin `json:",omitempty"`
}

// StepProtocol is the host<->device protocol of a multi-step persistent
// program (codegen/persist.BuildLoop): offsets of its words in the control
// block and how they read.
//
//   - Doorbell (on the step leader, written by the host): the number of
//     steps the host allows: step s starts once it reaches s+1 (the leader
//     waits for it in the barrier that starts every step). After the last
//     step the leader waits for DoorbellStop before its kernel exits: the
//     launch ends when the host stops it.
//   - Done (on the leader, written by the device): the steps completed,
//     every core's part and the step's tokens appended to the history.
//   - Finished (every core, by its signaling RISC): the steps this core
//     finished.
//   - Phase (every core, one word per data-movement RISC: RISCV0, RISCV1):
//     PhaseWord(p, false) once the RISC starts phase p (its dependency
//     waits included), PhaseWord(p, true) once it ended it. Compute
//     kernels cannot store to L1; a core's compute thread is held by the
//     phase barriers within one phase of its data-movement RISCs.
//
// The steps a launch runs are its StepsArg (every RISC's loop bound, the
// compute threads' too), so a run cannot be cut short once launched. The
// simulator, which runs a launch to its end, rings every step and the stop
// at the launch (Doorbell = DoorbellStop|Steps).
type StepProtocol struct {
	// History names the DRAM buffer the leader appends each step's tokens
	// to (page s: step s's).
	History        string
	Leader         Core
	Doorbell, Done uint32
	Finished       uint32
	Phase          [2]uint32
}

// DoorbellStop is the doorbell's stop flag (StepProtocol): set with the
// step count, it lets every step up to that count run and then ends the launch.
const DoorbellStop = 1 << 31

// PhaseWord is the value of a RISC's phase word in phase p: started
// (ended false) or ended. Zero means no phase started yet.
func PhaseWord(p int, ended bool) uint32 {
	v := uint32(2 * (p + 1))
	if ended {
		v++
	}
	return v
}

// DecodePhaseWord inverts PhaseWord; ok is false for zero.
func DecodePhaseWord(v uint32) (p int, ended, ok bool) {
	if v < 2 {
		return 0, false, false
	}
	return int(v/2) - 1, v%2 == 1, true
}

// PhaseWordIndex is the index in StepProtocol.Phase of processor proc's
// phase word, or -1 for a compute kernel (which has none).
func PhaseWordIndex(proc Processor) int {
	switch proc {
	case RISCV0:
		return 0
	case RISCV1:
		return 1
	}
	return -1
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
		if e.Phase == p && e.Processor == proc && slices.Contains(e.Cores, c) {
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
		if e.Prev == p && e.Processor == proc && slices.Contains(e.Cores, c) {
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
	// TXQ is the kernel's ethernet TX queue (Kernel.TXQ).
	TXQ     int `json:",omitempty"`
	Cores   []ir.CoreRange
	Compute ComputeConfig
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

// PhaseArgPrefix is the prefix of phase p's arguments in a merged kernel
// of a persistent program ("p17_" for phase 17).
func PhaseArgPrefix(p int) string { return fmt.Sprintf("p%d_", p) }

// ArgPhase returns the phase whose argument name is in a merged kernel
// (PhaseArgPrefix), or ok false for the kernel's own arguments (the step
// loop's and the control block's, "persist_...").
func ArgPhase(name string) (p int, ok bool) {
	rest, found := strings.CutPrefix(name, "p")
	if !found {
		return 0, false
	}
	digits, _, found := strings.Cut(rest, "_")
	if !found || digits == "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}
