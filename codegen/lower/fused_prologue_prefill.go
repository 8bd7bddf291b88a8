package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// attn_prologue_prefill: the prologue of S tokens per user at positions
// pos..pos+S-1. Inputs qg [B,S,H*2D], k and v [B,S,Hkv*D], cos and sin
// [S,1,R]; results q [B,H,S,D], gate [B,S,H,D] and the caches with rows
// pos..pos+S-1 written.
//
// Tokens are tile rows here: the reader gathers (blocks.Gather) the
// columns of one head for up to 32 tokens into the rows of Dt tiles, the
// layout of q's result and of the cache rows. Work items, per user: q (one
// per head and token tile row), k (one per kv head, all its token tile
// rows: positions of consecutive token tile rows share a cache tile when
// pos is not tile aligned, so one core must patch them in order), gate
// (one per token and 32 heads, heads as rows as in the decode prologue),
// v (one per kv head) and, without aliasing, one copy item per (cache, kv
// head) for the cache tile rows the tokens do not touch.
//
// The norm is the decode prologue's (headNorm). RoPE tables differ per
// row (token), so it is element-wise: the reader gathers the tokens' cos
// rows (1 past the rotary dims) and sin rows (0 past them) into tiles; the
// compute kernel rotates the normed, rounded tiles with a matmul by the
// signed rotate-half permutation (blocks.RopeMatrix.RotateHalf: moves bf16
// values exactly), multiplies y by cos and the rotated tile by sin into
// fp32 CBs and adds them into the result (the FPU reads the fp32 products
// as tf32: the one place this program deviates from fp32 math, by less
// than 2^-10 of a product before the bf16 rounding, as the composed
// rotary's program does; sim/ref models it, rotaryFPU).
//
// The writer patches the rows of each k or v tile into the one or two
// cache tiles their positions fall in (read, copy rows, write back).

