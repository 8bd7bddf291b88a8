package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// normSplit is the split-row RMSNorm shared by rms_norm and
// rms_norm_plain (norm.go), add_rmsnorm (fused_common.go) and the
// all_reduce_add_rmsnorm tail (fused_collective.go): every tile row gets
// a group of group consecutive cores (row-major), core k of a group takes
// tiles [k*per, min((k+1)*per, wt)) of the row, and the partial sums of
// squares are exchanged between the group's cores (multicore.Exchange;
// see the family doc in norm.go). The caller owns how x reaches CB x
// (read, or computed and packed), writes the results and adds the
// exchange's semaphores (ex.AddSemaphores); normSplit adds the exchange's
// CBs and emits its compute and writer parts.
type normSplit struct {
	t           *target.Target
	rows, wt    int // tile rows, tiles per row
	group, per  int // cores per row, tiles per core (the last core of a group may have fewer)
	fan         int // the exchange's subgroup size (multicore.Exchange.Fan; 0: one level)
	h           int
	eps, offset float64
	// live is the rows of a tile that hold data (blocks.LiveRows; 0 or 32
	// when unknown): the exchange moves only the row sums of those rows.
	live   int
	cores  []kir.Core // group g is cores[g*group : (g+1)*group]; cores[g*group] leads it
	ranges []ir.CoreRange
	cb     normCBs
	// ex exchanges the row sums of squares and the rsqrt tile between a
	// group's cores (its CBs from addCBs, its semaphores from
	// ex.AddSemaphores).
	ex multicore.Exchange
	// weightsDone records that prepareWeights emitted step 3's weight +
	// offset phase already (scaleChunk then skips it).
	weightsDone bool
}

// planNormSplit returns the split-row plan for rows tile rows of wt tiles
// on at most avail cores starting at worker index first, or nil when one
// core per row (or fewer) is as good: too many rows for two cores each,
// or a row too short to pay for the exchange. perTile is one tile's
// compute estimate in cycles.
func planNormSplit(t *target.Target, rows, wt, first, avail, perTile int) *normSplit {
	if rows < 1 || 2*rows > avail {
		return nil
	}
	s := PlanNormSplit(wt, avail/rows, perTile)
	if s.Cores < 2 {
		return nil
	}
	ns := &normSplit{t: t, rows: rows, wt: wt, group: s.Cores, per: s.PerCore, fan: NormExchangeFan(s.Cores), live: ir.TileSize}
	ns.cores, ns.ranges = blocks.CoresFrom(t, first, rows*ns.group)
	return ns
}

// rowSplit is the plan's chunking as the reference evaluator reads it
// (kir.Program.RowSplit): per tiles a core, the exchange's fan.
func (ns *normSplit) rowSplit() *kir.RowSplit {
	return &kir.RowSplit{Per: ns.per, Fan: ns.fan}
}

// chunk is the tile range of core i of the plan: its x pages start at
// page (the row's first page plus the chunk's), its weight pages at col.
func (ns *normSplit) chunk(i int) (page, col, count int) {
	g, k := i/ns.group, i%ns.group
	col = k * ns.per
	count = min(ns.per, ns.wt-col)
	return g*ns.wt + col, col, count
}

