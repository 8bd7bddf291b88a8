package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// The adder cores of a ring collective (see collective.go's Kernels
// section): per link, M worker cores that add each received tile to the
// local one and write the sum on.

// adders builds the reader, compute and writer kernels of the adder cores.
func (k *cclKernels) adders() {
	r, rs := k.ring, k.workerRanges
	rd := newReader(k.p, rs)
	k.adderReader(rd)

	// Compute: sum = local + received.
	cp := blocks.NewComputeKernel(k.p, rs, kir.ComputeConfig{MathFidelity: k.ctx.Fidelity, FP32DestAccEn: k.x.Type.DType == ir.FP32})
	ccount, clane := cp.RuntimeArg("num_tiles"), cp.RuntimeArg("lane")
	if k.residual != nil {
		k.residualCompute(cp, ccount, clane)
	} else {
		k.sumCompute(cp, ccount, clane)
	}

	wr := newWriter(k.p, rs)
	k.adderWriter(wr)

	for l, cores := range r.Workers {
		f, n := r.LinkRange(l)
		for j, c := range cores {
			rv := append(r.LinkValues(l, j), multicore.XY(r.West[l])...)
			if k.compact {
				rv = append(rv, multicore.XY(r.East[l])...)
			}
			rd.SetRuntimeArgs(c, rv...)
			cp.SetRuntimeArgs(c, kir.U32(uint32(n)), kir.U32(uint32(j)))
			wv := append(r.LinkValues(l, j), multicore.XY(r.East[l])...)
			if k.push != nil {
				tiles := k.laneTiles(n, j)
				wv = append(wv, k.push.Values(k.plan.adderTiles(), k.tb, func(s int) int {
					if s < len(tiles) {
						return f + tiles[s]
					}
					return -1
				})...)
			}
			if k.rows != nil {
				wv = append(wv, k.rows.values(l)...)
			}
			wr.SetRuntimeArgs(c, wv...)
		}
	}
}

// laneTiles lists the link-local tiles lane j adds, in the order it
// handles them: per packet of the link's n tiles, tiles j, j+M, ...
func (k *cclKernels) laneTiles(n, j int) []int {
	pk, m := k.plan.PacketTiles, k.ring.M()
	var ts []int
	for base := 0; base < n; base += pk {
		for t := j; t < min(pk, n-base); t += m {
			ts = append(ts, base+t)
		}
	}
	return ts
}

// lanes emits the loop over a lane's tiles of a packet: t = lane, lane+M,
// ... below cnt.
func (k *cclKernels) lanes(b *kir.Builder, lane kir.Expr, cnt kir.Var, body func(t kir.Var)) {
	b.ForStep("t", lane, cnt, kir.Ci(k.ring.M()), body)
}

func (k *cclKernels) adderReader(rd *kir.Kernel) {
	a := &cclKernel{cclKernels: k}
	a.staging = rd.CompileArg("staging_addr", uint32(k.ring.Staging))
	a.dev = rd.CommonArg("device_id", kir.DeviceID())
	a.xa = rd.CommonArg("x_addr", kir.BufferAddr(k.xName, 0))
	a.first, a.count, a.lane = rd.RuntimeArg("first_tile"), rd.RuntimeArg("num_tiles"), rd.RuntimeArg("lane")
	a.rx, a.ry = cclNoCArgs(rd, "receiver")
	if k.compact {
		a.sx, a.sy = cclNoCArgs(rd, "sender")
	}
	if k.residual != nil {
		a.ra = rd.CommonArg("residual_addr", kir.BufferAddr(k.ctx.BufferName(k.residual), 0))
	}
	a.b = rd.Builder()
	if !k.compact {
		a.zeroReceived()
	}
	a.sem = a.b.Let("arrived_sem", kir.GetSemaphore{ID: kir.C(cclSemArrived)})
	if k.batched {
		a.batchedPackets()
	} else {
		a.perTile()
	}
}

// zeroReceived zeroes the received CB's pages once: only the live rows
// of a received tile are read into c_1, so the padding rows add zeros,
// not stale L1. A compact adder zeroes them after it has handed its
// local segments to the sender (the sender waits for those; the received
// rows come later).
func (a *cclKernel) zeroReceived() {
	if a.ring.Wire() >= a.tb {
		return
	}
	a.b.Comment("Zero the received CB's pages once: only live rows are read into them.")
	a.b.CBReserveBack(cbIn1, kir.Ci(a.pages()))
	blocks.FillWords(a.b, kir.GetWritePtr{CB: cbIn1}, a.pages()*a.tb, 0)
}

