package hostcfg

import (
	"fmt"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// PersistentConfig is what the host needs beyond a program's config to
// launch a persistent program (kir.Persist, codegen/persist) whose kernels
// codegen/cpp printed: the control block it writes before each launch, the
// tables buffer it fills once, and every phase's CBs and argument slices.
//
// Before a launch the host writes, on every core of the program:
//
//   - the control block (Control.Buffer, Control.Bytes per worker core; at
//     Control.EthAddress on ethernet cores): zeros, then each phase's
//     semaphores' initial values at Control.SemBase + (SemSlot + id) *
//     Control.Stride;
//   - the tables buffer (Tables.Buffer, Tables.Bytes per worker core):
//     zeros for the Tables.BarrierWords barrier words (Tables.Stride bytes
//     apart); at Tables.ArgHeader the argument header, Tables.ArgSlots
//     pairs of words (slot 0 BRISC, 1 NCRISC, 2 compute): the offsets in
//     the buffer of the runtime and common runtime argument vectors of the
//     core's merged kernel on that RISC (zeros when none); then, from
//     Tables.ArgHeader + Tables.ArgHeaderBytes, for each phase the core
//     takes part in (its Cores), in phase order, the phase's record of
//     RecordBytes: the low and high words of the phase's CB mask on the
//     core (bit MergedIndex of each CB on the core), then for every merged
//     index up to (RecordBytes - 8) / 16 - 1 the CB's address, total size,
//     page count and page size (zeros for an index not configured on the
//     core), for the phases whose RecordOf is themselves (the others use
//     that phase's record); a record starts where the core's previous one
//     ends; then, for
//     each slot with a kernel on the core, that kernel's runtime argument
//     vector on the core and its common runtime argument vector (the
//     program config's, all of it), each starting at a multiple of
//     Tables.Stride.
//
// The kernel config ring of a worker core holds no argument vector of a
// merged kernel: its common runtime arguments there are
// Tables.RingCommonArgs alone (the control block's and the tables
// buffer's addresses, at indices 0 and 1), its runtime arguments none. An
// ethernet core's merged kernels keep their vectors where an ordinary
// program's are. Each phase reads its slices of the vectors (Kernels:
// first index and count of its runtime and common runtime arguments in
// each merged kernel).
type PersistentConfig struct {
	// Steps is the number of decode steps one launch runs (0 or 1: one).
	Steps   int           `json:"steps,omitempty"`
	Control ControlConfig `json:"control"`
	Tables  TablesConfig  `json:"tables"`
	Phases  []PhaseConfig `json:"phases"`
}

// ControlConfig is the control block's layout (kir.Persist).
type ControlConfig struct {
	Buffer     string `json:"buffer"`
	Bytes      int    `json:"bytes"`
	EthAddress uint32 `json:"eth_address"`
	Stride     int    `json:"stride"`
	// DoneBase, CountBase and SemBase are the offsets of phase 0's done
	// word, its count word and semaphore slot 0.
	DoneBase  uint32 `json:"done_base"`
	CountBase uint32 `json:"count_base"`
	SemBase   uint32 `json:"sem_base"`
}

// TablesConfig is the tables buffer's layout (kir.TablesBuffer).
type TablesConfig struct {
	Buffer         string   `json:"buffer"`
	Bytes          int      `json:"bytes"`
	BarrierWords   int      `json:"barrier_words"`
	Stride         int      `json:"stride"`
	ArgHeader      int      `json:"arg_header"`
	ArgHeaderBytes int      `json:"arg_header_bytes"`
	ArgSlots       int      `json:"arg_slots"`
	RingCommonArgs []string `json:"ring_common_args"`
}

// PhaseConfig is one phase.
type PhaseConfig struct {
	Index       int         `json:"index"`
	Name        string      `json:"name"`
	Cores       []CoreRange `json:"cores"`
	RecordBytes int         `json:"record_bytes"`
	// RecordOf is the phase whose record this phase uses (kir.Tables.
	// RecordOf): its own index, or an earlier phase's with the same
	// record on every core, in which case it has no record of its own.
	RecordOf   int               `json:"record_of"`
	SemSlot    int               `json:"sem_slot"`
	Semaphores []SemaphoreConfig `json:"semaphores"`
	CBs        []PhaseCBConfig   `json:"cbs"`
	Kernels    []PhaseArgs       `json:"kernels"`
}

// PhaseCBConfig is one CB of a phase with the address tcc_phase_begin
// installs it at (a number, or "addr(buf)" for a CB backed by buf).
type PhaseCBConfig struct {
	CBConfig
	Address ArgValue `json:"address"`
	// MergedIndex is the CB index the merged kernels use for it
	// (kir.Persist.CBMap): its place in the phase's record and mask, and
	// the index of the merged compute binary's format tables, which
	// the JIT builds from these CBs' data formats (one per merged index).
	MergedIndex int `json:"merged_index"`
}

// PhaseArgs is where a phase's arguments lie in one merged kernel's
// argument vectors.
type PhaseArgs struct {
	Kernel      string `json:"kernel"`
	RuntimeArgs [2]int `json:"runtime_args"`
	CommonArgs  [2]int `json:"common_runtime_args"`
}

// Persistent returns the persistent section of p's host config (nil for a
// program without kir.Persist). p must have its tables
// (codegen/persist.WithTables). Errors name the phase and CB.
func Persistent(p *kir.Program, t *target.Target) (*PersistentConfig, error) {
	ps := p.Persist
	if ps == nil {
		return nil, nil
	}
	tb := p.Buffer(kir.TablesBuffer)
	if tb == nil {
		return nil, fmt.Errorf("hostcfg: persistent program %q has no tables buffer %q", p.Name, kir.TablesBuffer)
	}
	out := &PersistentConfig{
		Steps: ps.Steps,
		Control: ControlConfig{Buffer: ps.Ctl, Bytes: ps.CtlBytes, EthAddress: ps.EthCtl, Stride: kir.CtlStride,
			DoneBase: ps.DoneWord(0), CountBase: ps.CountWord(0), SemBase: ps.SemWord(0)},
		Tables: TablesConfig{Buffer: kir.TablesBuffer, Bytes: tb.PageSize, BarrierWords: kir.TableBarrierWords, Stride: kir.CtlStride,
			ArgHeader: kir.TableArgHeader, ArgHeaderBytes: kir.TableArgHeaderBytes, ArgSlots: kir.TableArgSlots, RingCommonArgs: kir.RingCommonArgs[:]},
		Phases: []PhaseConfig{},
	}
	tables, err := ps.Tables()
	if err != nil {
		return nil, fmt.Errorf("hostcfg: program %q: %w", p.Name, err)
	}
	cbMap := tables.CBMap
	for i := range ps.Phases {
		ph := &ps.Phases[i]
		pc := PhaseConfig{Index: i, Name: ph.Name, RecordBytes: tables.Record[i], RecordOf: tables.RecordOf[i], SemSlot: ph.SemSlot,
			Semaphores: []SemaphoreConfig{}, CBs: []PhaseCBConfig{}, Kernels: []PhaseArgs{}}
		for _, c := range ph.Cores {
			pc.Cores = append(pc.Cores, CoreRange(c.Range()))
		}
		for _, s := range ph.Semaphores {
			sc := SemaphoreConfig{ID: s.ID, Cores: ranges(s.Cores), Initial: s.Initial}
			if len(s.Cores) > 0 && kir.IsEthRange(s.Cores[0]) {
				sc.CoreType = CoreTypeEth
			}
			pc.Semaphores = append(pc.Semaphores, sc)
		}
		placed, err := ps.PlacePhaseCBs(i, uint64(t.L1UnreservedBase))
		if err != nil {
			return nil, fmt.Errorf("hostcfg: program %q: %w", p.Name, err)
		}
		for _, pl := range placed {
			cb := pl.CB
			df, err := target.DataFormatOf(cb.Format)
			if err != nil {
				return nil, fmt.Errorf("hostcfg: program %q phase %d CB c_%d: %w", p.Name, i, cb.Index, err)
			}
			pc.CBs = append(pc.CBs, PhaseCBConfig{CBConfig: CBConfig{
				Index: cb.Index, Name: cb.Name, PageSize: cb.PageSize, NumPages: cb.Pages, TotalSize: cb.Bytes(),
				DataFormat: df.Name(), DataFormatCode: int(df), Cores: ranges(cb.Cores), BackingBuffer: cb.Backing,
			}, Address: ArgValue{pl.Addr}, MergedIndex: cbMap[i][cb.Index]})
		}
		prefix := fmt.Sprintf("p%d_", i)
		for _, k := range p.Kernels {
			rt, ct := argSpan(k, kir.RuntimeArg, prefix), argSpan(k, kir.CommonRuntimeArg, prefix)
			if rt[1] > 0 || ct[1] > 0 {
				pc.Kernels = append(pc.Kernels, PhaseArgs{Kernel: k.Name, RuntimeArgs: rt, CommonArgs: ct})
			}
		}
		out.Phases = append(out.Phases, pc)
	}
	return out, nil
}

// argSpan is the first index and count of k's arguments of kind named
// with prefix (contiguous in a merged kernel).
func argSpan(k *kir.Kernel, kind kir.ArgKind, prefix string) [2]int {
	lo, n := 0, 0
	for _, a := range k.ArgsOfKind(kind) {
		if strings.HasPrefix(a.Name, prefix) {
			if n == 0 {
				lo = a.Index
			}
			n++
		}
	}
	return [2]int{lo, n}
}
