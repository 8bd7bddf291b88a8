package kexec

import (
	"github.com/tcc-dev/tcc/codegen/kir"
)

// call compiles one API-call statement.
func (cc *compiler) call(s kir.Stmt) (instr, error) {
	ops, err := cc.exprs(kir.StmtExprs(s)...)
	if err != nil {
		return nil, err
	}
	// ev evaluates the statement's operands in StmtExprs order.
	ev := func(ks *kstate) ([]uint64, error) { return evalAll(ks, ops) }
	switch s := s.(type) {
	case kir.CBReserveBack:
		return maybeBlock(func(ks *kstate) (bool, error) {
			v, err := ev(ks)
			if err != nil {
				return false, err
			}
			return ks.cbReserve(s.CB, v[0])
		}), nil
	case kir.CBPushBack:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			return ks.cbPush(s.CB, v[0])
		}), nil
	case kir.CBWaitFront:
		return maybeBlock(func(ks *kstate) (bool, error) {
			v, err := ev(ks)
			if err != nil {
				return false, err
			}
			return ks.cbWait(s.CB, v[0])
		}), nil
	case kir.CBPopFront:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			return ks.cbPop(s.CB, v[0])
		}), nil
	case kir.NoCAsyncRead:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			return ks.nocRead(v[0], v[1], v[2])
		}), nil
	case kir.NoCAsyncWrite:
		buf := cc.targetBuffer(s.Dst)
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			if buf != "" {
				if err := ks.checkInBuffer(buf, v[1], v[2], "noc_async_write"); err != nil {
					return err
				}
			}
			return ks.nocWrite(v[0], v[1], v[2], "noc_async_write")
		}), nil
	case kir.NoCAsyncWriteMulticast:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			return ks.nocMulticast(v[0], v[1], v[2], v[3], "noc_async_write_multicast")
		}), nil
	case kir.NoCAsyncReadBarrier, kir.NoCAsyncWriteBarrier, kir.NoCAsyncWritesFlushed:
		// Transfers complete when issued.
		return next(func(*kstate) error { return nil }), nil
	case kir.NoCAsyncAtomicBarrier:
		return next(func(ks *kstate) error { ks.atomicsPending = 0; return nil }), nil
	case kir.NoCSemaphoreSet:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			if err := ks.checkL1(v[0], 4, "noc_semaphore_set", true); err != nil {
				return err
			}
			ks.core.mem.write32(v[0], uint32(v[1]))
			return nil
		}), nil
	case kir.NoCSemaphoreWait, kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWait, kir.EthNoCSemaphoreWaitMin:
		call := kir.APIName(s)
		exact, plain := false, false
		switch s.(type) {
		case kir.NoCSemaphoreWait:
			exact, plain = true, true
		case kir.NoCSemaphoreWaitMin:
			plain = true
		case kir.EthNoCSemaphoreWait:
			exact = true
		}
		return maybeBlock(func(ks *kstate) (bool, error) {
			if plain && ks.core.eth {
				return false, ks.errf(kir.RuleEthWait, kir.NoCB, "%s on ethernet core %s spins without run_routing, starving the base firmware that shares ERISC0; use eth_%s", call, ks.core.c, call)
			}
			v, err := ev(ks)
			if err != nil {
				return false, err
			}
			if err := ks.checkL1(v[0], 4, call, false); err != nil {
				return false, err
			}
			have, want := uint64(ks.core.mem.read32(v[0])), v[1]&0xffffffff
			if exact && have == want || !exact && have >= want {
				return false, nil
			}
			rel := "=="
			if !exact {
				rel = ">="
			}
			ks.block(call, kir.NoCB, ks.semID(v[0]), "waits for value %s %d, has %d", rel, want, have)
			return true, nil
		}), nil
	case kir.NoCSemaphoreInc:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			ks.atomicsPending++
			return ks.semInc(v[0], uint32(v[1]))
		}), nil
	case kir.NoCSemaphoreSetMulticast:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			return ks.nocMulticast(v[0], v[1], 4, v[2], "noc_semaphore_set_multicast")
		}), nil
	case kir.EthSendBytes:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			return ks.ethSendBytes(v[0], v[1], v[2], v[3], v[4])
		}), nil
	case kir.EthWaitForReceiverDone:
		return maybeBlock(func(ks *kstate) (bool, error) { return ks.ethWaitForReceiverDone() }), nil
	case kir.EthWaitForBytes:
		return maybeBlock(func(ks *kstate) (bool, error) {
			v, err := ev(ks)
			if err != nil {
				return false, err
			}
			return ks.ethWaitForBytes(v[0])
		}), nil
	case kir.EthReceiverDone:
		return next(func(ks *kstate) error { return ks.ethReceiverDone() }), nil
	case kir.L1Write32:
		return next(func(ks *kstate) error {
			v, err := ev(ks)
			if err != nil {
				return err
			}
			if err := ks.checkL1(v[0], 4, "L1 store", true); err != nil {
				return err
			}
			ks.core.mem.write32(v[0], uint32(v[1]))
			return nil
		}), nil
	}
	return cc.compute(s, ev)
}

