package lower

import (
	"cmp"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// attn_prologue (passes/fuse_attention.go) as one program. For user b the
// inputs hold one row each: qg [B,1,H*2D] (per head D query then D gate
// columns), k and v [B,1,Hkv*D]. The program works on heads as tile rows:
// a reader gathers the query columns of up to 32 heads of one user into
// the rows of Dt = D/32 tiles (blocks.Gather), so one tile row of work
// normalises and rotates all those heads at once (headNorm, then a matmul
// by the user's RoPE matrix), and the q result [B,H,D] is written tile by
// tile with no further assembly; the writer patches each kv head's k and
// v rows into row pos%32 of its cache tiles.
//
// Work items, per user (in this order): q (one per 32 heads), k (one per
// 32 kv heads), gate, v, and, when a cache result is not written in place,
// one copy item per (cache, kv head) for the cache pages outside tile row
// pos/32. Items are split over the cores; the compute kernel only sees the
// q and k items. In place (the result's buffer is the cache's, ctx.Alias)
// only the B*Hkv*Dt cache tiles of tile row pos/32 of each cache are read
// and rewritten.
//
// The decode and the prefill prologue (fused_prologue_prefill.go) share
// type prologue: the checks, the items and their split, the norm, the
// compute kernel, the cache copies and the q and gate writes; a
// prologueKind adds its reader, RoPE and cache patches.

func lowerAttnPrologue(op *ir.Op, ctx *Context) (*kir.Program, error) {
	pl, err := newPrologue(op, ctx, false)
	if err != nil {
		return nil, err
	}
	return pl.build(&decodePrologue{prologue: pl})
}

// prologueDims are the sizes of one attention prologue (S = 1 in decode).
type prologueDims struct{ B, S, H, Hkv, D, R, L, Dt, St, HRt, KRt, RtR, Lt int }

// attnPrologueDims checks attn_prologue's operand shapes.
func attnPrologueDims(op *ir.Op) (prologueDims, error) {
	qg, k, v, qw, kw, cos, sin, kc, vc := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Operands[4], op.Operands[5], op.Operands[6], op.Operands[7], op.Operands[8]
	d := prologueDims{S: 1}
	d.D = qw.Type.Shape.Numel()
	s := qg.Type.Shape
	if d.D < 2 || kw.Type.Shape.Numel() != d.D || s.Rank() != 3 || s[1] != 1 || s[2]%(2*d.D) != 0 {
		return d, fmt.Errorf("rule prologue-shape: want qg [B,1,H*2D] and norms of D elements, got qg %s, q_norm %s, k_norm %s", s, qw.Type.Shape, kw.Type.Shape)
	}
	d.B, d.H = s[0], s[2]/(2*d.D)
	ks := k.Type.Shape
	if ks.Rank() != 3 || !ks.Equal(v.Type.Shape) || ks[0] != d.B || ks[1] != 1 || ks[2]%d.D != 0 {
		return d, fmt.Errorf("rule prologue-shape: want k and v [%d,1,Hkv*%d], got %s and %s", d.B, d.D, ks, v.Type.Shape)
	}
	d.Hkv = ks[2] / d.D
	cs := cos.Type.Shape
	if cs.Rank() != 2 || !cs.Equal(sin.Type.Shape) || cs[0] != d.B || cs[1]%2 != 0 || cs[1] < 2 || cs[1] > d.D {
		return d, fmt.Errorf("rule prologue-shape: want cos and sin [%d,R] with R even in 2..%d, got %s and %s", d.B, d.D, cs, sin.Type.Shape)
	}
	d.R = cs[1]
	c := kc.Type.Shape
	if c.Rank() != 4 || !c.Equal(vc.Type.Shape) || c[0] != d.B || c[1] != d.Hkv || c[3] != d.D {
		return d, fmt.Errorf("rule prologue-shape: want k_cache and v_cache [%d,%d,L,%d], got %s and %s", d.B, d.Hkv, d.D, c, vc.Type.Shape)
	}
	d.L = c[2]
	return d, d.tiles()
}

// tiles checks that a head is whole tiles and sets the tile counts.
func (d *prologueDims) tiles() error {
	if d.D%ir.TileSize != 0 {
		return fmt.Errorf("rule prologue-head-dim: head dim %d must be a multiple of %d (heads are whole tiles)", d.D, ir.TileSize)
	}
	ceil := func(n int) int { return (n + ir.TileSize - 1) / ir.TileSize }
	d.Dt, d.St, d.HRt, d.KRt, d.RtR, d.Lt = d.D/ir.TileSize, ceil(d.S), ceil(d.H), ceil(d.Hkv), ceil(d.R), ceil(d.L)
	return nil
}

// cachePage is the page of cache tile (tt, dd) of kv head h of user.
func (d prologueDims) cachePage(user, h, tt, dd kir.Expr) kir.Expr {
	return kir.Add(kir.Mul(kir.Add(kir.Mul(kir.Add(kir.Mul(user, kir.Ci(d.Hkv)), h), kir.Ci(d.Lt)), tt), kir.Ci(d.Dt)), dd)
}

// itemSeg is one kind of work item of a program: n items per user at
// positions lo.. of the user's item list.
type itemSeg struct{ lo, n int }

// holds reports whether per-user item r is in the segment.
func (s itemSeg) holds(r int) bool { return r >= s.lo && r < s.lo+s.n }

// on emits `if (lo <= r < lo+n) { body(r - lo) }`.
func (s itemSeg) on(b *kir.Builder, r kir.Expr, body func(idx kir.Expr)) {
	if s.n == 0 {
		return
	}
	cond, idx := kir.Lt(r, kir.Ci(s.lo+s.n)), r
	if s.lo > 0 {
		cond = kir.LAnd(kir.Ge(r, kir.Ci(s.lo)), cond)
		idx = kir.Sub(r, kir.Ci(s.lo))
	}
	b.If(cond, func() { body(b.Let("idx", idx)) })
}

// prologueItems is the per-user item list of a prologue: its q, k, gate
// and v items, then one copy item per kv head of each cache not updated
// in place.
type prologueItems struct {
	q, k, gate, v, kcopy, vcopy itemSeg
	perUser                     int
}

// newPrologueItems lays out q, k, gate and v items and copies per cache.
func newPrologueItems(q, k, gate, v, copies int, inPlaceK, inPlaceV bool) prologueItems {
	var it prologueItems
	seg := func(n int) itemSeg { s := itemSeg{it.perUser, n}; it.perUser += n; return s }
	it.q, it.k, it.gate, it.v = seg(q), seg(k), seg(gate), seg(v)
	if !inPlaceK {
		it.kcopy = seg(copies)
	}
	if !inPlaceV {
		it.vcopy = seg(copies)
	}
	return it
}

// units is the number of norm units (compute iterations) of item i: 1 for
// a q item, kUnits for a k item, 0 for the others.
func (it prologueItems) units(i, kUnits int) int {
	switch r := i % it.perUser; {
	case it.q.holds(r):
		return 1
	case it.k.holds(r):
		return kUnits
	}
	return 0
}

// prologue is what the decode and the prefill prologue program share
// while they are built (the program, its cores and CB plan: splitProgram).
type prologue struct {
	*splitProgram
	op                 *ir.Op
	unitsArg           string // the compute kernel's runtime arg
	d                  prologueDims
	eps, offset        float64
	rope               blocks.RopeMatrix // R dims over RtR tiles
	inPlaceK, inPlaceV bool              // a cache result is the cache's buffer
	bfp                *bfpKV            // bfp8_b caches (kv_bfp8.go); nil: the caches are qg's dtype
	items              prologueItems
	qGroups            int // decode: q and gate items per tile row of heads (decodeHeadGroups)
	movedN             int // the moved CB's pages when over 2 (prefill: movedPages)
	// CBs; posR < 0: no cache copied; resident (resN pages; < 0: none): held by compute
	x, w, scaler, moved, posR, out, slot, posW, resident, resN int
	norm                                                       headNorm
	rd, wr                                                     *kir.Kernel
	ra                                                         struct{ qg, k, v, qw, kw, cos, sin, kc, vc, pos *blocks.Access }
	wa                                                         struct{ q, gate, kcIn, vcIn, kcOut, vcOut, pos *blocks.Access }
}

// prologueKind is what a prologue variant adds: CBs (around planInputs,
// planNorm, planOut), reader, RoPE of a unit (headNorm.emit's rope),
// writer. Errors are kept in the prologue's splitProgram (fail).
type prologueKind interface {
	planCBs()
	reader()
	rotate(c *blocks.Compute, out int)
	writer()
}

// newPrologue checks op (attn_prologue_prefill when prefill) and splits
// its items over the first cores, one item weighed as a norm unit of Dt
// tiles (normTileCycles; the q and k items, the long ones).
func newPrologue(op *ir.Op, ctx *Context, prefill bool) (*prologue, error) {
	pl := &prologue{op: op, unitsArg: "items", resident: -1}
	var err error
	if pl.eps, pl.offset, pl.d, err = checkPrologue(op, prefill); err != nil {
		return nil, err
	}
	d := pl.d
	if pl.rope, err = blocks.NewRopeMatrix(d.R, d.RtR*ir.TileSize); err != nil {
		return nil, err
	}
	pl.inPlaceK = ctx.BufferName(op.Results[2]) == ctx.BufferName(op.Operands[7])
	pl.inPlaceV = ctx.BufferName(op.Results[3]) == ctx.BufferName(op.Operands[8])
	if pl.bfp, err = newBFPKV(op, pl.inPlaceK, pl.inPlaceV, prefill); err != nil {
		return nil, err
	}
	if prefill {
		pl.items, pl.unitsArg = newPrologueItems(d.H*d.St, d.Hkv*d.cacheRows(), d.S*d.HRt, d.Hkv*d.cacheRows(), d.Hkv, pl.inPlaceK, pl.inPlaceV), "units"
	} else {
		pl.qGroups = decodeHeadGroups(d, ctx.Target.NumWorkers())
		pl.items = newPrologueItems(d.HRt*pl.qGroups, d.KRt, d.HRt*pl.qGroups, d.KRt, d.Hkv, pl.inPlaceK, pl.inPlaceV)
	}
	plan := PlanSplit(d.B*pl.items.perUser, ctx.Target.NumWorkers(), d.Dt*normTileCycles, 0, 0)
	if prefill && pl.bfp == nil {
		plan = plan.Balance(pl.items.prefillWeight(d))
	}
	pl.splitProgram = startProgram(op, ctx, plan)
	return pl, nil
}

// prefillWeight is the relative reader cost of a prefill prologue's item
// i, counted in the gathers' row runs (a local copy each, the reader's
// bound): a q item its tables' runs (its tiles are read whole when the
// tokens and D are whole tiles), a k item its rows' and its tables' runs,
// a gate item a run per head row and tile (its tiles' copies are in
// flight together, gateTiles), a v item its rows' runs,
// a copy item a few per cache tile it copies.
func (it prologueItems) prefillWeight(d prologueDims) func(i int) int {
	rows := d.Dt * ir.TileSize * 2 // an item's Dt tiles of token rows, two runs a row
	tables := 2 * d.RtR * ir.TileSize * 2
	q := tables + 4*d.Dt
	if d.S%ir.TileSize != 0 || d.D%ir.TileSize != 0 {
		q += rows
	}
	return func(i int) int {
		switch r := i % it.perUser; {
		case it.q.holds(r):
			return q
		case it.k.holds(r):
			return rows + tables
		case it.gate.holds(r):
			return d.Dt * min(ir.TileSize, d.H)
		case it.v.holds(r):
			return rows
		}
		return 4 * d.Lt * d.Dt
	}
}

// build runs the phases with kind's parts and returns the program, or
// the first error kept.
func (pl *prologue) build(kind prologueKind) (*kir.Program, error) {
	kind.planCBs()
	pl.planned(fmt.Sprintf("%s with head dim %d", pl.op.Name(), pl.d.D))
	kind.reader()
	if pl.bfp != nil {
		cp := pl.bfpCompute(kind.rotate)
		kind.writer()
		setRangeArgs(pl.cores, pl.plan, pl.rd, cp, pl.wr)
		return pl.done(pl.p)
	}
	cp := pl.compute(kind.rotate)
	kind.writer()
	setItemArgs(pl.cores, pl.plan, pl.rd, cp, pl.wr, func(i int) int { return pl.items.units(i, 1) })
	return pl.done(pl.p)
}

// dtype is the dtype of qg, k, v, the caches and the results.
func (pl *prologue) dtype() ir.DType { return pl.op.Operands[0].Type.DType }

// planInputs plans the input CBs: x, the norm weight, the RoPE inputs
// (rope), the ones column tile (CB scaler) and the moved tiles (gate, v, copies).
func (pl *prologue) planInputs(rope func()) {
	pl.x = pl.cbs.Input("x", pl.dtype(), pl.d.Dt)
	pl.w = pl.cbs.Input("norm_weight", pl.op.Operands[3].Type.DType, 2)
	rope()
	pl.scaler = pl.cbs.Input("scaler", ir.BF16, 1)
	pl.moved = pl.cbs.Input("moved", pl.dtype(), max(pl.movedN, 2))
}

// planNorm plans the reader's pos page and the norm's CBs but out.
func (pl *prologue) planNorm() {
	cbs, d := pl.cbs, pl.d
	pl.posR = -1
	if !pl.inPlaceK || !pl.inPlaceV {
		pl.posR = cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, posPageBytes(pl.ctx.Target, pl.op.Operands[9]), 1)
	}
	n := headNorm{x: pl.x, w: pl.w, wo: -1, scaler: pl.scaler, Dt: d.Dt, RtR: d.RtR, D: d.D, eps: pl.eps, offset: pl.offset}
	n.sq = cbs.Scratch("x_squared", ir.FP32, d.Dt)
	n.rs = cbs.Scratch("rsqrt_mean", ir.FP32, 1)
	n.xn = cbs.Scratch("x_normed", ir.FP32, 2)
	if pl.offset != 0 {
		n.wo = cbs.Scratch("weight_plus_offset", ir.FP32, 2)
	}
	n.y = cbs.Scratch("normed_rotary", pl.dtype(), d.RtR)
	pl.norm = n
}

