package timing

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
	"github.com/tcc-dev/tcc/sim/interp"
)

// Instruction implements interp.Machine: the cost of instruction s, what
// it does to time. It spends the call's cycles, books shared resources,
// and blocks on semaphores and ethernet words as the card would; for the
// CB calls and semaphore waits, whose books the core keeps, it is what
// follows once the call may proceed. v holds the operands in
// kir.StmtExprs order.
func (m *machine) Instruction(c *interp.Compiler[*thread], s kir.Stmt) (op, error) {
	switch s := s.(type) {
	case kir.PhaseBegin, kir.PhaseEnd:
		p, begin := 0, false
		if b, ok := s.(kir.PhaseBegin); ok {
			p, begin = b.Phase, true
		} else {
			p = s.(kir.PhaseEnd).Phase
		}
		if m.prog.Persist == nil || p < 0 || p >= len(m.prog.Persist.Phases) {
			return nil, fmt.Errorf("program %q: kernel %s: %s(%d) names no phase of the program", m.prog.Name, c.Kernel().Name, kir.APIName(s), p)
		}
		return m.phaseCost(p, begin, c.Kernel()), nil
	}
	if o, ok := m.dataCost(s); ok {
		return o, nil
	}
	return m.computeCost(s)
}

// do is an op that never blocks.
func do(f func(th *thread, v []uint64)) op {
	return func(t *ithread, v []uint64) (bool, error) { f(t.S, v); return false, nil }
}

// cost is an op that spends c cycles.
func cost(c float64) op { return do(func(th *thread, _ []uint64) { th.advance(c) }) }

// dataCost is the cost of a data-movement instruction (ok false for any
// other).
func (m *machine) dataCost(s kir.Stmt) (o op, ok bool) {
	p := m.p
	barrier := func(why string, done func(th *thread) float64) op {
		return do(func(th *thread, _ []uint64) { th.advance(p.CBCycles); th.waitUntil(done(th), why) })
	}
	reads := func(th *thread) float64 { return th.readDone }
	writes := func(th *thread) float64 { return th.writeDone }
	// noc_async_writes_flushed waits until the writes have departed, not
	// until they are acknowledged (tt-metal: ncrisc_noc_nonposted_writes_sent)
	sent := func(th *thread) float64 { return th.writeSent }
	switch s := s.(type) {
	case kir.CBReserveBack, kir.CBWaitFront, kir.CBPushBack, kir.CBPopFront:
		return cbCost(p, s), true
	case kir.NoCAsyncRead:
		return do(func(th *thread, v []uint64) { th.nocRead(v[0], v[1], v[2]) }), true
	case kir.NoCAsyncWrite:
		return do(func(th *thread, v []uint64) { th.nocWrite(v[0], v[1], v[2]) }), true
	case kir.NoCAsyncWriteMulticast:
		return do(func(th *thread, v []uint64) { th.nocMulticast(v[0], v[1], v[2], false) }), true
	case kir.NoCAsyncWriteMulticastLoopbackSrc:
		return do(func(th *thread, v []uint64) { th.nocMulticast(v[0], v[1], v[2], true) }), true
	case kir.NoCAsyncReadBarrier:
		return barrier("noc_async_read_barrier", reads), true
	case kir.NoCAsyncWriteBarrier:
		return barrier("noc_async_write_barrier", writes), true
	case kir.NoCAsyncAtomicBarrier:
		return barrier("noc_async_atomic_barrier", writes), true
	case kir.NoCAsyncWritesFlushed:
		return barrier("noc_async_writes_flushed", sent), true
	case kir.NoCSemaphoreSet:
		return store(p.CBCycles), true
	case kir.L1Write32:
		return store(p.ScalarCycles), true
	case kir.NoCSemaphoreWait, kir.NoCSemaphoreWaitMin, kir.EthNoCSemaphoreWait, kir.EthNoCSemaphoreWaitMin:
		// The core waited for the value; the write that set it may land later.
		return do(func(th *thread, v []uint64) {
			th.waitUntil(th.core.word(uint32(v[0])).t, "noc_semaphore_wait")
			th.advance(p.CBCycles)
		}), true
	case kir.NoCSemaphoreInc:
		return do(func(th *thread, v []uint64) {
			w, at, ok := th.remoteWord(v[0])
			if !ok {
				return
			}
			th.advance(p.NoCIssueCycles)
			th.setWord(w, w.v+uint32(v[1]), at)
			th.writeDone = max(th.writeDone, at)
		}), true
	case kir.NoCSemaphoreSetMulticast, kir.NoCSemaphoreSetMulticastLoopbackSrc:
		_, loopback := s.(kir.NoCSemaphoreSetMulticastLoopbackSrc)
		return do(func(th *thread, v []uint64) {
			val := th.core.word(uint32(v[0])).v
			th.advance(p.NoCIssueCycles)
			addr := interp.DecodeNoC(v[1]).Addr
			for _, cs := range th.rect(v[1], loopback) {
				at := th.Clock + p.latency(p.L1WriteLatency, 4, th.hops(cs.NX, cs.NY))
				th.setWord(cs.word(uint32(addr)), val, at)
				th.writeDone = max(th.writeDone, at)
			}
		}), true
	}
	return m.ethCost(s)
}

