package kexec

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// cbState is one circular buffer on one core. Counters are in pages.
type cbState struct {
	cfg      *kir.CB
	base     uint32
	pages    int
	pageSize int
	wrPos    int // producer ring position
	rdPos    int // consumer ring position
	filled   int // pushed and not yet popped
	reserved int // producer: pages reserved beyond the pushed ones
	waited   int // consumer: pages waited for beyond the popped ones
	packed   int // pack_tile position since the last push
}

// kstate is one kernel running on one core.
type kstate struct {
	r       *run
	core    *coreState
	k       *kir.Kernel
	code    []instr
	pc      int
	vars    []uint64
	args    []uint64 // by row of k.Args
	done    bool
	blocked Blocked
	comp    *computeState
	// ethSignalled: the pending eth_wait_for_receiver_done has sent the
	// bytes_sent word to the peer.
	ethSignalled bool
	// atomicsPending counts noc_semaphore_inc calls since the last
	// noc_async_atomic_barrier: non-posted atomics a kernel must not end with.
	atomicsPending int
}

func newKState(r *run, cs *coreState, k *kir.Kernel, code *kcode) (*kstate, error) {
	ks := &kstate{r: r, core: cs, k: k, code: code.code, vars: make([]uint64, code.slots), args: make([]uint64, len(k.Args))}
	c := cs.c
	rt := k.RuntimeValuesOn(c)
	for i, a := range k.Args {
		v := a.Value
		if a.Kind == kir.RuntimeArg {
			if a.Index >= len(rt) {
				return nil, r.ruleErr(kir.RuleArgTable, k.Name, &c, kir.NoCB, "no value for runtime arg %q (index %d); the core has %d values", a.Name, a.Index, len(rt))
			}
			v = rt[a.Index]
		}
		x, err := v.Resolve(r)
		if err != nil {
			return nil, r.ruleErr(kir.RuleArgTable, k.Name, &c, kir.NoCB, "arg %q = %s: %v", a.Name, v, err)
		}
		ks.args[i] = uint64(x)
	}
	if k.Role == kir.RoleCompute {
		ks.comp = newComputeState(r, k)
	}
	ks.done = len(ks.code) == 0
	return ks, nil
}

// runQuantum executes up to q instructions and returns how many ran.
func (ks *kstate) runQuantum(q int) (int, error) {
	n := 0
	for n < q && !ks.done {
		next, err := ks.code[ks.pc](ks)
		if err != nil {
			return n, err
		}
		if next == blocked {
			return n, nil
		}
		ks.pc = next
		n++
		if ks.pc >= len(ks.code) {
			ks.done = true
			if ks.atomicsPending > 0 {
				return n, ks.errf(kir.RuleAtomicBarrier, kir.NoCB, "the kernel ends with %s in flight; call noc_async_atomic_barrier() after the last one (the card may still be delivering them when the next program starts)", plural(uint64(ks.atomicsPending), "noc_semaphore_inc"))
			}
		}
	}
	return n, nil
}

func (ks *kstate) errf(rule kir.Rule, cb int, format string, args ...any) error {
	c := ks.core.c
	return ks.r.ruleErr(rule, ks.k.Name, &c, cb, format, args...)
}

func (ks *kstate) block(call string, cb, sem int, format string, args ...any) {
	ks.blocked = Blocked{Device: ks.r.dev, Core: ks.core.c, Kernel: ks.k.Name, Call: call, CB: cb, Semaphore: sem, Reason: fmt.Sprintf(format, args...)}
}

func (ks *kstate) cb(idx int, call string) (*cbState, error) {
	if idx < 0 || idx >= len(ks.core.cbs) || ks.core.cbs[idx] == nil {
		return nil, ks.errf(kir.RuleCBCount, idx, "%s names CB c_%d, which is not configured on this core", call, idx)
	}
	return ks.core.cbs[idx], nil
}

// checkL1 checks a local L1 access; writes may not touch the reserved
// region below the semaphores.
func (ks *kstate) checkL1(addr, n uint64, what string, write bool) error {
	if !ks.core.mem.inBounds(addr, n) {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at L1 %#x is outside the %d-byte L1", what, n, addr, ks.core.mem.size)
	}
	if write && addr < ks.core.lo {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at L1 %#x writes into the firmware-reserved region below %#x", what, n, addr, ks.core.lo)
	}
	if write && addr+n > ks.core.hi {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at L1 %#x writes into the reserved region above %#x", what, n, addr, ks.core.hi)
	}
	return nil
}

