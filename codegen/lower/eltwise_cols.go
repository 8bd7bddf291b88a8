package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// maxColsRowTiles bounds the width in tiles of a result computed by tile
// rows (bcastColsProgram): its in0 and out CBs hold two rows each.
const maxColsRowTiles = 8

// colsRows reports whether a binary op whose second operand in1
// broadcasts its column (bcast cols) runs by result tile rows
// (bcastColsProgram): the result is 2 to maxColsRowTiles tiles wide, so
// the column tile pairs with several result tiles in a row.
func colsRows(bc blocks.Bcast, out *ir.Value, in1 eltInput) bool {
	ct := blocks.ImageOf(out.Type.Shape).Ct
	return bc == blocks.BcastCols && !in1.zeroPad && ct > 1 && ct <= maxColsRowTiles
}

// bcastColsProgram is eltwiseProgram for a binary op whose second operand
// broadcasts its column 0 over the result's columns (bcast cols): one page
// of in1 serves a whole result tile row. The work items are the result's
// tile rows (Ct tiles each). Per row the reader issues the row's Ct pages
// of in0 and the one page of in1 at once, with one barrier; compute holds
// the in1 page for the row's Ct tiles (DEST[0] = in0 op bcast_cols(in1),
// negated when negate is set), then pops it; the writer stores the row
// with its writes in flight at once, one barrier.
// Each result tile is computed as eltwiseProgram computes it (the same FPU
// op on the same tiles), so the results are the same bit for bit; only
// in1 is read once per row instead of once per tile.
func bcastColsProgram(op *ir.Op, ctx *Context, in0, in1 eltInput, eop kir.EltwiseOp, negate bool) (*kir.Program, error) {
	out := op.Result()
	oi := blocks.ImageOf(out.Type.Shape)
	ct := oi.Ct
	rows := oi.Pages / ct
	// A row costs the core a read round trip and a write round trip (its
	// reads in flight at once, its writes too), or its compute: spread the
	// rows by that, with no DRAM floor (which kept 24 cores, 24.6 us
	// predicted for the 27B's [1,24,8,32,128] fp32; 64 cores: 16.2 us).
	perRow := max(2*DRAMReadLatencyCycles, ct*(2*UnpackTileCycles+EltwiseTileCycles+PackTileCycles))
	s := startProgram(op, ctx, PlanSplit(rows, ctx.Target.NumWorkers(), perRow, 0, 0))
	cb0 := s.cbs.Input("in0", in0.v.Type.DType, 2*ct)
	cb1 := s.cbs.Input("in1", in1.v.Type.DType, 2)
	outCB := s.cbs.Output("out", out.Type.DType, 2*ct)
	s.planned("eltwise")

	rd := s.reader()
	a0, a1 := s.bind(rd, "in0_addr", in0.v), s.bind(rd, "in1_addr", in1.v)
	rstart, rcount := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(rstart, i), kir.Ci(ct)))
		l0 := blocks.Reserve(b, cb0, kir.Ci(ct), "l0")
		l1 := blocks.Reserve(b, cb1, kir.C(1), "l1")
		b.For("t", kir.C(0), kir.Ci(ct), func(t kir.Var) {
			blocks.ReadPageTo(b, a0, pageFor(in0.page, kir.Add(first, t)), kir.Add(l0, kir.Mul(t, kir.Ci(in0.v.Type.DType.TileBytes()))))
		})
		blocks.ReadPageTo(b, a1, pageFor(in1.page, first), l1)
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cb0, kir.Ci(ct))
		b.CBPushBack(cb1, kir.C(1))
	})

	cp, c, ccount := s.rangeCompute("num_rows")
	c.Startup(cb0, cb1, outCB)
	var steps []blocks.SFPUStep
	if negate {
		steps = []blocks.SFPUStep{{Op: kir.SFPUNegative}}
	}
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		c.B.CBWaitFront(cb1, kir.C(1))
		c.For("t", kir.C(0), kir.Ci(ct), func(kir.Var) {
			c.B.CBWaitFront(cb0, kir.C(1))
			c.Acquire()
			c.Binary(eop, blocks.BcastCols, cb0, cb1, kir.C(0), kir.C(0), kir.C(0))
			for _, st := range steps {
				c.SFPU(st, kir.C(0))
			}
			c.B.CBPopFront(cb0, kir.C(1))
			c.PackOut(outCB, 1)
		})
		c.B.CBPopFront(cb1, kir.C(1))
	})
	wr, oAcc := s.writerOf("out_addr", out)
	wstart, wrows := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
	w := wr.Builder()
	w.For("i", kir.C(0), wrows, func(i kir.Var) {
		first := w.Let("first", kir.Mul(kir.Add(wstart, i), kir.Ci(ct)))
		blocks.WritePagesBatch(w, oAcc, outCB, kir.Ci(ct), func(t kir.Expr) kir.Expr { return kir.Add(first, t) })
	})
	s.plan.SetArgs(s.cores, rd, cp, wr)
	return s.done(s.p)
}