// addCBs adds the norm's CBs besides x, the scaler and out (which the
// caller allocated on ns.ranges, x with ns.per pages): the weight chunk
// (wdt, -1 dtype-less when w is nil), squares, the received rsqrt (the
// exchange's Result), x * rsqrt, weight + offset, and the exchange's CBs:
// partial (the chunk's fp32 row sums of squares in column 0), the group's
// partials on leaders and the leader's rsqrt tile (on two levels: a
// sub-leader's subgroup sum and every core's subgroups' sums).
func (ns *normSplit) addCBs(cbs *blocks.CBPlan, x, scaler, out int, w *ir.Value, sq ir.DType) {
	n := normCBs{x: x, scaler: scaler, out: out, w: -1, wo: -1, xn: -1}
	if w != nil {
		n.w = cbs.Input("norm_weight", w.Type.DType, ns.per)
		pages := 2
		if ns.batched() {
			pages = ns.per
		}
		n.xn = cbs.Scratch("x_normed", ir.FP32, pages)
		if ns.offset != 0 {
			n.wo = cbs.Scratch("weight_plus_offset", ir.FP32, pages)
		}
	}
	n.sq = cbs.Scratch("x_squared", sq, ns.per)
	n.rs = cbs.Input("rsqrt_mean", ir.FP32, 1)
	ns.cb = n
	ns.ex = multicore.Exchange{T: ns.t, Group: ns.group, Fan: ns.fan, Cores: ns.cores, Ranges: ns.ranges, Result: n.rs,
		Page: ir.FP32.TileBytes(), Bytes: rowSumBytes(ns.live),
		PartialName: "partial sums (column 0 of its live rows)", ResultName: "rsqrt tile"}
	ns.ex.Partial = cbs.Output("partial_sums", ir.FP32, 1)
	ns.ex.Gather = cbs.Input("group_partial_sums", ir.FP32, ns.ex.GatherPages())
	if n := ns.ex.SumsPages(); n > 0 {
		ns.ex.Local = cbs.Output("subgroup_sum", ir.FP32, 1)
		ns.ex.Sums = cbs.Input("subgroup_sums", ir.FP32, n)
	} else {
		ns.ex.Local = cbs.Output("rsqrt_local", ir.FP32, 1)
	}
}

// maxBatchedNormTiles bounds the chunk whose step 3 runs phase by phase
// (batched): its x * rsqrt and weight + offset tiles are all resident.
const maxBatchedNormTiles = 16

// batched reports whether step 3 runs phase by phase on the whole chunk
// (scaleChunk) rather than tile by tile (normCBs.scale).
func (ns *normSplit) batched() bool { return ns.per <= maxBatchedNormTiles }

// outPages is the depth of a result CB of the chunk: the whole chunk when
// step 3 is batched (the writer then issues every write as its tile
// arrives and waits once, writeChunk), else two.
func (ns *normSplit) outPages() int {
	if ns.batched() {
		return ns.per
	}
	return 2
}

// writeChunk emits the writer's stores of the count result tiles of cb
// (outPages deep) to pages start.. of a: one barrier for the chunk when
// batched, else a barrier per tile. Batched, a tile of few live rows
// (ns.live) is written as those rows (blocks.WriteTilesLive; its padding
// rows are no reader's). The writer calls it once per result CB.
func (ns *normSplit) writeChunk(b *kir.Builder, a *blocks.Access, cb int, start, count kir.Expr) {
	if !ns.batched() {
		blocks.WritePages(b, a, cb, start, count)
		return
	}
	b.If(kir.Gt(count, kir.C(0)), func() {
		if eb := blocks.ElemBytes(a.Buf.DType); ns.live > 0 && ns.live < ir.TileSize && (eb == 2 || eb == 4) {
			blocks.WriteTilesLive(b, a, cb, start, count, ns.live, eb, ns.outPages(), b.LetT("out_pos", kir.U32T, kir.C(0)))
			return
		}
		blocks.WritePagesBatch(b, a, cb, count, func(i kir.Expr) kir.Expr { return kir.Add(start, i) })
	})
}

// issueWeights reserves count pages of the weight CB and issues the reads
// of the weight chunk's live row (the weight is a row vector: compute
// broadcasts its row 0); pushWeights pushes them after the caller's
// barrier. Both do nothing without a weight.
func (ns *normSplit) issueWeights(b *kir.Builder, wAcc *blocks.Access, col, count kir.Expr) {
	if ns.cb.w < 0 {
		return
	}
	l1 := blocks.Reserve(b, ns.cb.w, count, "wl1")
	blocks.ReadTilesLive(b, wAcc, l1, col, count, 1, blocks.ElemBytes(wAcc.Buf.DType))
}

func (ns *normSplit) pushWeights(b *kir.Builder, count kir.Expr) {
	if ns.cb.w >= 0 {
		b.CBPushBack(ns.cb.w, count)
	}
}