// received reads the segments of the packet's tile t (link-local tile
// base + t) from the receiver's staging (the packet's slot) into dst.
func (a *cclKernel) received(base, t kir.Expr, dst kir.Expr) {
	r := a.ring
	slot := r.SlotAddr(a.staging, kir.Div(base, kir.Ci(r.PacketTiles)))
	r.EachSegment(func(sg multicore.Span, coff int) {
		at := r.TileAddr(slot, t, sg.Off)
		if a.compact {
			at = r.PackedAddr(a.staging, kir.Add(base, t), coff)
		}
		a.b.NoCAsyncRead(kir.NoCAddr{X: a.rx, Y: a.ry, Addr: at}, kir.Add(dst, kir.Ci(sg.Off)), kir.Ci(sg.Size))
	})
}

// packLocal writes the segments of the n local tiles at l0 (packet
// tiles tileOf(j)) into the sender's packed staging and waits for the
// writes; the caller then Signals the sender.
func (a *cclKernel) packLocal(base kir.Var, n kir.Expr, l0 kir.Expr, tileOf func(j kir.Var) kir.Expr) {
	b, r := a.b, a.ring
	b.For("j", kir.C(0), n, func(j kir.Var) {
		r.EachSegment(func(sg multicore.Span, coff int) {
			at := r.PackedAddr(a.staging, kir.Add(base, tileOf(j)), coff)
			b.NoCAsyncWrite(r.TileAddr(l0, j, sg.Off), kir.NoCAddr{X: a.sx, Y: a.sy, Addr: at}, kir.Ci(sg.Size))
		})
	})
	b.NoCAsyncWriteBarrier()
}

// batchedPackets emits the batched reader: per packet the lane's local
// (and residual) tiles are read before the packet arrives, then the
// received rows, all under one barrier.
func (a *cclKernel) batchedPackets() {
	b, r, m := a.b, a.ring, a.ring.M()
	b.Comment("One reduce step, every tile of this adder in its CBs: per packet the local (and residual) tiles are read before the packet arrives, then the received rows, all under one barrier.")
	kk := b.Let("chunk", a.chunkIndex(a.dev, kir.C(0), 2))
	r.Packets(b, a.count, func(base, cnt kir.Var) {
		n := r.LaneCount(b, cnt, a.lane)
		// A lane with no tile of a short packet still takes part in the
		// handshake.
		b.IfElse(kir.Gt(n, kir.C(0)), func() {
			l0 := blocks.Reserve(b, cbIn0, n, "local_base")
			var r0 kir.Var
			if a.residual != nil {
				r0 = blocks.Reserve(b, cbIn2, n, "residual_base")
			}
			tileOf := func(j kir.Var) kir.Expr { return kir.Add(a.lane, kir.Mul(j, kir.Ci(m))) }
			pageOf := func(j kir.Var) kir.Expr { return a.page(kk, kir.Add(kir.Add(a.first, base), tileOf(j))) }
			readResidual := func() {
				if a.residual != nil {
					b.For("j", kir.C(0), n, func(j kir.Var) {
						b.NoCAsyncRead(a.dram(a.ra, pageOf(j)), kir.Add(r0, kir.Mul(j, kir.Ci(a.tb))), kir.Ci(a.tb))
					})
				}
			}
			b.For("j", kir.C(0), n, func(j kir.Var) {
				b.NoCAsyncRead(a.dram(a.xa, pageOf(j)), kir.Add(l0, kir.Mul(j, kir.Ci(a.tb))), kir.Ci(a.tb))
			})
			if a.compact {
				b.Comment("this adder's local segments into the sender's packed staging (first: the sender waits for them), then the residual and the received CB's zeros")
				b.NoCAsyncReadBarrier()
				a.packLocal(base, n, l0, tileOf)
				r.Signal(b, a.sx, a.sy)
				readResidual()
				b.If(kir.Eq(base, kir.C(0)), a.zeroReceived)
			} else {
				readResidual()
			}
			a.await(base)
			in1 := blocks.Reserve(b, cbIn1, n, "received_base")
			b.For("j", kir.C(0), n, func(j kir.Var) {
				a.received(base, tileOf(j), kir.Add(in1, kir.Mul(j, kir.Ci(a.tb))))
			})
			b.NoCAsyncReadBarrier()
			a.pushInputs(n)
		}, func() {
			if a.compact {
				r.Signal(b, a.sx, a.sy)
			}
			a.await(base)
		})
		r.Signal(b, a.rx, a.ry)
	})
}

