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
// per head and token tile row), k (one per kv head and cache tile row the
// tokens touch), gate (one per token and 32 heads, heads as rows as in the
// decode prologue), v (as k) and, without aliasing, one copy item per
// (cache, kv head) for the cache tile rows the tokens do not touch.
//
// A k or v item is cache tile row c0 + t of one kv head (c0 = pos/32; t <
// Ct = cacheRows, the most tile rows S tokens touch): its tiles' row r
// holds token 32 t + r - pos%32 (rows outside the tokens hold zeros, and
// cos 1 and sin 0 for the RoPE, so they norm and rotate to zeros), so its
// rows are already where the cache wants them and no two items write one
// cache tile: the items run on any cores in any order. (Token tile rows
// as k items would share a cache tile whenever pos is not tile aligned,
// so one core had to patch a kv head's rows in order, St norm units on one
// core while the q items' cores waited.) An item past c1 = (pos+S-1)/32
// (pos tile aligned) has no rows: its tiles are computed and dropped.
//
// The rest is the decode prologue's (type prologue) but the RoPE: its
// tables differ per row (token), so it is element-wise (rotate); and the
// writer writes each k or v tile whole into its cache tile, or patches
// its token rows into it (the first and last cache tile, patchRows).

func lowerAttnProloguePrefill(op *ir.Op, ctx *Context) (*kir.Program, error) {
	pl, err := newPrologue(op, ctx, true)
	if err != nil {
		return nil, err
	}
	return pl.build(&prefillPrologue{prologue: pl, swap: pl.rope.RotateHalf()})
}

// cacheRows is the most cache tile rows S tokens touch, ceil((S+31)/32):
// the k (and v) items per kv head.
func (d prologueDims) cacheRows() int { return (d.S + 2*ir.TileSize - 2) / ir.TileSize }

// prefillPrologueDims checks attn_prologue_prefill's operand shapes.
func prefillPrologueDims(op *ir.Op) (prologueDims, error) {
	qg, k, v, qw, kw, cos, sin, kc, vc := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Operands[4], op.Operands[5], op.Operands[6], op.Operands[7], op.Operands[8]
	D := qw.Type.Shape.Numel()
	s, ks, cs, c := qg.Type.Shape, k.Type.Shape, cos.Type.Shape, kc.Type.Shape
	if D < 2 || kw.Type.Shape.Numel() != D || s.Rank() != 3 || s[2]%(2*D) != 0 ||
		ks.Rank() != 3 || !ks.Equal(v.Type.Shape) || ks[0] != s[0] || ks[1] != s[1] || ks[2]%D != 0 ||
		cs.Rank() != 3 || !cs.Equal(sin.Type.Shape) || cs[0] != s[1] || cs[1] != 1 || cs[2]%2 != 0 || cs[2] < 2 || cs[2] > D ||
		c.Rank() != 4 || !c.Equal(vc.Type.Shape) || c[0] != s[0] || c[1] != ks[2]/D || c[2] < s[1] || c[3] != D {
		return prologueDims{}, fmt.Errorf("rule prologue-shape: want qg [B,S,H*2D], k and v [B,S,Hkv*D], cos and sin [S,1,R] (R even, <= D), caches [B,Hkv,L>=S,D] and norms of D elements; got qg %s, k %s, v %s, cos %s, sin %s, caches %s and %s, norms %s and %s",
			s, ks, v.Type.Shape, cs, sin.Type.Shape, c, vc.Type.Shape, qw.Type.Shape, kw.Type.Shape)
	}
	d := prologueDims{B: s[0], S: s[1], H: s[2] / (2 * D), Hkv: ks[2] / D, D: D, R: cs[2], L: c[2]}
	return d, d.tiles()
}

// prefillPrologue is attn_prologue_prefill's part of its program.
type prefillPrologue struct {
	*prologue
	swap                   blocks.RopeMatrix // the signed rotate-half permutation
	cos, sin, rot, t1, t2  int               // CBs: tables' rows, rotated half, y*cos, ys*sin
	slots                  [6]int            // CBs: the page caches of gq, gg, gk, gv, gc, gs
	gq, gg, gk, gv, gc, gs *blocks.Gather
	touched0, touched1     kir.Expr // reader: the cache tile rows the tokens touch (a cache is copied)
	off                    kir.Var  // reader: pos%32, the cache row of the first token in its tile
	wpos, slotL1           kir.Var  // writer: pos, the cache tile slot
}