// planOut plans the result CB and the writer's cache tiles and pos.
func (pl *prologue) planOut(slots int) {
	pl.out = pl.cbs.Output("out", pl.dtype(), 2)
	pl.norm.out = pl.out
	if pl.bfp != nil {
		pl.bfp.plan(pl)
	} else {
		pl.slot = pl.cbs.Scratch("cache_tile", pl.dtype(), slots)
	}
	pl.posW = pl.cbs.Pages(blocks.ScratchCB, "pos_writer", ir.UInt32, posPageBytes(pl.ctx.Target, pl.op.Operands[9]), 1)
}

// readerStart adds the reader with its buffers (pl.ra; the caches unless
// in place, pos when a cache is copied), emits the ones column tile and returns
// the builder and the item range.
func (pl *prologue) readerStart() (b *kir.Builder, start, count kir.Expr) {
	rd, o, ab, r := newReader(pl.p, pl.rs), pl.op.Operands, pl.splitProgram, &pl.ra
	r.qg, r.k, r.v = ab.bind(rd, "qg_addr", o[0]), ab.bind(rd, "k_addr", o[1]), ab.bind(rd, "v_addr", o[2])
	r.qw, r.kw = ab.bind(rd, "q_norm_addr", o[3]), ab.bind(rd, "k_norm_addr", o[4])
	r.cos, r.sin = ab.bind(rd, "cos_addr", o[5]), ab.bind(rd, "sin_addr", o[6])
	if !pl.inPlaceK {
		r.kc = ab.bind(rd, "k_cache_addr", o[7])
	}
	if !pl.inPlaceV {
		r.vc = ab.bind(rd, "v_cache_addr", o[8])
	}
	if pl.posR >= 0 {
		r.pos = ab.bind(rd, "pos_addr", o[9])
	}
	pl.rd, start, count = rd, rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b = rd.Builder()
	blocks.OnesColumnTile(b, pl.scaler)
	return b, start, count
}