func lowerAttnProloguePrefill(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	qg, k, v, qw, kw, cos, sin, kc, vc, pos := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Operands[4], op.Operands[5], op.Operands[6], op.Operands[7], op.Operands[8], op.Operands[9]
	qOut, gOut, kcOut, vcOut := op.Results[0], op.Results[1], op.Results[2], op.Results[3]
	eps, offset, err := prologuePreamble(op, "attn_prologue_prefill")
	if err != nil {
		return nil, err
	}
	D := qw.Type.Shape.Numel()
	s, ks, cs, c := qg.Type.Shape, k.Type.Shape, cos.Type.Shape, kc.Type.Shape
	if D < 2 || kw.Type.Shape.Numel() != D || s.Rank() != 3 || s[2]%(2*D) != 0 ||
		ks.Rank() != 3 || !ks.Equal(v.Type.Shape) || ks[0] != s[0] || ks[1] != s[1] || ks[2]%D != 0 ||
		cs.Rank() != 3 || !cs.Equal(sin.Type.Shape) || cs[0] != s[1] || cs[1] != 1 || cs[2]%2 != 0 || cs[2] < 2 || cs[2] > D ||
		c.Rank() != 4 || !c.Equal(vc.Type.Shape) || c[0] != s[0] || c[1] != ks[2]/D || c[2] < s[1] || c[3] != D {
		return nil, fmt.Errorf("rule prologue-shape: want qg [B,S,H*2D], k and v [B,S,Hkv*D], cos and sin [S,1,R] (R even, <= D), caches [B,Hkv,L>=S,D] and norms of D elements; got qg %s, k %s, v %s, cos %s, sin %s, caches %s and %s, norms %s and %s",
			s, ks, v.Type.Shape, cs, sin.Type.Shape, c, vc.Type.Shape, qw.Type.Shape, kw.Type.Shape)
	}
	B, S, H, Hkv, R, L := s[0], s[1], s[2]/(2*D), ks[2]/D, cs[2], c[2]
	if D%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule prologue-head-dim: head dim %d must be a multiple of %d (heads are whole tiles)", D, ir.TileSize)
	}
	dt := qg.Type.DType
	for _, x := range []*ir.Value{k, v, kc, vc, qOut, gOut, kcOut, vcOut} {
		if x.Type.DType != dt {
			return nil, fmt.Errorf("rule prologue-dtype: %s is %s; qg, k, v, the caches and the results must share qg's dtype %s", x, x.Type.DType, dt)
		}
	}
	if blocks.ElemBytes(dt) == 0 || blocks.ElemBytes(cos.Type.DType) == 0 || blocks.ElemBytes(sin.Type.DType) == 0 {
		return nil, fmt.Errorf("rule prologue-dtype: the program moves single rows of qg, k, v, the tables and the caches, which needs bf16 or fp32, not %s / %s / %s", dt, cos.Type.DType, sin.Type.DType)
	}
	if qw.Type.DType != kw.Type.DType {
		return nil, fmt.Errorf("rule prologue-norm-dtype: q_norm (%s) and k_norm (%s) must share a dtype (one weight CB)", qw.Type.DType, kw.Type.DType)
	}
	Dt, St, HRt, RtR, Lt := D/ir.TileSize, (S+ir.TileSize-1)/ir.TileSize, (H+ir.TileSize-1)/ir.TileSize, (R+ir.TileSize-1)/ir.TileSize, (L+ir.TileSize-1)/ir.TileSize
	rope, err := blocks.NewRopeMatrix(R, RtR*ir.TileSize)
	if err != nil {
		return nil, err
	}
	swap := rope.RotateHalf()
	inPlaceK := ctx.BufferName(kcOut) == ctx.BufferName(kc)
	inPlaceV := ctx.BufferName(vcOut) == ctx.BufferName(vc)
	var it struct {
		q, k, gate, v, kcopy, vcopy itemSeg
		perUser                     int
	}
	seg := func(n int) itemSeg { sg := itemSeg{it.perUser, n}; it.perUser += n; return sg }
	it.q, it.k, it.gate, it.v = seg(H*St), seg(Hkv), seg(S*HRt), seg(Hkv)
	if !inPlaceK {
		it.kcopy = seg(Hkv)
	}
	if !inPlaceV {
		it.vcopy = seg(Hkv)
	}
	// units is the number of compute units (norm tile rows) of item i.
	units := func(i int) int {
		switch r := i % it.perUser; {
		case it.q.holds(r):
			return 1
		case it.k.holds(r):
			return St
		}
		return 0
	}

	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	plan := PlanSplit(B*it.perUser, t.NumWorkers(), 8*Dt*EltwiseTileCycles, 0, 0)
	cores, rs := firstCores(t, plan.Cores)
	cbs := blocks.NewCBPlan(p, t, rs)
	cbX := cbs.Input("x", dt, Dt)
	cbW := cbs.Input("norm_weight", qw.Type.DType, 2)
	cbCos := cbs.Input("cos_rows", cos.Type.DType, 2)
	cbSin := cbs.Input("sin_rows", sin.Type.DType, 2)
	cbPerm := cbs.Input("rotate_half", dt, len(swap.Tiles))
	cbScaler := cbs.Input("scaler", ir.BF16, 1)
	cbCopy := cbs.Input("moved", dt, 2)
	slotQ := cbs.Scratch("qg_tile", dt, 1)
	slotG := cbs.Scratch("qg_gate_tile", dt, 1)
	slotK := cbs.Scratch("k_tile", dt, 1)
	slotV := cbs.Scratch("v_tile", dt, 1)
	slotC := cbs.Scratch("cos_tile", cos.Type.DType, 1)
	slotS := cbs.Scratch("sin_tile", sin.Type.DType, 1)
	cbPosR := -1
	if !inPlaceK || !inPlaceV {
		cbPosR = cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, pos.Type.DType.ElemBytes(), 1)
	}
	cbSq := cbs.Scratch("x_squared", ir.FP32, Dt)
	cbRs := cbs.Scratch("rsqrt_mean", ir.FP32, 1)
	cbXn := cbs.Scratch("x_normed", ir.FP32, 2)
	cbWo := -1
	if offset != 0 {
		cbWo = cbs.Scratch("weight_plus_offset", ir.FP32, 2)
	}
	cbY := cbs.Scratch("normed_rotary", dt, RtR)
	cbYs := cbs.Scratch("rotated_half", dt, 1)
	cbT1 := cbs.Scratch("y_cos", ir.FP32, 1)
	cbT2 := cbs.Scratch("ys_sin", ir.FP32, 1)
	cbOut := cbs.Output("out", dt, 2)
	cbSlot := cbs.Scratch("cache_tile", dt, 1)
	cbPosW := cbs.Pages(blocks.ScratchCB, "pos_writer", ir.UInt32, pos.Type.DType.ElemBytes(), 1)
	if err := cbs.Err(fmt.Sprintf("attn_prologue_prefill with head dim %d", D)); err != nil {
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
	sg := blocks.SegFor(D)
	tokRows := blocks.ImageOf(ir.Shape{S, D})
	qgIm := blocks.ImageOf(s)
	gather := func(src *blocks.Access, im, out blocks.Image, dtype ir.DType, segLen int, fill float32) *blocks.Gather {
		return &blocks.Gather{Out: out, DType: dtype, Seg: segLen, Fill: true, FillValue: fill, Sources: []blocks.GatherSource{{Acc: src, Image: im}}}
	}
	gq := gather(qgAcc, qgIm, tokRows, dt, sg, 0)
	gg := gather(qgAcc, qgIm, blocks.ImageOf(ir.Shape{H, D}), dt, sg, 0)
	gk := gather(kAcc, blocks.ImageOf(ks), tokRows, dt, sg, 0)
	gv := gather(vAcc, blocks.ImageOf(ks), tokRows, dt, sg, 0)
	tabRows := blocks.ImageOf(ir.Shape{S, R})
	tsg := blocks.SegFor(R, R/2)
	gc := gather(cosAcc, blocks.ImageOf(cs), tabRows, cos.Type.DType, tsg, 1)
	gs := gather(sinAcc, blocks.ImageOf(cs), tabRows, sin.Type.DType, tsg, 0)
	for _, g := range []*blocks.Gather{gq, gc} {
		if err := g.Check(); err != nil {
			return nil, err
		}
	}
	// Every token's table row: row s of the [S,R] view is row s of the
	// tables' [S,1,R] (one row per matrix).
	tableMap := func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		return []blocks.Run{{Src: 0, Row: row, Col: col}}
	}
	gc.Map, gs.Map = tableMap, tableMap
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	blocks.ScalerTile(b, cbScaler, 1)
	b.Comment("the signed rotate-half permutation, resident")
	b.CBReserveBack(cbPerm, kir.Ci(len(swap.Tiles)))
	perm := b.Let("perm", kir.GetWritePtr{CB: cbPerm})
	for i, pt := range swap.Tiles {
		tile := b.Let("ptile", kir.Add(perm, kir.Ci(i*dt.TileBytes())))
		blocks.FillWords(b, tile, dt.TileBytes(), 0)
		pt.EmitTile(b, tile, dt, nil, nil)
	}
	b.CBPushBack(cbPerm, kir.Ci(len(swap.Tiles)))
	var touched0, touched1 kir.Expr // the cache tile rows the tokens touch
	if cbPosR >= 0 {
		posv := readPos(b, posAcc, cbPosR)
		touched0 = b.Let("c0", kir.Div(posv, kir.Ci(ir.TileSize)))
		touched1 = b.Let("c1", kir.Div(kir.Add(posv, kir.Ci(S-1)), kir.Ci(ir.TileSize)))
	}
	gathers := []*blocks.Gather{gq, gg, gk, gv, gc, gs}
	for i, slot := range []int{slotQ, slotG, slotK, slotV, slotC, slotS} {
		gathers[i].Begin(b, []int{slot})
	}
	// rows pushes the Dt tiles of token tile row st of the [S, D] view of
	// one head, token s taken from columns col0 + c of row user*S + s.
	rows := func(g *blocks.Gather, cb int, user, st, col0 kir.Expr) {
		g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			return []blocks.Run{{Src: 0, Row: kir.Add(kir.Mul(user, kir.Ci(S)), row), Col: kir.Add(col0, col)}}
		}
		b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) { g.Page(b, cb, kir.Add(kir.Mul(st, kir.Ci(Dt)), dd)) })
	}
	// normInputs streams w's tiles around the token rows of the tables.
	normInputs := func(wAcc *blocks.Access, st kir.Expr) {
		blocks.ReadPages(b, wAcc, cbW, kir.C(0), kir.Ci(RtR))
		b.For("rt", kir.C(0), kir.Ci(RtR), func(rt kir.Var) {
			pg := b.Let("tpg", kir.Add(kir.Mul(st, kir.Ci(RtR)), rt))
			gc.Page(b, cbCos, pg)
			gs.Page(b, cbSin, pg)
		})
		if Dt > RtR {
			blocks.ReadPages(b, wAcc, cbW, kir.Ci(RtR), kir.Ci(Dt-RtR))
		}
	}
	cachePage := func(user, h, tt, dd kir.Expr) kir.Expr {
		return kir.Add(kir.Mul(kir.Add(kir.Mul(kir.Add(kir.Mul(user, kir.Ci(Hkv)), h), kir.Ci(Lt)), tt), kir.Ci(Dt)), dd)
	}
	twoD := 2 * D
	b.For("i", rstart, kir.Add(rstart, rcount), func(i kir.Var) {
		u := b.Let("u", kir.Div(i, kir.Ci(it.perUser)))
		r := b.Let("r", kir.Mod(i, kir.Ci(it.perUser)))
		it.q.on(b, r, func(idx kir.Expr) {
			b.Comment("q: one head's query columns for a token tile row, norm weight, tables")
			h, st := b.Let("h", kir.Div(idx, kir.Ci(St))), b.Let("st", kir.Mod(idx, kir.Ci(St)))
			rows(gq, cbX, u, st, kir.Mul(h, kir.Ci(twoD)))
			normInputs(qwAcc, st)
		})
		it.k.on(b, r, func(j kir.Expr) {
			b.Comment("k: one kv head, every token tile row")
			b.For("st", kir.C(0), kir.Ci(St), func(st kir.Var) {
				rows(gk, cbX, u, st, kir.Mul(j, kir.Ci(D)))
				normInputs(kwAcc, st)
			})
		})
		it.gate.on(b, r, func(idx kir.Expr) {
			b.Comment("gate: the gate columns of 32 heads of one token, heads as rows")
			tok := b.Let("tok", kir.Add(kir.Mul(u, kir.Ci(S)), kir.Div(idx, kir.Ci(HRt))))
			hr := b.Let("hr", kir.Mod(idx, kir.Ci(HRt)))
			gg.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
				return []blocks.Run{{Src: 0, Row: tok, Col: kir.Add(kir.Add(kir.Mul(row, kir.Ci(twoD)), kir.Ci(D)), col)}}
			}
			b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) { gg.Page(b, cbCopy, kir.Add(kir.Mul(hr, kir.Ci(Dt)), dd)) })
		})
		it.v.on(b, r, func(j kir.Expr) {
			b.Comment("v: one kv head, every token tile row")
			b.For("st", kir.C(0), kir.Ci(St), func(st kir.Var) { rows(gv, cbCopy, u, st, kir.Mul(j, kir.Ci(D))) })
		})
		copyCache := func(a *blocks.Access) func(h kir.Expr) {
			return func(h kir.Expr) {
				b.Comment("cache copy: every tile row the tokens do not touch")
				b.For("t", kir.C(0), kir.Ci(Lt), func(tt kir.Var) {
					b.If(kir.LOr(kir.Lt(tt, touched0), kir.Gt(tt, touched1)), func() {
						blocks.ReadPages(b, a, cbCopy, cachePage(u, h, tt, kir.C(0)), kir.Ci(Dt))
					})
				})
			}
		}
		if !inPlaceK {
			it.kcopy.on(b, r, copyCache(kcAcc))
		}
		if !inPlaceV {
			it.vcopy.on(b, r, copyCache(vcAcc))
		}
	})
	for i := len(gathers) - 1; i >= 0; i-- {
		gathers[i].End(b)
	}
	if cbPosR >= 0 {
		blocks.ReleaseScratch(b, cbPosR)
	}

	// Compute: the norm units of the q and k items.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	cunits := cp.RuntimeArg("units")
	cc := blocks.NewCompute(p, cp)
	cb := cc.B
	cc.Startup(cbX, cbScaler, cbOut)
	cb.CBWaitFront(cbScaler, kir.C(1))
	cb.CBWaitFront(cbPerm, kir.Ci(len(swap.Tiles)))
	nc := headNorm{x: cbX, w: cbW, wo: cbWo, scaler: cbScaler, sq: cbSq, rs: cbRs, xn: cbXn, y: cbY, out: cbOut,
		Dt: Dt, RtR: RtR, D: D, eps: eps, offset: offset}
	cc.For("i", kir.C(0), cunits, func(kir.Var) {
		nc.emit(cc, func() {
			cb.Comment("rope: y * cos + rotate_half(y) * sin, per token row")
			for col := 0; col < swap.ColTiles(); col++ {
				cc.Acquire()
				for pi, pt := range swap.Tiles {
					if pt.Col == col {
						cc.Matmul(cbY, cbPerm, kir.Ci(pt.Row), kir.Ci(pi), kir.C(0), false)
					}
				}
				cc.PackOut(cbYs, 1)
				cb.CBWaitFront(cbCos, kir.C(1))
				cc.Acquire()
				cc.Binary(kir.EltMul, blocks.BcastNone, cbY, cbCos, kir.Ci(col), kir.C(0), kir.C(0))
				cb.CBPopFront(cbCos, kir.C(1))
				cc.PackOut(cbT1, 1)
				cc.BinaryTile(kir.EltMul, blocks.BcastNone, cbYs, cbSin, cbT2, false, nil)
				cc.BinaryTile(kir.EltAdd, blocks.BcastNone, cbT1, cbT2, cbOut, false, nil)
			}
		})
	})
	cb.CBPopFront(cbPerm, kir.Ci(len(swap.Tiles)))
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
	slot := blocks.Scratch(b, cbSlot, "cache_tile")
	eb, tb := blocks.ElemBytes(dt), dt.TileBytes()
	// patchRows writes rows 0..n-1 of the tile at src (tokens 32*st ..) into
	// the cache rows of their positions pos + 32*st + r, head (user, j),
	// tile column dd: the one or two cache tiles they fall in are read,
	// patched and written back. A cache tile the previous token tile row
	// already patched (pos not tile aligned) is read back from out.
	patchRows := func(in, out *blocks.Access, user, j, st, dd, src kir.Expr) {
		p0 := b.Let("p0", kir.Add(wpos, kir.Mul(st, kir.Ci(ir.TileSize))))
		n := blocks.BlockLen(b, "n", kir.Ci(S), kir.Mul(st, kir.Ci(ir.TileSize)), ir.TileSize)
		c0 := b.Let("c0", kir.Div(p0, kir.Ci(ir.TileSize)))
		c1 := b.Let("c1", kir.Div(kir.Sub(kir.Add(p0, n), kir.C(1)), kir.Ci(ir.TileSize)))
		b.For("ct", c0, kir.Add(c1, kir.C(1)), func(ct kir.Var) {
			pg := b.Let("pg", cachePage(user, j, ct, dd))
			if in == out {
				blocks.ReadPageTo(b, in, pg, slot)
			} else {
				again := kir.LAnd(kir.Gt(st, kir.C(0)), kir.LAnd(kir.Ne(kir.Mod(wpos, kir.Ci(ir.TileSize)), kir.C(0)), kir.Eq(ct, c0)))
				b.IfElse(again, func() { blocks.ReadPageTo(b, out, pg, slot) }, func() { blocks.ReadPageTo(b, in, pg, slot) })
			}
			b.NoCAsyncReadBarrier()
			b.For("rr", kir.C(0), n, func(rr kir.Var) {
				pp := b.Let("pp", kir.Add(p0, rr))
				b.If(kir.Eq(kir.Div(pp, kir.Ci(ir.TileSize)), ct), func() {
					blocks.CopyTileRow(b, src, rr, slot, kir.Mod(pp, kir.Ci(ir.TileSize)), eb)
				})
			})
			b.NoCAsyncReadBarrier()
			b.NoCAsyncWrite(slot, out.PageAddr(pg), kir.Ci(tb))
			b.NoCAsyncWriteBarrier()
		})
	}
	b.For("i", wstart, kir.Add(wstart, wcount), func(i kir.Var) {
		u := b.Let("u", kir.Div(i, kir.Ci(it.perUser)))
		r := b.Let("r", kir.Mod(i, kir.Ci(it.perUser)))
		it.q.on(b, r, func(idx kir.Expr) {
			// q [B,H,S,D]: (user, head) matrix, token tile row st.
			blocks.WritePages(b, qAcc, cbOut, kir.Mul(kir.Add(kir.Mul(u, kir.Ci(H*St)), idx), kir.Ci(Dt)), kir.Ci(Dt))
		})
		kv := func(cb int, in, out *blocks.Access) func(j kir.Expr) {
			return func(j kir.Expr) {
				b.For("st", kir.C(0), kir.Ci(St), func(st kir.Var) {
					b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) {
						b.CBWaitFront(cb, kir.C(1))
						src := b.Let("src", kir.GetReadPtr{CB: cb})
						patchRows(in, out, u, j, st, dd, src)
						b.CBPopFront(cb, kir.C(1))
					})
				})
			}
		}
		it.k.on(b, r, kv(cbOut, kcIn, kcW))
		it.gate.on(b, r, func(idx kir.Expr) {
			// gate [B,S,H,D]: (user, token) matrix of heads, tile row hr;
			// idx = s*HRt + hr.
			blocks.WritePages(b, gAcc, cbCopy, kir.Mul(kir.Add(kir.Mul(u, kir.Ci(S*HRt)), idx), kir.Ci(Dt)), kir.Ci(Dt))
		})
		it.v.on(b, r, kv(cbCopy, vcIn, vcW))
		copyCache := func(a *blocks.Access) func(h kir.Expr) {
			return func(h kir.Expr) {
				c0 := b.Let("c0", kir.Div(wpos, kir.Ci(ir.TileSize)))
				c1 := b.Let("c1", kir.Div(kir.Add(wpos, kir.Ci(S-1)), kir.Ci(ir.TileSize)))
				b.For("t", kir.C(0), kir.Ci(Lt), func(tt kir.Var) {
					b.If(kir.LOr(kir.Lt(tt, c0), kir.Gt(tt, c1)), func() {
						blocks.WritePages(b, a, cbCopy, cachePage(u, h, tt, kir.C(0)), kir.Ci(Dt))
					})
				})
			}
		}
		if !inPlaceK {
			it.kcopy.on(b, r, copyCache(kcW))
		}
		if !inPlaceV {
			it.vcopy.on(b, r, copyCache(vcW))
		}
	})
	blocks.ReleaseScratch(b, cbSlot)
	blocks.ReleaseScratch(b, cbPosW)

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
	return p, nil
}
