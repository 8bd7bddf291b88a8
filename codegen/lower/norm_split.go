package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// normSplit is the split-row RMSNorm shared by rms_norm and
// rms_norm_plain (norm.go), add_rmsnorm (fused_common.go) and the
// all_reduce_add_rmsnorm tail (fused_collective.go): every tile row gets
// a group of Group consecutive cores (row-major from First), core k of a
// group takes tiles [k*Per, min((k+1)*Per, wt)) of the row, and the row's
// sum of squares is reduced over the group in two stages (see the family
// doc in norm.go). The caller owns how x reaches CB x (read, or computed
// and packed) and writes the results; normSplit adds the CBs and
// semaphores of the exchange and emits its compute and writer parts.
type normSplit struct {
	t           *target.Target
	rows, wt    int // tile rows, tiles per row
	group, per  int // cores per row, tiles per core (the last core of a group may have fewer)
	h           int
	eps, offset float64
	// live is the rows of a tile that hold data (blocks.LiveRows; 0 or 32
	// when unknown): the exchange moves only the row sums of those rows.
	live   int
	cores  []kir.Core // group g is cores[g*group : (g+1)*group]; cores[g*group] leads it
	ranges []ir.CoreRange
	// semPartial counts the cores whose squares reached a leader, semValid
	// tells a follower that the rsqrt tile is in place.
	semPartial, semValid int
	cb                   normSplitCBs
	// weightsDone records that prepareWeights emitted step 3's weight +
	// offset phase already (scaleChunk then skips it).
	weightsDone bool
}

// normSplitCBs are normCBs (x holds the core's chunk, sq its squares,
// scratch of compute; rs receives the broadcast rsqrt tile: producer the
// writer, consumer compute) plus the exchange CBs: partial (one fp32
// tile, compute -> writer: the chunk's row sums of squares in column 0),
// gather (Group fp32 tiles, only used on leaders: the partials of the
// group, page k from core k; the writer publishes them, compute adds them)
// and rsLocal (one fp32 tile, leaders: compute -> writer, the tile the
// writer broadcasts).
type normSplitCBs struct {
	normCBs
	partial, gather, rsLocal int
}