// planCBs plans the tables' rows, the permutation, the gathers' page
// caches and the RoPE products around the shared CBs.
func (pp *prefillPrologue) planCBs() {
	cbs, dt, cos, sin := pp.cbs, pp.dtype(), pp.op.Operands[5].Type.DType, pp.op.Operands[6].Type.DType
	pp.movedN = pp.movedPages()
	pp.planInputs(func() {
		pp.cos = cbs.Input("cos_rows", cos, 2)
		pp.sin = cbs.Input("sin_rows", sin, 2)
		pp.resident, pp.resN = cbs.Input("rotate_half", dt, len(pp.swap.Tiles)), len(pp.swap.Tiles)
	})
	pf, gr := pp.prefetch(), pp.groups()
	for i, name := range []string{"qg_tile", "qg_gate_tile", "k_tile", "v_tile", "cos_tile", "sin_tile"} {
		dtype := []ir.DType{dt, dt, dt, dt, cos, sin}[i]
		pages := max(pf[i], 1)
		if gr[i] > 0 && pf[i] > 0 {
			pages = gr[i]*pf[i] + blocks.GroupTagPages(gr[i]*pf[i], dtype.TileBytes())
		}
		pp.slots[i] = cbs.Scratch(name, dtype, pages)
	}
	pp.planNorm()
	if pp.posR < 0 { // the reader needs pos for the k and v items' rows
		pp.posR = cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, posPageBytes(pp.ctx.Target, pp.op.Operands[9]), 1)
	}
	pp.rot = cbs.Scratch("rotated_half", dt, 1)
	pp.t1 = cbs.Scratch("y_cos", ir.FP32, 1)
	pp.t2 = cbs.Scratch("ys_sin", ir.FP32, 1)
	pp.planOut(1)
}

// prefetch is the Prefetch page count of each gather (gathers' order: q,
// gate, k, v, cos, sin; 0: one page at a time). A q, k or v tile's rows
// come from one operand tile, so those read a page per tile anyway; a
// gate tile's rows (heads) and a table tile's rows (tokens: the tables are
// [S,1,R], one tile per token) each come from another tile, and waiting
// for each in turn made the prologue latency-bound (1,851 us at 256
// tokens of the 27B model, predicted).
func (pp *prefillPrologue) prefetch() [6]int {
	d := pp.d
	gate := blocks.PrefetchPages(blocks.ImageOf(ir.Shape{d.H, d.D}), blocks.SegFor(d.D), 1)
	if d.D%ir.TileSize == 0 {
		// A gate row's 32 columns lie in one qg tile: one page change
		// per head row.
		gate = min(ir.TileSize, d.H)
	}
	// A table row's columns of one tile lie in the token's tile: one
	// page change per token row (blocks.PrefetchPages would count one
	// per run).
	tab := min(ir.TileSize, d.S)
	return [6]int{0, gate, 0, 0, tab, tab}
}

// groups is the Groups of each gather (prefetch's order; 0: none). The
// gate keeps a group of pages per column tile of D: the tokens of one
// tile row need the same qg tiles for a column tile, so a core's run of
// gate items reads each once per token tile row, not once per token (the
// reads were 805 of the prologue's 1,338 MB at 4,096 tokens of the 27B
// model, 32 times the gate's data). The tables keep a group per rotary
// column tile: the q items of one token tile row (qItem) and its k item
// read the same 32 token tiles.
func (pp *prefillPrologue) groups() [6]int {
	if pp.d.HRt != 1 {
		return [6]int{} // a token's output pages are not one per column tile
	}
	return [6]int{0, pp.d.Dt, 0, 0, pp.d.RtR, pp.d.RtR}
}