// store is an L1 word store (noc_semaphore_set, L1Write32) costing c.
func store(c float64) op {
	return do(func(th *thread, v []uint64) {
		th.advance(c)
		th.setWord(th.core.word(uint32(v[0])), uint32(v[1]), th.Clock)
	})
}

// cbCost is what a CB call does to time once the core let it proceed:
// cb_reserve_back and cb_wait_front wait until the page they need was
// freed or pushed, cb_push_back and cb_pop_front stamp their pages with
// the clock and wake the other side.
func cbCost(p *Params, s kir.Stmt) op {
	idx := kir.CBsOf(s)[0]
	switch s.(type) {
	case kir.CBReserveBack:
		return do(func(th *thread, v []uint64) {
			q := th.core.q[idx]
			th.waitUntil(q.free[v[0]-1], q.reserve)
			th.advance(p.CBCycles)
		})
	case kir.CBWaitFront:
		return do(func(th *thread, v []uint64) {
			q := th.core.q[idx]
			th.waitUntil(q.avail[v[0]-1], q.wait)
			th.advance(p.CBCycles)
			q.consumer = th
		})
	case kir.CBPushBack:
		return do(func(th *thread, v []uint64) {
			q := th.core.q[idx]
			q.producer = th
			th.advance(p.CBCycles)
			th.move(&q.free, &q.avail, int(v[0]))
			th.m.wake(&q.cons)
		})
	}
	return do(func(th *thread, v []uint64) {
		q := th.core.q[idx]
		th.advance(p.CBCycles)
		th.move(&q.avail, &q.free, int(v[0]))
		th.m.wake(&q.prod)
	})
}

