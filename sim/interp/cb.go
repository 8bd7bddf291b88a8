package interp

import "github.com/tcc-dev/tcc/codegen/kir"

// CB is the books of one circular buffer on one core, in pages: the ring
// at Base, the producer's position WrPos, the consumer's RdPos, the pages
// Filled (pushed and not popped), Reserved by the producer beyond the
// pushed ones, Waited for by the consumer beyond the popped ones, and
// Packed (pack_tile's position since the last push).
type CB struct {
	Config          *kir.CB
	Base            uint64
	Pages, PageSize int
	WrPos, RdPos    int
	Filled          int
	Reserved        int
	Waited          int
	Packed          int
}

// WritePtr is get_write_ptr: the L1 address of the producer's position.
func (c *CB) WritePtr() uint64 { return c.Base + uint64(c.WrPos*c.PageSize) }

// ReadPtr is get_read_ptr: the L1 address of the front page.
func (c *CB) ReadPtr() uint64 { return c.Base + uint64(c.RdPos*c.PageSize) }

// Free is the number of pages cb_reserve_back may have.
func (c *CB) Free() int { return c.Pages - c.Filled }

func (c *CB) count(call string, n uint64) *Fault {
	if n == 0 || n > uint64(c.Pages) {
		return faultf(kir.RuleCBFlow, c.Config.Index, "%s(c_%d, %d): the count must be 1..%d (the CB's pages)", call, c.Config.Index, n, c.Pages)
	}
	return nil
}

// straddles checks that the block of n pages at ring page at does not
// cross the end of the ring (unless the machine allows it).
func (c *CB) straddles(call string, at int, n uint64, allow bool) *Fault {
	if !allow && at+int(n) > c.Pages {
		return faultf(kir.RuleCBFlow, c.Config.Index, "%s(c_%d, %d) at ring page %d of %d: the block straddles the end of the ring", call, c.Config.Index, n, at, c.Pages)
	}
	return nil
}

// reserve is cb_reserve_back(n): wait is true while fewer than n pages
// are free; otherwise the n pages from the write position are reserved.
// straddle allows a block that crosses the end of the ring (as for the
// other calls).
func (c *CB) reserve(n uint64, straddle bool) (wait bool, f *Fault) {
	return c.acquire("cb_reserve_back", n, c.Free(), c.WrPos, &c.Reserved, straddle)
}

// wait is cb_wait_front(n): wait is true while fewer than n pages are
// filled; otherwise the consumer may read the n front pages.
func (c *CB) wait(n uint64, straddle bool) (wait bool, f *Fault) {
	return c.acquire("cb_wait_front", n, c.Filled, c.RdPos, &c.Waited, straddle)
}

// acquire is one end's claim on the n pages from its position at, of
// which have are ready; held is the most that end claimed.
func (c *CB) acquire(call string, n uint64, have, at int, held *int, straddle bool) (bool, *Fault) {
	if f := c.count(call, n); f != nil {
		return false, f
	}
	if uint64(have) < n {
		return true, nil
	}
	if f := c.straddles(call, at, n, straddle); f != nil {
		return false, f
	}
	*held = max(*held, int(n))
	return false, nil
}

// push is cb_push_back(n): n reserved pages become filled.
func (c *CB) push(n uint64, straddle bool) (wait bool, f *Fault) {
	if f := c.release("cb_push_back", n, c.Reserved, "pushes more pages than were reserved (%d); call cb_reserve_back"); f != nil {
		return false, f
	}
	if f := c.straddles("cb_push_back", c.WrPos, n, straddle); f != nil {
		return false, f
	}
	c.Reserved -= int(n)
	c.Filled += int(n)
	c.WrPos = (c.WrPos + int(n)) % c.Pages
	c.Packed = 0
	return false, nil
}

// pop is cb_pop_front(n): n waited-for pages become free.
func (c *CB) pop(n uint64, _ bool) (wait bool, f *Fault) {
	if f := c.release("cb_pop_front", n, c.Waited, "pops more pages than were waited for (%d); call cb_wait_front"); f != nil {
		return false, f
	}
	c.Waited -= int(n)
	c.Filled -= int(n)
	c.RdPos = (c.RdPos + int(n)) % c.Pages
	return false, nil
}

// release checks that an end gives back at most the held pages it
// claimed; tooMany says what it did otherwise.
func (c *CB) release(call string, n uint64, held int, tooMany string) *Fault {
	if f := c.count(call, n); f != nil {
		return f
	}
	if uint64(held) < n {
		return faultf(kir.RuleCBFlow, c.Config.Index, "%s(c_%d, %d) "+tooMany+" first", call, c.Config.Index, n, held)
	}
	return nil
}

// FrontTile is the L1 address of tile i counted from the front, for a
// compute call that unpacks it: i must be a page waited for and inside
// the ring.
func (c *CB) FrontTile(i uint64, call string) (uint64, *Fault) {
	idx := c.Config.Index
	if i >= uint64(c.Waited) {
		return 0, faultf(kir.RuleCBFlow, idx, "%s reads tile %d of CB c_%d, but only %d pages were waited for (cb_wait_front)", call, i, idx, c.Waited)
	}
	if uint64(c.RdPos)+i >= uint64(c.Pages) {
		return 0, faultf(kir.RuleCBFlow, idx, "%s reads tile %d from ring page %d of %d: past the end of the ring", call, i, c.RdPos, c.Pages)
	}
	return c.Base + (uint64(c.RdPos)+i)*uint64(c.PageSize), nil
}

// MissingCB is the fault of a call naming a CB its core does not have.
func MissingCB(idx int, call string) *Fault {
	return faultf(kir.RuleCBCount, idx, "%s names CB c_%d, which is not configured on this core", call, idx)
}

// cbCall is the books of one CB call: what the call does to the CB, and
// what a blocked call waits for.
type cbCall struct {
	do   func(c *CB, n uint64, straddle bool) (bool, *Fault)
	kind WaitKind
	have func(c *CB) int
}

var cbCalls = map[string]cbCall{
	"cb_reserve_back": {(*CB).reserve, WaitFree, (*CB).Free},
	"cb_push_back":    {do: (*CB).push},
	"cb_wait_front":   {(*CB).wait, WaitFilled, func(c *CB) int { return c.Filled }},
	"cb_pop_front":    {do: (*CB).pop},
}

// cbInstr compiles a CB call on CB idx: the core's books, then the
// machine's op.
func (c *Compiler[S]) cbInstr(call string, idx int, ops []Expr[S], op Op[S]) Instr[S] {
	cc, m, straddle := cbCalls[call], c.m, c.cfg.Straddle
	return func(t *Thread[S]) int {
		v := t.eval(ops)
		if t.Err != nil {
			return Failed
		}
		cb := t.Core.CB(idx)
		if cb == nil {
			t.Fail(MissingCB(idx, call))
			return Failed
		}
		wait, f := cc.do(cb, v[0], straddle)
		if f != nil {
			t.Fail(f)
			return Failed
		}
		if wait {
			m.Block(t, Wait{Kind: cc.kind, Call: call, CB: idx, Want: v[0], Have: uint64(cc.have(cb))})
			return Blocked
		}
		return t.finish(op, v)
	}
}