// gathers sets up the reader's Gathers: q, k, v token rows of one head
// ([S, D] view), the gate heads of one token ([H, D]), the tables' token
// rows (cos 1 and sin 0 past the rotary dims).
func (pp *prefillPrologue) gathers() {
	d, dt, o := pp.d, pp.dtype(), pp.op.Operands
	gather := func(src *blocks.Access, im, out blocks.Image, dtype ir.DType, segLen int, fill float32) *blocks.Gather {
		return &blocks.Gather{Out: out, DType: dtype, Seg: segLen, Fill: true, FillValue: fill, Sources: []blocks.GatherSource{{Acc: src, Image: im}}}
	}
	sg, tokRows, qgIm, kIm := blocks.SegFor(d.D), blocks.ImageOf(ir.Shape{d.S, d.D}), blocks.ImageOf(o[0].Type.Shape), blocks.ImageOf(o[1].Type.Shape)
	pp.gq = gather(pp.ra.qg, qgIm, tokRows, dt, sg, 0)
	pp.gg = gather(pp.ra.qg, qgIm, blocks.ImageOf(ir.Shape{d.H, d.D}), dt, sg, 0)
	pp.gk = gather(pp.ra.k, kIm, tokRows, dt, sg, 0)
	pp.gv = gather(pp.ra.v, kIm, tokRows, dt, sg, 0)
	tabRows, tsg, tabIm := blocks.ImageOf(ir.Shape{d.S, d.R}), blocks.SegFor(d.R, d.R/2), blocks.ImageOf(o[5].Type.Shape)
	pp.gc = gather(pp.ra.cos, tabIm, tabRows, o[5].Type.DType, tsg, 1)
	pp.gs = gather(pp.ra.sin, tabIm, tabRows, o[6].Type.DType, tsg, 0)
	pf := pp.prefetch()
	pp.gg.Prefetch, pp.gc.Prefetch, pp.gs.Prefetch = pf[1], pf[4], pf[5]
	gr := pp.groups()
	pp.gg.Groups, pp.gc.Groups, pp.gs.Groups = gr[1], gr[4], gr[5]
	pp.fail(pp.gq.Check())
	pp.fail(pp.gc.Check())
	// Every token's table row: row s of the [S,R] view is row s of the
	// tables' [S,1,R] (one row per matrix).
	tableMap := func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		return []blocks.Run{{Src: 0, Row: row, Col: col}}
	}
	pp.gc.Map, pp.gs.Map = tableMap, tableMap
}