// maxMcastRects bounds the multicast rectangles of one group (see
// mcastRects); their arguments are fixed slots of the writer.
const maxMcastRects = 6

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
	ns := &normSplit{t: t, rows: rows, wt: wt, group: s.Cores, per: s.PerCore, live: ir.TileSize}
	ns.cores, ns.ranges = coresFrom(t, first, rows*ns.group)
	return ns
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
// (wdt, -1 dtype-less when w is nil), squares, the received rsqrt, x *
// rsqrt, weight + offset, and the exchange CBs.
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
	ns.cb = normSplitCBs{normCBs: n,
		partial: cbs.Output("partial_sums", ir.FP32, 1),
		gather:  cbs.Input("group_partial_sums", ir.FP32, ns.group),
		rsLocal: cbs.Output("rsqrt_local", ir.FP32, 1),
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
// batched, else a barrier per tile.
func (ns *normSplit) writeChunk(b *kir.Builder, a *blocks.Access, cb int, start, count kir.Expr) {
	if !ns.batched() {
		blocks.WritePages(b, a, cb, start, count)
		return
	}
	b.If(kir.Gt(count, kir.C(0)), func() {
		blocks.WritePagesBatch(b, a, cb, count, func(i kir.Expr) kir.Expr { return kir.Add(start, i) })
	})
}

// addSemaphores adds the exchange semaphores (ids a and b, initial 0) on
// the plan's cores.
func (ns *normSplit) addSemaphores(p *kir.Program, a, b int) {
	ns.semPartial, ns.semValid = a, b
	p.AddSemaphore(kir.Semaphore{ID: a, Cores: ns.ranges})
	p.AddSemaphore(kir.Semaphore{ID: b, Cores: ns.ranges})
}

// readWeights emits the reader's weight chunk: count pages of w from page
// col into the weight CB, all in flight. Produces count pages of it.
func (ns *normSplit) readWeights(b *kir.Builder, wAcc *blocks.Access, col, count kir.Expr) {
	if ns.cb.w >= 0 {
		ns.issueWeights(b, wAcc, col, count)
		b.NoCAsyncReadBarrier()
		ns.pushWeights(b, count)
	}
}

// issueWeights reserves count pages of the weight CB and issues the reads
// of the weight chunk's live row (the weight is a row vector: compute
// broadcasts its row 0); pushWeights pushes them after the caller's
// barrier. Both do nothing without a weight.
func (ns *normSplit) issueWeights(b *kir.Builder, wAcc *blocks.Access, col, count kir.Expr) {
	if ns.cb.w < 0 {
		return
	}
	b.CBReserveBack(ns.cb.w, count)
	l1 := b.Let("wl1", kir.GetWritePtr{CB: ns.cb.w})
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
// packed to partial for the writer; on a leader (leader != 0) the sum of
// the group's Group partials the writer gathered, in core order with
// add_binary_tile (fp32 exact: the partials unpack straight to DEST), / H
// + eps, rsqrt packed to rsLocal; then step 3 with the rsqrt tile the
// writer delivers to rs. Pushes count tiles to out, pops the x tiles.
func (ns *normSplit) compute(c *blocks.Compute, count, leader kir.Expr) {
	n := ns.cb
	c.B.CBWaitFront(n.x, count)
	n.sumSquares(c, count, n.partial, "this core's row sums of x^2, to the writer (it sends them to the leader)")
	c.PackOut(n.partial, 1)
	c.B.CBPopFront(n.sq, count)
	c.If(kir.Ne(leader, kir.C(0)), func() {
		c.B.Comment("leader: the group's partial sums (the writer gathered them), added in core order in fp32 on the SFPU; rsqrt(sum / H + eps)")
		g := kir.Ci(ns.group)
		c.B.CBWaitFront(n.gather, g)
		c.Acquire()
		c.Copy(n.gather, kir.C(0), kir.C(0))
		c.For("k", kir.C(1), g, func(k kir.Var) {
			c.Copy(n.gather, k, kir.C(1))
			c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
		})
		n.rsqrtOf(c, ns.h, ns.eps)
		c.PackOut(n.rsLocal, 1)
		c.B.CBPopFront(n.gather, g)
	}, nil)
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

// sumBytes is the bytes of a partial or rsqrt tile the exchange moves:
// the fp32 row sums sit in column 0, so live rows r < 16 are the first
// live*64 bytes of face 0; with rows past 16 the whole tile.
func (ns *normSplit) sumBytes() int {
	if ns.live > 0 && ns.live < blocks.FaceDim {
		return ns.live * blocks.FaceDim * 4
	}
	return ir.FP32.TileBytes()
}

// exchangeArgs declares the writer's per-core exchange arguments (in this
// order; values from exchangeValues).
type exchangeArgs struct {
	leader, slot, lx, ly kir.ArgRef
	rects                [maxMcastRects][5]kir.ArgRef // x0, y0, x1, y1, cores (0: unused slot)
}

func (ns *normSplit) declareExchange(wr *kir.Kernel) exchangeArgs {
	a := exchangeArgs{leader: wr.RuntimeArg("leader"), slot: wr.RuntimeArg("slot"),
		lx: wr.RuntimeArg("leader_x"), ly: wr.RuntimeArg("leader_y")}
	for r := range a.rects {
		for j, f := range []string{"x0", "y0", "x1", "y1", "cores"} {
			a.rects[r][j] = wr.RuntimeArg("mcast" + strconv.Itoa(r) + "_" + f)
		}
	}
	return a
}

// exchangeValues are core i's values for declareExchange's arguments, for
// a writer issuing on NoC noc;
// the first is the leader flag (1 on a group's first core), which the
// compute kernels take too.
func (ns *normSplit) exchangeValues(i, noc int) ([]kir.ArgValue, error) {
	g, k := i/ns.group, i%ns.group
	lead := ns.cores[g*ns.group]
	isLeader := uint32(0)
	var rects []coreRect
	if k == 0 {
		isLeader = 1
		var err error
		if rects, err = followerRects(ns.t, ns.cores[g*ns.group+1:(g+1)*ns.group]); err != nil {
			return nil, err
		}
	}
	vals := []kir.ArgValue{kir.U32(isLeader), kir.U32(uint32(k)), kir.NoCX(lead), kir.NoCY(lead)}
	for r := 0; r < maxMcastRects; r++ {
		if r >= len(rects) {
			vals = append(vals, kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0))
			continue
		}
		vals = append(vals, rects[r].mcastArgs(noc)...)
	}
	return vals, nil
}

// exchange emits the writer's part of the exchange. Every core waits for
// its partial tile, writes it into page slot of the leader's gather CB
// (the CB has one address on every core and is untouched on followers, so
// this core's get_write_ptr is the leader's), waits for the write and
// increments the leader's semPartial. A leader then waits until
// semPartial counts Group, publishes the Group gather pages to compute,
// waits for the rsqrt tile compute packs to rsLocal, multicasts it into rs
// of every follower (one multicast per rectangle, the leader outside all
// of them) and copies it into its own rs, waits for those writes, sets its
// semValid to 1 and multicasts that word to the same rectangles. A
// follower waits until its semValid is 1. Every core then publishes its
// rs page. Consumes one partial page (and on leaders one rsLocal page),
// produces Group gather pages on leaders and one rs page everywhere.
func (ns *normSplit) exchange(b *kir.Builder, a exchangeArgs) {
	n := ns.cb
	tb := kir.Ci(ir.FP32.TileBytes())
	sb := kir.Ci(ns.sumBytes())
	b.Comment("send this core's partial sums (column 0 of its live rows) to its page of the group leader's gather CB")
	b.CBWaitFront(n.partial, kir.C(1))
	row := b.Let("gather_base", kir.GetWritePtr{CB: n.gather})
	b.NoCAsyncWrite(kir.GetReadPtr{CB: n.partial}, kir.NoCAddr{X: a.lx, Y: a.ly, Addr: kir.Add(row, kir.Mul(a.slot, tb))}, sb)
	b.NoCAsyncWriteBarrier()
	b.NoCSemaphoreInc(kir.NoCAddr{X: a.lx, Y: a.ly, Addr: kir.GetSemaphore{ID: kir.Ci(ns.semPartial)}}, kir.C(1))
	b.CBPopFront(n.partial, kir.C(1))
	b.CBReserveBack(n.rs, kir.C(1))
	valid := b.Let("valid_sem", kir.GetSemaphore{ID: kir.Ci(ns.semValid)})
	b.IfElse(kir.Ne(a.leader, kir.C(0)), func() {
		b.Comment("leader: the group's partials in, to compute; then broadcast the rsqrt tile")
		b.CBReserveBack(n.gather, kir.Ci(ns.group))
		b.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.Ci(ns.semPartial)}, kir.Ci(ns.group))
		b.CBPushBack(n.gather, kir.Ci(ns.group))
		b.CBWaitFront(n.rsLocal, kir.C(1))
		src := b.Let("rs_src", kir.GetReadPtr{CB: n.rsLocal})
		dst := b.Let("rs_dst", kir.GetWritePtr{CB: n.rs})
		ns.eachRect(b, a, func(r [5]kir.ArgRef, mc func(kir.Expr) kir.Expr) {
			b.NoCAsyncWriteMulticast(src, mc(dst), sb, r[4])
		})
		blocks.LocalCopy(b, src, dst, ns.sumBytes())
		b.NoCAsyncReadBarrier()
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreSet(valid, kir.C(1))
		ns.eachRect(b, a, func(r [5]kir.ArgRef, mc func(kir.Expr) kir.Expr) {
			b.NoCSemaphoreSetMulticast(valid, mc(valid), r[4])
		})
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(n.rsLocal, kir.C(1))
	}, func() {
		b.Comment("follower: wait for the leader's rsqrt tile")
		b.NoCSemaphoreWait(valid, kir.C(1))
	})
	b.CBPushBack(n.rs, kir.C(1))
}

