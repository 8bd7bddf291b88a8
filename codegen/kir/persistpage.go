package kir

import (
	"encoding/binary"
	"fmt"
)

// Page returns worker core c's page of p's tables buffer (TablesBuffer) as
// the host writes it before a launch and the printed kernels read it
// (kernels/tcc_persist.h; the layout is Tables's):
//
//   - the TableBarrierWords barrier words: zeros;
//   - the argument header at TableArgHeader: per slot (TableArgSlot) the
//     offsets in the page of the runtime and common runtime argument
//     vectors of the core's merged kernel on that RISC (Args), zeros when
//     none runs there;
//   - at Offsets, the record of every phase of the core whose RecordOf is
//     itself: the phase's CB mask on the core (bit CBMap[p][index] of each
//     CB whose cores hold c), then per merged index the CB's address,
//     total size, page count and page size, the CBs placed as the
//     simulator places them (Persist.PlacePhaseCBs from base, a backed CB
//     at its buffer's address);
//   - the argument vectors at Args: the kernel's runtime argument values
//     on c and its common runtime argument values, at their indices
//     (zeros for an index without a value).
//
// r resolves the argument values and the backing buffers' addresses.
// The page is Tables.Bytes long, so every core's page has the buffer's
// page size. Errors name the phase and CB, or the kernel and argument, r
// cannot resolve; c must be a worker core of p.
func (tb *Tables) Page(p *Program, c Core, r Resolver, base uint64) ([]byte, error) {
	ps := p.Persist
	if ps == nil {
		return nil, fmt.Errorf("program %q: not a persistent program", p.Name)
	}
	if c.IsEth() {
		return nil, fmt.Errorf("program %q: core %s is an ethernet core; it has no tables page", p.Name, c)
	}
	page := make([]byte, tb.Bytes(p))
	put := func(off int, v uint32) { binary.LittleEndian.PutUint32(page[off:], v) }
	for q, off := range tb.Offsets(ps, c) {
		if tb.RecordOf[q] != q {
			continue
		}
		placed, err := ps.PlacePhaseCBs(q, base)
		if err != nil {
			return nil, fmt.Errorf("program %q: %w", p.Name, err)
		}
		var mask uint64
		for _, pl := range placed {
			cb := pl.CB
			if !InRanges(cb.Cores, c) {
				continue
			}
			m, ok := tb.CBMap[q][cb.Index]
			if !ok || m < 0 || m >= MergedCBs || 8+16*(m+1) > tb.Record[q] {
				return nil, fmt.Errorf("program %q phase %d (%s): CB c_%d has no merged index in the phase's record", p.Name, q, ps.Phases[q].Name, cb.Index)
			}
			addr, err := pl.Addr.Resolve(r)
			if err != nil {
				return nil, fmt.Errorf("program %q phase %d (%s): CB c_%d's address: %w", p.Name, q, ps.Phases[q].Name, cb.Index, err)
			}
			mask |= 1 << m
			at := off + 8 + 16*m
			put(at, addr)
			put(at+4, uint32(cb.Bytes()))
			put(at+8, uint32(cb.Pages))
			put(at+12, uint32(cb.PageSize))
		}
		put(off, uint32(mask))
		put(off+4, uint32(mask>>32))
	}
	slots, _ := tb.Args(p, c)
	for _, v := range slots {
		k := v.Kernel
		if k == nil {
			continue
		}
		put(v.Header, uint32(v.Runtime))
		put(v.Header+4, uint32(v.Common))
		vals := k.RuntimeValuesOn(c)
		for _, a := range k.ArgsOfKind(RuntimeArg) {
			if a.Index >= v.RuntimeWords || a.Index >= len(vals) {
				continue
			}
			x, err := vals[a.Index].Resolve(r)
			if err != nil {
				return nil, fmt.Errorf("program %q kernel %s on core %s: runtime argument %s: %w", p.Name, k.Name, c, a.Name, err)
			}
			put(v.Runtime+4*a.Index, x)
		}
		for _, a := range k.ArgsOfKind(CommonRuntimeArg) {
			if a.Index >= v.CommonWords {
				continue
			}
			x, err := a.Value.Resolve(r)
			if err != nil {
				return nil, fmt.Errorf("program %q kernel %s: common runtime argument %s: %w", p.Name, k.Name, a.Name, err)
			}
			put(v.Common+4*a.Index, x)
		}
	}
	return page, nil
}