// reader adds the reader: the resident rotate-half permutation, then per
// q, k, v item one head's token rows (rows; q, k: and the norm inputs), per
// gate item 32 heads of one token, per copy item the untouched tile rows.
func (pp *prefillPrologue) reader() {
	d, dt := pp.d, pp.dtype()
	b, start, count := pp.readerStart()
	pp.gathers()
	b.Comment("the signed rotate-half permutation, resident")
	perm := blocks.Reserve(b, pp.resident, kir.Ci(pp.resN), "perm")
	for i, pt := range pp.swap.Tiles {
		tile := b.Let("ptile", kir.Add(perm, kir.Ci(i*dt.TileBytes())))
		blocks.FillWords(b, tile, dt.TileBytes(), 0)
		pt.EmitTile(b, tile, dt, nil, nil)
	}
	b.CBPushBack(pp.resident, kir.Ci(pp.resN))
	posv := readPos(b, pp.ra.pos, pp.posR)
	pp.off = b.Let("off", kir.Mod(posv, kir.Ci(ir.TileSize)))
	if !pp.inPlaceK || !pp.inPlaceV {
		pp.touched0 = b.Let("c0", kir.Div(posv, kir.Ci(ir.TileSize)))
		pp.touched1 = b.Let("c1", kir.Div(kir.Add(posv, kir.Ci(d.S-1)), kir.Ci(ir.TileSize)))
	}
	gathers := []*blocks.Gather{pp.gq, pp.gg, pp.gk, pp.gv, pp.gc, pp.gs}
	for i, g := range gathers {
		g.Begin(b, pp.slots[i:i+1])
	}
	twoD := 2 * d.D
	pp.eachItem(b, start, count, func(u, r kir.Var) {
		pp.items.q.on(b, r, func(idx kir.Expr) {
			b.Comment("q: one head's query columns for a token tile row, norm weight, tables")
			h, st := pp.qItem(b, idx)
			if d.S%ir.TileSize == 0 && d.D%ir.TileSize == 0 {
				// Whole tiles: the item's tiles are qg's tiles of the
				// head's columns, read as they are.
				qgIm := blocks.ImageOf(pp.op.Operands[0].Type.Shape)
				first := kir.Add(kir.Add(kir.Mul(u, kir.Ci(qgIm.TilesPerMat)), kir.Mul(st, kir.Ci(qgIm.Ct))), kir.Mul(h, kir.Ci(2*d.Dt)))
				blocks.ReadPagesBatch(b, pp.ra.qg, pp.x, first, kir.Ci(d.Dt))
			} else {
				pp.rows(b, pp.gq, pp.x, u, st, kir.Mul(h, kir.Ci(twoD)))
			}
			pp.normInputs(b, pp.ra.qw, st, false)
		})
		pp.items.k.on(b, r, func(idx kir.Expr) {
			b.Comment("k: one kv head's tokens of one cache tile row")
			j, t := b.Let("j", kir.Div(idx, kir.Ci(d.cacheRows()))), b.Let("t", kir.Mod(idx, kir.Ci(d.cacheRows())))
			pp.alignedRows(b, pp.gk, pp.x, u, t, kir.Mul(j, kir.Ci(d.D)))
			pp.normInputs(b, pp.ra.kw, t, true)
		})
		pp.items.gate.on(b, r, func(idx kir.Expr) {
			b.Comment("gate: the gate columns of 32 heads of one token, heads as rows")
			tok := b.Let("tok", kir.Add(kir.Mul(u, kir.Ci(d.S)), kir.Div(idx, kir.Ci(d.HRt))))
			hr := b.Let("hr", kir.Mod(idx, kir.Ci(d.HRt)))
			pp.gg.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
				return []blocks.Run{{Src: 0, Row: tok, Col: kir.Add(kir.Add(kir.Mul(row, kir.Ci(twoD)), kir.Ci(d.D)), col)}}
			}
			if pp.directGate() {
				pp.gateTiles(b, tok)
				return
			}
			b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) { pp.gg.Page(b, pp.moved, kir.Add(kir.Mul(hr, kir.Ci(d.Dt)), dd)) })
		})
		pp.items.v.on(b, r, func(idx kir.Expr) {
			b.Comment("v: one kv head's tokens of one cache tile row")
			j, t := b.Let("j", kir.Div(idx, kir.Ci(d.cacheRows()))), b.Let("t", kir.Mod(idx, kir.Ci(d.cacheRows())))
			pp.alignedRows(b, pp.gv, pp.vCB(), u, t, kir.Mul(j, kir.Ci(d.D)))
		})
		pp.cacheCopies(b, u, r, pp.ra.kc, pp.ra.vc, "cache copy: every tile row the tokens do not touch",
			func() func(tt kir.Expr) kir.Expr { return untouched(pp.touched0, pp.touched1) }, blocks.ReadPages)
	})
	for i := len(gathers) - 1; i >= 0; i-- {
		gathers[i].End(b)
	}
	blocks.ReleaseScratch(b, pp.posR)
}

// untouched is the predicate of the cache tile rows outside c0..c1.
func untouched(c0, c1 kir.Expr) func(tt kir.Expr) kir.Expr {
	return func(tt kir.Expr) kir.Expr { return kir.LOr(kir.Lt(tt, c0), kir.Gt(tt, c1)) }
}

// rows emits the push into cb of the Dt tiles of token tile row st of one
// head, token s from columns col0.. of row user*S + s.
func (pp *prefillPrologue) rows(b *kir.Builder, g *blocks.Gather, cb int, user, st, col0 kir.Expr) {
	g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		return []blocks.Run{{Src: 0, Row: kir.Add(kir.Mul(user, kir.Ci(pp.d.S)), row), Col: kir.Add(col0, col)}}
	}
	b.For("d", kir.C(0), kir.Ci(pp.d.Dt), func(dd kir.Var) { g.Page(b, cb, kir.Add(kir.Mul(st, kir.Ci(pp.d.Dt)), dd)) })
}

// alignedRows emits the push into cb of the Dt tiles of cache tile row
// c0 + t of one head: row r holds token s = 32 t + r - off (when 0 <= s <
// S) from columns col0.. of row user*S + s, the other rows are zero.
func (pp *prefillPrologue) alignedRows(b *kir.Builder, g *blocks.Gather, cb int, user, t, col0 kir.Expr) {
	g.Out = blocks.ImageOf(ir.Shape{pp.d.cacheRows() * ir.TileSize, pp.d.D})
	g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		return []blocks.Run{{Cond: pp.tokenRow(row), Src: 0, Row: kir.Add(kir.Mul(user, kir.Ci(pp.d.S)), kir.Sub(row, pp.off)), Col: kir.Add(col0, col)}}
	}
	b.For("d", kir.C(0), kir.Ci(pp.d.Dt), func(dd kir.Var) { g.Page(b, cb, kir.Add(kir.Mul(t, kir.Ci(pp.d.Dt)), dd)) })
}