// ethCost is the cost of an ethernet instruction (ok false for any other).
func (m *machine) ethCost(s kir.Stmt) (o op, ok bool) {
	switch s.(type) {
	case kir.EthSendBytes:
		// operands: src, dst, size, per-command bytes, per-command words.
		return do(func(th *thread, v []uint64) {
			if _, ok := th.peer(); !ok {
				return
			}
			n, per := v[2], v[3]
			th.ethSend(kir.EthCommands(n, per), float64(per), "eth_send_bytes")
			w := th.core.word(th.ethWord())
			th.setWord(w, w.v+uint32(n), th.Clock)
			th.ethSent += int64(n)
		}), true
	case kir.EthWaitForReceiverDone:
		return func(t *ithread, _ []uint64) (bool, error) {
			th := t.S
			pc, ok := th.peer()
			if !ok {
				return false, nil
			}
			w := th.core.word(th.ethWord())
			if !th.ethSignalled {
				// One 16-byte command carries the bytes_sent word, behind the data.
				arrive := th.ethSend(1, 16, "eth_wait_for_receiver_done")
				th.setWord(pc.word(th.ethWord()), w.v, arrive)
				th.ethSignalled = true
			}
			if w.v != 0 {
				return th.block(&w.waiters, "eth_wait_for_receiver_done"), nil
			}
			th.ethSignalled = false
			th.waitUntil(w.t, "eth_wait_for_receiver_done")
			return false, nil
		}, true
	case kir.EthWaitForBytes:
		return func(t *ithread, v []uint64) (bool, error) {
			th := t.S
			w := th.core.word(th.ethWord())
			if uint64(w.v) != v[0] {
				return th.block(&w.waiters, "eth_wait_for_bytes"), nil
			}
			th.waitUntil(w.t, "eth_wait_for_bytes")
			return false, nil
		}, true
	case kir.EthSendBytesOverChannelPayloadOnly:
		// operands: src, dst, size, per-command bytes, per-command words.
		return do(func(th *thread, v []uint64) {
			if _, ok := th.peer(); !ok {
				return
			}
			n, per := v[2], v[3]
			th.ethSend(kir.EthCommands(n, per), float64(per), "eth_send_bytes_over_channel_payload_only")
			th.ethSent += int64(n)
		}), true
	case kir.EthSendPayloadCompleteSignalOverChannel:
		// operands: channel, size. One 16-byte command carries the word,
		// behind the payload.
		return do(func(th *thread, v []uint64) {
			pc, ok := th.peer()
			if !ok {
				return
			}
			key := ethWordKey + uint32(v[0])
			th.setWord(th.core.word(key), uint32(v[1]), th.Clock)
			th.setWord(pc.word(key), uint32(v[1]), th.ethSend(1, 16, "eth_send_payload_complete_signal_over_channel"))
		}), true
	case kir.EthWaitForReceiverChannelDone:
		return func(t *ithread, v []uint64) (bool, error) {
			th := t.S
			w := th.core.word(ethWordKey + uint32(v[0]))
			if w.v != 0 {
				return th.block(&w.waiters, "eth_wait_for_receiver_channel_done"), nil
			}
			th.waitUntil(w.t, "eth_wait_for_receiver_channel_done")
			return false, nil
		}, true
	case kir.EthWaitForBytesOnChannel:
		return func(t *ithread, v []uint64) (bool, error) {
			th := t.S
			w := th.core.word(ethWordKey + uint32(v[1]))
			if uint64(w.v) != v[0] {
				return th.block(&w.waiters, "eth_wait_for_bytes_on_channel"), nil
			}
			th.waitUntil(w.t, "eth_wait_for_bytes_on_channel")
			return false, nil
		}, true
	case kir.EthReceiverChannelDone:
		return do(func(th *thread, v []uint64) {
			pc, ok := th.peer()
			if !ok {
				return
			}
			key := ethWordKey + uint32(v[0])
			th.setWord(th.core.word(key), 0, th.Clock)
			// One 16-byte command clears the sender's word.
			th.setWord(pc.word(key), 0, th.ethSend(1, 16, "eth_receiver_channel_done"))
		}), true
	case kir.EthReceiverDone:
		return do(func(th *thread, _ []uint64) {
			pc, ok := th.peer()
			if !ok {
				return
			}
			th.setWord(th.core.word(th.ethWord()), 0, th.Clock)
			// One 16-byte command clears the sender's word.
			th.setWord(pc.word(th.ethWord()), 0, th.ethSend(1, 16, "eth_receiver_done"))
		}), true
	}
	return nil, false
}