// compute emits the core's norm compute on its count x tiles (x must have
// been pushed or be pushed as it runs; the scaler waited for): the squares
// of the chunk reduced in column order into one fp32 tile of row sums,
// packed to partial for the writer; on a leader the sum of the group's
// Group partials the writer gathered, in core order with add_binary_tile
// (fp32 exact: the partials unpack straight to DEST; on two levels per
// subgroup on its sub-leader, then the subgroups' sums on every core), /
// H + eps, rsqrt packed to rsLocal (leader is ns.ex.ComputeDeclare's
// argument); then step 3 with the rsqrt tile the
// writer delivers to rs. Pushes count tiles to out, pops the x tiles.
func (ns *normSplit) compute(c *blocks.Compute, count, leader kir.Expr) {
	n := ns.cb
	c.B.CBWaitFront(n.x, count)
	n.sumSquares(c, count, "this core's row sums of x^2, to the writer (it sends them to the leader)")
	c.PackOut(ns.ex.Partial, 1)
	c.B.CBPopFront(n.sq, count)
	what := "leader: the group's partial sums (the writer gathered them), added in core order in fp32 on the SFPU; rsqrt(sum / H + eps)"
	if ns.ex.Subs() > 1 {
		what = "a sub-leader: its subgroup's partial sums (the writer gathered them), added in core order in fp32 on the SFPU; every core then adds the subgroups' sums in order, rsqrt(sum / H + eps)"
	}
	ns.ex.Combine(c, leader, what, func() { n.rsqrtOf(c, ns.h, ns.eps) }, func() { ns.prepareWeights(c, count) })
	if ns.batched() && n.w >= 0 {
		ns.scaleChunk(c, count)
	} else {
		n.scale(c, count, ns.offset)
	}
	c.B.CBPopFront(n.x, count)
}

// scaleChunk is normCBs.scale with a weight, phase by phase over the
// chunk's count tiles, each phase one configuration (no init per tile):
// weight + offset for every tile (before the rsqrt is waited for, so a
// follower does it while its leader sums), then x * rsqrt into xn, then
// xn * weight to out. The roundings are scale's: x * rsqrt and weight +
// offset are packed to fp32 CBs, the product to out's format.
func (ns *normSplit) scaleChunk(c *blocks.Compute, count kir.Expr) {
	n := ns.cb
	wCB := n.w
	if n.wo >= 0 {
		wCB = n.wo
		ns.prepareWeights(c, count)
	}
	c.B.CBWaitFront(n.rs, kir.C(1))
	c.B.Comment("x * rsqrt (column broadcast), the chunk")
	c.For("j", kir.C(0), count, func(j kir.Var) {
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastCols, n.x, n.rs, j, kir.C(0), kir.C(0))
		c.PackOut(n.xn, 1)
	})
	c.B.CBPopFront(n.rs, kir.C(1))
	c.B.Comment("* weight (row broadcast)")
	c.For("j", kir.C(0), count, func(kir.Var) {
		c.BinaryTile(kir.EltMul, blocks.BcastRows, n.xn, wCB, n.out, false, nil)
	})
}

// prepareWeights emits step 3's weight + offset phase over the chunk's
// count weight tiles (batched plans with an offset; else nothing) unless
// it was emitted already. Callers emit it first thing, before compute
// waits for x: the weights are read before the data x depends on, so the
// phase runs while the core would otherwise wait. Pops count weight
// pages, pushes count weight_plus_offset pages.
func (ns *normSplit) prepareWeights(c *blocks.Compute, count kir.Expr) {
	n := ns.cb
	if ns.weightsDone || !ns.batched() || n.w < 0 || n.wo < 0 {
		return
	}
	ns.weightsDone = true
	c.B.Comment("weight + offset, the chunk")
	c.For("j", kir.C(0), count, func(kir.Var) {
		c.Unary(n.w, n.wo, []blocks.SFPUStep{{Op: kir.SFPUAddScalar, Param: float32(ns.offset)}})
	})
}

// rowSumBytes is the bytes of an fp32 tile of row sums (column 0) that
// hold live rows (blocks.LiveRows): live rows r < 16 are the first
// live*64 bytes of face 0; with rows past 16 the whole tile.
func rowSumBytes(live int) int {
	if live > 0 && live < blocks.FaceDim {
		return live * blocks.FaceDim * 4
	}
	return ir.FP32.TileBytes()
}