// tokenRow is the condition that row `row` of the cache-aligned rows
// (token row - off) holds a token: off <= row < off + S.
func (pp *prefillPrologue) tokenRow(row kir.Expr) kir.Expr {
	return kir.LAnd(kir.Ge(row, pp.off), kir.Lt(row, kir.Add(pp.off, kir.Ci(pp.d.S))))
}

// normInputs emits w's tiles around the tables' rows of token tile row
// st (aligned: of cache tile row c0 + st, as alignedRows; cos 1 and sin 0
// in the rows without a token), in compute's order.
func (pp *prefillPrologue) normInputs(b *kir.Builder, wAcc *blocks.Access, st kir.Expr, aligned bool) {
	d := pp.d
	blocks.ReadPages(b, wAcc, pp.w, kir.C(0), kir.Ci(d.RtR))
	if aligned {
		im := blocks.ImageOf(ir.Shape{d.cacheRows() * ir.TileSize, d.R})
		shifted := func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			return []blocks.Run{{Cond: pp.tokenRow(row), Src: 0, Row: kir.Sub(row, pp.off), Col: col}}
		}
		for _, g := range []*blocks.Gather{pp.gc, pp.gs} {
			defer func(out blocks.Image, m func(b *kir.Builder, row, col kir.Var) []blocks.Run) { g.Out, g.Map = out, m }(g.Out, g.Map)
			g.Out, g.Map = im, shifted
		}
	}
	b.For("rt", kir.C(0), kir.Ci(d.RtR), func(rt kir.Var) {
		if !aligned && pp.directTables() {
			pp.tablePage(b, pp.gc, pp.ra.cos, pp.cos, st, rt)
			pp.tablePage(b, pp.gs, pp.ra.sin, pp.sin, st, rt)
			return
		}
		pg := b.Let("tpg", kir.Add(kir.Mul(st, kir.Ci(d.RtR)), rt))
		pp.gc.Page(b, pp.cos, pg)
		pp.gs.Page(b, pp.sin, pg)
	})
	if d.Dt > d.RtR {
		blocks.ReadPages(b, wAcc, pp.w, kir.Ci(d.RtR), kir.Ci(d.Dt-d.RtR))
	}
}

// rotate emits y*cos + rotate_half(y)*sin of the normed, rounded rotary
// tiles y: a matmul by the signed rotate-half permutation (moves bf16
// values exactly), the products into fp32 CBs, their sum into the result
// (read as tf32: by less than 2^-10 of a product off fp32 math, as the
// composed rotary; sim/ref models it, rotaryFPU).
func (pp *prefillPrologue) rotate(c *blocks.Compute, out int) {
	c.B.Comment("rope: y * cos + rotate_half(y) * sin, per token row")
	for col := 0; col < pp.swap.ColTiles(); col++ {
		c.Acquire()
		for pi, pt := range pp.swap.Tiles {
			if pt.Col == col {
				c.Matmul(pp.norm.y, pp.resident, kir.Ci(pt.Row), kir.Ci(pi), kir.C(0), false)
			}
		}
		c.PackOut(pp.rot, 1)
		c.B.CBWaitFront(pp.cos, kir.C(1))
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastNone, pp.norm.y, pp.cos, kir.Ci(col), kir.C(0), kir.C(0))
		c.B.CBPopFront(pp.cos, kir.C(1))
		c.PackOut(pp.t1, 1)
		c.BinaryTile(kir.EltMul, blocks.BcastNone, pp.rot, pp.sin, pp.t2, false, nil)
		c.BinaryTile(kir.EltAdd, blocks.BcastNone, pp.t1, pp.t2, out, false, nil)
	}
}

// qItem is q item idx's head and token tile row: items go token tile
// row by tile row, the heads of one row in turn, so a core's run of q
// items shares the rows' cos and sin tiles (the tables' gathers keep
// them: groups).
func (pp *prefillPrologue) qItem(b *kir.Builder, idx kir.Expr) (h, st kir.Var) {
	return b.Let("h", kir.Mod(idx, kir.Ci(pp.d.H))), b.Let("st", kir.Div(idx, kir.Ci(pp.d.H)))
}

