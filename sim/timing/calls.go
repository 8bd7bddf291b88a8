package timing

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// call compiles one API-call statement into an instruction that does what
// the call does to time: it spends the call's cycles, books shared
// resources, and blocks on CBs, semaphores and ethernet words as the card
// would.
func (cc *compiler) call(s kir.Stmt) (instr, error) {
	ops, err := cc.exprs(kir.StmtExprs(s)...)
	if err != nil {
		return nil, err
	}
	arg := func(th *thread, i int) uint64 { return ops[i](th) }
	p := cc.m.p
	next := func(f func(th *thread)) instr {
		return func(th *thread) int { f(th); return th.pc + 1 }
	}
	cost := func(c float64) instr { return next(func(th *thread) { th.advance(c) }) }
	unpack := p.UnpackCyclesPerTile
	switch s := s.(type) {
	case kir.CBReserveBack:
		return func(th *thread) int { return th.cbAcquire("cb_reserve_back", s.CB, int(arg(th, 0)), true) }, nil
	case kir.CBPushBack:
		return func(th *thread) int { return th.cbRelease("cb_push_back", s.CB, int(arg(th, 0)), true) }, nil
	case kir.CBWaitFront:
		return func(th *thread) int { return th.cbAcquire("cb_wait_front", s.CB, int(arg(th, 0)), false) }, nil
	case kir.CBPopFront:
		return func(th *thread) int { return th.cbRelease("cb_pop_front", s.CB, int(arg(th, 0)), false) }, nil
	case kir.NoCAsyncRead:
		return next(func(th *thread) { th.nocRead(arg(th, 0), arg(th, 2)) }), nil
	case kir.NoCAsyncWrite:
		return next(func(th *thread) { th.nocWrite(arg(th, 1), arg(th, 2)) }), nil
	case kir.NoCAsyncWriteMulticast:
		return next(func(th *thread) { th.nocMulticast(arg(th, 1), arg(th, 2)) }), nil
	case kir.NoCAsyncReadBarrier:
		return next(func(th *thread) { th.advance(p.CBCycles); th.waitUntil(th.readDone, "noc_async_read_barrier") }), nil
	case kir.NoCAsyncWriteBarrier:
		return next(func(th *thread) { th.advance(p.CBCycles); th.waitUntil(th.writeDone, "noc_async_write_barrier") }), nil
	case kir.NoCAsyncAtomicBarrier:
		return next(func(th *thread) { th.advance(p.CBCycles); th.waitUntil(th.writeDone, "noc_async_atomic_barrier") }), nil
	case kir.NoCAsyncWritesFlushed:
		return next(func(th *thread) { th.advance(p.CBCycles); th.waitUntil(th.writeDone, "noc_async_writes_flushed") }), nil
	case kir.NoCSemaphoreSet:
		return next(func(th *thread) {
			th.advance(p.CBCycles)
			th.setWord(th.core.word(uint32(arg(th, 0))), uint32(arg(th, 1)), th.t)
		}), nil
	case kir.L1Write32:
		return next(func(th *thread) {
			th.advance(p.ScalarCycles)
			th.setWord(th.core.word(uint32(arg(th, 0))), uint32(arg(th, 1)), th.t)
		}), nil
	case kir.NoCSemaphoreWait, kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWait, kir.EthNoCSemaphoreWaitMin:
		var atLeast bool
		switch s.(type) {
		case kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWaitMin:
			atLeast = true
		}
		return func(th *thread) int {
			w := th.core.word(uint32(arg(th, 0)))
			v := uint32(arg(th, 1))
			if w.v != v && !(atLeast && w.v >= v) {
				return th.block(&w.waiters, "noc_semaphore_wait")
			}
			th.waitUntil(w.t, "noc_semaphore_wait")
			th.advance(p.CBCycles)
			return th.pc + 1
		}, nil
	case kir.NoCSemaphoreInc:
		return next(func(th *thread) {
			w, at, ok := th.remoteWord(arg(th, 0))
			if !ok {
				return
			}
			th.advance(p.NoCIssueCycles)
			th.setWord(w, w.v+uint32(arg(th, 1)), at)
			th.writeDone = max(th.writeDone, at)
		}), nil
	case kir.NoCSemaphoreSetMulticast:
		return next(func(th *thread) {
			v := th.core.word(uint32(arg(th, 0))).v
			th.advance(p.NoCIssueCycles)
			_, _, _, _, _, addr := decode(arg(th, 1))
			for _, cs := range th.rect(arg(th, 1)) {
				at := th.t + p.latency(p.L1WriteLatency, 4, th.hops(cs.nx, cs.ny))
				th.setWord(cs.word(uint32(addr)), v, at)
				th.writeDone = max(th.writeDone, at)
			}
		}), nil
	case kir.EthSendBytes:
		// operands: src, dst, size, per-command bytes, per-command words.
		return next(func(th *thread) {
			if _, ok := th.peer(); !ok {
				return
			}
			n, per := arg(th, 2), arg(th, 3)
			th.ethSend(kir.EthCommands(n, per), float64(per), "eth_send_bytes")
			w := th.core.word(ethWordKey)
			th.setWord(w, w.v+uint32(n), th.t)
			th.ethSent += int64(n)
		}), nil
	case kir.EthWaitForReceiverDone:
		return func(th *thread) int {
			pc, ok := th.peer()
			if !ok {
				return -1
			}
			w := th.core.word(ethWordKey)
			if !th.ethSignalled {
				// One 16-byte command carries the bytes_sent word, behind the data.
				arrive := th.ethSend(1, 16, "eth_wait_for_receiver_done")
				th.setWord(pc.word(ethWordKey), w.v, arrive)
				th.ethSignalled = true
			}
			if w.v != 0 {
				return th.block(&w.waiters, "eth_wait_for_receiver_done")
			}
			th.ethSignalled = false
			th.waitUntil(w.t, "eth_wait_for_receiver_done")
			return th.pc + 1
		}, nil
	case kir.EthWaitForBytes:
		return func(th *thread) int {
			w := th.core.word(ethWordKey)
			if uint64(w.v) != arg(th, 0) {
				return th.block(&w.waiters, "eth_wait_for_bytes")
			}
			th.waitUntil(w.t, "eth_wait_for_bytes")
			return th.pc + 1
		}, nil
	case kir.EthReceiverDone:
		return next(func(th *thread) {
			pc, ok := th.peer()
			if !ok {
				return
			}
			th.setWord(th.core.word(ethWordKey), 0, th.t)
			// One 16-byte command clears the sender's word.
			th.setWord(pc.word(ethWordKey), 0, th.ethSend(1, 16, "eth_receiver_done"))
		}), nil
	// ---- compute ----
	case kir.ComputeKernelHWStartup:
		return cost(3 * p.InitCycles), nil
	case kir.TileRegsAcquire, kir.TileRegsCommit, kir.TileRegsWait, kir.TileRegsRelease:
		return cost(p.CBCycles / 2), nil
	case kir.CopyTileInit, kir.BinaryInit, kir.BcastInit, kir.MatmulInit, kir.MatmulBlockInit, kir.ReduceInit,
		kir.ReduceUninit, kir.TransposeInit, kir.SFPUInit, kir.ReconfigDataFormat, kir.PackReconfigDataFormat:
		return cost(p.InitCycles), nil
	case kir.CopyTile:
		return cost(unpack), nil
	case kir.BinaryTiles:
		if s.Op == kir.EltMul {
			return next(func(th *thread) { th.advance(2*unpack + p.FPUEltwiseCycles*th.mathPasses) }), nil
		}
		return cost(2*unpack + p.FPUEltwiseCycles), nil
	case kir.BcastTiles:
		if s.Op == kir.EltMul {
			return next(func(th *thread) { th.advance(2*unpack + p.FPUEltwiseCycles*th.mathPasses) }), nil
		}
		return cost(2*unpack + p.FPUEltwiseCycles), nil
	case kir.MatmulTiles, kir.ReduceTile:
		return next(func(th *thread) { th.advance(2*unpack + p.MatmulCycles[th.k.Compute.MathFidelity]) }), nil
	case kir.MatmulBlock:
		// operands: in0 tile, in1 tile, dst, ct, rt, kt
		return next(func(th *thread) {
			ct, rt := float64(arg(th, 3)), float64(arg(th, 4))
			th.advance((ct+rt)*unpack + ct*rt*p.MatmulCycles[th.k.Compute.MathFidelity])
		}), nil
	case kir.TransposeTile:
		return cost(unpack + p.FPUEltwiseCycles), nil
	case kir.SFPU:
		c, ok := p.SFPUCycles[s.Op]
		if !ok {
			return nil, fmt.Errorf("the timing model has no cost for SFPU op %s", s.Op)
		}
		return cost(c), nil
	case kir.PackTile:
		return next(func(th *thread) {
			if th.fp32 {
				th.advance(p.PackCycles32)
			} else {
				th.advance(p.PackCycles16)
			}
		}), nil
	}
	return nil, fmt.Errorf("the timing model does not know statement %T", s)
}