// writerStart adds the writer with its buffers (pl.wa; the cache results
// unless in place), reads pos's page and returns the builder, the page
// (readPosPage) and the item range.
func (pl *prologue) writerStart() (b *kir.Builder, pos posReader, start, count kir.Expr) {
	wr, o, res, ab, w := newWriter(pl.p, pl.rs), pl.op.Operands, pl.op.Results, pl.splitProgram, &pl.wa
	w.q, w.gate = ab.bind(wr, "q_addr", res[0]), ab.bind(wr, "gate_addr", res[1])
	w.kcIn, w.vcIn = ab.bind(wr, "k_cache_addr", o[7]), ab.bind(wr, "v_cache_addr", o[8])
	w.kcOut, w.vcOut = w.kcIn, w.vcIn
	if !pl.inPlaceK {
		w.kcOut = ab.bind(wr, "k_cache_out_addr", res[2])
	}
	if !pl.inPlaceV {
		w.vcOut = ab.bind(wr, "v_cache_out_addr", res[3])
	}
	w.pos = ab.bind(wr, "pos_addr", o[9])
	pl.wr, start, count = wr, wr.RuntimeArg("start"), wr.RuntimeArg("count")
	b = wr.Builder()
	return b, readPosPage(b, w.pos, pl.posW, o[9]), start, count
}

// eachItem emits the loop over items start.., body(user, index in the
// user's list).
func (pl *prologue) eachItem(b *kir.Builder, start, count kir.Expr, body func(u, r kir.Var)) {
	b.For("i", start, kir.Add(start, count), func(i kir.Var) {
		body(b.Let("u", kir.Div(i, kir.Ci(pl.items.perUser))), b.Let("r", kir.Mod(i, kir.Ci(pl.items.perUser))))
	})
}

// cacheCopies emits the copy items of the caches not updated in place (kc,
// vc): comment, then the Dt pages of every tile row tt of kv head h for
// which outside()(tt) holds moved by move (ReadPages, WritePages) through
// the moved CB. outside runs in the item's branch, so it may emit values.
func (pl *prologue) cacheCopies(b *kir.Builder, u, r kir.Var, kc, vc *blocks.Access, comment string,
	outside func() func(tt kir.Expr) kir.Expr, move func(b *kir.Builder, a *blocks.Access, cb int, first, count kir.Expr)) {
	for _, c := range []struct {
		seg itemSeg
		a   *blocks.Access
	}{{pl.items.kcopy, kc}, {pl.items.vcopy, vc}} {
		c.seg.on(b, r, func(h kir.Expr) {
			if comment != "" {
				b.Comment(comment)
			}
			out := outside()
			b.For("t", kir.C(0), kir.Ci(pl.d.Lt), func(tt kir.Var) {
				b.If(out(tt), func() { move(b, c.a, pl.moved, pl.d.cachePage(u, h, tt, kir.C(0)), kir.Ci(pl.d.Dt)) })
			})
		})
	}
}

