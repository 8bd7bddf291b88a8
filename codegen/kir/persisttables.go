package kir

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// The per-phase tables of a persistent program on the card (the printed
// kernels' tcc_phase_begin reads them; codegen/cpp, codegen/hostcfg).
//
// tt-metal's firmware installs a program's CBs once per launch, from the
// local CB configs in the kernel config ring (setup_local_cb_read_write_
// interfaces over local_cb_mask). A persistent program installs each
// phase's CBs when the phase begins, from a table in L1 of the same format:
// the tables buffer (TablesBuffer, one page of TablesBytes on every worker
// core) holds, from offset 0:
//
//	the core-local barrier words: TableBarrierWords words, one per RISC
//	(BRISC, NCRISC, TRISC0, TRISC1, TRISC2), CtlStride bytes apart; the
//	host zeroes them before each launch
//	the argument header (TableArgHeaderBytes): per argument slot
//	(TableArgSlot: BRISC, NCRISC, compute) two words, the offsets in the
//	buffer of the core's merged kernel's runtime and common runtime
//	argument vectors (zeros when no such kernel runs on the core)
//	then, for each phase the core takes part in, in phase order, the
//	phase's CB record (PhaseRecordBytes):
//	  word 0, 1   the low and high 32 bits of the phase's local CB mask on
//	              the core (bit i: CB index i is configured)
//	  word 2+4i.. merged CB index i's config (CBMap) as tt-metal's ring
//	              holds it: address, total size, page count, page size
//	              (bytes), for i = 0 .. the phase's highest merged index;
//	              zeros for an index not configured on the core
//
//	then the argument vectors (Tables.Args): for each slot whose merged
//	kernel runs on the core, its runtime arguments' values on the core,
//	then its common runtime arguments' (every phase's and the kernel's
//	own, at their indices in the kernel's vectors), each vector starting
//	at a multiple of CtlStride
//
// A record's size depends on the phase only, so a core's record of phase p
// starts after the records of the phases before p the core takes part in
// (a phase whose record is another's, Tables.RecordOf, has none of its own):
// cores with the same phase sequence (the cores of one merged kernel) have
// the same offsets (Tables.Offsets). The argument vectors, whose lengths
// depend on the core's kernels, are found through the header, so the
// kernel config ring holds no phase's arguments: a worker merged kernel's
// ring arguments are its common arguments persist_ctl and persist_tables
// alone (RingCommonArgs), from which tcc_persist_init reads the tables
// buffer's address and then the header.
const (
	// TablesBuffer is the name of the tables buffer.
	TablesBuffer = "persist.tables"
	// TableBarrierWords is the number of core-local barrier words.
	TableBarrierWords = 5
	// TableArgSlots is the number of argument slots of the header (one
	// per merged kernel of a worker core: TableArgSlot).
	TableArgSlots = 3
	// TableArgHeaderBytes is the argument header's size: two words per
	// slot, rounded up to CtlStride.
	TableArgHeaderBytes = 32
	// TextBuffer is the L1 buffer (one page on every worker core) holding
	// a persistent program's kernel images outside the kernel config ring
	// (target.CodeSize): the host writes each core's images back to back
	// (BRISC, NCRISC, TRISC0, TRISC1, TRISC2; each rounded up to 16 bytes)
	// and points kernel_text_offset at them.
	TextBuffer = "persist.text"
)

// MergedCBs is the number of CB indices a merged binary has on Blackhole
// (NUM_CIRCULAR_BUFFERS, tt_metal/api/tt-metalium/circular_buffer_constants.h:38;
// the firmware installs indices 32..63 from the mask's upper word).
const MergedCBs = 64