func plural(n uint64, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// ---- circular buffers ----

func (ks *kstate) cbReserve(idx int, n uint64) (bool, error) {
	c, err := ks.cb(idx, "cb_reserve_back")
	if err != nil {
		return false, err
	}
	if n == 0 || n > uint64(c.pages) {
		return false, ks.errf(kir.RuleCBFlow, idx, "cb_reserve_back(c_%d, %d): the count must be 1..%d (the CB's pages)", idx, n, c.pages)
	}
	free := c.pages - c.filled
	if uint64(free) < n {
		ks.block("cb_reserve_back", idx, -1, "waits for %s free, %d free", plural(n, "page"), free)
		return true, nil
	}
	if c.wrPos+int(n) > c.pages {
		return false, ks.errf(kir.RuleCBFlow, idx, "cb_reserve_back(c_%d, %d) at ring page %d of %d: the block straddles the end of the ring", idx, n, c.wrPos, c.pages)
	}
	c.reserved = max(c.reserved, int(n))
	return false, nil
}

func (ks *kstate) cbPush(idx int, n uint64) error {
	c, err := ks.cb(idx, "cb_push_back")
	if err != nil {
		return err
	}
	if n == 0 || n > uint64(c.pages) {
		return ks.errf(kir.RuleCBFlow, idx, "cb_push_back(c_%d, %d): the count must be 1..%d (the CB's pages)", idx, n, c.pages)
	}
	if uint64(c.reserved) < n {
		return ks.errf(kir.RuleCBFlow, idx, "cb_push_back(c_%d, %d) pushes more pages than were reserved (%d); call cb_reserve_back first", idx, n, c.reserved)
	}
	if c.wrPos+int(n) > c.pages {
		return ks.errf(kir.RuleCBFlow, idx, "cb_push_back(c_%d, %d) at ring page %d of %d: the block straddles the end of the ring", idx, n, c.wrPos, c.pages)
	}
	c.reserved -= int(n)
	c.filled += int(n)
	c.wrPos = (c.wrPos + int(n)) % c.pages
	c.packed = 0
	return nil
}

func (ks *kstate) cbWait(idx int, n uint64) (bool, error) {
	c, err := ks.cb(idx, "cb_wait_front")
	if err != nil {
		return false, err
	}
	if n == 0 || n > uint64(c.pages) {
		return false, ks.errf(kir.RuleCBFlow, idx, "cb_wait_front(c_%d, %d): the count must be 1..%d (the CB's pages)", idx, n, c.pages)
	}
	if uint64(c.filled) < n {
		ks.block("cb_wait_front", idx, -1, "waits for %s, %d available", plural(n, "page"), c.filled)
		return true, nil
	}
	if c.rdPos+int(n) > c.pages {
		return false, ks.errf(kir.RuleCBFlow, idx, "cb_wait_front(c_%d, %d) at ring page %d of %d: the block straddles the end of the ring", idx, n, c.rdPos, c.pages)
	}
	c.waited = max(c.waited, int(n))
	return false, nil
}

func (ks *kstate) cbPop(idx int, n uint64) error {
	c, err := ks.cb(idx, "cb_pop_front")
	if err != nil {
		return err
	}
	if n == 0 || n > uint64(c.pages) {
		return ks.errf(kir.RuleCBFlow, idx, "cb_pop_front(c_%d, %d): the count must be 1..%d (the CB's pages)", idx, n, c.pages)
	}
	if uint64(c.waited) < n {
		return ks.errf(kir.RuleCBFlow, idx, "cb_pop_front(c_%d, %d) pops more pages than were waited for (%d); call cb_wait_front first", idx, n, c.waited)
	}
	c.waited -= int(n)
	c.filled -= int(n)
	c.rdPos = (c.rdPos + int(n)) % c.pages
	return nil
}

// frontTileAddr is the L1 address of tile i counted from the front, for a
// compute op that unpacks it.
func (ks *kstate) frontTileAddr(idx int, i uint64, call string) (*cbState, uint64, error) {
	c, err := ks.cb(idx, call)
	if err != nil {
		return nil, 0, err
	}
	if i >= uint64(c.waited) {
		return nil, 0, ks.errf(kir.RuleCBFlow, idx, "%s reads tile %d of CB c_%d, but only %d pages were waited for (cb_wait_front)", call, i, idx, c.waited)
	}
	if uint64(c.rdPos)+i >= uint64(c.pages) {
		return nil, 0, ks.errf(kir.RuleCBFlow, idx, "%s reads tile %d from ring page %d of %d: past the end of the ring", call, i, c.rdPos, c.pages)
	}
	return c, uint64(c.base) + (uint64(c.rdPos)+i)*uint64(c.pageSize), nil
}

// checkInBuffer checks that a DRAM access of n bytes at NoC address a stays
// inside the bank region of buffer name, the buffer its address argument
// names (a write that lands in another buffer is as wrong as one that
// lands in none).
func (ks *kstate) checkInBuffer(name string, a, n uint64, call string) error {
	db, ok := ks.r.bufDev[name]
	if !ok || !db.Mem.Kind.IsDRAM() {
		return nil
	}
	off := decodeNoC(a).addr
	lo := uint64(db.Addr)
	hi := lo + uint64(db.PerCore)*uint64(db.Stride)
	if off < lo || off+n > hi {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at bank offset %#x leaves buffer %q (bank region %#x..%#x: %d pages of %d bytes per bank); its address argument names that buffer",
			call, n, off, name, lo, hi, db.PerCore, db.Stride)
	}
	return nil
}
