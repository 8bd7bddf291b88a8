package lower

import (
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
// normalises and rotates all those heads at once, and the q result
// [B,H,D] is written tile by tile with no further assembly.
//
// Work items, per user (in this order): q (one per 32 heads), k (one per
// 32 kv heads), gate, v, and, when a cache result is not written in place,
// one copy item per (cache, kv head). Items are split over the cores; the
// compute kernel only sees the q and k items.
//
//   - q, k: the reader gathers x (Dt tiles, heads as rows, zero rows past
//     the last head; when a user's heads fit one tile row, from row 0 of
//     each head's source tile by two 64-byte reads, blocks.GatherRows),
//     streams the norm weight tiles and builds the RoPE
//     matrix of the user (blocks.RopeMatrix: cos on the diagonal, the
//     signed sin at the rotate-half positions, 1 past the rotary dims)
//     from the cos and sin rows. Compute: x^2 (fp32), the row sums
//     (reduce_tile SUM REDUCE_ROW), * 1/D, + eps, rsqrt; per tile x *
//     rsqrt (bcast cols, fp32), * (w + offset) (bcast rows) packed to the
//     input dtype, which is the Doc's rounding point of the norm; the
//     tiles holding rotary dims are then multiplied by the RoPE matrix
//     (matmul_tiles into fp32 DEST, one rounding at the pack), the others
//     are the result as they are. The writer stores the q tiles, or, for
//     k, copies the row of each kv head into row pos%32 of its cache tile
//     (read, patch, write back; up to 16 cache tiles all read at the
//     item's start and written under one barrier).
//   - gate: the reader gathers the gate columns the same way; the writer
//     stores them.
//   - v: the reader streams the v tiles of each kv head (the head's D
//     values are row 0 of Dt tiles); the writer patches them into row
//     pos%32 of the cache tiles.
//   - copy (only without aliasing): every cache page of the kv head
//     outside tile row pos/32 is copied to the result.
//
// In place (the result's buffer is the cache's, ctx.Alias) only the
// B*Hkv*Dt cache tiles of tile row pos/32 of each cache are read and
// rewritten; every other cache row is untouched.

// prologueDims are the sizes of one attn_prologue.
type prologueDims struct {
	B, H, Hkv, D, R, L int
	Dt, HRt, KRt, RtR  int
	Lt                 int
}

func attnPrologueDims(op *ir.Op) (prologueDims, error) {
	qg, k, v, qw, kw, cos, sin, kc, vc := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Operands[4], op.Operands[5], op.Operands[6], op.Operands[7], op.Operands[8]
	var d prologueDims
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
	if d.D%ir.TileSize != 0 {
		return d, fmt.Errorf("rule prologue-head-dim: head dim %d must be a multiple of %d (heads are whole tiles)", d.D, ir.TileSize)
	}
	d.Dt = d.D / ir.TileSize
	d.HRt = (d.H + ir.TileSize - 1) / ir.TileSize
	d.KRt = (d.Hkv + ir.TileSize - 1) / ir.TileSize
	d.RtR = (d.R + ir.TileSize - 1) / ir.TileSize
	d.Lt = (d.L + ir.TileSize - 1) / ir.TileSize
	return d, nil
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

// prologueItems is the per-user item list of attn_prologue.
type prologueItems struct {
	q, k, gate, v, kcopy, vcopy itemSeg
	perUser                     int
}

func newPrologueItems(d prologueDims, copyK, copyV bool) prologueItems {
	var it prologueItems
	next := 0
	seg := func(n int) itemSeg { s := itemSeg{next, n}; next += n; return s }
	it.q, it.k, it.gate, it.v = seg(d.HRt), seg(d.KRt), seg(d.HRt), seg(d.KRt)
	if copyK {
		it.kcopy = seg(d.Hkv)
	}
	if copyV {
		it.vcopy = seg(d.Hkv)
	}
	it.perUser = next
	return it
}

// normed reports whether item i (global index) runs on the compute kernel.
func (it prologueItems) normed(i int) bool {
	r := i % it.perUser
	return it.q.holds(r) || it.k.holds(r)
}

func lowerAttnPrologue(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	qg, k, v, qw, kw, cos, sin, kc, vc, pos := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Operands[4], op.Operands[5], op.Operands[6], op.Operands[7], op.Operands[8], op.Operands[9]
	qOut, gOut, kcOut, vcOut := op.Results[0], op.Results[1], op.Results[2], op.Results[3]
	eps, offset, err := prologuePreamble(op, "attn_prologue")
	if err != nil {
		return nil, err
	}
	d, err := attnPrologueDims(op)
	if err != nil {
		return nil, err
	}
	dt := qg.Type.DType
	for _, x := range []*ir.Value{k, v, kc, vc, qOut, gOut, kcOut, vcOut} {
		if x.Type.DType != dt {
			return nil, fmt.Errorf("rule prologue-dtype: %s is %s; qg, k, v, the caches and the results must share qg's dtype %s", x, x.Type.DType, dt)
		}
	}
	if blocks.ElemBytes(dt) == 0 {
		return nil, fmt.Errorf("rule prologue-dtype: the program moves single rows of qg, k, v and the caches, which needs bf16 or fp32, not %s (block floats share exponents across a face row)", dt)
	}
	if cos.Type.DType != sin.Type.DType || blocks.ElemBytes(cos.Type.DType) == 0 {
		return nil, fmt.Errorf("rule prologue-rope-dtype: cos (%s) and sin (%s) must share a bf16 or fp32 dtype (their elements are placed into the RoPE matrix)", cos.Type.DType, sin.Type.DType)
	}
	if qw.Type.DType != kw.Type.DType {
		return nil, fmt.Errorf("rule prologue-norm-dtype: q_norm (%s) and k_norm (%s) must share a dtype (one weight CB)", qw.Type.DType, kw.Type.DType)
	}
	rope, err := blocks.NewRopeMatrix(d.R, d.RtR*ir.TileSize)
	if err != nil {
		return nil, err
	}
	inPlaceK := ctx.BufferName(kcOut) == ctx.BufferName(kc)
	inPlaceV := ctx.BufferName(vcOut) == ctx.BufferName(vc)
	items := newPrologueItems(d, !inPlaceK, !inPlaceV)
	nItems := d.B * items.perUser

	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	// One item is a few dozen tile operations: one item per core while
	// cores last.
	plan := PlanSplit(nItems, t.NumWorkers(), 8*d.Dt*EltwiseTileCycles, 0, 0)
	cores, rs := firstCores(t, plan.Cores)
	tabDT := cos.Type.DType
	tabBytes := tabDT.TileBytes()
	cbs := blocks.NewCBPlan(p, t, rs)
	cbX := cbs.Input("x", dt, d.Dt)
	cbW := cbs.Input("norm_weight", qw.Type.DType, 2)
	cbM := cbs.Input("rope_matrix", tabDT, 2)
	cbScaler := cbs.Input("scaler", ir.BF16, 1)
	cbCopy := cbs.Input("moved", dt, 2)
	seg := blocks.SegFor(d.D)
	qImage, kImage := blocks.ImageOf(ir.Shape{d.H, d.D}), blocks.ImageOf(ir.Shape{d.Hkv, d.D})
	qPrefetch, kPrefetch := blocks.PrefetchPages(qImage, seg, 1), blocks.PrefetchPages(kImage, seg, 1)
	cbSlotQG := cbs.Scratch("qg_tiles", dt, qPrefetch)
	cbSlotK := cbs.Scratch("k_tiles", dt, kPrefetch)
	cbTab := cbs.Pages(blocks.ScratchCB, "rope_tables", tabDT, tabBytes, 2*d.RtR)
	cbZero := cbs.Scratch("zero_tile", tabDT, 1)
	cbPosR := -1
	if !inPlaceK || !inPlaceV {
		cbPosR = cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, pos.Type.DType.ElemBytes(), 1)
	}
	cbSq := cbs.Scratch("x_squared", ir.FP32, d.Dt)
	cbRs := cbs.Scratch("rsqrt_mean", ir.FP32, 1)
	cbXn := cbs.Scratch("x_normed", ir.FP32, 2)
	cbWo := -1
	if offset != 0 {
		cbWo = cbs.Scratch("weight_plus_offset", ir.FP32, 2)
	}
	cbY := cbs.Scratch("normed_rotary", dt, d.RtR)
	cbOut := cbs.Output("out", dt, 2)
	// The k and v items patch the Hkv*Dt cache tiles of tile row pos/32:
	// all read at the item's start (before compute delivers the rows), one
	// barrier, then per result tile the row copies, the writes under one
	// final barrier — when they fit 16 slots; else one tile at a time.
	batchPatch := d.KRt == 1 && d.Hkv*d.Dt <= 16
	slots := 1
	if batchPatch {
		slots = d.Hkv * d.Dt
	}
	cbSlot := cbs.Scratch("cache_tile", dt, slots)
	cbPosW := cbs.Pages(blocks.ScratchCB, "pos_writer", ir.UInt32, pos.Type.DType.ElemBytes(), 1)
	// With every head of a user in one tile row the reader assembles a
	// head tile from row 0 of each head's source tile (blocks.GatherRows:
	// two 64-byte reads per head instead of a whole source page).
	rowGather := d.HRt == 1 && d.KRt == 1
	cbRows := -1
	if rowGather {
		cbRows = cbs.Pages(blocks.ScratchCB, "head_rows", dt, d.Dt*max(d.H, d.Hkv)*blocks.GatherRowSlot, 1)
	}
	if err := cbs.Err(fmt.Sprintf("attn_prologue with head dim %d", d.D)); err != nil {
		return nil, err
	}

	// Reader.
	rd := newReader(p, rs)
	ab := &accessBinder{ctx: ctx}
	ra := bindPrologueReader(ab, rd, op, inPlaceK, inPlaceV, cbPosR >= 0)
	if ab.err != nil {
		return nil, ab.err
	}
	qgAcc, kAcc, vAcc, qwAcc, kwAcc := ra.qg, ra.k, ra.v, ra.qw, ra.kw
	cosAcc, sinAcc, kcAcc, vcAcc, posAcc := ra.cos, ra.sin, ra.kc, ra.vc, ra.pos
	gq := &blocks.Gather{Out: qImage, DType: dt, Seg: seg, Fill: true, Prefetch: qPrefetch,
		Sources: []blocks.GatherSource{{Acc: qgAcc, Image: blocks.ImageOf(qg.Type.Shape)}}}
	gk := &blocks.Gather{Out: kImage, DType: dt, Seg: seg, Fill: true, Prefetch: kPrefetch,
		Sources: []blocks.GatherSource{{Acc: kAcc, Image: blocks.ImageOf(k.Type.Shape)}}}
	if err := gq.Check(); err != nil {
		return nil, err
	}
	tabIm := blocks.ImageOf(cos.Type.Shape)
	teb := blocks.ElemBytes(tabDT)
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	blocks.ScalerTile(b, cbScaler, 1)
	zero := blocks.Scratch(b, cbZero, "zero")
	blocks.FillWords(b, zero, tabBytes, 0)
	tab := blocks.ScratchPages(b, cbTab, 2*d.RtR, "tab")
	var rptr kir.Expr
	if cbPosR >= 0 {
		rptr = b.Let("ptr", kir.Div(readPos(b, posAcc, cbPosR), kir.Ci(ir.TileSize)))
	}
	gq.Begin(b, []int{cbSlotQG})
	gk.Begin(b, []int{cbSlotK})
	var headRows kir.Var
	if rowGather {
		headRows = blocks.Scratch(b, cbRows, "head_rows")
	}
	qgIm, kIm := blocks.ImageOf(qg.Type.Shape), blocks.ImageOf(k.Type.Shape)
	// normInputs streams the weight tiles of w around the user's RoPE
	// matrix tiles, in the order the compute kernel takes them.
	normInputs := func(wAcc *blocks.Access, user kir.Expr) {
		blocks.ReadPages(b, wAcc, cbW, kir.C(0), kir.Ci(d.RtR))
		b.Comment("RoPE matrix of the user from its cos and sin rows")
		trow := b.Let("trow", kir.Mul(kir.Div(user, kir.Ci(ir.TileSize)), kir.Ci(tabIm.Ct)))
		for i := 0; i < d.RtR; i++ {
			blocks.ReadPageTo(b, cosAcc, kir.Add(trow, kir.Ci(i)), kir.Add(tab, kir.Ci(i*tabBytes)))
			blocks.ReadPageTo(b, sinAcc, kir.Add(trow, kir.Ci(i)), kir.Add(tab, kir.Ci((d.RtR+i)*tabBytes)))
		}
		b.NoCAsyncReadBarrier()
		urow := b.Let("urow", kir.Mod(user, kir.Ci(ir.TileSize)))
		elem := func(base int) func(i kir.Expr) kir.Expr {
			return func(i kir.Expr) kir.Expr {
				tile := kir.Add(tab, kir.Mul(kir.Add(kir.Div(i, kir.Ci(ir.TileSize)), kir.Ci(base)), kir.Ci(tabBytes)))
				return kir.Add(tile, blocks.FaceOffset(urow, kir.Mod(i, kir.Ci(ir.TileSize)), teb))
			}
		}
		for _, mt := range rope.Tiles {
			b.CBReserveBack(cbM, kir.C(1))
			m := b.Let("m", kir.GetWritePtr{CB: cbM})
			blocks.LocalCopy(b, zero, m, tabBytes)
			b.NoCAsyncReadBarrier()
			mt.EmitTile(b, m, tabDT, elem(0), elem(d.RtR))
			b.CBPushBack(cbM, kir.C(1))
		}
		if d.Dt > d.RtR {
			blocks.ReadPages(b, wAcc, cbW, kir.Ci(d.RtR), kir.Ci(d.Dt-d.RtR))
		}
	}
	// gatherHeads pushes the Dt tiles of tile row hr of the [n, D] view
	// of heads, head h taken from columns colOf(h) + c of user's row. A
	// Gather's Map is read when Page emits, so the q and gate items share
	// gq (and its one-page cache of qg) with different maps.
	gatherHeads := func(g *blocks.Gather, cb int, user, hr kir.Expr, colOf func(h kir.Expr) kir.Expr) {
		if rowGather {
			// Head h's columns colOf(h) + 32*dd.. are row 0 of source tile
			// (colOf(h) + 32*dd)/32 of the user's row (colOf is a multiple of 32).
			src, n := qgAcc, d.H
			im := qgIm
			if g == gk {
				src, n, im = kAcc, d.Hkv, kIm
			}
			// The Dt tiles in groups of the CB's depth (all of them into x,
			// two into the copy CB), each group's reads under one barrier.
			group := d.Dt
			if cb == cbCopy {
				group = 2
			}
			for group > 1 && d.Dt%group != 0 {
				group--
			}
			eb := blocks.ElemBytes(dt)
			tb := dt.TileBytes()
			for d0 := 0; d0 < d.Dt; d0 += group {
				b.CBReserveBack(cb, kir.Ci(group))
				tiles := b.Let("tiles", kir.GetWritePtr{CB: cb})
				blocks.GatherRowsTiles(b, src, headRows, tiles, group, tb, n, eb, func(t, h kir.Expr) kir.Expr {
					col := kir.Add(colOf(h), kir.Mul(kir.Add(t, kir.Ci(d0)), kir.Ci(ir.TileSize)))
					return kir.Add(kir.Mul(user, kir.Ci(im.Ct)), kir.Div(col, kir.Ci(ir.TileSize)))
				})
				if tabBytes >= 1024*eb {
					b.For("zt", kir.C(0), kir.Ci(group), func(t kir.Var) {
						blocks.ClearRows(b, kir.Add(tiles, kir.Mul(t, kir.Ci(tb))), zero, n, eb)
					})
				}
				b.NoCAsyncReadBarrier()
				b.CBPushBack(cb, kir.Ci(group))
			}
			return
		}
		g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			return []blocks.Run{{Src: 0, Row: user, Col: kir.Add(colOf(row), col)}}
		}
		b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) { g.Page(b, cb, kir.Add(kir.Mul(hr, kir.Ci(d.Dt)), dd)) })
	}
	// heads emits body(h) for the kv heads of tile row hr.
	heads := func(b *kir.Builder, hr kir.Expr, body func(h kir.Var)) {
		b.For("hh", kir.C(0), kir.Ci(ir.TileSize), func(hh kir.Var) {
			h := b.Let("h", kir.Add(kir.Mul(hr, kir.Ci(ir.TileSize)), hh))
			b.If(kir.Lt(h, kir.Ci(d.Hkv)), func() { body(h) })
		})
	}
	cachePage := func(user, h, tt, dd kir.Expr) kir.Expr {
		return kir.Add(kir.Mul(kir.Add(kir.Mul(kir.Add(kir.Mul(user, kir.Ci(d.Hkv)), h), kir.Ci(d.Lt)), tt), kir.Ci(d.Dt)), dd)
	}
	twoD := 2 * d.D
	b.For("i", rstart, kir.Add(rstart, rcount), func(i kir.Var) {
		u := b.Let("u", kir.Div(i, kir.Ci(items.perUser)))
		r := b.Let("r", kir.Mod(i, kir.Ci(items.perUser)))
		items.q.on(b, r, func(hr kir.Expr) {
			b.Comment("q: query columns of the heads, norm weight, RoPE matrix")
			gatherHeads(gq, cbX, u, hr, func(h kir.Expr) kir.Expr { return kir.Mul(h, kir.Ci(twoD)) })
			normInputs(qwAcc, u)
		})
		items.k.on(b, r, func(hr kir.Expr) {
			b.Comment("k: key heads, norm weight, RoPE matrix")
			gatherHeads(gk, cbX, u, hr, func(h kir.Expr) kir.Expr { return kir.Mul(h, kir.Ci(d.D)) })
			normInputs(kwAcc, u)
		})
		items.gate.on(b, r, func(hr kir.Expr) {
			b.Comment("gate: gate columns of the heads")
			gatherHeads(gq, cbCopy, u, hr, func(h kir.Expr) kir.Expr { return kir.Add(kir.Mul(h, kir.Ci(twoD)), kir.Ci(d.D)) })
		})
		items.v.on(b, r, func(hr kir.Expr) {
			b.Comment("v: the tiles of each kv head (its row is row 0)")
			heads(b, hr, func(h kir.Var) {
				blocks.ReadPages(b, vAcc, cbCopy, kir.Add(kir.Mul(u, kir.Ci(d.Hkv*d.Dt)), kir.Mul(h, kir.Ci(d.Dt))), kir.Ci(d.Dt))
			})
		})
		copyCache := func(a *blocks.Access) func(h kir.Expr) {
			return func(h kir.Expr) {
				b.Comment("cache copy: every page outside tile row pos/32")
				b.For("t", kir.C(0), kir.Ci(d.Lt), func(tt kir.Var) {
					b.If(kir.Ne(tt, rptr), func() {
						blocks.ReadPages(b, a, cbCopy, cachePage(u, h, tt, kir.C(0)), kir.Ci(d.Dt))
					})
				})
			}
		}
		if !inPlaceK {
			items.kcopy.on(b, r, copyCache(kcAcc))
		}
		if !inPlaceV {
			items.vcopy.on(b, r, copyCache(vcAcc))
		}
	})
	if rowGather {
		blocks.ReleaseScratch(b, cbRows)
	}
	gk.End(b)
	gq.End(b)
	if cbPosR >= 0 {
		blocks.ReleaseScratch(b, cbPosR)
	}
	blocks.ReleaseScratchPages(b, cbTab, 2*d.RtR)
	blocks.ReleaseScratch(b, cbZero)

	// Compute: the q and k items.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	citems := cp.RuntimeArg("items")
	c := blocks.NewCompute(p, cp)
	cb := c.B
	c.Startup(cbX, cbScaler, cbOut)
	cb.CBWaitFront(cbScaler, kir.C(1))
	nc := headNorm{x: cbX, w: cbW, wo: cbWo, scaler: cbScaler, sq: cbSq, rs: cbRs, xn: cbXn, y: cbY, out: cbOut,
		Dt: d.Dt, RtR: d.RtR, D: d.D, eps: eps, offset: offset}
	c.For("i", kir.C(0), citems, func(kir.Var) {
		nc.emit(c, func() {
			cb.Comment("times the RoPE matrix")
			for col := 0; col < rope.ColTiles(); col++ {
				c.Acquire()
				for _, row := range rope.RowsFor(col) {
					cb.CBWaitFront(cbM, kir.C(1))
					c.Matmul(cbY, cbM, kir.Ci(row), kir.C(0), kir.C(0), false)
					cb.CBPopFront(cbM, kir.C(1))
				}
				c.PackOut(cbOut, 1)
			}
		})
	})
	cb.CBPopFront(cbScaler, kir.C(1))

	// Writer.
	wr := newWriter(p, rs)
	wa := bindPrologueWriter(ab, wr, op, inPlaceK, inPlaceV)
	if ab.err != nil {
		return nil, ab.err
	}
	qAcc, gAcc, kcIn, vcIn, kcW, vcW, wpAcc := wa.q, wa.gate, wa.kcIn, wa.vcIn, wa.kcOut, wa.vcOut, wa.pos
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	b = wr.Builder()
	wpos := readPos(b, wpAcc, cbPosW)
	wptr := b.Let("ptr", kir.Div(wpos, kir.Ci(ir.TileSize)))
	prow := b.Let("prow", kir.Mod(wpos, kir.Ci(ir.TileSize)))
	slot := blocks.ScratchPages(b, cbSlot, slots, "cache_tile")
	eb := blocks.ElemBytes(dt)
	tb := dt.TileBytes()
	// patch writes row srcRow of the tile at src into row pos%32 of cache
	// page page (read from in, written to out).
	patch := func(in, out *blocks.Access, page, src, srcRow kir.Expr) {
		pg := b.Let("pg", page)
		blocks.ReadPageTo(b, in, pg, slot)
		b.NoCAsyncReadBarrier()
		blocks.CopyTileRow(b, src, srcRow, slot, prow, eb)
		b.NoCAsyncReadBarrier()
		b.NoCAsyncWrite(slot, out.PageAddr(pg), kir.Ci(tb))
		b.NoCAsyncWriteBarrier()
	}
	b.For("i", wstart, kir.Add(wstart, wcount), func(i kir.Var) {
		u := b.Let("u", kir.Div(i, kir.Ci(items.perUser)))
		r := b.Let("r", kir.Mod(i, kir.Ci(items.perUser)))
		items.q.on(b, r, func(hr kir.Expr) {
			blocks.WritePages(b, qAcc, cbOut, kir.Mul(kir.Add(kir.Mul(u, kir.Ci(d.HRt)), hr), kir.Ci(d.Dt)), kir.Ci(d.Dt))
		})
		// patchAll is the batched patch of every (kv head, D tile) cache
		// tile of the item: next(h, dd) waits for the source tile and
		// returns its L1 address and row, done(h, dd) releases it.
		patchAll := func(in, out *blocks.Access, headsOuter bool, next func(h, dd int) (kir.Expr, kir.Expr), done func(h, dd int)) {
			at := func(h, dd int) kir.Expr { return kir.Add(slot, kir.Ci((h*d.Dt+dd)*tb)) }
			for h := range d.Hkv {
				for dd := range d.Dt {
					blocks.ReadPageTo(b, in, cachePage(u, kir.Ci(h), wptr, kir.Ci(dd)), at(h, dd))
				}
			}
			b.NoCAsyncReadBarrier()
			each := func(h, dd int) {
				src, row := next(h, dd)
				blocks.CopyTileRow(b, src, row, at(h, dd), prow, eb)
				b.NoCAsyncReadBarrier()
				done(h, dd)
				b.NoCAsyncWrite(at(h, dd), out.PageAddr(cachePage(u, kir.Ci(h), wptr, kir.Ci(dd))), kir.Ci(tb))
			}
			if headsOuter {
				for h := range d.Hkv {
					for dd := range d.Dt {
						each(h, dd)
					}
				}
			} else {
				for dd := range d.Dt {
					for h := range d.Hkv {
						each(h, dd)
					}
				}
			}
			b.NoCAsyncWriteBarrier()
		}
		items.k.on(b, r, func(hr kir.Expr) {
			b.Comment("k: each kv head's row into row pos%32 of its cache tiles")
			if batchPatch {
				// Result tile dd holds every kv head's row dd of D.
				var src kir.Var
				patchAll(kcIn, kcW, false, func(h, dd int) (kir.Expr, kir.Expr) {
					if h == 0 {
						b.CBWaitFront(cbOut, kir.C(1))
						src = b.Let("src", kir.GetReadPtr{CB: cbOut})
					}
					return src, kir.Ci(h)
				}, func(h, dd int) {
					if h == d.Hkv-1 {
						b.CBPopFront(cbOut, kir.C(1))
					}
				})
				return
			}
			b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) {
				b.CBWaitFront(cbOut, kir.C(1))
				src := b.Let("src", kir.GetReadPtr{CB: cbOut})
				heads(b, hr, func(h kir.Var) {
					patch(kcIn, kcW, cachePage(u, h, wptr, dd), src, kir.Mod(h, kir.Ci(ir.TileSize)))
				})
				b.CBPopFront(cbOut, kir.C(1))
			})
		})
		items.gate.on(b, r, func(hr kir.Expr) {
			blocks.WritePages(b, gAcc, cbCopy, kir.Mul(kir.Add(kir.Mul(u, kir.Ci(d.HRt)), hr), kir.Ci(d.Dt)), kir.Ci(d.Dt))
		})
		items.v.on(b, r, func(hr kir.Expr) {
			b.Comment("v: row 0 of each tile into row pos%32 of the cache tile")
			if batchPatch {
				patchAll(vcIn, vcW, true, func(h, dd int) (kir.Expr, kir.Expr) {
					b.CBWaitFront(cbCopy, kir.C(1))
					return b.Let("src", kir.GetReadPtr{CB: cbCopy}), kir.C(0)
				}, func(h, dd int) { b.CBPopFront(cbCopy, kir.C(1)) })
				return
			}
			heads(b, hr, func(h kir.Var) {
				b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) {
					b.CBWaitFront(cbCopy, kir.C(1))
					src := b.Let("src", kir.GetReadPtr{CB: cbCopy})
					patch(vcIn, vcW, cachePage(u, h, wptr, dd), src, kir.C(0))
					b.CBPopFront(cbCopy, kir.C(1))
				})
			})
		})
		copyCache := func(a *blocks.Access) func(h kir.Expr) {
			return func(h kir.Expr) {
				b.For("t", kir.C(0), kir.Ci(d.Lt), func(tt kir.Var) {
					b.If(kir.Ne(tt, wptr), func() {
						blocks.WritePages(b, a, cbCopy, cachePage(u, h, tt, kir.C(0)), kir.Ci(d.Dt))
					})
				})
			}
		}
		if !inPlaceK {
			items.kcopy.on(b, r, copyCache(kcW))
		}
		if !inPlaceV {
			items.vcopy.on(b, r, copyCache(vcW))
		}
	})
	blocks.ReleaseScratchPages(b, cbSlot, slots)
	blocks.ReleaseScratch(b, cbPosW)

	for ci, core := range cores {
		s, n := plan.Range(ci)
		normed := 0
		for i := s; i < s+n; i++ {
			if items.normed(i) {
				normed++
			}
		}
		rd.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
		cp.SetRuntimeArgs(core, kir.U32(uint32(normed)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
	return p, nil
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
// (reduce_tile SUM REDUCE_ROW), * 1/D, + eps, rsqrt; per tile x * rsqrt
// (bcast cols, fp32) * (w + offset) (bcast rows) packed to y's dtype, the
// Doc's rounding point of the norm. The first RtR tiles go to y (waited
// for as a block), then rope emits their rotation into out (consuming
// nothing of y); the other tiles go to out as they are. Consumes Dt pages
// of x and Dt pages of w, produces Dt pages of out.
func (n headNorm) emit(c *blocks.Compute, rope func()) {
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
	cb.CBWaitFront(n.sq, kir.Ci(n.Dt))
	c.Acquire()
	c.For("j", kir.C(0), kir.Ci(n.Dt), func(j kir.Var) {
		c.Reduce(kir.ReduceSum, kir.ReduceRow, n.sq, n.scaler, n.rs, j, kir.C(0), kir.C(0))
	})
	c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(1 / float64(n.D))}, kir.C(0))
	c.SFPU(blocks.SFPUStep{Op: kir.SFPUAddScalar, Param: float32(n.eps)}, kir.C(0))
	c.SFPU(blocks.SFPUStep{Op: kir.SFPURsqrt}, kir.C(0))
	c.PackOut(n.rs, 1)
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
	rope()
	cb.CBPopFront(n.y, kir.Ci(n.RtR))
	if n.RtR < n.Dt {
		cb.Comment("the other normed tiles are the result")
		c.For("j", kir.Ci(n.RtR), kir.Ci(n.Dt), func(j kir.Var) { normTile(j, n.out) })
	}
	cb.CBPopFront(n.rs, kir.C(1))
	cb.CBPopFront(n.x, kir.Ci(n.Dt))
}

// prologueReads are the reader's accesses of the operands of attn_prologue
// and attn_prologue_prefill (qg, k, v, q_norm, k_norm, cos, sin, k_cache,
// v_cache, pos).
type prologueReads struct{ qg, k, v, qw, kw, cos, sin, kc, vc, pos *blocks.Access }

// bindPrologueReader declares the prologue operands' buffers as runtime
// args of the reader rd in this order: qg, k, v, q_norm, k_norm, cos, sin,
// then k_cache unless inPlaceK, v_cache unless inPlaceV and pos when
// readPos. The accesses not declared stay nil; failures are left in ab.
func bindPrologueReader(ab *accessBinder, rd *kir.Kernel, op *ir.Op, inPlaceK, inPlaceV, readPos bool) prologueReads {
	o := op.Operands
	var r prologueReads
	r.qg, r.k, r.v = ab.bind(rd, "qg_addr", o[0]), ab.bind(rd, "k_addr", o[1]), ab.bind(rd, "v_addr", o[2])
	r.qw, r.kw = ab.bind(rd, "q_norm_addr", o[3]), ab.bind(rd, "k_norm_addr", o[4])
	r.cos, r.sin = ab.bind(rd, "cos_addr", o[5]), ab.bind(rd, "sin_addr", o[6])
	if !inPlaceK {
		r.kc = ab.bind(rd, "k_cache_addr", o[7])
	}
	if !inPlaceV {
		r.vc = ab.bind(rd, "v_cache_addr", o[8])
	}
	if readPos {
		r.pos = ab.bind(rd, "pos_addr", o[9])
	}
	return r
}

// prologueWrites are the prologue writer's accesses: the q and gate
// results, the caches it reads (kcIn, vcIn) and writes (kcOut, vcOut: the
// read access itself when that cache is updated in place) and pos.
type prologueWrites struct{ q, gate, kcIn, vcIn, kcOut, vcOut, pos *blocks.Access }

// bindPrologueWriter declares the buffers the prologue writer wr touches
// as its runtime args in this order: q, gate, k_cache, v_cache, then the
// k and v cache results unless updated in place, then pos. Failures are
// left in ab.
func bindPrologueWriter(ab *accessBinder, wr *kir.Kernel, op *ir.Op, inPlaceK, inPlaceV bool) prologueWrites {
	o, res := op.Operands, op.Results
	var w prologueWrites
	w.q, w.gate = ab.bind(wr, "q_addr", res[0]), ab.bind(wr, "gate_addr", res[1])
	w.kcIn, w.vcIn = ab.bind(wr, "k_cache_addr", o[7]), ab.bind(wr, "v_cache_addr", o[8])
	w.kcOut, w.vcOut = w.kcIn, w.vcIn
	if !inPlaceK {
		w.kcOut = ab.bind(wr, "k_cache_out_addr", res[2])
	}
	if !inPlaceV {
		w.vcOut = ab.bind(wr, "v_cache_out_addr", res[3])
	}
	w.pos = ab.bind(wr, "pos_addr", o[9])
	return w
}

// prologuePreamble checks what both attention prologues (kind names the op
// in errors) require of op: the float attributes eps and offset, which it
// returns; every operand but pos and every result in tile layout; and pos
// a position operand (checkPos).
func prologuePreamble(op *ir.Op, kind string) (eps, offset float64, err error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", kind)
	}
	o, r := op.Operands, op.Results
	for _, x := range []*ir.Value{o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8], r[0], r[1], r[2], r[3]} {
		if err := requireTile("value", x); err != nil {
			return 0, 0, err
		}
	}
	if err := checkPos(o[9]); err != nil {
		return 0, 0, err
	}
	return eps, offset, nil
}