// addRMSNormSplit is lowerAddRMSNorm on ns's split-row plan: core i reads
// its chunk of a and b in pairs and its weight chunk, computes h = r(a +
// b) tile by tile (to the writer and kept as the norm's x chunk), and runs
// the split-row norm; the writer writes the h chunk, runs the exchange,
// then writes the normed chunk.
func addRMSNormSplit(op *ir.Op, ctx *Context, ns *normSplit) (*kir.Program, error) {
	a, bv, w := op.Operands[0], op.Operands[1], op.Operands[2]
	h, normed := op.Results[0], op.Results[1]
	sp := startProgramOn(op, ctx, ns.cores, ns.ranges)
	cbA := sp.cbs.Input("a", a.Type.DType, 2)
	cbB := sp.cbs.Input("b", bv.Type.DType, 2)
	cbScaler := sp.cbs.Input("scaler", ir.BF16, 1)
	cbHOut := sp.cbs.Output("h", h.Type.DType, 2)
	cbNOut := sp.cbs.Output("normed", normed.Type.DType, 2)
	cbH := sp.cbs.Scratch("h_row", h.Type.DType, ns.per)
	ns.addCBs(sp.cbs, cbH, cbScaler, cbNOut, w, ir.FP32)
	sp.planned(fmt.Sprintf("add_rmsnorm over H = %d split over %d cores per tile row", ns.h, ns.group))
	ns.ex.AddSemaphores(sp.p, 0, 1, 2)
	sp.p.RowSplit = ns.rowSplit()

	rd := sp.reader()
	aAcc, bAcc, wAcc := sp.bind(rd, "a_addr", a), sp.bind(rd, "b_addr", bv), sp.bind(rd, "w_addr", w)
	rstart, rcol, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("col"), rd.RuntimeArg("count")
	b := rd.Builder()
	blocks.OnesColumnTile(b, cbScaler)
	b.For("j", kir.C(0), rcount, func(j kir.Var) {
		blocks.ReadPage(b, aAcc, cbA, kir.Add(rstart, j))
		blocks.ReadPage(b, bAcc, cbB, kir.Add(rstart, j))
	})
	ns.issueWeights(b, wAcc, rcol, rcount)
	b.NoCAsyncReadBarrier()
	ns.pushWeights(b, rcount)

	cp, c := sp.compute()
	ccount, cleader := cp.RuntimeArg("count"), ns.ex.ComputeDeclare(cp)
	c.Startup(cbA, cbB, cbH)
	c.B.CBWaitFront(cbScaler, kir.C(1))
	c.B.Comment("h = a + b, stored to the result and kept (rounded) for the norm")
	c.For("j", kir.C(0), ccount, func(kir.Var) {
		c.BinaryTileTo(kir.EltAdd, blocks.BcastNone, cbA, cbB, cbH, cbHOut)
	})
	ns.compute(c, ccount, cleader)
	c.B.CBPopFront(cbScaler, kir.C(1))

	wr := newWriter(sp.p, sp.rs)
	hAcc, nAcc := sp.bind(wr, "h_addr", h), sp.bind(wr, "normed_addr", normed)
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	ea := ns.ex.Declare(wr)
	b = wr.Builder()
	blocks.WritePages(b, hAcc, cbHOut, wstart, wcount)
	ns.ex.Emit(b, ea)
	blocks.WritePages(b, nAcc, cbNOut, wstart, wcount)
	sp.fail(ns.setArgs(op.Name(), rd, cp, wr, nil))
	return sp.done(sp.p)
}

// setArgs sets the per-core runtime arguments of a split-row program
// whose reader takes (start, col, count), compute (count, leader) and
// writer (start, count, exchange arguments); rdExtra (may be nil) gives
// core i's further reader arguments. name is the op's, for errors.
func (ns *normSplit) setArgs(name string, rd, cp, wr *kir.Kernel, rdExtra func(i int) []kir.ArgValue) error {
	for i, core := range ns.cores {
		page, col, n := ns.chunk(i)
		ex, err := ns.ex.Values(i, wr.NoC)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rv := []kir.ArgValue{kir.U32(uint32(page)), kir.U32(uint32(col)), kir.U32(uint32(n))}
		if rdExtra != nil {
			rv = append(rv, rdExtra(i)...)
		}
		rd.SetRuntimeArgs(core, rv...)
		cp.SetRuntimeArgs(core, kir.U32(uint32(n)), ns.ex.ComputeValue(i))
		wr.SetRuntimeArgs(core, append([]kir.ArgValue{kir.U32(uint32(page)), kir.U32(uint32(n))}, ex...)...)
	}
	return nil
}