// writeTiles emits the write of item kind s's Dt tiles from cb (the q and
// gate results hold them in item order).
func (pl *prologue) writeTiles(b *kir.Builder, s itemSeg, u, r kir.Var, a *blocks.Access, cb int) {
	s.on(b, r, func(idx kir.Expr) {
		blocks.WritePages(b, a, cb, kir.Mul(kir.Add(kir.Mul(u, kir.Ci(s.n)), idx), kir.Ci(pl.d.Dt)), kir.Ci(pl.d.Dt))
	})
}

// compute adds the compute kernel: per norm unit the norm and rotate.
func (pl *prologue) compute(rotate func(c *blocks.Compute, out int)) *kir.Kernel {
	cp, c, units := pl.rangeCompute(pl.unitsArg)
	c.Startup(pl.x, pl.scaler, pl.out)
	c.B.CBWaitFront(pl.scaler, kir.C(1))
	if pl.resident >= 0 {
		c.B.CBWaitFront(pl.resident, kir.Ci(pl.resN))
	}
	c.For("i", kir.C(0), units, func(kir.Var) { pl.norm.emit(c, rotate) })
	if pl.resident >= 0 {
		c.B.CBPopFront(pl.resident, kir.Ci(pl.resN))
	}
	c.B.CBPopFront(pl.scaler, kir.C(1))
	return cp
}