// await emits the wait for the hand-off of the packet at link-local tile
// base: SemArrived is 1 (reset), or streaming counts the packet
// (multicore.AwaitCount).
func (a *cclKernel) await(base kir.Expr) {
	if a.plan.Streaming() {
		multicore.AwaitCount(a.b, a.sem, kir.Div(base, kir.Ci(a.plan.PacketTiles)))
		return
	}
	multicore.Await(a.b, a.sem, true)
}

// pushInputs pushes n pages of the local, received (and residual) CBs.
func (a *cclKernel) pushInputs(n kir.Expr) {
	a.b.CBPushBack(cbIn0, n)
	a.b.CBPushBack(cbIn1, n)
	if a.residual != nil {
		a.b.CBPushBack(cbIn2, n)
	}
}

// perTile emits the reader that moves one tile per barrier: per step and
// packet, after the hand-off, each of the lane's tiles.
func (a *cclKernel) perTile() {
	b, r := a.b, a.ring
	b.For("s", kir.C(0), kir.Ci(a.plan.ReduceSteps), func(s kir.Var) {
		kk := b.Let("chunk", a.chunkIndex(a.dev, s, 2))
		r.Packets(b, a.count, func(base, cnt kir.Var) {
			a.await(base)
			a.lanes(b, a.lane, cnt, func(t kir.Var) {
				i := kir.Add(kir.Add(a.first, base), t)
				b.CBReserveBack(cbIn0, kir.C(1))
				b.NoCAsyncRead(a.dram(a.xa, a.page(kk, i)), kir.GetWritePtr{CB: cbIn0}, kir.Ci(a.tb))
				b.CBReserveBack(cbIn1, kir.C(1))
				a.received(base, t, kir.GetWritePtr{CB: cbIn1})
				if a.residual != nil {
					b.CBReserveBack(cbIn2, kir.C(1))
					b.NoCAsyncRead(a.dram(a.ra, a.page(kk, i)), kir.GetWritePtr{CB: cbIn2}, kir.Ci(a.tb))
				}
				b.NoCAsyncReadBarrier()
				a.pushInputs(kir.C(1))
			})
			r.Signal(b, a.rx, a.ry)
		})
	})
}

func (k *cclKernels) adderWriter(wr *kir.Kernel) {
	pl := k.plan
	w := &cclKernel{cclKernels: k}
	w.fwd0 = wr.CompileArg("fwd0_addr", uint32(k.ring.Fwd0))
	w.fwd1 = wr.CompileArg("fwd1_addr", uint32(k.ring.Fwd1))
	w.dev = wr.CommonArg("device_id", kir.DeviceID())
	w.oa = wr.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	w.first, w.count, w.lane = wr.RuntimeArg("first_tile"), wr.RuntimeArg("num_tiles"), wr.RuntimeArg("lane")
	w.sx, w.sy = cclNoCArgs(wr, "sender")
	b := wr.Builder()
	w.b = b
	w.sem = b.Let("fwd_free_sem", kir.GetSemaphore{ID: kir.C(cclSemFwdFree)})
	if pl.ReduceSteps > 1 {
		w.intermediate()
	}
	last := pl.ReduceSteps - 1
	b.Comment("Last reduce step: the sum of this card's chunk.")
	toFwd := k.kind == cclAllReduce && pl.GatherSteps > 0
	if toFwd && last >= 2 {
		b.NoCSemaphoreWaitMin(w.sem, kir.Ci(last-1))
	}
	kk := b.Let("chunk", k.chunkIndex(w.dev, kir.Ci(last), 2))
	if k.batched {
		w.lastBatched(wr, kk)
	} else {
		w.lastPerTile(wr, kk, last, toFwd)
	}
	if toFwd {
		w.signal()
	}
	k.notifyDone(wr, b)
}

