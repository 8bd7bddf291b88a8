package kexec

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// do is an op that never waits.
func do(f func(ks *kstate, v []uint64) error) op {
	return func(t *thread, v []uint64) (bool, error) { return false, f(t.S, v) }
}

// dataflow compiles the effect of a data-movement instruction (ok false
// for any other); v holds the operands in kir.StmtExprs order.
func (r *run) dataflow(c *interp.Compiler[*kstate], s kir.Stmt) (o op, ok bool, err error) {
	switch s := s.(type) {
	case kir.CBReserveBack, kir.CBPushBack, kir.CBWaitFront, kir.CBPopFront,
		kir.NoCSemaphoreWait, kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWait, kir.EthNoCSemaphoreWaitMin:
		return nil, true, nil // the core's books are the whole effect
	case kir.NoCAsyncRead:
		o = do(func(ks *kstate, v []uint64) error { return ks.nocRead(v[0], v[1], v[2]) })
	case kir.NoCAsyncWrite:
		buf := targetBuffer(c, s.Dst)
		o = do(func(ks *kstate, v []uint64) error {
			if buf != "" {
				if err := ks.checkInBuffer(buf, v[1], v[2], "noc_async_write"); err != nil {
					return err
				}
			}
			return ks.nocWrite(v[0], v[1], v[2], "noc_async_write")
		})
	case kir.NoCAsyncWriteMulticast:
		o = do(func(ks *kstate, v []uint64) error {
			return ks.nocMulticast(v[0], v[1], v[2], v[3], false, "noc_async_write_multicast")
		})
	case kir.NoCAsyncWriteMulticastLoopbackSrc:
		o = do(func(ks *kstate, v []uint64) error {
			return ks.nocMulticast(v[0], v[1], v[2], v[3], true, "noc_async_write_multicast_loopback_src")
		})
	case kir.NoCAsyncReadBarrier, kir.NoCAsyncWriteBarrier, kir.NoCAsyncWritesFlushed:
		// Transfers complete when issued.
		o = do(func(*kstate, []uint64) error { return nil })
	case kir.NoCAsyncAtomicBarrier:
		o = do(func(ks *kstate, _ []uint64) error { ks.atomicsPending = 0; return nil })
	case kir.NoCSemaphoreSet:
		o = do(func(ks *kstate, v []uint64) error { return ks.store32(v[0], v[1], "noc_semaphore_set") })
	case kir.NoCSemaphoreInc:
		o = do(func(ks *kstate, v []uint64) error {
			ks.atomicsPending++
			return ks.semInc(v[0], uint32(v[1]))
		})
	case kir.NoCSemaphoreSetMulticast:
		o = do(func(ks *kstate, v []uint64) error {
			return ks.nocMulticast(v[0], v[1], 4, v[2], false, "noc_semaphore_set_multicast")
		})
	case kir.NoCSemaphoreSetMulticastLoopbackSrc:
		o = do(func(ks *kstate, v []uint64) error {
			return ks.nocMulticast(v[0], v[1], 4, v[2], true, "noc_semaphore_set_multicast_loopback_src")
		})
	case kir.EthSendBytes:
		o = do(func(ks *kstate, v []uint64) error { return ks.ethSendBytes(v[0], v[1], v[2], v[3], v[4]) })
	case kir.EthWaitForReceiverDone:
		o = func(t *thread, _ []uint64) (bool, error) { return t.S.ethWaitForReceiverDone() }
	case kir.EthWaitForBytes:
		o = func(t *thread, v []uint64) (bool, error) { return t.S.ethWaitForBytes(v[0]) }
	case kir.EthReceiverDone:
		o = do(func(ks *kstate, _ []uint64) error { return ks.ethReceiverDone() })
	case kir.EthSendBytesOverChannelPayloadOnly:
		o = do(func(ks *kstate, v []uint64) error {
			return ks.ethPayload("eth_send_bytes_over_channel_payload_only", v[0], v[1], v[2], v[3], v[4])
		})
	case kir.EthSendPayloadCompleteSignalOverChannel:
		o = do(func(ks *kstate, v []uint64) error { return ks.ethSignalOverChannel(v[0], v[1]) })
	case kir.EthWaitForReceiverChannelDone:
		o = func(t *thread, v []uint64) (bool, error) { return t.S.ethWaitForReceiverChannelDone(v[0]) }
	case kir.EthWaitForBytesOnChannel:
		o = func(t *thread, v []uint64) (bool, error) { return t.S.ethWaitForBytesOnChannel(v[0], v[1]) }
	case kir.EthReceiverChannelDone:
		o = do(func(ks *kstate, v []uint64) error { return ks.ethReceiverChannelDone(v[0]) })
	case kir.L1Write32:
		o = do(func(ks *kstate, v []uint64) error { return ks.store32(v[0], v[1], "L1 store") })
	default:
		return nil, false, nil
	}
	return o, true, nil
}