// setItemArgs sets each core's runtime args: its item range of plan
// (reader, writer) and the sum of units(i) over it (compute).
func setItemArgs(cores []kir.Core, plan Split, rd, cp, wr *kir.Kernel, units func(i int) int) {
	for ci, core := range cores {
		s, n := plan.Range(ci)
		nu := 0
		for i := s; i < s+n; i++ {
			nu += units(i)
		}
		rd.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
		cp.SetRuntimeArgs(core, kir.U32(uint32(nu)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
}

// decodePrologue is attn_prologue's part of its program.
type decodePrologue struct {
	*prologue
	m, slotQG, slotK, tab, zero, rows int  // CBs; rows < 0: no row gather
	batchPatch                        bool // patchAll: the Hkv*Dt cache tiles fit 16 slots
	slots                             int  // cache tiles the writer holds
	rowGather                         bool // every head of a user is in one tile row (gatherHeads)
	gq, gk                            *blocks.Gather
	// reader values (zero tile, RoPE tables, staged head rows, pos/32) and
	// writer values (pos/32, pos%32, the cache tile slots)
	zeroL1, tabL1, headRows, wptr, prow, slotL1 kir.Var
	rptr                                        kir.Expr
}

// planCBs plans the RoPE matrix and tables, the gathers' page caches and
// (rowGather) the staged head rows around the shared CBs.
func (dp *decodePrologue) planCBs() {
	d, cbs, dt, tabDT := dp.d, dp.cbs, dp.dtype(), dp.op.Operands[5].Type.DType
	dp.planInputs(func() { dp.m = cbs.Input("rope_matrix", tabDT, 2) })
	view := func(n int) *blocks.Gather { // into the [n, D] view of heads; the reader sets Sources
		im, seg := blocks.ImageOf(ir.Shape{n, d.D}), blocks.SegFor(d.D)
		return &blocks.Gather{Out: im, DType: dt, Seg: seg, Fill: true, Prefetch: blocks.PrefetchPages(im, seg, 1)}
	}
	dp.gq, dp.gk = view(d.H), view(d.Hkv)
	dp.slotQG = cbs.Scratch("qg_tiles", dt, dp.gq.Prefetch)
	dp.slotK = cbs.Scratch("k_tiles", dt, dp.gk.Prefetch)
	dp.tab = cbs.Pages(blocks.ScratchCB, "rope_tables", tabDT, tabDT.TileBytes(), 2*d.RtR)
	dp.zero = cbs.Scratch("zero_tile", tabDT, 1)
	dp.planNorm()
	dp.batchPatch = d.KRt == 1 && d.Hkv*d.Dt <= 16
	dp.slots = 1
	if dp.batchPatch {
		dp.slots = d.Hkv * d.Dt
	}
	dp.planOut(dp.slots)
	dp.rowGather = d.HRt == 1 && d.KRt == 1
	dp.rows = -1
	if dp.rowGather {
		dp.rows = cbs.Pages(blocks.ScratchCB, "head_rows", dt, d.Dt*max(d.H, d.Hkv)*blocks.GatherRowSlot, 1)
	}
}

// reader adds the reader: per q or k item x (gatherHeads) and the norm
// inputs, per gate item the gate columns, per v item each kv head's tiles
// (its row is row 0), per copy item the cache pages outside row pos/32.
func (dp *decodePrologue) reader() {
	d, qg, k := dp.d, dp.op.Operands[0], dp.op.Operands[1]
	b, start, count := dp.readerStart()
	dp.gq.Sources = []blocks.GatherSource{{Acc: dp.ra.qg, Image: blocks.ImageOf(qg.Type.Shape)}}
	dp.gk.Sources = []blocks.GatherSource{{Acc: dp.ra.k, Image: blocks.ImageOf(k.Type.Shape)}}
	dp.fail(dp.gq.Check())
	dp.zeroL1 = blocks.Scratch(b, dp.zero, "zero")
	blocks.FillWords(b, dp.zeroL1, dp.op.Operands[5].Type.DType.TileBytes(), 0)
	dp.tabL1 = blocks.ScratchPages(b, dp.tab, 2*d.RtR, "tab")
	var rpos posReader
	if dp.posR >= 0 {
		rpos = readPosPage(b, dp.ra.pos, dp.posR, dp.op.Operands[9])
		if !rpos.perUser {
			dp.rptr = b.Let("ptr", kir.Div(rpos.shared, kir.Ci(ir.TileSize)))
		}
	}
	dp.gq.Begin(b, []int{dp.slotQG})
	dp.gk.Begin(b, []int{dp.slotK})
	if dp.rowGather {
		dp.headRows = blocks.Scratch(b, dp.rows, "head_rows")
	}
	twoD, items := 2*d.D, dp.items
	dp.eachItem(b, start, count, func(u, r kir.Var) {
		items.q.on(b, r, func(hr kir.Expr) {
			b.Comment("q: query columns of the heads, norm weight, RoPE matrix")
			dp.gatherHeads(b, dp.gq, dp.x, u, hr, func(h kir.Expr) kir.Expr { return kir.Mul(h, kir.Ci(twoD)) })
			dp.normInputs(b, dp.ra.qw, u)
		})
		items.k.on(b, r, func(hr kir.Expr) {
			b.Comment("k: key heads, norm weight, RoPE matrix")
			dp.gatherHeads(b, dp.gk, dp.x, u, hr, func(h kir.Expr) kir.Expr { return kir.Mul(h, kir.Ci(d.D)) })
			dp.normInputs(b, dp.ra.kw, u)
		})
		items.gate.on(b, r, func(hr kir.Expr) {
			b.Comment("gate: gate columns of the heads")
			dp.gatherHeads(b, dp.gq, dp.moved, u, hr, func(h kir.Expr) kir.Expr { return kir.Add(kir.Mul(h, kir.Ci(twoD)), kir.Ci(d.D)) })
		})
		items.v.on(b, r, func(hr kir.Expr) {
			b.Comment("v: the tiles of each kv head (its row is row 0)")
			dp.heads(b, hr, func(h kir.Var) {
				blocks.ReadPages(b, dp.ra.v, dp.vCB(), kir.Add(kir.Mul(u, kir.Ci(d.Hkv*d.Dt)), kir.Mul(h, kir.Ci(d.Dt))), kir.Ci(d.Dt))
			})
		})
		dp.cacheCopies(b, u, r, dp.ra.kc, dp.ra.vc, "cache copy: every page outside tile row pos/32",
			func() func(tt kir.Expr) kir.Expr {
				ptr := dp.rptr
				if rpos.perUser {
					ptr = b.Let("ptr", kir.Div(rpos.of(b, u, "upos"), kir.Ci(ir.TileSize)))
				}
				return func(tt kir.Expr) kir.Expr { return kir.Ne(tt, ptr) }
			}, blocks.ReadPages)
	})
	if dp.rowGather {
		blocks.ReleaseScratch(b, dp.rows)
	}
	dp.gk.End(b)
	dp.gq.End(b)
	if dp.posR >= 0 {
		blocks.ReleaseScratch(b, dp.posR)
	}
	blocks.ReleaseScratchPages(b, dp.tab, 2*d.RtR)
	blocks.ReleaseScratch(b, dp.zero)
}

// normInputs emits w's tiles around the user's RoPE matrix tiles (cos on
// the diagonal, the signed sin at the rotate-half positions, 1 past the
// rotary dims; from the user's cos and sin rows) in compute's order.
func (dp *decodePrologue) normInputs(b *kir.Builder, wAcc *blocks.Access, user kir.Expr) {
	d, tabDT := dp.d, dp.op.Operands[5].Type.DType
	tabIm, teb, tabBytes, tab := blocks.ImageOf(dp.op.Operands[5].Type.Shape), blocks.ElemBytes(tabDT), tabDT.TileBytes(), dp.tabL1
	blocks.ReadPages(b, wAcc, dp.w, kir.C(0), kir.Ci(d.RtR))
	b.Comment("RoPE matrix of the user from its cos and sin rows")
	trow := b.Let("trow", kir.Mul(kir.Div(user, kir.Ci(ir.TileSize)), kir.Ci(tabIm.Ct)))
	for i := 0; i < d.RtR; i++ {
		blocks.ReadPageTo(b, dp.ra.cos, kir.Add(trow, kir.Ci(i)), kir.Add(tab, kir.Ci(i*tabBytes)))
		blocks.ReadPageTo(b, dp.ra.sin, kir.Add(trow, kir.Ci(i)), kir.Add(tab, kir.Ci((d.RtR+i)*tabBytes)))
	}
	b.NoCAsyncReadBarrier()
	urow := b.Let("urow", kir.Mod(user, kir.Ci(ir.TileSize)))
	elem := func(base int) func(i kir.Expr) kir.Expr {
		return func(i kir.Expr) kir.Expr {
			tile := kir.Add(tab, kir.Mul(kir.Add(kir.Div(i, kir.Ci(ir.TileSize)), kir.Ci(base)), kir.Ci(tabBytes)))
			return kir.Add(tile, blocks.FaceOffset(urow, kir.Mod(i, kir.Ci(ir.TileSize)), teb))
		}
	}
	for _, mt := range dp.rope.Tiles {
		m := blocks.Reserve(b, dp.m, kir.C(1), "m")
		blocks.LocalCopy(b, dp.zeroL1, m, tabBytes)
		b.NoCAsyncReadBarrier()
		mt.EmitTile(b, m, tabDT, elem(0), elem(d.RtR))
		b.CBPushBack(dp.m, kir.C(1))
	}
	if d.Dt > d.RtR {
		blocks.ReadPages(b, wAcc, dp.w, kir.Ci(d.RtR), kir.Ci(d.Dt-d.RtR))
	}
}

// gatherHeads emits the push into cb of the Dt tiles of tile row hr of
// the [n, D] view of heads (gq: q heads, gk: kv heads), head h from
// columns colOf(h).. of user's row, zero rows past the last head. The q
// and gate items share gq (its Map is read when Page emits). With
// rowGather a head's row is row 0 of its source tile: two 64-byte reads
// (blocks.GatherRowsTiles), in groups of the CB's depth, each group's
// reads under one barrier.
func (dp *decodePrologue) gatherHeads(b *kir.Builder, g *blocks.Gather, cb int, user, hr kir.Expr, colOf func(h kir.Expr) kir.Expr) {
	d, dt := dp.d, dp.dtype()
	if !dp.rowGather {
		g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			return []blocks.Run{{Src: 0, Row: user, Col: kir.Add(colOf(row), col)}}
		}
		b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) { g.Page(b, cb, kir.Add(kir.Mul(hr, kir.Ci(d.Dt)), dd)) })
		return
	}
	src, n, im := dp.ra.qg, d.H, blocks.ImageOf(dp.op.Operands[0].Type.Shape)
	if g == dp.gk {
		src, n, im = dp.ra.k, d.Hkv, blocks.ImageOf(dp.op.Operands[1].Type.Shape)
	}
	// A group of heads (qGroups > 1, hr the group): heads row0.. into
	// their own rows of tiles cleared first (the other rows zero).
	var row0 kir.Expr
	grouped := g == dp.gq && dp.qGroups > 1
	if grouped {
		n = d.H / dp.qGroups
		row0 = b.Let("h0", kir.Mul(hr, kir.Ci(n)))
	}
	clear := dp.op.Operands[5].Type.DType.TileBytes() >= 1024*blocks.ElemBytes(dt)
	group := d.Dt
	if cb == dp.moved {
		group = 2
	}
	for group > 1 && d.Dt%group != 0 {
		group--
	}
	eb, tb := blocks.ElemBytes(dt), dt.TileBytes()
	for d0 := 0; d0 < d.Dt; d0 += group {
		tiles := blocks.Reserve(b, cb, kir.Ci(group), "tiles")
		if grouped && clear {
			b.For("zt", kir.C(0), kir.Ci(group), func(t kir.Var) {
				blocks.ClearRows(b, kir.Add(tiles, kir.Mul(t, kir.Ci(tb))), dp.zeroL1, 0, eb)
			})
		}
		blocks.GatherRowsTilesAt(b, src, dp.headRows, tiles, row0, group, tb, n, eb, func(t, h kir.Expr) kir.Expr {
			if row0 != nil {
				h = kir.Add(row0, h)
			}
			col := kir.Add(colOf(h), kir.Mul(kir.Add(t, kir.Ci(d0)), kir.Ci(ir.TileSize)))
			return kir.Add(kir.Mul(user, kir.Ci(im.Ct)), kir.Div(col, kir.Ci(ir.TileSize)))
		})
		if !grouped && clear {
			b.For("zt", kir.C(0), kir.Ci(group), func(t kir.Var) {
				blocks.ClearRows(b, kir.Add(tiles, kir.Mul(t, kir.Ci(tb))), dp.zeroL1, n, eb)
			})
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cb, kir.Ci(group))
	}
}