// computeCost is the cost of a compute instruction.
func (m *machine) computeCost(s kir.Stmt) (op, error) {
	p := m.p
	unpack := p.UnpackCyclesPerTile
	// fpu is an FPU op on two unpacked tiles: mul takes a pass per math
	// fidelity phase.
	fpu := func(elt kir.EltwiseOp) op {
		if elt == kir.EltMul {
			return do(func(th *thread, _ []uint64) { th.advance(2*unpack + p.FPUEltwiseCycles*th.mathPasses) })
		}
		return cost(2*unpack + p.FPUEltwiseCycles)
	}
	switch s := s.(type) {
	case kir.ComputeKernelHWStartup:
		return cost(3 * p.InitCycles), nil
	case kir.TileRegsAcquire, kir.TileRegsCommit, kir.TileRegsWait, kir.TileRegsRelease:
		return cost(p.CBCycles / 2), nil
	case kir.CopyTileInit, kir.BinaryInit, kir.BcastInit, kir.MatmulInit, kir.MatmulBlockInit, kir.ReduceInit,
		kir.ReduceUninit, kir.TransposeInit, kir.TransposeDestInit, kir.SFPUInit, kir.ReconfigDataFormat, kir.PackReconfigDataFormat:
		return cost(p.InitCycles), nil
	case kir.CopyTile:
		return cost(unpack), nil
	case kir.BinaryTiles:
		return fpu(s.Op), nil
	case kir.BcastTiles:
		return fpu(s.Op), nil
	case kir.MatmulTiles:
		// matmul_block's 1 x 1 sub-block: both tiles unpacked per product
		return do(func(th *thread, _ []uint64) { th.advance(matmulBlockCycles(p, th.k.Compute.MathFidelity, 1, 1)) }), nil
	case kir.ReduceTile:
		return do(func(th *thread, _ []uint64) {
			th.advance(2*unpack + reduceMathCycles(p, s.Op, s.Dim, th.k.Compute.MathFidelity))
		}), nil
	case kir.MatmulBlock:
		// operands: in0 tile, in1 tile, dst, ct, rt, kt
		return do(func(th *thread, v []uint64) {
			th.advance(matmulBlockCycles(p, th.k.Compute.MathFidelity, v[3], v[4]))
		}), nil
	case kir.TransposeTile:
		return cost(unpack + p.FPUEltwiseCycles), nil
	case kir.TransposeDest:
		return do(func(th *thread, _ []uint64) { th.advance(transposeDestCycles(p, th.fp32)) }), nil
	case kir.SFPU:
		if s.Chain != "" {
			return sfpuChainCost(p, s)
		}
		c, ok := p.SFPUCycles[s.Op]
		ct, okt := p.TCCSFPUCycles[s.Op]
		if !ok || !okt {
			return nil, fmt.Errorf("the timing model has no cost for SFPU op %s", s.Op)
		}
		return do(func(th *thread, _ []uint64) {
			if th.k.Compute.SFPU.For(s.Op) == sfpu.CodeTCC {
				th.advance(ct)
				return
			}
			th.advance(c)
		}), nil
	case kir.PackTile:
		return do(func(th *thread, _ []uint64) {
			if th.fp32 {
				th.advance(p.PackCycles32)
			} else {
				th.advance(p.PackCycles16)
			}
		}), nil
	}
	return nil, fmt.Errorf("the timing model does not know statement %T", s)
}

// reduceMathCycles is the math time of one reduce_tile on a 32x32 tile:
// its pool instructions (tt-llk llk_math_reduce.h, Blackhole) at a
// quarter of a LoFi tile product each (one 16x16 face of the tile's 4),
// so that a SUM of a tile at fidelity f costs MatmulCycles[f]. A row or
// column reduce pools each of the 4 faces once, a scalar reduce the 4
// faces and then its transposed row once more. A pool is one GMPOOL for
// MAX at any fidelity; for SUM one GAPOOL at LoFi, and at HiFi2..4 a MOP
// of one GAPOOL per fidelity phase (2, 3, 4). Postcondition: SUM row and
// column reduces cost MatmulCycles[f] as before; MAX ones
// MatmulCycles[LoFi] whatever f. The DEST moves of the row reduce's
// transposes are not charged (as before).
func reduceMathCycles(p *Params, op kir.ReduceOp, dim kir.ReduceDim, f ir.MathFidelity) float64 {
	pools := 4.0
	if dim == kir.ReduceScalar {
		pools = 5
	}
	insns := 1.0 // GMPOOL, or LoFi's single GAPOOL
	if op != kir.ReduceMax && f != ir.LoFi {
		insns = float64(f) // the fidelity MOP: one GAPOOL per phase
	}
	return pools * insns * p.MatmulCycles[ir.LoFi] / 4
}