// store32 is a store of the word v at local L1 address addr.
func (ks *kstate) store32(addr, v uint64, what string) error {
	if err := ks.checkL1(addr, 4, what, true); err != nil {
		return err
	}
	ks.core.mem.write32(addr, uint32(v))
	return nil
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
	t := interp.DecodeNoC(src)
	if t.Mcast {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s from %s: a read cannot come from a multicast address", call, t)
	}
	buf := make([]byte, size)
	if bank, ok := ks.r.t.DRAMBankAt(t.X1, t.Y1); ok {
		if err := ks.dramAccess(call, bank, t.Addr, size, true); err != nil {
			return err
		}
		if a := uint64(ks.r.t.DRAMReadAlign); t.Addr%a != dst%a {
			return ks.errf(kir.RuleDRAMAlign, kir.NoCB, "%s from DRAM bank %d address %#x (≡ %d mod %d) to L1 %#x (≡ %d mod %d): a DRAM read's source and destination must agree modulo %d, or the NoC shifts the data", call, bank, t.Addr, t.Addr%a, a, dst, dst%a, a, a)
		}
		ks.r.d.dram[bank].read(t.Addr, buf)
	} else if m, c, ok := ks.endpoint(t.X1, t.Y1); ok {
		if !m.inBounds(t.Addr, size) {
			return ks.errf(kir.RuleMemory, kir.NoCB, "%s of %d bytes at L1 %#x of core %s is outside L1", call, size, t.Addr, c)
		}
		m.read(t.Addr, buf)
	} else {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s from %s: no DRAM bank, worker or ethernet core at NoC (%d,%d)", call, t, t.X1, t.Y1)
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
	t := interp.DecodeNoC(dst)
	if t.Mcast {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s: use noc_async_write_multicast for a multicast address", call, t)
	}
	buf := make([]byte, size)
	ks.core.mem.read(src, buf)
	if bank, ok := ks.r.t.DRAMBankAt(t.X1, t.Y1); ok {
		if err := ks.dramAccess(call, bank, t.Addr, size, false); err != nil {
			return err
		}
		ks.r.d.dram[bank].write(t.Addr, buf)
	} else if m, c, ok := ks.endpoint(t.X1, t.Y1); ok {
		if err := ks.remoteL1(call, m, c, t.Addr, size); err != nil {
			return err
		}
		m.write(t.Addr, buf)
	} else {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s: no DRAM bank, worker or ethernet core at NoC (%d,%d)", call, t, t.X1, t.Y1)
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

// nocMulticast copies size bytes at L1 src to every worker core of the
// multicast rectangle dst, the sender only when loopback (the _loopback_src
// calls), which numDests must count exactly.
func (ks *kstate) nocMulticast(src, dst, size, numDests uint64, loopback bool, call string) error {
	if err := ks.packet(call, size); err != nil {
		return err
	}
	if err := ks.checkL1(src, size, call+" source", false); err != nil {
		return err
	}
	t := interp.DecodeNoC(dst)
	if !t.Mcast {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s: the destination is not a multicast address (get_noc_multicast_addr)", call, t)
	}
	if !kir.McastOrdered(ks.k.NoC, t.X0, t.Y0, t.X1, t.Y1) {
		return ks.errf(kir.RuleMcastRange, kir.NoCB, "%s to %s issued on NoC %d: the corners must be in NoC %d order (%s; kir.McastCorners); a card would multicast to other cores", call, t, ks.k.NoC, ks.k.NoC, kir.McastOrder(ks.k.NoC))
	}
	buf := make([]byte, size)
	ks.core.mem.read(src, buf)
	x0, x1 := min(t.X0, t.X1), max(t.X0, t.X1)
	y0, y1 := min(t.Y0, t.Y1), max(t.Y0, t.Y1)
	type dest struct {
		m *memory
		c kir.Core
	}
	var dests []dest
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			m, c, ok := ks.worker(x, y)
			if !ok || c == ks.core.C && !loopback {
				continue
			}
			if err := ks.remoteL1(call, m, c, t.Addr, size); err != nil {
				return err
			}
			dests = append(dests, dest{m, c})
		}
	}
	if uint64(len(dests)) != numDests {
		who := "besides the sender"
		if loopback {
			who = "with the sender"
		}
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s to %s with num_dests %d: the rectangle holds %d worker cores %s", call, t, numDests, len(dests), who)
	}
	for _, d := range dests {
		d.m.write(t.Addr, buf)
	}
	ks.r.stats.NoCWriteBytes += int64(size) * int64(len(dests))
	return nil
}

func (ks *kstate) semInc(dst uint64, incr uint32) error {
	const call = "noc_semaphore_inc"
	t := interp.DecodeNoC(dst)
	m, c, ok := ks.endpoint(t.X1, t.Y1)
	if t.Mcast || !ok {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s at %s: not a worker or ethernet core's L1", call, t)
	}
	if t.Addr%4 != 0 {
		return ks.errf(kir.RuleMemory, kir.NoCB, "%s at %s: the address is not 4-byte aligned", call, t)
	}
	if err := ks.remoteL1(call, m, c, t.Addr, 4); err != nil {
		return err
	}
	m.write32(t.Addr, m.read32(t.Addr)+incr)
	return nil
}