// heads emits body(h) for the kv heads of tile row hr.
func (dp *decodePrologue) heads(b *kir.Builder, hr kir.Expr, body func(h kir.Var)) {
	b.For("hh", kir.C(0), kir.Ci(ir.TileSize), func(hh kir.Var) {
		h := b.Let("h", kir.Add(kir.Mul(hr, kir.Ci(ir.TileSize)), hh))
		b.If(kir.Lt(h, kir.Ci(dp.d.Hkv)), func() { body(h) })
	})
}

// rotate emits the normed rotary tiles times the RoPE matrix (fp32 DEST,
// one rounding at the pack).
func (dp *decodePrologue) rotate(c *blocks.Compute, out int) {
	c.B.Comment("times the RoPE matrix")
	for col := 0; col < dp.rope.ColTiles(); col++ {
		c.Acquire()
		for _, row := range dp.rope.RowsFor(col) {
			c.B.CBWaitFront(dp.m, kir.C(1))
			c.Matmul(dp.norm.y, dp.m, kir.Ci(row), kir.C(0), kir.C(0), false)
			c.B.CBPopFront(dp.m, kir.C(1))
		}
		c.PackOut(out, 1)
	}
}

// writer adds the writer: q and gate tiles, k and v rows (writeKV, or
// with bfp8_b caches bfpWriteKV, kv_bfp8.go), copies of the caches not
// updated in place (bfp8_b caches always are).
func (dp *decodePrologue) writer() {
	slot, slots, name, writeKV := dp.slot, dp.slots, "cache_tile", dp.writeKV
	if kv := dp.bfp; kv != nil {
		slot, slots, name, writeKV = kv.exp, kv.slots, "cache_exp", dp.bfpWriteKV
	}
	b, wpos, start, count := dp.writerStart()
	if !wpos.perUser {
		dp.wptr = b.Let("ptr", kir.Div(wpos.shared, kir.Ci(ir.TileSize)))
		dp.prow = b.Let("prow", kir.Mod(wpos.shared, kir.Ci(ir.TileSize)))
	}
	dp.slotL1 = blocks.ScratchPages(b, slot, slots, name)
	dp.eachItem(b, start, count, func(u, r kir.Var) {
		dp.userRow(b, wpos, u)
		dp.writeHeads(b, dp.items.q, u, r, dp.wa.q, dp.out)
		dp.items.k.on(b, r, func(hr kir.Expr) { writeKV(b, u, hr, true) })
		dp.writeHeads(b, dp.items.gate, u, r, dp.wa.gate, dp.moved)
		dp.items.v.on(b, r, func(hr kir.Expr) { writeKV(b, u, hr, false) })
		dp.cacheCopies(b, u, r, dp.wa.kcOut, dp.wa.vcOut, "",
			func() func(tt kir.Expr) kir.Expr { return func(tt kir.Expr) kir.Expr { return kir.Ne(tt, dp.wptr) } }, blocks.WritePages)
	})
	blocks.ReleaseScratchPages(b, slot, slots)
	blocks.ReleaseScratch(b, dp.posW)
}

// userRow emits (pos [B]) user u's cache tile row and row in it, wptr
// and prow, from its word of the writer's pos page; with pos [1] the
// writer set them once.
func (dp *decodePrologue) userRow(b *kir.Builder, wpos posReader, u kir.Var) {
	if !wpos.perUser {
		return
	}
	b.Comment("the user's position: its cache tile row and the row in it")
	up := wpos.of(b, u, "upos")
	dp.wptr = b.Let("ptr", kir.Div(up, kir.Ci(ir.TileSize)))
	dp.prow = b.Let("prow", kir.Mod(up, kir.Ci(ir.TileSize)))
}