// writeQ emits the writer's q item: its Dt tiles of out to page ((u*H +
// h)*St + st)*Dt of q's result.
func (pp *prefillPrologue) writeQ(b *kir.Builder, u, r kir.Var) {
	d := pp.d
	pp.items.q.on(b, r, func(idx kir.Expr) {
		h, st := pp.qItem(b, idx)
		first := kir.Mul(kir.Add(kir.Mul(kir.Add(kir.Mul(u, kir.Ci(d.H)), h), kir.Ci(d.St)), st), kir.Ci(d.Dt))
		blocks.WritePages(b, pp.wa.q, pp.out, first, kir.Ci(d.Dt))
	})
}

// writer adds the writer: q and gate tiles, k and v rows (patchRows), copies.
func (pp *prefillPrologue) writer() {
	if pp.bfp != nil {
		pp.bfpWriter()
		return
	}
	b, wp, start, count := pp.writerStart()
	wpos := wp.shared
	pp.wpos = wpos
	pp.slotL1 = blocks.Scratch(b, pp.slot, "cache_tile")
	pp.eachItem(b, start, count, func(u, r kir.Var) {
		pp.writeQ(b, u, r)
		kv := func(cb int, in, out *blocks.Access) func(idx kir.Expr) {
			return func(idx kir.Expr) {
				j, ct, r0, r1, has := pp.cacheRow(b, idx)
				whole := b.Let("whole", kir.LAnd(kir.Eq(r0, kir.C(0)), kir.Eq(r1, kir.Ci(ir.TileSize))))
				b.For("d", kir.C(0), kir.Ci(pp.d.Dt), func(dd kir.Var) {
					src := blocks.WaitFront(b, cb, kir.C(1), "src")
					b.If(has, func() { pp.patchRows(b, in, out, pp.d.cachePage(u, j, ct, dd), r0, r1, whole, src) })
					b.CBPopFront(cb, kir.C(1))
				})
			}
		}
		pp.items.k.on(b, r, kv(pp.out, pp.wa.kcIn, pp.wa.kcOut))
		pp.writeTiles(b, pp.items.gate, u, r, pp.wa.gate, pp.moved)
		pp.items.v.on(b, r, kv(pp.moved, pp.wa.vcIn, pp.wa.vcOut))
		pp.cacheCopies(b, u, r, pp.wa.kcOut, pp.wa.vcOut, "", func() func(tt kir.Expr) kir.Expr {
			c0 := b.Let("c0", kir.Div(wpos, kir.Ci(ir.TileSize)))
			return untouched(c0, b.Let("c1", kir.Div(kir.Add(wpos, kir.Ci(pp.d.S-1)), kir.Ci(ir.TileSize))))
		}, blocks.WritePages)
	})
	blocks.ReleaseScratch(b, pp.slot)
	blocks.ReleaseScratch(b, pp.posW)
}

// cacheRow emits what the writer needs of k or v item idx: its kv head
// j, its cache tile row ct = pos/32 + t, the rows [r0, r1) of that tile
// the tokens fill (r0 = pos%32 in the first, r1 < 32 in the last) and
// whether it has any (has; not past the last token's tile).
func (pp *prefillPrologue) cacheRow(b *kir.Builder, idx kir.Expr) (j, ct, r0, r1, has kir.Var) {
	d, ts := pp.d, kir.Ci(ir.TileSize)
	j = b.Let("j", kir.Div(idx, kir.Ci(d.cacheRows())))
	t := b.Let("t", kir.Mod(idx, kir.Ci(d.cacheRows())))
	off := b.Let("off", kir.Mod(pp.wpos, ts))
	ct = b.Let("ct", kir.Add(kir.Div(pp.wpos, ts), t))
	end := b.Let("end", kir.Add(off, kir.Ci(d.S))) // one past the last token's row, counted from tile c0's row 0
	has = b.Let("has", kir.Lt(kir.Mul(t, ts), end))
	r0 = b.LetT("r0", kir.U32T, kir.C(0))
	b.If(kir.Eq(t, kir.C(0)), func() { b.Assign(r0, off) })
	r1 = b.LetT("r1", kir.U32T, ts)
	b.If(kir.LAnd(has, kir.Lt(kir.Sub(end, kir.Mul(t, ts)), ts)), func() { b.Assign(r1, kir.Sub(end, kir.Mul(t, ts))) })
	return j, ct, r0, r1, has
}