// toSlot writes the segments of the front sum tile to tile base+t of
// forwarding slot slot on the sender, packed.
func (w *cclKernel) toSlot(slot kir.Expr, base, t kir.Var) {
	r := w.ring
	r.EachSegment(func(sg multicore.Span, coff int) {
		dst := kir.NoCAddr{X: w.sx, Y: w.sy, Addr: r.PackedAddr(slot, kir.Add(base, t), coff)}
		w.b.NoCAsyncWrite(kir.Add(kir.GetReadPtr{CB: cbOut}, kir.Ci(sg.Off)), dst, kir.Ci(sg.Size))
	})
}

// signal waits for the writes and counts this adder in the sender's
// semaphore.
func (w *cclKernel) signal() {
	w.b.NoCAsyncWriteBarrier()
	w.ring.Signal(w.b, w.sx, w.sy)
}

// intermediate emits the reduce steps before the last: each partial sum
// to the sender's forwarding slot s % 2, reused once the sender freed it.
func (w *cclKernel) intermediate() {
	b := w.b
	b.Comment("Intermediate reduce steps: the partial sum goes to the sender's forwarding slot s % 2.")
	b.For("s", kir.C(0), kir.Ci(w.plan.ReduceSteps-1), func(s kir.Var) {
		b.If(kir.Ge(s, kir.C(2)), func() { b.NoCSemaphoreWaitMin(w.sem, kir.Sub(s, kir.C(1))) })
		slot := b.Let("slot", multicore.FwdSlot(w.fwd0, w.fwd1, s))
		w.ring.Packets(b, w.count, func(base, cnt kir.Var) {
			w.lanes(b, w.lane, cnt, func(t kir.Var) {
				b.CBWaitFront(cbOut, kir.C(1))
				w.toSlot(slot, base, t)
				b.NoCAsyncWriteBarrier()
				b.CBPopFront(cbOut, kir.C(1))
			})
		})
		w.signal()
	})
}

// lastBatched emits the last step of batched adders: every sum tile of a
// packet written under one barrier (and, with a push, its live rows
// pushed into the tail's h CB).
func (w *cclKernel) lastBatched(wr *kir.Kernel, kk kir.Var) {
	b, m := w.b, w.ring.M()
	var pa multicore.PushArgs
	var pushBase kir.Var
	if w.push != nil {
		pa = multicore.DeclarePushArgs(wr, w.plan.adderTiles())
		b.Comment("Wait for the tail's h CB address (its first core publishes it).")
		pushBase = multicore.AwaitAddress(b, cclSemPushAddr)
	}
	b.Comment("Every sum tile of a packet written under one barrier (the CB holds them all).")
	// pushed counts the lane's tiles of earlier packets: the push args
	// list the lane's tiles of every packet in order (laneTiles).
	var pushed kir.Var
	multi := w.push != nil && w.plan.Packets() > 1
	if multi {
		pushed = b.LetT("pushed", kir.U32T, kir.C(0))
	}
	w.ring.Packets(b, w.count, func(base, cnt kir.Var) {
		n := w.ring.LaneCount(b, cnt, w.lane)
		b.If(kir.Gt(n, kir.C(0)), func() {
			out0 := b.Let("sum_base", kir.GetReadPtr{CB: cbOut})
			b.For("j", kir.C(0), n, func(j kir.Var) {
				pg := kir.Expr(kir.Add(kir.Add(w.first, base), kir.Add(w.lane, kir.Mul(j, kir.Ci(m)))))
				if w.kind == cclAllReduce {
					pg = w.page(kk, pg)
				}
				b.CBWaitFront(cbOut, kir.Add(j, kir.C(1)))
				b.NoCAsyncWrite(kir.Add(out0, kir.Mul(j, kir.Ci(w.tb))), w.dram(w.oa, pg), kir.Ci(w.tb))
			})
			switch {
			case multi:
				b.Comment("the live rows of every sum tile of this packet into its page of the owning tail core's h CB")
				pa.WritesFrom(b, pushed, n, out0, pushBase, w.tb, w.segs)
			case w.push != nil:
				b.Comment("the live rows of every sum tile into its page of the owning tail core's h CB")
				pa.Writes(b, n, out0, pushBase, w.tb, w.segs)
			}
			b.NoCAsyncWriteBarrier()
			switch {
			case multi:
				pa.CountsFrom(b, pushed, n, cclSemTail)
				b.Assign(pushed, kir.Add(pushed, n))
			case w.push != nil:
				pa.Counts(b, n, cclSemTail)
			}
			b.CBPopFront(cbOut, n)
		})
	})
}