// semID is the program semaphore at local L1 address addr, or -1.
func (ks *kstate) semID(addr uint64) int {
	base := uint64(ks.core.semBase)
	if addr < base || (addr-base)%SemaphoreStride != 0 {
		return -1
	}
	id := int((addr - base) / SemaphoreStride)
	if !ks.core.semIDs[id] {
		return -1
	}
	return id
}

func (ks *kstate) packet(call string, size uint64) error {
	if size > uint64(ks.r.t.MaxNoCPacket) {
		return ks.errf(kir.RuleNoCPacket, kir.NoCB, "%s transfers %d bytes; a NoC packet is at most %d bytes", call, size, ks.r.t.MaxNoCPacket)
	}
	return nil
}

// worker resolves the NoC coordinates of a worker core.
func (ks *kstate) worker(x, y int) (*memory, kir.Core, bool) {
	lx, ly, ok := ks.r.t.WorkerAt(x, y)
	if !ok {
		return nil, kir.Core{}, false
	}
	c := kir.Core{X: lx, Y: ly}
	return ks.r.d.coreMem(c), c, true
}

// endpoint resolves the NoC coordinates of a worker or ethernet core of
// this device.
func (ks *kstate) endpoint(x, y int) (*memory, kir.Core, bool) {
	if m, c, ok := ks.worker(x, y); ok {
		return m, c, true
	}
	if ch, ok := ks.r.t.EthAt(x, y); ok {
		return ks.r.d.eth(ch).mem, kir.EthCore(ch), true
	}
	return nil, kir.Core{}, false
}

func (ks *kstate) nocRead(src, dst, size uint64) error {
	const call = "noc_async_read"
	if err := ks.packet(call, size); err != nil {
		return err
	}
	if err := ks.checkL1(dst, size, call+" destination", true); err != nil {
		return err
	}
	t := decodeNoC(src)
	if t.mcast {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s from %s: a read cannot come from a multicast address", call, t)
	}
	buf := make([]byte, size)
	if bank, ok := ks.r.t.DRAMBankAt(t.x1, t.y1); ok {
		if err := ks.dramAccess(call, bank, t.addr, size, true); err != nil {
			return err
		}
		if a := uint64(ks.r.t.DRAMReadAlign); t.addr%a != dst%a {
			return ks.errf(kir.RuleDRAMAlign, kir.NoCB, "%s from DRAM bank %d address %#x (≡ %d mod %d) to L1 %#x (≡ %d mod %d): a DRAM read's source and destination must agree modulo %d, or the NoC shifts the data", call, bank, t.addr, t.addr%a, a, dst, dst%a, a, a)
		}
		ks.r.d.dram[bank].read(t.addr, buf)
	} else if m, c, ok := ks.endpoint(t.x1, t.y1); ok {
		if !m.inBounds(t.addr, size) {
			return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at L1 %#x of core %s is outside L1", call, size, t.addr, c)
		}
		m.read(t.addr, buf)
	} else {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s from %s: no DRAM bank, worker or ethernet core at NoC (%d,%d)", call, t, t.x1, t.y1)
	}
	ks.core.mem.write(dst, buf)
	ks.r.stats.NoCReadBytes += int64(size)
	return nil
}

// dramAccess checks a DRAM read (read alignment; whole pages, or a part
// of one page) or write (write alignment) against the buffers allocated in
// the bank.
func (ks *kstate) dramAccess(call string, bank int, addr, size uint64, read bool) error {
	t := ks.r.t
	align := uint64(t.DRAMWriteAlign)
	if read {
		align = uint64(t.DRAMReadAlign)
	}
	if addr%align != 0 {
		return ks.errf(kir.RuleDRAMAlign, kir.NoCB, "%s at DRAM bank %d address %#x is not %d-byte aligned", call, bank, addr, align)
	}
	b := ks.r.d.findDRAM(addr, size)
	if b == nil {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at DRAM bank %d address %#x is outside every allocated buffer", call, size, bank, addr)
	}
	if read {
		rel := addr - uint64(b.Addr)
		stride, in := uint64(b.Stride), rel%uint64(b.Stride)
		whole := in == 0 && (size == uint64(b.PageSize) || size%stride == 0)
		if !whole && in+size > uint64(b.PageSize) {
			return ks.errf(kir.RuleDRAMAlign, kir.NoCB, "%s of %d bytes at offset %d of buffer %q (pages of %d bytes, %d apart in a bank) reads neither whole pages nor within one page", call, size, rel, b.Name, b.PageSize, b.Stride)
		}
	}
	return nil
}