// eachRect emits f for every used multicast slot (cores != 0); mc turns
// an L1 address into the slot's multicast address.
func (ns *normSplit) eachRect(b *kir.Builder, a exchangeArgs, f func(r [5]kir.ArgRef, mc func(kir.Expr) kir.Expr)) {
	for _, r := range a.rects {
		b.If(kir.Ne(r[4], kir.C(0)), func() {
			f(r, func(addr kir.Expr) kir.Expr {
				return kir.MulticastAddr{X0: r[0], Y0: r[1], X1: r[2], Y1: r[3], Addr: addr}
			})
		})
	}
}

// coreRect is a rectangle of logical worker cores.
type coreRect struct{ x0, y0, x1, y1 int }

func (m coreRect) cores() int { return (m.x1 - m.x0 + 1) * (m.y1 - m.y0 + 1) }

// mcastArgs are the rectangle's five multicast argument values for a
// kernel issuing on NoC noc: its corners in that NoC's order
// (kir.McastCorners), then its number of cores.
func (m coreRect) mcastArgs(noc int) []kir.ArgValue {
	c := kir.McastCorners(noc, kir.Core{X: m.x0, Y: m.y0}, kir.Core{X: m.x1, Y: m.y1})
	return append(c[:], kir.U32(uint32(m.cores())))
}