// lastPerTile emits the last step one tile per barrier: each sum tile to
// the output and, toFwd, to the forwarding slot of step last; with a row
// stream (cclOp.rows) then the counts of the rows the packet completes,
// and with its kept rows each tile also into its tail core's h CB.
func (w *cclKernel) lastPerTile(wr *kir.Kernel, kk kir.Var, last int, toFwd bool) {
	b := w.b
	var ra rowArgs
	var keptBase kir.Var
	if w.rows != nil {
		ra = w.rows.declare(wr)
		if w.rows.kept > 0 {
			b.Comment("Wait for the tail's h CB address (its first core publishes it).")
			keptBase = multicore.AwaitAddress(b, cclSemPushAddr)
		}
	}
	w.ring.Packets(b, w.count, func(base, cnt kir.Var) {
		w.lanes(b, w.lane, cnt, func(t kir.Var) {
			i := kir.Add(kir.Add(w.first, base), t)
			pg := kir.Expr(i)
			if w.kind == cclAllReduce {
				pg = w.page(kk, i)
			}
			b.CBWaitFront(cbOut, kir.C(1))
			b.NoCAsyncWrite(kir.GetReadPtr{CB: cbOut}, w.dram(w.oa, pg), kir.Ci(w.tb))
			if toFwd {
				w.toSlot(multicore.FwdSlot(w.fwd0, w.fwd1, kir.Ci(last)), base, t)
			}
			if w.rows != nil && w.rows.kept > 0 {
				w.rows.writeKept(b, ra, kir.Add(base, t), kir.GetReadPtr{CB: cbOut}, keptBase, w.tb, w.rows.rowsPerLink(w.plan.LinkTiles))
			}
			b.NoCAsyncWriteBarrier()
			b.CBPopFront(cbOut, kir.C(1))
		})
		if w.rows != nil {
			w.rows.emit(b, ra, base, cnt, w.rows.rowsPerLink(w.plan.LinkTiles))
		}
	})
}

func cclRanges(cs []kir.Core) []ir.CoreRange {
	rs := make([]ir.CoreRange, len(cs))
	for i, c := range cs {
		rs[i] = c.Range()
	}
	return rs
}

// sumCompute is the adders' compute kernel: sum = local + received.
func (k *cclKernels) sumCompute(cp *kir.Kernel, ccount, clane kir.ArgRef) {
	b := cp.Builder()
	b.HWStartup(cbIn0, cbIn1, cbOut)
	b.BinaryInit(kir.EltAdd, cbIn0, cbIn1)
	b.For("s", kir.C(0), kir.Ci(k.plan.ReduceSteps), func(kir.Var) {
		k.ring.Packets(b, ccount, func(_, cnt kir.Var) {
			k.lanes(b, clane, cnt, func(kir.Var) {
				b.CBWaitFront(cbIn0, kir.C(1))
				b.CBWaitFront(cbIn1, kir.C(1))
				b.TileRegsAcquire()
				b.AddTiles(cbIn0, cbIn1, kir.C(0), kir.C(0), kir.C(0))
				b.TileRegsCommit()
				b.CBReserveBack(cbOut, kir.C(1))
				b.TileRegsWait()
				b.PackTile(kir.C(0), cbOut)
				b.TileRegsRelease()
				b.CBPushBack(cbOut, kir.C(1))
				b.CBPopFront(cbIn0, kir.C(1))
				b.CBPopFront(cbIn1, kir.C(1))
			})
		})
	})
}

// residualCompute is the adders' compute kernel with a residual:
// reduced = r(local + received) into c_24, then out = r(residual +
// reduced), both adds exact fp32 sums of the unpacked tiles rounded once
// to the dtype when packed (fused all_reduce_add).
func (k *cclKernels) residualCompute(cp *kir.Kernel, ccount, clane kir.ArgRef) {
	m := k.plan.WorkersPerLink
	c := blocks.NewCompute(k.p, cp)
	c.Startup(cbIn0, cbIn1, cbIm0)
	c.For("s", kir.C(0), kir.Ci(k.plan.ReduceSteps), func(kir.Var) {
		k.ring.Packets(c.B, ccount, func(_, cnt kir.Var) {
			c.ForStep("t", clane, cnt, kir.Ci(m), func(kir.Var) {
				c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbIn0, cbIn1, cbIm0, false, nil)
				c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbIn2, cbIm0, cbOut, false, nil)
			})
		})
	})
}