// patchRows emits the write of tile src (cache-aligned rows) into cache
// page pg: whole, straight from src; else rows r0..r1-1 copied into the
// page read from in and the page written to out.
func (pp *prefillPrologue) patchRows(b *kir.Builder, in, out *blocks.Access, pg, r0, r1, whole, src kir.Expr) {
	slot, eb, tb := pp.slotL1, blocks.ElemBytes(pp.dtype()), pp.dtype().TileBytes()
	pgv := b.Let("pg", pg)
	b.IfElse(whole, func() {
		b.NoCAsyncWrite(src, out.PageAddr(pgv), kir.Ci(tb))
	}, func() {
		blocks.ReadPageTo(b, in, pgv, slot)
		b.NoCAsyncReadBarrier()
		b.For("rr", r0, r1, func(rr kir.Var) { blocks.CopyTileRow(b, src, rr, slot, rr, eb) })
		b.NoCAsyncReadBarrier() // the rows' local copies
		b.NoCAsyncWrite(slot, out.PageAddr(pgv), kir.Ci(tb))
	})
	b.NoCAsyncWriteBarrier()
}

// directGate reports whether gate tiles take gateTiles: one tile row of
// heads (H <= 32), whole column tiles per head (D % 32 == 0) and the
// gate's grouped cache (prefetch, groups).
func (pp *prefillPrologue) directGate() bool {
	return pp.d.HRt == 1 && pp.d.D%ir.TileSize == 0 && pp.groups()[1] > 0 && pp.prefetch()[1] == pp.d.H
}

// movedPages is the moved CB's pages: two gate items' Dt tiles with
// gateTiles (a token's tiles pushed at once, the next token's built while
// the writer drains them), else 2.
func (pp *prefillPrologue) movedPages() int {
	if pp.directGate() {
		return 2 * pp.d.Dt
	}
	return 2
}

// gateTiles emits the Dt gate column tiles of token row tok (global row
// of qg) into moved: row h of tile dd is columns h*2D + D + 32 dd .. +31
// of row tok, the rows past H zero. The same pages, slots, tags and bytes
// as pp.gg.Page per tile (slot dd*H + h holds head h's qg page), with the
// address math hoisted out of the head loop (a head's source page is head
// 0's plus 2 Dt, its row's offset in the tile is the same for every head)
// and the Dt tiles' reads, then their row copies, in flight together: two
// barriers per token, not two per tile (the copies' latency was the gate
// items' reader bound, 509 of 1,158 us at 4,096 tokens of the 27B model).
// The Dt tiles are zeroed as one fill. Postcondition: Dt
// pages of moved pushed, bit for bit pp.gg.Page's.
func (pp *prefillPrologue) gateTiles(b *kir.Builder, tok kir.Var) {
	d, dt := pp.d, pp.dtype()
	eb, tb := blocks.ElemBytes(dt), dt.TileBytes()
	im := blocks.ImageOf(pp.op.Operands[0].Type.Shape)
	slots, tags := pp.gg.Cache(0)
	col0 := kir.Ci(d.D)
	pg0 := b.Let("gpg", im.Page(tok, col0))
	src0 := b.Let("gin", im.InTile(tok, col0, eb))
	tp := blocks.Reserve(b, pp.moved, kir.Ci(d.Dt), "tp")
	b.Comment("gate: every head's qg page of every column tile (kept across the tokens of a tile row), all in flight")
	b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) {
		group := b.Let("gslot", kir.Mul(dd, kir.Ci(d.H)))
		b.For("h", kir.C(0), kir.Ci(d.H), func(h kir.Var) {
			pg := b.Let("pg", kir.Add(kir.Add(pg0, dd), kir.Mul(h, kir.Ci(2*d.Dt))))
			si := b.Let("si", kir.Add(group, h))
			tag := b.Let("tag", kir.Add(tags, kir.Mul(si, kir.C(4))))
			b.If(kir.Ne(kir.L1Read32{Addr: tag}, pg), func() {
				blocks.ReadPageTo(b, pp.ra.qg, pg, kir.Add(slots, kir.Mul(si, kir.Ci(tb))))
				b.L1Write32(tag, pg)
			})
		})
	})
	b.NoCAsyncReadBarrier()
	blocks.FillWords(b, tp, d.Dt*tb, blocks.FillWord(dt, 0)) // ends with its copies' barrier
	b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) {
		page := b.Let("gtile", kir.Add(tp, kir.Mul(dd, kir.Ci(tb))))
		group := b.Let("gslot", kir.Mul(dd, kir.Ci(d.H)))
		b.For("h", kir.C(0), kir.Ci(d.H), func(h kir.Var) {
			src := b.Let("src", kir.Add(kir.Add(slots, kir.Mul(kir.Add(group, h), kir.Ci(tb))), src0))
			dst := b.Let("dst", kir.Add(page, blocks.FaceOffset(h, kir.C(0), eb)))
			for c := 0; c < ir.TileSize; c += pp.gg.Seg {
				off := blocks.FaceOffsetConst(0, c, eb)
				blocks.CopyRun(b, kir.Add(src, kir.Ci(off)), kir.Add(dst, kir.Ci(off)), pp.gg.Seg, eb, pp.gg.Seg*eb)
			}
		})
	})
	b.NoCAsyncReadBarrier()
	b.CBPushBack(pp.moved, kir.Ci(d.Dt))
}