// writeHeads emits the write of a q or gate item (s) from cb: its Dt
// tiles whole (writeTiles) or, with groups of heads (qGroups > 1), the
// group's rows of each tile, the last group's through row 31 (the zero
// rows past the last head, as a whole tile would write them).
func (dp *decodePrologue) writeHeads(b *kir.Builder, s itemSeg, u, r kir.Var, a *blocks.Access, cb int) {
	if dp.qGroups == 1 {
		dp.writeTiles(b, s, u, r, a, cb)
		return
	}
	d, n, eb := dp.d, dp.d.H/dp.qGroups, blocks.ElemBytes(dp.dtype())
	s.on(b, r, func(grp kir.Expr) {
		for gi := range dp.qGroups {
			lo, hi := gi*n, (gi+1)*n
			if gi == dp.qGroups-1 {
				hi = ir.TileSize
			}
			b.If(kir.Eq(grp, kir.Ci(gi)), func() {
				b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) {
					l1 := blocks.WaitFront(b, cb, kir.C(1), "l1")
					blocks.WriteRows(b, a, kir.Add(kir.Mul(u, kir.Ci(d.Dt)), dd), l1, lo, hi, eb)
					b.NoCAsyncWriteBarrier()
					b.CBPopFront(cb, kir.C(1))
				})
			})
		}
	})
}

// writeKV emits k (or v) item hr: each kv head's row into row pos%32 of
// its cache tiles, from row h%32 of k result tile dd (out) or row 0 of
// the head's v tile dd (moved).
func (dp *decodePrologue) writeKV(b *kir.Builder, u kir.Var, hr kir.Expr, k bool) {
	cb, in, out := dp.moved, dp.wa.vcIn, dp.wa.vcOut
	if k {
		cb, in, out = dp.out, dp.wa.kcIn, dp.wa.kcOut
		b.Comment("k: each kv head's row into row pos%32 of its cache tiles")
	} else {
		b.Comment("v: row 0 of each tile into row pos%32 of the cache tile")
	}
	if dp.batchPatch {
		dp.patchAll(b, u, in, out, cb, k)
		return
	}
	if k {
		b.For("d", kir.C(0), kir.Ci(dp.d.Dt), func(dd kir.Var) {
			src := blocks.WaitFront(b, cb, kir.C(1), "src")
			dp.heads(b, hr, func(h kir.Var) {
				dp.patch(b, in, out, dp.d.cachePage(u, h, dp.wptr, dd), src, kir.Mod(h, kir.Ci(ir.TileSize)))
			})
			b.CBPopFront(cb, kir.C(1))
		})
		return
	}
	dp.heads(b, hr, func(h kir.Var) {
		b.For("d", kir.C(0), kir.Ci(dp.d.Dt), func(dd kir.Var) {
			src := blocks.WaitFront(b, cb, kir.C(1), "src")
			dp.patch(b, in, out, dp.d.cachePage(u, h, dp.wptr, dd), src, kir.C(0))
			b.CBPopFront(cb, kir.C(1))
		})
	})
}

// patch emits the copy of row srcRow of tile src into row pos%32 of cache
// page page (read from in, written to out), complete when it returns.
func (dp *decodePrologue) patch(b *kir.Builder, in, out *blocks.Access, page, src, srcRow kir.Expr) {
	pg := b.Let("pg", page)
	blocks.ReadPageTo(b, in, pg, dp.slotL1)
	b.NoCAsyncReadBarrier()
	blocks.CopyTileRow(b, src, srcRow, dp.slotL1, dp.prow, blocks.ElemBytes(dp.dtype()))
	b.NoCAsyncReadBarrier()
	b.NoCAsyncWrite(dp.slotL1, out.PageAddr(pg), kir.Ci(dp.dtype().TileBytes()))
	b.NoCAsyncWriteBarrier()
}

// patchAll is writeKV batched: every (kv head, D tile) cache tile read
// (before compute delivers the rows), one barrier, then per tile (k: D
// tiles outer) the row copied and the tile written; one write barrier.
func (dp *decodePrologue) patchAll(b *kir.Builder, u kir.Var, in, out *blocks.Access, cb int, k bool) {
	d, tb := dp.d, dp.dtype().TileBytes()
	at := func(h, dd int) kir.Expr { return kir.Add(dp.slotL1, kir.Ci((h*d.Dt+dd)*tb)) }
	for h := range d.Hkv {
		for dd := range d.Dt {
			blocks.ReadPageTo(b, in, d.cachePage(u, kir.Ci(h), dp.wptr, kir.Ci(dd)), at(h, dd))
		}
	}
	b.NoCAsyncReadBarrier()
	var src kir.Var
	each := func(h, dd int) {
		row := kir.C(0)
		if k {
			row = kir.Ci(h)
		}
		if !k || h == 0 {
			src = blocks.WaitFront(b, cb, kir.C(1), "src")
		}
		blocks.CopyTileRow(b, src, row, at(h, dd), dp.prow, blocks.ElemBytes(dp.dtype()))
		b.NoCAsyncReadBarrier()
		if !k || h == d.Hkv-1 {
			b.CBPopFront(cb, kir.C(1))
		}
		b.NoCAsyncWrite(at(h, dd), out.PageAddr(d.cachePage(u, kir.Ci(h), dp.wptr, kir.Ci(dd))), kir.Ci(tb))
	}
	for o := range d.Hkv * d.Dt {
		if k {
			each(o%d.Hkv, o/d.Hkv)
		} else {
			each(o/d.Dt, o%d.Dt)
		}
	}
	b.NoCAsyncWriteBarrier()
}

// headNorm is the compute of one tile row of heads (or tokens) of the
// prologues: rows of D = 32*Dt elements normalised, the first RtR tiles
// rotated.
type headNorm struct {
	x, w, wo, scaler, sq, rs, xn, y, out int // CBs; wo < 0: no offset
	Dt, RtR, D                           int
	eps, offset                          float64
}