// followerRects covers exactly cores (consecutive in row-major order) with
// rectangles whose NoC columns and rows are contiguous, so that no
// multicast rectangle spans a DRAM or PCIe column of the NoC (nor, since
// the leader precedes its followers, the sending leader). Rows with the
// same column span merge into one rectangle.
func followerRects(t *target.Target, cores []kir.Core) ([]coreRect, error) {
	nocX := func(c kir.Core) int { nx, _, _ := t.WorkerNoC(c.X, c.Y); return nx }
	nocY := func(y int) int { _, ny, _ := t.WorkerNoC(0, y); return ny }
	var segs []coreRect // runs of one grid row, split at NoC gaps
	for i := 0; i < len(cores); {
		c := cores[i]
		j := i + 1
		for j < len(cores) && cores[j].Y == c.Y && cores[j].X == cores[j-1].X+1 && nocX(cores[j]) == nocX(cores[j-1])+1 {
			j++
		}
		segs = append(segs, coreRect{x0: c.X, y0: c.Y, x1: cores[j-1].X, y1: c.Y})
		i = j
	}
	var out []coreRect
	for _, s := range segs {
		merged := false
		for k := range out {
			o := &out[k]
			if o.x0 == s.x0 && o.x1 == s.x1 && o.y1+1 == s.y0 && nocY(s.y0) == nocY(o.y1)+1 {
				o.y1 = s.y1
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, s)
		}
	}
	if len(out) > maxMcastRects {
		return nil, fmt.Errorf("rule norm-mcast: %d follower cores need %d multicast rectangles, at most %d are supported", len(cores), len(out), maxMcastRects)
	}
	return out, nil
}