// CBMap assigns each CB index of each phase the CB index of the merged
// binaries it is installed at (map[phase][index]): a compute binary is
// compiled with one data format and one unpack-to-DEST mode per CB index
// (the JIT's unpack and pack format tables), which the phases of a merged
// kernel must share, so every merged index has one (format, unpack-to-DEST)
// class over the whole program: class c takes the indices base(c) ..
// base(c)+n(c)-1, classes in (format, mode) order; a phase's CBs of class
// c take them in the order of their own indices, except that a phase that
// begins early (Persist.Early) gives its early CBs the lowest of them no
// CB of the phase still running on its cores (EarlyBegin.Prev) has (its
// early CBs are installed, and filled, while that phase's kernels still
// use their indices) and its other CBs the lowest left; n(c) is the most
// any phase needs. Phases with the same CBs and early CBs get the same
// indices, so
// their bodies print the same. The simulator keeps each phase's own
// indices: the map renames, it does not move, any CB. Errors: a phase
// giving one index two formats, more than MergedCBs merged indices.
func (ps *Persist) CBMap() ([]map[int]int, error) {
	type class struct {
		f      ir.DType
		toDest bool
	}
	type local struct {
		idx int
		c   class
	}
	per := make([][]local, len(ps.Phases))
	most := map[class]int{}
	for p := range ps.Phases {
		ph := &ps.Phases[p]
		format := map[int]ir.DType{}
		var idx []int
		for _, cb := range ph.CBs {
			if f, ok := format[cb.Index]; ok {
				if f != cb.Format {
					return nil, fmt.Errorf("phase %d (%s): CB c_%d holds %s on some cores and %s on others; a merged binary has one data format per CB index", p, ph.Name, cb.Index, f, cb.Format)
				}
				continue
			}
			format[cb.Index] = cb.Format
			idx = append(idx, cb.Index)
		}
		sort.Ints(idx)
		n := map[class]int{}
		for _, i := range idx {
			c := class{f: format[i]}
			for _, k := range ph.Kernels {
				if k.Processor == ComputeProc && k.Compute.UnpacksToDest(i) {
					c.toDest = true
				}
			}
			per[p] = append(per[p], local{i, c})
			n[c]++
			most[c] = max(most[c], n[c])
		}
	}
	// Offsets within each class. A phase's CBs of a class take the
	// lowest offsets in the order of their own indices, except that the
	// early CBs of a phase that begins early (EarlyBegin) take the lowest
	// offsets no CB of the phases still running on its cores (Prev)
	// takes, and its other CBs the lowest the early ones leave: the early
	// CBs are installed, and pages pushed into them, while those phases'
	// kernels still use their own indices.
	early := map[int]map[int]bool{} // phase -> its early CBs' own indices
	prevs := map[int][]int{}        // phase -> the phases before it still running
	for _, e := range ps.Early {
		if early[e.Phase] == nil {
			early[e.Phase] = map[int]bool{}
		}
		for _, i := range e.CBs {
			early[e.Phase][i] = true
		}
		if !slices.Contains(prevs[e.Phase], e.Prev) {
			prevs[e.Phase] = append(prevs[e.Phase], e.Prev)
		}
	}
	offset := make([]map[int]int, len(ps.Phases))
	for p, ls := range per {
		offset[p] = map[int]int{}
		taken := map[class]map[int]bool{}
		take := func(c class, from map[class]map[int]bool) int {
			if taken[c] == nil {
				taken[c] = map[int]bool{}
			}
			o := 0
			for taken[c][o] || from[c][o] {
				o++
			}
			taken[c][o] = true
			most[c] = max(most[c], o+1)
			return o
		}
		if e := early[p]; len(e) > 0 {
			busy := map[class]map[int]bool{}
			for _, q := range prevs[p] {
				if q < 0 || q >= p {
					continue
				}
				for _, l := range per[q] {
					if busy[l.c] == nil {
						busy[l.c] = map[int]bool{}
					}
					busy[l.c][offset[q][l.idx]] = true
				}
			}
			for _, l := range ls {
				if e[l.idx] {
					offset[p][l.idx] = take(l.c, busy)
				}
			}
		}
		for _, l := range ls {
			if _, ok := offset[p][l.idx]; !ok {
				offset[p][l.idx] = take(l.c, nil)
			}
		}
	}
	classes := make([]class, 0, len(most))
	for c := range most {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(a, b int) bool {
		if classes[a].f != classes[b].f {
			return classes[a].f < classes[b].f
		}
		return !classes[a].toDest && classes[b].toDest
	})
	base, total := map[class]int{}, 0
	for _, c := range classes {
		base[c] = total
		total += most[c]
	}
	if total > MergedCBs {
		return nil, fmt.Errorf("the phases' CBs need %d merged CB indices (one per data format and unpack-to-DEST mode and CB of a phase, and for the CBs of an early begin one apart from the running phase's), %d more than the %d a binary has", total, total-MergedCBs, MergedCBs)
	}
	out := make([]map[int]int, len(ps.Phases))
	for p, ls := range per {
		out[p] = map[int]int{}
		for _, l := range ls {
			out[p][l.idx] = base[l.c] + offset[p][l.idx]
		}
	}
	return out, nil
}