// emit emits, in the compute kernel, the norm of the Dt tiles of x (one
// row of heads or tokens per tile row): x^2 (fp32), the row sums
// (matmul against the ones column, sumRows), * 1/D, + eps, rsqrt; per tile x * rsqrt
// (bcast cols, fp32) * (w + offset) (bcast rows) packed to y's dtype, the
// Doc's rounding point of the norm. The first RtR tiles go to y (waited
// for as a block), then rope emits their rotation into out (consuming
// nothing of y); the other tiles go to out as they are. Consumes Dt pages
// of x and Dt pages of w, produces Dt pages of out.
func (n headNorm) emit(c *blocks.Compute, rope func(c *blocks.Compute, out int)) {
	cb := c.B
	cb.CBWaitFront(n.x, kir.Ci(n.Dt))
	cb.Comment("x^2")
	c.For("j", kir.C(0), kir.Ci(n.Dt), func(j kir.Var) {
		c.Acquire()
		c.Copy(n.x, j, kir.C(0))
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUSquare}, kir.C(0))
		c.PackOut(n.sq, 1)
	})
	cb.Comment("rsqrt(sum(x^2) / D + eps) per row, in column 0")
	sumRows(c, "j", n.sq, n.scaler, n.rs, n.Dt, blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(1 / float64(n.D))},
		blocks.SFPUStep{Op: kir.SFPUAddScalar, Param: float32(n.eps)}, blocks.SFPUStep{Op: kir.SFPURsqrt})
	cb.CBPopFront(n.sq, kir.Ci(n.Dt))
	cb.CBWaitFront(n.rs, kir.C(1))
	normTile := func(j kir.Expr, out int) {
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastCols, n.x, n.rs, j, kir.C(0), kir.C(0))
		c.PackOut(n.xn, 1)
		wCB := n.w
		if n.wo >= 0 {
			wCB = n.wo
			c.Unary(n.w, n.wo, []blocks.SFPUStep{{Op: kir.SFPUAddScalar, Param: float32(n.offset)}})
		}
		c.BinaryTile(kir.EltMul, blocks.BcastRows, n.xn, wCB, out, false, nil)
	}
	cb.Comment("normed tiles holding rotary dims, rounded")
	c.For("j", kir.C(0), kir.Ci(n.RtR), func(j kir.Var) { normTile(j, n.y) })
	cb.CBWaitFront(n.y, kir.Ci(n.RtR))
	rope(c, n.out)
	cb.CBPopFront(n.y, kir.Ci(n.RtR))
	if n.RtR < n.Dt {
		cb.Comment("the other normed tiles are the result")
		c.For("j", kir.Ci(n.RtR), kir.Ci(n.Dt), func(j kir.Var) { normTile(j, n.out) })
	}
	cb.CBPopFront(n.rs, kir.C(1))
	cb.CBPopFront(n.x, kir.Ci(n.Dt))
}

// checkPrologue checks op (attn_prologue_prefill when prefill) and
// returns its eps, offset and sizes: every operand but pos (a position,
// checkPos; decode: checkDecodePos) and every result in tile layout, k, v, the caches and the
// results of qg's dtype, bf16 or fp32 like the tables (single rows move;
// decode: cos and sin alike), the norm weights alike (one weight CB).
func checkPrologue(op *ir.Op, prefill bool) (eps, offset float64, d prologueDims, err error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return 0, 0, d, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
	}
	o, r := op.Operands, op.Results
	posErr := checkPos(o[9])
	if !prefill && o[0].Type.Shape.Rank() > 0 {
		posErr = checkDecodePos(o[9], o[0].Type.Shape[0])
	}
	if err := cmp.Or(requireTiles(o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8], r[0], r[1], r[2], r[3]), posErr); err != nil {
		return 0, 0, d, err
	}
	if prefill {
		d, err = prefillPrologueDims(op)
	} else {
		d, err = attnPrologueDims(op)
	}
	if err != nil {
		return 0, 0, d, err
	}
	dt, cos, sin := o[0].Type.DType, o[5].Type.DType, o[6].Type.DType
	kvDT := dt
	if o[7].Type.DType == ir.BFP8B {
		kvDT = ir.BFP8B // the rows are packed and moved by their exponent and mantissa bytes (kv_bfp8.go)
	}
	for i, x := range []*ir.Value{o[1], o[2], o[7], o[8], r[0], r[1], r[2], r[3]} {
		if want := []ir.DType{dt, kvDT}[(i/2)%2]; err == nil && x.Type.DType != want {
			err = fmt.Errorf("rule prologue-dtype: %s is %s; qg, k, v, q and gate must share qg's dtype %s and the caches and their results one dtype, qg's or bfp8_b", x, x.Type.DType, dt)
		}
	}
	switch {
	case err != nil:
	case prefill && (blocks.ElemBytes(dt) == 0 || blocks.ElemBytes(cos) == 0 || blocks.ElemBytes(sin) == 0):
		err = fmt.Errorf("rule prologue-dtype: the program moves single rows of qg, k, v, the tables and the caches, which needs bf16 or fp32, not %s / %s / %s", dt, cos, sin)
	case !prefill && blocks.ElemBytes(dt) == 0:
		err = fmt.Errorf("rule prologue-dtype: the program moves single rows of qg, k, v and the caches, which needs bf16 or fp32, not %s (block floats share exponents across a face row)", dt)
	case !prefill && (cos != sin || blocks.ElemBytes(cos) == 0):
		err = fmt.Errorf("rule prologue-rope-dtype: cos (%s) and sin (%s) must share a bf16 or fp32 dtype (their elements are placed into the RoPE matrix)", cos, sin)
	case o[3].Type.DType != o[4].Type.DType:
		err = fmt.Errorf("rule prologue-norm-dtype: q_norm (%s) and k_norm (%s) must share a dtype (one weight CB)", o[3].Type.DType, o[4].Type.DType)
	}
	return eps, offset, d, err
}

// minGroupHeads is the fewest heads of a q or gate item of the decode
// prologue (decodeHeadGroups). Fewer gain little at B=1 (the q item's
// compute, not its gather, is then the long pole: sim/timing predicts
// 19.7 us for 4 heads, 19.1 us for 2) and cost at B=8, where more cores
// contend for DRAM (24.2 us for 4, 25.2 us for 3).
const minGroupHeads = 4

// decodeHeadGroups is the number of q (and gate) items per tile row of
// heads of the decode prologue. A q item's reader gathers one row per head
// and tile, so at small batch the item of all H heads is the program's
// long pole while the compute of a tile row costs the same for 1 or 32
// heads. With every head of a user in one tile row (rowGather) the heads
// are split into groups of G heads, G the smallest divisor of H of at
// least minGroupHeads below H for which the B*2*(H/G+1) q, gate, k and v
// items fit one per worker core; each group is its own item, writing only
// its rows of the shared result tiles (writeHeads). 1 otherwise.
func decodeHeadGroups(d prologueDims, workers int) int {
	if d.HRt != 1 || d.KRt != 1 {
		return 1
	}
	for g := minGroupHeads; g < d.H; g++ {
		if d.H%g == 0 && d.B*2*(d.H/g+1) <= workers {
			return d.H / g
		}
	}
	return 1
}