// directTables reports whether the q items' table tiles take tablePage:
// whole token tile rows (S % 32 == 0), whole rotary column tiles (R % 32
// == 0) and the tables' grouped caches of 32 pages (prefetch, groups).
func (pp *prefillPrologue) directTables() bool {
	d := pp.d
	return d.S%ir.TileSize == 0 && d.R%ir.TileSize == 0 && pp.groups()[4] > 0 && pp.prefetch()[4] == ir.TileSize
}

// tablePage emits rotary column tile rt of token tile row st of table g
// (cos or sin, [S,1,R]: one page per token and column tile) into cb: row
// r is columns 32 rt .. +31 of token 32 st + r. The same pages, slots
// (group rt, slot r), tags and copies as g.Page, with the address math
// out of the row loop (a token's page is the previous one's plus Ct, its
// columns sit in row 0 of its tile) and no fill (the copies cover the
// tile). Postcondition: one page of cb pushed, bit for bit g.Page's.
func (pp *prefillPrologue) tablePage(b *kir.Builder, g *blocks.Gather, acc *blocks.Access, cb int, st kir.Expr, rt kir.Var) {
	eb, tb := blocks.ElemBytes(g.DType), g.DType.TileBytes()
	im := g.Sources[0].Image
	slots, tags := g.Cache(0)
	pg0 := b.Let("tpg", im.Page(kir.Mul(st, kir.Ci(ir.TileSize)), kir.Mul(rt, kir.Ci(ir.TileSize))))
	base := b.Let("tslot", kir.Add(slots, kir.Mul(rt, kir.Ci(ir.TileSize*tb))))
	tagBase := b.Let("ttag", kir.Add(tags, kir.Mul(rt, kir.Ci(ir.TileSize*4))))
	tp := blocks.Reserve(b, cb, kir.C(1), "tp")
	b.Comment("table: every token's page (kept across the heads of a token tile row), all in flight")
	b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
		pg := b.Let("pg", kir.Add(pg0, kir.Mul(r, kir.Ci(im.Ct))))
		tag := b.Let("tag", kir.Add(tagBase, kir.Mul(r, kir.C(4))))
		b.If(kir.Ne(kir.L1Read32{Addr: tag}, pg), func() {
			blocks.ReadPageTo(b, acc, pg, kir.Add(base, kir.Mul(r, kir.Ci(tb))))
			b.L1Write32(tag, pg)
		})
	})
	b.NoCAsyncReadBarrier()
	b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
		src := b.Let("src", kir.Add(base, kir.Mul(r, kir.Ci(tb))))
		dst := b.Let("dst", kir.Add(tp, blocks.FaceOffset(r, kir.C(0), eb)))
		for c := 0; c < ir.TileSize; c += g.Seg {
			off := blocks.FaceOffsetConst(0, c, eb)
			blocks.CopyRun(b, kir.Add(src, kir.Ci(off)), kir.Add(dst, kir.Ci(off)), g.Seg, eb, g.Seg*eb)
		}
	})
	b.NoCAsyncReadBarrier()
	b.CBPushBack(cb, kir.C(1))
}