// Tables is the layout of a persistent program's tables buffer: the
// merged CB indices (CBMap) and each phase's record size.
type Tables struct {
	CBMap []map[int]int
	// Record is each phase's record size in bytes: two mask words and
	// four words per merged CB index up to the phase's highest (none: the
	// mask only).
	Record []int
	// RecordOf is the phase whose record each phase uses: itself, or the
	// first phase before it with the same cores and the same CBs at the
	// same merged indices (the layers' phases), whose record is the
	// same on every core. A shared record is written once.
	RecordOf []int
}

// Tables computes the layout of ps's tables buffer (CBMap's errors).
func (ps *Persist) Tables() (*Tables, error) {
	m, err := ps.CBMap()
	if err != nil {
		return nil, err
	}
	tb := &Tables{CBMap: m, Record: make([]int, len(ps.Phases)), RecordOf: make([]int, len(ps.Phases))}
	seen := map[string]int{}
	for p := range ps.Phases {
		hi := -1
		for _, g := range m[p] {
			hi = max(hi, g)
		}
		tb.Record[p] = 8 + 16*(hi+1)
		key := recordKey(&ps.Phases[p], m[p])
		if q, ok := seen[key]; ok {
			tb.RecordOf[p] = q
			continue
		}
		seen[key] = p
		tb.RecordOf[p] = p
	}
	return tb, nil
}

// recordKey is what a phase's record on each of its cores depends on: its
// cores, where its CBs are placed from, and each CB's merged index,
// configuration and cores, in placement order.
func recordKey(ph *Phase, m map[int]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|%d|%v|", ph.Cores, ph.CBBase, ph.EarlyCBs)
	for _, cb := range ph.CBs {
		fmt.Fprintf(&b, "%d:%d:%d:%d:%d:%v:%s;", cb.Index, m[cb.Index], cb.PageSize, cb.Pages, cb.Format, cb.Cores, cb.Backing)
	}
	return b.String()
}

// TableArgHeader is the offset of the argument header (after the barrier
// words).
const TableArgHeader = TableBarrierWords * CtlStride

// Offsets returns the offset in the tables buffer of the record of every
// phase of ps core c takes part in (by phase), after the barrier words
// and the argument header.
func (tb *Tables) Offsets(ps *Persist, c Core) map[int]int {
	off := TableArgHeader + TableArgHeaderBytes
	out := map[int]int{}
	for p := range ps.Phases {
		if inSorted(ps.Phases[p].Cores, c) {
			if q := tb.RecordOf[p]; q != p {
				out[p] = out[q]
				continue
			}
			out[p] = off
			off += tb.Record[p]
		}
	}
	return out
}

// Bytes is the tables buffer's page: the largest worker core's barrier
// words, argument header, records and argument vectors (Args), rounded up
// to CtlStride.
func (tb *Tables) Bytes(p *Program) int {
	best := TableArgHeader + TableArgHeaderBytes
	for _, c := range p.Cores() {
		if c.IsEth() {
			continue
		}
		_, end := tb.Args(p, c)
		best = max(best, end)
	}
	return target.AlignUp(best, CtlStride)
}

// TableArgSlot is the argument slot of a merged kernel on processor proc:
// 0 BRISC, 1 NCRISC, 2 compute (its three TRISCs share one vector).
func TableArgSlot(proc Processor) int {
	switch proc {
	case RISCV0:
		return 0
	case RISCV1:
		return 1
	}
	return 2
}

