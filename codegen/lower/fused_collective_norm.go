package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// buildSplit is build for the norm tail on tl.ns's split-row plan (CBs
// c: splitCBs; build added the ring semaphore and the kernels rd, cp and
// wr): after the ring wait, tail core i reads its chunk of h (or of s and
// the residual, and adds them into h, written out and kept), and the
// split-row norm of norm_split.go runs on the chunk. The tail cores' ring
// semaphore is cclSemTail; the norm's exchange uses semaphores 1 and 2
// (and cclSemNormSub on two levels).
func (tl *cclTail) buildSplit(p *kir.Program, c tailCBs, rd, cp, wr *kir.Kernel) {
	ns := tl.ns
	if tl.pushed != nil {
		p.AddSemaphore(kir.Semaphore{ID: cclSemPushAddr, Cores: tl.ranges})
	}
	ns.ex.AddSemaphores(p, cclSemTail+1, cclSemTail+2, cclSemNormSub)
	p.RowSplit = ns.rowSplit()
	tl.splitReader(rd, c)
	tl.splitCompute(p, cp, c)
	tl.splitWriter(wr, c)
	tl.fail(ns.setArgs(tl.name, rd, cp, wr, tl.ringArgs))
}

// splitCBs adds the split tail's CBs to cbs: c.norm.x is the chunk of h,
// fed by the reader (or, with a residual, by compute from c.s and c.res).
func (tl *cclTail) splitCBs(cbs *blocks.CBPlan) tailCBs {
	ns := tl.ns
	c := tailCBs{s: -1, res: -1, hOut: -1}
	var x int
	if tl.res != nil {
		c.s = cbs.Input("reduced", tl.dt, ns.per)
		c.res = cbs.Input("residual", tl.dt, ns.per)
		x = cbs.Scratch("h_row", tl.dt, ns.per)
	} else {
		x = cbs.Input("h_row", tl.dt, ns.per)
	}
	scaler := cbs.Input("scaler", ir.BF16, 1)
	if tl.res != nil {
		c.hOut = cbs.Output("h", tl.dt, ns.outPages())
	}
	out := cbs.Output("normed", tl.dt, ns.outPages())
	ns.addCBs(cbs, x, scaler, out, tl.w, ir.FP32)
	c.norm = ns.cb
	tl.fail(cbs.Err(fmt.Sprintf("the norm over H = %d split over %d cores per tile row after the ring", ns.h, ns.group)))
	return c
}

// splitReader emits the split tail's reader: the residual and weight
// chunks and the scaler, the ring wait, the reduced chunk (s, or h; with
// a push the ring's adders write it and the reader only counts it).
func (tl *cclTail) splitReader(rd *kir.Kernel, c tailCBs) {
	ns, x, scaler := tl.ns, c.norm.x, c.norm.scaler
	var sAcc *blocks.Access
	if tl.pushed == nil {
		sAcc = tl.bind(rd, "s_addr", tl.s)
	}
	rAcc, wAcc := tl.bind(rd, "residual_addr", tl.res), tl.bind(rd, "w_addr", tl.w)
	fx, fy := tl.ringFollowers(rd)
	var adders []multicore.Slot
	if tl.pushed != nil {
		var err error
		if adders, err = multicore.DeclarePublish(tl.ctx.Target, rd, "adders", tl.pushed); err != nil {
			tl.fail(fmt.Errorf("%s: %w", tl.name, err))
		}
	}
	start, col, count := rd.RuntimeArg("start"), rd.RuntimeArg("col"), rd.RuntimeArg("count")
	b := rd.Builder()
	if tl.pushed != nil {
		leader := rd.RuntimeArg("leader")
		multicore.Publish(b, leader, cclSemPushAddr, x, adders, "tell the ring's adders where this CB is: they push the reduced tiles into it")
	}
	// The residual's and the weight's live rows do not wait for the ring:
	// in flight while the scaler is built. Then the reduced sum's live rows
	// once the ring has delivered it.
	live := blocks.LiveRows(tl.s.Type.Shape)
	if tl.res != nil {
		lr := blocks.Reserve(b, c.res, count, "lr")
		blocks.ReadTilesLive(b, rAcc, lr, start, count, live, blocks.ElemBytes(tl.res.Type.DType))
	}
	ns.issueWeights(b, wAcc, col, count)
	blocks.OnesColumnTile(b, scaler)
	b.NoCAsyncReadBarrier()
	if tl.res != nil {
		b.CBPushBack(c.res, count)
	}
	ns.pushWeights(b, count)
	tl.ringWait(rd, fx, fy)
	sCB := x
	if tl.res != nil {
		sCB = c.s
	}
	b.CBReserveBack(sCB, count)
	if tl.pushed != nil {
		b.Comment("the ring's adders push this core's h tiles (live rows) into this CB; each counts one")
		b.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.Ci(cclSemTail)}, count)
	} else {
		ls := b.Let("ls", kir.GetWritePtr{CB: sCB})
		blocks.ReadTilesLive(b, sAcc, ls, start, count, live, blocks.ElemBytes(tl.s.Type.DType))
		b.NoCAsyncReadBarrier()
	}
	b.CBPushBack(sCB, count)
}

// splitCompute emits the split tail's compute: h = residual + s per tile
// (to the writer and the chunk), then the split-row norm.
func (tl *cclTail) splitCompute(p *kir.Program, cp *kir.Kernel, c tailCBs) {
	ns, n := tl.ns, c.norm
	ccount, cleader := cp.RuntimeArg("count"), ns.ex.ComputeDeclare(cp)
	k := blocks.NewCompute(p, cp)
	if tl.res != nil {
		k.Startup(c.res, c.s, c.hOut)
	} else {
		k.Startup(n.x, n.scaler, n.out)
	}
	ns.prepareWeights(k, ccount)
	k.B.CBWaitFront(n.scaler, kir.C(1))
	if tl.res != nil {
		k.B.Comment("h = residual + s, to the writer and to the resident chunk")
		k.For("j", kir.C(0), ccount, func(kir.Var) { c.addResidual(k) })
	}
	ns.compute(k, ccount, cleader)
	k.B.CBPopFront(n.scaler, kir.C(1))
}

// splitWriter emits the split tail's writer: the h chunk (first: compute
// produces all of it before its squares), the exchange, the normed chunk.
func (tl *cclTail) splitWriter(wr *kir.Kernel, c tailCBs) {
	ns := tl.ns
	hAcc, nAcc, start, count := tl.writerArgs(wr, c)
	ea := ns.ex.Declare(wr)
	b := wr.Builder()
	if hAcc != nil {
		ns.writeChunk(b, hAcc, c.hOut, start, count)
	}
	ns.ex.Emit(b, ea)
	ns.writeChunk(b, nAcc, c.norm.out, start, count)
}
