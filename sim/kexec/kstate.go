package kexec

import (
	"errors"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// kstate is one kernel running on one core: the core's thread plus the
// executor's state.
type kstate struct {
	interp.Thread[*kstate]
	r    *run
	core *coreState
	k    *kir.Kernel
	done bool
	// wait is what the kernel waits for when the core blocked it (Call ""
	// otherwise); blocked when the executor did (ethernet).
	wait    interp.Wait
	blocked Blocked
	comp    *computeState
	// ethSignalled: the pending eth_wait_for_receiver_done has sent the
	// bytes_sent word to the peer.
	ethSignalled bool
	// atomicsPending counts noc_semaphore_inc calls since the last
	// noc_async_atomic_barrier: non-posted atomics a kernel must not end with.
	atomicsPending int
}

func newKState(r *run, cs *coreState, k *kir.Kernel, code *interp.Code[*kstate]) (*kstate, error) {
	c := cs.C
	args, err := interp.ResolveArgs(k, c, r)
	if err != nil {
		return nil, r.ruleErr(kir.RuleArgTable, k.Name, &c, kir.NoCB, "%s", err)
	}
	ks := &kstate{r: r, core: cs, k: k}
	ks.Start(code, &cs.Core, args, ks)
	if k.Role == kir.RoleCompute {
		ks.comp = newComputeState(r, k)
	}
	ks.done = ks.Done()
	return ks, nil
}

// runQuantum executes up to q instructions and returns how many ran.
func (ks *kstate) runQuantum(q int) (int, error) {
	n := 0
	for n < q && !ks.done {
		switch ks.Step() {
		case interp.Failed:
			return n, ks.fault(ks.Err)
		case interp.Blocked:
			return n, nil
		}
		n++
		if ks.Done() {
			ks.done = true
			if p := ks.atomicsPending; p > 0 {
				s := "s"
				if p == 1 {
					s = ""
				}
				return n, ks.errf(kir.RuleAtomicBarrier, kir.NoCB, "the kernel ends with %d noc_semaphore_inc%s in flight; call noc_async_atomic_barrier() after the last one (the card may still be delivering them when the next program starts)", p, s)
			}
		}
	}
	return n, nil
}

// fault completes an error of the core with the program, kernel and core.
func (ks *kstate) fault(err error) error {
	var f *interp.Fault
	if errors.As(err, &f) {
		return ks.errf(f.Rule, f.CB, "%s", f.Msg)
	}
	return err
}

func (ks *kstate) errf(rule kir.Rule, cb int, format string, args ...any) error {
	c := ks.core.C
	return ks.r.ruleErr(rule, ks.k.Name, &c, cb, format, args...)
}

// block records a wait the executor describes itself.
func (ks *kstate) block(call string, cb, sem int, format string, args ...any) {
	ks.wait = interp.Wait{}
	ks.blocked = Blocked{Device: ks.r.dev, Core: ks.core.C, Kernel: ks.k.Name, Call: call, CB: cb, Semaphore: sem, Reason: fmt.Sprintf(format, args...)}
}

// blockedOn describes what the kernel waits for.
func (ks *kstate) blockedOn() Blocked {
	w := ks.wait
	if w.Call == "" {
		return ks.blocked
	}
	sem := -1
	if w.Kind == interp.WaitWord {
		sem = ks.core.SemaphoreAt(w.Addr)
	}
	return Blocked{Device: ks.r.dev, Core: ks.core.C, Kernel: ks.k.Name, Call: w.Call, CB: w.CB, Semaphore: sem, Reason: w.Reason()}
}

func (ks *kstate) cb(idx int, call string) (*interp.CB, error) {
	if c := ks.core.CB(idx); c != nil {
		return c, nil
	}
	return nil, ks.fault(interp.MissingCB(idx, call))
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

// frontTileAddr is the L1 address of tile i counted from the front, for a
// compute op that unpacks it.
func (ks *kstate) frontTileAddr(idx int, i uint64, call string) (*interp.CB, uint64, error) {
	c, err := ks.cb(idx, call)
	if err != nil {
		return nil, 0, err
	}
	a, f := c.FrontTile(i, call)
	if f != nil {
		return nil, 0, ks.fault(f)
	}
	return c, a, nil
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
	off := interp.DecodeNoC(a).Addr
	lo := uint64(db.Addr)
	hi := lo + uint64(db.PerCore)*uint64(db.Stride)
	if off < lo || off+n > hi {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at bank offset %#x leaves buffer %q (bank region %#x..%#x: %d pages of %d bytes per bank); its address argument names that buffer",
			call, n, off, name, lo, hi, db.PerCore, db.Stride)
	}
	return nil
}