// ArgVectors is where a merged kernel's argument vectors lie in core c's
// tables page (Tables.Args): byte offsets and word counts.
type ArgVectors struct {
	Kernel       *Kernel
	Runtime      int
	RuntimeWords int
	Common       int
	CommonWords  int
	// Header is the offset of the slot's two header words (Runtime,
	// then Common).
	Header int
}

// Args returns, per argument slot (TableArgSlot), the argument vectors of
// the merged kernel of p on worker core c (Kernel nil when none runs
// there) and the end of the core's tables page: after the records of the
// core's phases, each slot's runtime vector then its common vector, each
// starting at a multiple of CtlStride.
func (tb *Tables) Args(p *Program, c Core) ([TableArgSlots]ArgVectors, int) {
	var out [TableArgSlots]ArgVectors
	end := TableArgHeader + TableArgHeaderBytes
	for q := range p.Persist.Phases {
		if inSorted(p.Persist.Phases[q].Cores, c) && tb.RecordOf[q] == q {
			end += tb.Record[q]
		}
	}
	for _, k := range p.Kernels {
		if k.OnEth() || !InRanges(k.Cores, c) {
			continue
		}
		out[TableArgSlot(k.Processor)].Kernel = k
	}
	for s := range out {
		out[s].Header = TableArgHeader + 8*s
		k := out[s].Kernel
		if k == nil {
			continue
		}
		end = target.AlignUp(end, CtlStride)
		out[s].Runtime, out[s].RuntimeWords = end, k.numArgs(RuntimeArg)
		end = target.AlignUp(end+4*out[s].RuntimeWords, CtlStride)
		out[s].Common, out[s].CommonWords = end, k.numArgs(CommonRuntimeArg)
		end += 4 * out[s].CommonWords
	}
	return out, target.AlignUp(end, CtlStride)
}

// RingCommonArgs are the only arguments a worker merged kernel of a
// persistent program keeps in the kernel config ring: its common runtime
// arguments 0 and 1 there (the rest of its vectors are in the tables
// buffer, Tables.Args).
var RingCommonArgs = [2]string{"persist_ctl", "persist_tables"}

// PlacedPhaseCB is one CB of a phase as tcc_phase_begin installs it: its
// configuration and its L1 address (a buffer address for a backed CB).
type PlacedPhaseCB struct {
	CB   *CB
	Addr ArgValue
}

// PlacePhaseCBs places phase p's CBs as the simulator places them when the
// phase begins (kir.PlaceCBs: CBPlaceOrder and FirstFit from base, the
// phase's early CBs, Phase.EarlyCBs, from its CBBase first, so that they
// clear the CBs of the phase before; a backed CB sits at its buffer's
// address), in placement order.
func (ps *Persist) PlacePhaseCBs(p int, base uint64) ([]PlacedPhaseCB, error) {
	ph := &ps.Phases[p]
	cbs := ph.CBs
	indices := make([]int, len(cbs))
	for i, cb := range cbs {
		indices[i] = cb.Index
		if cb.Backing == "" && (cb.PageSize <= 0 || cb.Pages <= 0) {
			return nil, fmt.Errorf("phase %d (%s): CB c_%d has page size %d, pages %d", p, ph.Name, cb.Index, cb.PageSize, cb.Pages)
		}
	}
	addrs := PlaceCBs(cbs, base, ph.EarlyCBs, uint64(ph.CBBase))
	var out []PlacedPhaseCB
	for _, i := range CBPlaceOrder(indices) {
		cb := &cbs[i]
		if cb.Backing != "" {
			out = append(out, PlacedPhaseCB{CB: cb, Addr: BufferAddr(cb.Backing, 0)})
			continue
		}
		out = append(out, PlacedPhaseCB{CB: cb, Addr: U32(uint32(addrs[i]))})
	}
	return out, nil
}

func inSorted(cs []Core, c Core) bool {
	lo, hi := 0, len(cs)
	for lo < hi {
		m := (lo + hi) / 2
		if cs[m].Less(c) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(cs) && cs[lo] == c
}