// Instructions of one transpose_wh_dest call (tt-llk
// llk_math_transpose_dest.h, Blackhole): 16-bit DEST runs the MOP
// ckernel_unpack_template::run(2, 0b10): faces 0 to 3 each 4 MOVD2B, a
// TRNSPSRCB and 4 MOVB2D or MOVB2A (36), then 2 MOVA2D for face 1: 38
// moves. The is_32bit MOP run(3, 0b101) moves the high and low halves
// apart: faces 0 and 3 take 14 + 6 replayed instructions each, faces 1 and
// 2 together 5 + 4 + 5 + 4 + 24: 82. Around the MOP each call issues the
// dst address set, counter reset, STALLWAIT and SETRWC (4), and the 32-bit
// one four config read-modify-writes of 3 instructions (zero flag and fp32
// mode off and back on: 12).
const (
	transposeDestInsns16 = 38 + 4
	transposeDestInsns32 = 82 + 4 + 12
)

// transposeDestCycles is the math thread's time of one transpose_wh_dest
// of a tile in 16-bit or fp32 DEST: its instructions (above) at
// DestMoveCycles each. No unpack or pack: the tile stays in DEST.
func transposeDestCycles(p *Params, fp32 bool) float64 {
	if fp32 {
		return transposeDestInsns32 * p.DestMoveCycles
	}
	return transposeDestInsns16 * p.DestMoveCycles
}

// sfpuChainCost is the cost of a chain statement (kir.SFPU's Chain):
// under tcc's SFPU code its one program's cycles per tile
// (sfpu.ChainTileCycles, in DEST's mode), under tt-metal's the steps'
// calls one after the other.
func sfpuChainCost(p *Params, s kir.SFPU) (op, error) {
	prog32, steps, err := sfpu.CachedChain(s.Chain, true)
	if err != nil {
		return nil, err
	}
	prog16, _, err := sfpu.CachedChain(s.Chain, false)
	if err != nil {
		return nil, err
	}
	var llk float64
	for _, st := range steps {
		c, ok := p.SFPUCycles[st.Op]
		if !ok {
			return nil, fmt.Errorf("the timing model has no cost for SFPU op %s", st.Op)
		}
		llk += c
	}
	c32, c16 := sfpu.ChainTileCycles(prog32), sfpu.ChainTileCycles(prog16)
	return do(func(th *thread, _ []uint64) {
		for _, st := range steps {
			if th.k.Compute.SFPU.For(st.Op) != sfpu.CodeTCC {
				th.advance(llk)
				return
			}
		}
		if th.fp32 {
			th.advance(c32)
		} else {
			th.advance(c16)
		}
	}), nil
}

// matmulBlockCycles is the compute time of one matmul_block call of an
// rt x ct sub-block at math fidelity fid: rt*ct tile products, and the
// unpacker's tiles as the LLK moves them (tt-llk
// llk_unpack_AB_matmul.h, _llk_unpack_AB_matmul_): srcA and srcB hold one
// tile each, so of the two operands only one is reused: for each of the
// min(rt, ct) tiles of the shorter side it unpacks that tile once and the
// max(rt, ct) tiles of the other side again, min(rt, ct) + rt*ct tiles in
// all (ct + 1 for a one-row sub-block). Per product that is 1 +
// 1/max(rt, ct) tiles: a taller sub-block saves unpacking only as far as
// it makes the longer side longer.
//
// The unpacker (TRISC0's UNPACR stream) and the matrix unit (TRISC1's
// MVMULs) run at once: srcA and srcB have two banks each, the unpacker
// filling one while the matrix unit multiplies the other (the LLK waits
// for a free one of its two contexts, wait_for_next_context(2), before
// each unpack), so in a run of products the slower of the two sets the
// pace: max(unpacked tiles x matmul_unpack_tile, products x the
// fidelity's tile product). A one-row bf16 sub-block of 4 columns at
// HiFi4 is bound by its products (5 x 27 < 4 x 64), at LoFi by its
// unpacks.
func matmulBlockCycles(p *Params, fid ir.MathFidelity, ct, rt uint64) float64 {
	products := float64(ct * rt)
	unpack := (float64(min(ct, rt)) + products) * p.MatmulUnpackCyclesPerTile
	return max(unpack, products*p.MatmulCycles[fid])
}