func (ks *kstate) nocWrite(src, dst, size uint64, call string) error {
	if err := ks.packet(call, size); err != nil {
		return err
	}
	if err := ks.checkL1(src, size, call+" source", false); err != nil {
		return err
	}
	t := decodeNoC(dst)
	if t.mcast {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s: use noc_async_write_multicast for a multicast address", call, t)
	}
	buf := make([]byte, size)
	ks.core.mem.read(src, buf)
	if bank, ok := ks.r.t.DRAMBankAt(t.x1, t.y1); ok {
		if err := ks.dramAccess(call, bank, t.addr, size, false); err != nil {
			return err
		}
		ks.r.d.dram[bank].write(t.addr, buf)
	} else if m, c, ok := ks.endpoint(t.x1, t.y1); ok {
		if err := ks.remoteL1(call, m, c, t.addr, size); err != nil {
			return err
		}
		m.write(t.addr, buf)
	} else {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s: no DRAM bank, worker or ethernet core at NoC (%d,%d)", call, t, t.x1, t.y1)
	}
	ks.r.stats.NoCWriteBytes += int64(size)
	return nil
}

func (ks *kstate) remoteL1(call string, m *memory, c kir.Core, addr, size uint64) error {
	lo, hi := uint64(ks.r.d.SemaphoreBase()), uint64(ks.r.t.L1Size)
	if c.IsEth() {
		lo, hi = ks.r.ethBounds()
	}
	if !m.inBounds(addr, size) || addr < lo || addr+size > hi {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at L1 %#x of core %s is outside the writable L1 [%#x, %#x)", call, size, addr, c, lo, hi)
	}
	return nil
}

func (ks *kstate) nocMulticast(src, dst, size, numDests uint64, call string) error {
	if err := ks.packet(call, size); err != nil {
		return err
	}
	if err := ks.checkL1(src, size, call+" source", false); err != nil {
		return err
	}
	t := decodeNoC(dst)
	if !t.mcast {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s: the destination is not a multicast address (get_noc_multicast_addr)", call, t)
	}
	if !kir.McastOrdered(ks.k.NoC, t.x0, t.y0, t.x1, t.y1) {
		return ks.errf(kir.RuleMcastRange, kir.NoCB, "%s to %s issued on NoC %d: the corners must be in NoC %d order (%s; kir.McastCorners); a card would multicast to other cores", call, t, ks.k.NoC, ks.k.NoC, kir.McastOrder(ks.k.NoC))
	}
	buf := make([]byte, size)
	ks.core.mem.read(src, buf)
	x0, x1 := min(t.x0, t.x1), max(t.x0, t.x1)
	y0, y1 := min(t.y0, t.y1), max(t.y0, t.y1)
	type dest struct {
		m *memory
		c kir.Core
	}
	var dests []dest
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			m, c, ok := ks.worker(x, y)
			if !ok || c == ks.core.c {
				continue
			}
			if err := ks.remoteL1(call, m, c, t.addr, size); err != nil {
				return err
			}
			dests = append(dests, dest{m, c})
		}
	}
	if uint64(len(dests)) != numDests {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s with num_dests %d: the rectangle holds %d worker cores besides the sender", call, t, numDests, len(dests))
	}
	for _, d := range dests {
		d.m.write(t.addr, buf)
	}
	ks.r.stats.NoCWriteBytes += int64(size) * int64(len(dests))
	return nil
}

func (ks *kstate) semInc(dst uint64, incr uint32) error {
	const call = "noc_semaphore_inc"
	t := decodeNoC(dst)
	m, c, ok := ks.endpoint(t.x1, t.y1)
	if t.mcast || !ok {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s at %s: not a worker or ethernet core's L1", call, t)
	}
	if t.addr%4 != 0 {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s at %s: the address is not 4-byte aligned", call, t)
	}
	if err := ks.remoteL1(call, m, c, t.addr, 4); err != nil {
		return err
	}
	m.write32(t.addr, m.read32(t.addr)+incr)
	return nil
}
