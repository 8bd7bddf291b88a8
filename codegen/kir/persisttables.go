package kir

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/target"
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
//	then, for each phase the core takes part in, in phase order, the
//	phase's CB record (PhaseRecordBytes):
//	  word 0, 1   the low and high 32 bits of the phase's local CB mask on
//	              the core (bit i: CB index i is configured)
//	  word 2+4i.. CB index i's config as tt-metal's ring holds it:
//	              address, total size, page count, page size (bytes), for
//	              i = 0 .. the highest CB index of the phase (on any core);
//	              zeros for an index not configured on the core
//
// A record's size depends on the phase only, so a core's record of phase p
// starts at TableOffset(p, the phases before p the core takes part in):
// cores with the same phase sequence (the cores of one merged kernel) have
// the same offsets.
const (
	// TablesBuffer is the name of the tables buffer.
	TablesBuffer = "persist.tables"
	// TableBarrierWords is the number of core-local barrier words.
	TableBarrierWords = 5
	// TextBuffer is the L1 buffer (one page on every worker core) holding
	// a persistent program's kernel images outside the kernel config ring
	// (target.CodeSize): the host writes each core's images back to back
	// (BRISC, NCRISC, TRISC0, TRISC1, TRISC2; each rounded up to 16 bytes)
	// and points kernel_text_offset at them.
	TextBuffer = "persist.text"
)

// PhaseRecordBytes is the size of phase p's CB record: two mask words and
// four words per CB index up to the phase's highest (none: the mask only).
func (ps *Persist) PhaseRecordBytes(p int) int {
	hi := -1
	for _, cb := range ps.Phases[p].CBs {
		hi = max(hi, cb.Index)
	}
	return 8 + 16*(hi+1)
}

// TableOffsets returns the offset in the tables buffer of the record of
// every phase core c takes part in (by phase), after the barrier words.
func (ps *Persist) TableOffsets(c Core) map[int]int {
	off := TableBarrierWords * CtlStride
	out := map[int]int{}
	for p := range ps.Phases {
		if inSorted(ps.Phases[p].Cores, c) {
			out[p] = off
			off += ps.PhaseRecordBytes(p)
		}
	}
	return out
}

// TablesBytes is the tables buffer's page: the largest core's barrier
// words and records, rounded up to CtlStride.
func (ps *Persist) TablesBytes() int {
	best := TableBarrierWords * CtlStride
	per := map[Core]int{}
	for p := range ps.Phases {
		n := ps.PhaseRecordBytes(p)
		for _, c := range ps.Phases[p].Cores {
			if c.IsEth() {
				continue
			}
			per[c] += n
			best = max(best, TableBarrierWords*CtlStride+per[c])
		}
	}
	return target.AlignUp(best, CtlStride)
}

// PlacedPhaseCB is one CB of a phase as tcc_phase_begin installs it: its
// configuration and its L1 address (a buffer address for a backed CB).
type PlacedPhaseCB struct {
	CB   *CB
	Addr ArgValue
}

// PlacePhaseCBs places phase p's CBs as the simulator places them when the
// phase begins (CBPlaceOrder, then FirstFit from base; a backed CB sits at
// its buffer's address), in placement order.
func (ps *Persist) PlacePhaseCBs(p int, base uint64) ([]PlacedPhaseCB, error) {
	cbs := ps.Phases[p].CBs
	indices := make([]int, len(cbs))
	for i, cb := range cbs {
		indices[i] = cb.Index
	}
	var done []CBSpan
	var out []PlacedPhaseCB
	for _, i := range CBPlaceOrder(indices) {
		cb := &cbs[i]
		if cb.Backing != "" {
			out = append(out, PlacedPhaseCB{CB: cb, Addr: BufferAddr(cb.Backing, 0)})
			continue
		}
		if cb.PageSize <= 0 || cb.Pages <= 0 {
			return nil, fmt.Errorf("phase %d (%s): CB c_%d has page size %d, pages %d", p, ps.Phases[p].Name, cb.Index, cb.PageSize, cb.Pages)
		}
		cores := CoresOf(cb.Cores)
		size := uint64(cb.Bytes())
		addr := FirstFit(base, size, cores, done)
		done = append(done, CBSpan{Cores: cores, Lo: addr, Hi: addr + size})
		out = append(out, PlacedPhaseCB{CB: cb, Addr: U32(uint32(addr))})
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
