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
	pl := k.plan
	m := pl.WorkersPerLink
	rs := k.workerRanges
	lanes := func(b *kir.Builder, lane kir.Expr, cnt kir.Var, body func(t kir.Var)) {
		b.ForStep("t", lane, cnt, kir.Ci(m), body)
	}

	// Reader: the local x tile into c_0, the received segments into c_1.
	rd := k.p.AddKernel(&kir.Kernel{Name: "reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: rs})
	staging := rd.CompileArg("staging_addr", uint32(k.staging))
	dev := rd.CommonArg("device_id", kir.DeviceID())
	xa := rd.CommonArg("x_addr", kir.BufferAddr(k.xName, 0))
	first, count, lane := rd.RuntimeArg("first_tile"), rd.RuntimeArg("num_tiles"), rd.RuntimeArg("lane")
	ex, ey := cclNoCArgs(rd, "receiver")
	var px, py kir.ArgRef
	if k.compact {
		px, py = cclNoCArgs(rd, "sender")
	}
	var ra kir.ArgRef
	if k.residual != nil {
		ra = rd.CommonArg("residual_addr", kir.BufferAddr(k.ctx.BufferName(k.residual), 0))
	}
	b := rd.Builder()
	pages := 2
	if k.batched {
		pages = k.adderTiles
	}
	// Only the live rows of a received tile are read into c_1; its pages
	// are zeroed once so the padding rows add zeros, not stale L1. A compact
	// adder zeroes them after it has handed its local segments to the
	// sender (the sender waits for those; the received rows come later).
	zeroReceived := func() {
		if segmentBytes(k.segs) >= k.tb {
			return
		}
		b.Comment("Zero the received CB's pages once: only live rows are read into them.")
		b.CBReserveBack(cbIn1, kir.Ci(pages))
		blocks.FillWords(b, kir.GetWritePtr{CB: cbIn1}, pages*k.tb, 0)
	}
	if !k.compact {
		zeroReceived()
	}
	arrived := b.Let("arrived_sem", kir.GetSemaphore{ID: kir.C(cclSemArrived)})
	// packed is the staging address of byte coff of link-local tile i's
	// packed wire segments (compact).
	packed := func(i kir.Expr, coff int) kir.Expr {
		return kir.Add(kir.Add(staging, kir.Mul(i, kir.Ci(pl.WireBytes))), kir.Ci(coff))
	}
	// received reads the segments of the packet's tile t (link-local tile
	// base + t) into dst.
	received := func(base, t kir.Expr, dst kir.Expr) {
		coff := 0
		for _, sg := range k.segs {
			at := kir.Add(kir.Add(staging, kir.Mul(t, kir.Ci(k.tb))), kir.Ci(sg.Off))
			if k.compact {
				at = packed(kir.Add(base, t), coff)
			}
			b.NoCAsyncRead(kir.NoCAddr{X: ex, Y: ey, Addr: at}, kir.Add(dst, kir.Ci(sg.Off)), kir.Ci(sg.Size))
			coff += sg.Size
		}
	}
	// packLocal writes the segments of the n local tiles at l0 (packet
	// tiles tileOf(j)) into the sender's packed staging and waits for the
	// writes; tellSender then counts this adder in the sender's semaphore.
	packLocal := func(base kir.Var, n kir.Expr, l0 kir.Expr, tileOf func(j kir.Var) kir.Expr) {
		b.For("j", kir.C(0), n, func(j kir.Var) {
			coff := 0
			for _, sg := range k.segs {
				at := packed(kir.Add(base, tileOf(j)), coff)
				b.NoCAsyncWrite(kir.Add(kir.Add(l0, kir.Mul(j, kir.Ci(k.tb))), kir.Ci(sg.Off)), kir.NoCAddr{X: px, Y: py, Addr: at}, kir.Ci(sg.Size))
				coff += sg.Size
			}
		})
		b.NoCAsyncWriteBarrier()
	}
	tellSender := func() {
		b.NoCSemaphoreInc(kir.NoCAddr{X: px, Y: py, Addr: kir.GetEthSemaphore{ID: kir.C(cclSemEth)}}, kir.C(1))
	}
	if k.batched {
		b.Comment("One reduce step, every tile of this adder in its CBs: per packet the local (and residual) tiles are read before the packet arrives, then the received rows, all under one barrier.")
		kk := b.Let("chunk", k.chunkIndex(dev, kir.C(0), 2))
		k.packets(b, count, func(base, cnt kir.Var) {
			n := k.laneCount(b, cnt, lane)
			// A lane with no tile of a short packet still takes part in the
			// handshake.
			b.IfElse(kir.Gt(n, kir.C(0)), func() {
				b.CBReserveBack(cbIn0, n)
				l0 := b.Let("local_base", kir.GetWritePtr{CB: cbIn0})
				var r0 kir.Var
				if k.residual != nil {
					b.CBReserveBack(cbIn2, n)
					r0 = b.Let("residual_base", kir.GetWritePtr{CB: cbIn2})
				}
				tileOf := func(j kir.Var) kir.Expr { return kir.Add(lane, kir.Mul(j, kir.Ci(m))) }
				pageOf := func(j kir.Var) kir.Expr { return k.page(kk, kir.Add(kir.Add(first, base), tileOf(j))) }
				readResidual := func() {
					if k.residual == nil {
						return
					}
					b.For("j", kir.C(0), n, func(j kir.Var) {
						b.NoCAsyncRead(k.dram(ra, pageOf(j)), kir.Add(r0, kir.Mul(j, kir.Ci(k.tb))), kir.Ci(k.tb))
					})
				}
				b.For("j", kir.C(0), n, func(j kir.Var) {
					b.NoCAsyncRead(k.dram(xa, pageOf(j)), kir.Add(l0, kir.Mul(j, kir.Ci(k.tb))), kir.Ci(k.tb))
				})
				if k.compact {
					b.Comment("this adder's local segments into the sender's packed staging (first: the sender waits for them), then the residual and the received CB's zeros")
					b.NoCAsyncReadBarrier()
					packLocal(base, n, l0, tileOf)
					tellSender()
					readResidual()
					b.If(kir.Eq(base, kir.C(0)), zeroReceived)
				} else {
					readResidual()
				}
				b.NoCSemaphoreWait(arrived, kir.C(1))
				b.NoCSemaphoreSet(arrived, kir.C(0))
				b.CBReserveBack(cbIn1, n)
				in1 := b.Let("received_base", kir.GetWritePtr{CB: cbIn1})
				b.For("j", kir.C(0), n, func(j kir.Var) {
					received(base, tileOf(j), kir.Add(in1, kir.Mul(j, kir.Ci(k.tb))))
				})
				b.NoCAsyncReadBarrier()
				b.CBPushBack(cbIn0, n)
				b.CBPushBack(cbIn1, n)
				if k.residual != nil {
					b.CBPushBack(cbIn2, n)
				}
			}, func() {
				if k.compact {
					tellSender()
				}
				b.NoCSemaphoreWait(arrived, kir.C(1))
				b.NoCSemaphoreSet(arrived, kir.C(0))
			})
			b.NoCSemaphoreInc(kir.NoCAddr{X: ex, Y: ey, Addr: kir.GetEthSemaphore{ID: kir.C(cclSemEth)}}, kir.C(1))
		})
	} else {
		b.For("s", kir.C(0), kir.Ci(pl.ReduceSteps), func(s kir.Var) {
			kk := b.Let("chunk", k.chunkIndex(dev, s, 2))
			k.packets(b, count, func(base, cnt kir.Var) {
				b.NoCSemaphoreWait(arrived, kir.C(1))
				b.NoCSemaphoreSet(arrived, kir.C(0))
				lanes(b, lane, cnt, func(t kir.Var) {
					i := kir.Add(kir.Add(first, base), t)
					b.CBReserveBack(cbIn0, kir.C(1))
					b.NoCAsyncRead(k.dram(xa, k.page(kk, i)), kir.GetWritePtr{CB: cbIn0}, kir.Ci(k.tb))
					b.CBReserveBack(cbIn1, kir.C(1))
					received(base, t, kir.GetWritePtr{CB: cbIn1})
					if k.residual != nil {
						b.CBReserveBack(cbIn2, kir.C(1))
						b.NoCAsyncRead(k.dram(ra, k.page(kk, i)), kir.GetWritePtr{CB: cbIn2}, kir.Ci(k.tb))
					}
					b.NoCAsyncReadBarrier()
					b.CBPushBack(cbIn0, kir.C(1))
					b.CBPushBack(cbIn1, kir.C(1))
					if k.residual != nil {
						b.CBPushBack(cbIn2, kir.C(1))
					}
				})
				b.NoCSemaphoreInc(kir.NoCAddr{X: ex, Y: ey, Addr: kir.GetEthSemaphore{ID: kir.C(cclSemEth)}}, kir.C(1))
			})
		})
	}

	// Compute: sum = local + received.
	cp := k.p.AddKernel(&kir.Kernel{Name: "compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: rs,
		Compute: kir.ComputeConfig{MathFidelity: k.ctx.Fidelity, FP32DestAccEn: k.x.Type.DType == ir.FP32}})
	ccount, clane := cp.RuntimeArg("num_tiles"), cp.RuntimeArg("lane")
	if k.residual != nil {
		k.residualCompute(cp, ccount, clane)
	} else {
		k.sumCompute(cp, ccount, clane)
	}

	// Writer: partial sums to the sender's forwarding slot, the final sum
	// to the output (and, for all_reduce, to the slot the gather sends).
	wr := k.p.AddKernel(&kir.Kernel{Name: "writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: rs})
	fwd0 := wr.CompileArg("fwd0_addr", uint32(k.fwd0))
	fwd1 := wr.CompileArg("fwd1_addr", uint32(k.fwd1))
	wdev := wr.CommonArg("device_id", kir.DeviceID())
	oa := wr.CommonArg("out_addr", kir.BufferAddr(k.outName, 0))
	wfirst, wcount, wlane := wr.RuntimeArg("first_tile"), wr.RuntimeArg("num_tiles"), wr.RuntimeArg("lane")
	sx, sy := cclNoCArgs(wr, "sender")
	b = wr.Builder()
	fwdFree := b.Let("fwd_free_sem", kir.GetSemaphore{ID: kir.C(cclSemFwdFree)})
	toSlot := func(slot kir.Expr, base, t kir.Var) {
		j := kir.Add(base, t)
		coff := 0
		for _, sg := range k.segs {
			dst := kir.NoCAddr{X: sx, Y: sy, Addr: kir.Add(kir.Add(slot, kir.Mul(j, kir.Ci(pl.WireBytes))), kir.Ci(coff))}
			b.NoCAsyncWrite(kir.Add(kir.GetReadPtr{CB: cbOut}, kir.Ci(sg.Off)), dst, kir.Ci(sg.Size))
			coff += sg.Size
		}
	}
	signal := func() {
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreInc(kir.NoCAddr{X: sx, Y: sy, Addr: kir.GetEthSemaphore{ID: kir.C(cclSemEth)}}, kir.C(1))
	}
	slotOf := func(s kir.Expr) kir.Expr { return kir.Add(fwd0, kir.Mul(kir.Mod(s, kir.C(2)), kir.Sub(fwd1, fwd0))) }
	if pl.ReduceSteps > 1 {
		b.Comment("Intermediate reduce steps: the partial sum goes to the sender's forwarding slot s % 2.")
		b.For("s", kir.C(0), kir.Ci(pl.ReduceSteps-1), func(s kir.Var) {
			b.If(kir.Ge(s, kir.C(2)), func() { b.NoCSemaphoreWaitMin(fwdFree, kir.Sub(s, kir.C(1))) })
			slot := b.Let("slot", slotOf(s))
			k.packets(b, wcount, func(base, cnt kir.Var) {
				lanes(b, wlane, cnt, func(t kir.Var) {
					b.CBWaitFront(cbOut, kir.C(1))
					toSlot(slot, base, t)
					b.NoCAsyncWriteBarrier()
					b.CBPopFront(cbOut, kir.C(1))
				})
			})
			signal()
		})
	}
	last := pl.ReduceSteps - 1
	b.Comment("Last reduce step: the sum of this card's chunk.")
	toFwd := k.kind == cclAllReduce && pl.GatherSteps > 0
	if toFwd && last >= 2 {
		b.NoCSemaphoreWaitMin(fwdFree, kir.Ci(last-1))
	}
	kk := b.Let("chunk", k.chunkIndex(wdev, kir.Ci(last), 2))
	var pa multicore.PushArgs
	if k.batched {
		var pushBase kir.Var
		if k.push != nil {
			pa = multicore.DeclarePushArgs(wr, k.adderTiles)
			b.Comment("Wait for the tail's h CB address (its first core publishes it).")
			pushBase = multicore.AwaitAddress(b, cclSemPushAddr)
		}
		b.Comment("Every sum tile of a packet written under one barrier (the CB holds them all).")
		k.packets(b, wcount, func(base, cnt kir.Var) {
			n := k.laneCount(b, cnt, wlane)
			b.If(kir.Gt(n, kir.C(0)), func() {
				out0 := b.Let("sum_base", kir.GetReadPtr{CB: cbOut})
				b.For("j", kir.C(0), n, func(j kir.Var) {
					pg := kir.Expr(kir.Add(kir.Add(wfirst, base), kir.Add(wlane, kir.Mul(j, kir.Ci(m)))))
					if k.kind == cclAllReduce {
						pg = k.page(kk, pg)
					}
					b.CBWaitFront(cbOut, kir.Add(j, kir.C(1)))
					b.NoCAsyncWrite(kir.Add(out0, kir.Mul(j, kir.Ci(k.tb))), k.dram(oa, pg), kir.Ci(k.tb))
				})
				if k.push != nil {
					b.Comment("the live rows of every sum tile into its page of the owning tail core's h CB")
					pa.Writes(b, n, out0, pushBase, k.tb, k.segs)
				}
				b.NoCAsyncWriteBarrier()
				if k.push != nil {
					pa.Counts(b, n, cclSemTail)
				}
				b.CBPopFront(cbOut, n)
			})
		})
	} else {
		k.packets(b, wcount, func(base, cnt kir.Var) {
			lanes(b, wlane, cnt, func(t kir.Var) {
				i := kir.Add(kir.Add(wfirst, base), t)
				pg := kir.Expr(i)
				if k.kind == cclAllReduce {
					pg = k.page(kk, i)
				}
				b.CBWaitFront(cbOut, kir.C(1))
				b.NoCAsyncWrite(kir.GetReadPtr{CB: cbOut}, k.dram(oa, pg), kir.Ci(k.tb))
				if toFwd {
					toSlot(slotOf(kir.Ci(last)), base, t)
				}
				b.NoCAsyncWriteBarrier()
				b.CBPopFront(cbOut, kir.C(1))
			})
		})
	}
	if toFwd {
		signal()
	}
	if nx, ny, ok := k.notifyArgs(wr); ok {
		k.emitNotify(b, nx, ny)
	}

	for l, cores := range k.workers {
		f, n := k.linkRange(l)
		for j, c := range cores {
			lv := kir.U32(uint32(j))
			rv := []kir.ArgValue{kir.U32(uint32(f)), kir.U32(uint32(n)), lv, kir.NoCX(k.west[l]), kir.NoCY(k.west[l])}
			if k.compact {
				rv = append(rv, kir.NoCX(k.east[l]), kir.NoCY(k.east[l]))
			}
			rd.SetRuntimeArgs(c, rv...)
			cp.SetRuntimeArgs(c, kir.U32(uint32(n)), lv)
			wv := []kir.ArgValue{kir.U32(uint32(f)), kir.U32(uint32(n)), lv, kir.NoCX(k.east[l]), kir.NoCY(k.east[l])}
			if k.push != nil {
				wv = append(wv, k.push.Values(k.adderTiles, k.tb, func(s int) int {
					if t := j + s*m; t < n {
						return f + t
					}
					return -1
				})...)
			}
			wr.SetRuntimeArgs(c, wv...)
		}
	}
}

// laneCount emits n, the number of the packet's cnt tiles that fall to
// lane (tiles lane, lane+M, ... below cnt), and returns it.
func (k *cclKernels) laneCount(b *kir.Builder, cnt, lane kir.Expr) kir.Var {
	m := kir.Ci(k.plan.WorkersPerLink)
	n := b.LetT("lane_tiles", kir.U32T, kir.C(0))
	b.If(kir.Gt(cnt, lane), func() {
		b.Assign(n, kir.Div(kir.Add(kir.Sub(cnt, lane), kir.Sub(m, kir.C(1))), m))
	})
	return n
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
	pl := k.plan
	m := pl.WorkersPerLink
	lanes := func(b *kir.Builder, lane kir.Expr, cnt kir.Var, body func(t kir.Var)) {
		b.ForStep("t", lane, cnt, kir.Ci(m), body)
	}
	b := cp.Builder()
	b.HWStartup(cbIn0, cbIn1, cbOut)
	b.BinaryInit(kir.EltAdd, cbIn0, cbIn1)
	b.For("s", kir.C(0), kir.Ci(pl.ReduceSteps), func(kir.Var) {
		k.packets(b, ccount, func(_, cnt kir.Var) {
			lanes(b, clane, cnt, func(kir.Var) {
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
		k.packets(c.B, ccount, func(_, cnt kir.Var) {
			c.ForStep("t", clane, cnt, kir.Ci(m), func(kir.Var) {
				c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbIn0, cbIn1, cbIm0, false, nil)
				c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbIn2, cbIm0, cbOut, false, nil)
			})
		})
	})
}