// addRMSNormSplit is lowerAddRMSNorm on ns's split-row plan: core i reads
// its chunk of a and b in pairs and its weight chunk, computes h = r(a +
// b) tile by tile (to the writer and kept as the norm's x chunk), and runs
// the split-row norm; the writer writes the h chunk, runs the exchange,
// then writes the normed chunk.
func addRMSNormSplit(op *ir.Op, ctx *Context, ns *normSplit) (*kir.Program, error) {
	t := ctx.Target
	a, bv, w := op.Operands[0], op.Operands[1], op.Operands[2]
	h, normed := op.Results[0], op.Results[1]
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	cbs := blocks.NewCBPlan(p, t, ns.ranges)
	cbA := cbs.Input("a", a.Type.DType, 2)
	cbB := cbs.Input("b", bv.Type.DType, 2)
	cbScaler := cbs.Input("scaler", ir.BF16, 1)
	cbHOut := cbs.Output("h", h.Type.DType, 2)
	cbNOut := cbs.Output("normed", normed.Type.DType, 2)
	cbH := cbs.Scratch("h_row", h.Type.DType, ns.per)
	ns.addCBs(cbs, cbH, cbScaler, cbNOut, w, ir.FP32)
	if err := cbs.Err(fmt.Sprintf("add_rmsnorm over H = %d split over %d cores per tile row", ns.h, ns.group)); err != nil {
		return nil, err
	}
	ns.addSemaphores(p, 0, 1)

	rd := newReader(p, ns.ranges)
	ab := accessBinder{ctx: ctx}
	aAcc, bAcc, wAcc := ab.bind(rd, "a_addr", a), ab.bind(rd, "b_addr", bv), ab.bind(rd, "w_addr", w)
	if ab.err != nil {
		return nil, ab.err
	}
	rstart, rcol, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("col"), rd.RuntimeArg("count")
	b := rd.Builder()
	blocks.ScalerTile(b, cbScaler, 1)
	b.For("j", kir.C(0), rcount, func(j kir.Var) {
		blocks.ReadPage(b, aAcc, cbA, kir.Add(rstart, j))
		blocks.ReadPage(b, bAcc, cbB, kir.Add(rstart, j))
	})
	ns.readWeights(b, wAcc, rcol, rcount)

	cp := newCompute(p, ns.ranges, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	ccount, cleader := cp.RuntimeArg("count"), cp.RuntimeArg("leader")
	c := blocks.NewCompute(p, cp)
	c.Startup(cbA, cbB, cbH)
	c.B.CBWaitFront(cbScaler, kir.C(1))
	c.B.Comment("h = a + b, stored to the result and kept (rounded) for the norm")
	c.For("j", kir.C(0), ccount, func(kir.Var) {
		c.B.CBWaitFront(cbA, kir.C(1))
		c.B.CBWaitFront(cbB, kir.C(1))
		c.Acquire()
		c.Binary(kir.EltAdd, blocks.BcastNone, cbA, cbB, kir.C(0), kir.C(0), kir.C(0))
		c.B.CBPopFront(cbA, kir.C(1))
		c.B.CBPopFront(cbB, kir.C(1))
		c.PackOutTo(cbH, cbHOut)
	})
	ns.compute(c, ccount, cleader)
	c.B.CBPopFront(cbScaler, kir.C(1))

	wr := newWriter(p, ns.ranges)
	wb := accessBinder{ctx: ctx}
	hAcc, nAcc := wb.bind(wr, "h_addr", h), wb.bind(wr, "normed_addr", normed)
	if wb.err != nil {
		return nil, wb.err
	}
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	ea := ns.declareExchange(wr)
	b = wr.Builder()
	blocks.WritePages(b, hAcc, cbHOut, wstart, wcount)
	ns.exchange(b, ea)
	blocks.WritePages(b, nAcc, cbNOut, wstart, wcount)
	return p, ns.setArgs(op.Name(), rd, cp, wr, nil)
}

// setArgs sets the per-core runtime arguments of a split-row program
// whose reader takes (start, col, count), compute (count, leader) and
// writer (start, count, exchange arguments); rdExtra (may be nil) gives
// core i's further reader arguments. name is the op's, for errors.
func (ns *normSplit) setArgs(name string, rd, cp, wr *kir.Kernel, rdExtra func(i int) []kir.ArgValue) error {
	for i, core := range ns.cores {
		page, col, n := ns.chunk(i)
		ex, err := ns.exchangeValues(i, wr.NoC)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rv := []kir.ArgValue{kir.U32(uint32(page)), kir.U32(uint32(col)), kir.U32(uint32(n))}
		if rdExtra != nil {
			rv = append(rv, rdExtra(i)...)
		}
		rd.SetRuntimeArgs(core, rv...)
		cp.SetRuntimeArgs(core, kir.U32(uint32(n)), ex[0]) // ex[0]: leader
		wr.SetRuntimeArgs(core, append([]kir.ArgValue{kir.U32(uint32(page)), kir.U32(uint32(n))}, ex...)...)
	}
	return nil
}
