package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// gdn_recurrence's packed tiles: when a core holds more than one row of
// z (its items times their value tiles) or more than one item's g, the
// per-user SFPU work runs once per core instead of once per row, on
// tiles whose rows belong to different users (see the GDN doc).
//
//   - Reader, before its first item: row j = li*vc + v of the packed z
//     tiles (li the item's index on the core, v its value tile) is row 0
//     of that item's z tile v, and element (li, 0) of the packed g tiles
//     is the item's g; all DRAM reads in flight into staging slots behind
//     the zero tile, then local copies (z rows) and element moves (g) into
//     the cleared packed tiles.
//   - Compute, before its first item: silu of each packed z tile (packed
//     to z's dtype: r_z) and exp of each packed g tile (with an fp32
//     state also - 1, as the per-item decay does), the same element-wise
//     arithmetic as one tile per row.
//   - Writer, per item before its state tiles: row j of the packed silu
//     moved to row 0 of silu_z page v (rows 1..31 of those pages were
//     cleared once: the CB has exactly vc pages and nothing else writes
//     them), and element li of the packed exp(g) to (0, 0) of the exp_g
//     page, for the item's compute to consume in place of its own.

// gdnPages is the number of tiles that hold rows packed rows.
func gdnPages(rows int) int { return (rows + ir.TileSize - 1) / ir.TileSize }

// zSlot is the staging bytes of one z row: what blocks.ReadRowsTo reads
// of a tile's row 0 in one request (face 0 and face 1's first 64 bytes),
// as the per-item reads do.
func (r *gdnRec) zSlot() int { return 256*r.ebZ + 64 }

// stageBytes is the reader's staging space for the packed reads: a zSlot
// per z row, 64 bytes per g element.
func (r *gdnRec) stageBytes() int {
	return r.zRows*r.zSlot() + r.gRows*64
}

// readPacked emits the reader's packed tiles of its count items from
// start (zeros: the zero tile, followed by the staging space): pushes
// the packed z and g pages.
func (r *gdnRec) readPacked(b *kir.Builder, a gdnReads, zeros kir.Var, start, count kir.Expr) {
	c, vc := r.cb, r.vc
	stage := b.Let("stage", kir.Add(zeros, kir.Ci(r.zeroBytes)))
	gstage := b.Let("gstage", kir.Add(stage, kir.Ci(r.zRows*r.zSlot())))
	var zp, gp kir.Var
	zPage, gPage := r.z.Type.DType.TileBytes(), r.g.Type.DType.TileBytes()
	b.Comment("the core's z rows (row li*vc + v: item li's value tile v) and g elements ((li, 0)) into cleared packed tiles")
	if r.zRows > 0 {
		zp = blocks.Reserve(b, c.z, kir.Ci(gdnPages(r.zRows)), "zp")
		for p := range gdnPages(r.zRows) {
			blocks.ClearRows(b, kir.Add(zp, kir.Ci(p*zPage)), zeros, 0, r.ebZ)
		}
		rows := b.Let("zrows", kir.Mul(count, kir.Ci(vc)))
		b.For("j", kir.C(0), rows, func(j kir.Var) {
			head := kir.Add(start, kir.Div(j, kir.Ci(vc))) // b*H + h: one item per head
			zt := b.Let("zt", kir.Add(kir.Add(kir.Mul(kir.Div(head, kir.Ci(r.H)), kir.Ci(r.ctz)), kir.Mul(kir.Mod(head, kir.Ci(r.H)), kir.Ci(r.vt))), kir.Mod(j, kir.Ci(vc))))
			blocks.ReadRowsTo(b, a.z, zt, kir.Add(stage, kir.Mul(j, kir.Ci(r.zSlot()))), 1, r.ebZ)
		})
	}
	if r.gRows > 0 {
		gp = blocks.Reserve(b, c.g, kir.Ci(gdnPages(r.gRows)), "gp")
		for p := range gdnPages(r.gRows) {
			blocks.ClearRows(b, kir.Add(gp, kir.Ci(p*gPage)), zeros, 0, r.ebG)
		}
		b.For("li", kir.C(0), count, func(li kir.Var) {
			head := b.Let("head", kir.Add(start, li))
			off := kir.And(blocks.FaceOffset(kir.Mod(head, kir.Ci(ir.TileSize)), kir.C(0), r.ebG), kir.C(^uint32(63)))
			b.NoCAsyncRead(a.g.PageAddrAtExpr(kir.Div(head, kir.Ci(ir.TileSize)), off), kir.Add(gstage, kir.Mul(li, kir.C(64))), kir.C(64))
		})
	}
	b.NoCAsyncReadBarrier()
	if r.zRows > 0 {
		b.For("j", kir.C(0), kir.Mul(count, kir.Ci(vc)), func(j kir.Var) {
			dst := b.Let("zdst", kir.Add(zp, kir.Mul(kir.Div(j, kir.Ci(ir.TileSize)), kir.Ci(zPage))))
			for half := range 2 {
				src := kir.Add(stage, kir.Add(kir.Mul(j, kir.Ci(r.zSlot())), kir.Ci(blocks.RowOffset(0, half, r.ebZ))))
				blocks.LocalCopy(b, src, kir.Add(dst, blocks.FaceOffset(kir.Mod(j, kir.Ci(ir.TileSize)), kir.Ci(half*blocks.FaceDim), r.ebZ)), blocks.FaceDim*r.ebZ)
			}
		})
	}
	if r.gRows > 0 {
		b.For("li", kir.C(0), count, func(li kir.Var) {
			head := kir.Add(start, li)
			src := kir.Add(kir.Add(gstage, kir.Mul(li, kir.C(64))), kir.And(blocks.FaceOffset(kir.Mod(head, kir.Ci(ir.TileSize)), kir.C(0), r.ebG), kir.C(63)))
			dst := kir.Add(kir.Add(gp, kir.Mul(kir.Div(li, kir.Ci(ir.TileSize)), kir.Ci(gPage))), blocks.FaceOffset(kir.Mod(li, kir.Ci(ir.TileSize)), kir.C(0), r.ebG))
			blocks.StoreElem(b, dst, blocks.LoadElem(src, r.ebG), r.ebG)
		})
	}
	b.NoCAsyncReadBarrier()
	if r.zRows > 0 {
		b.CBPushBack(c.z, kir.Ci(gdnPages(r.zRows)))
	}
	if r.gRows > 0 {
		b.CBPushBack(c.g, kir.Ci(gdnPages(r.gRows)))
	}
}

// computePacked emits the compute's SFPU work on the packed tiles:
// silu of the z pages into szp, exp(g) (and - 1 with an fp32 state) of
// the g pages into egp.
func (k gdnCompute) computePacked() {
	if k.zRows > 0 {
		k.c.B.Comment("silu(z) of the core's items, one tile for up to 32 rows")
		k.c.ForPeeled("zp", gdnPages(k.zRows), func(kir.Expr) { k.c.Unary(k.cb.z, k.cb.szp, []blocks.SFPUStep{{Op: k.cb.silu}}) })
	}
	if k.gRows > 0 {
		k.c.B.Comment("exp(g) of the core's items, one tile for up to 32 items")
		steps := []blocks.SFPUStep{{Op: kir.SFPUExp}}
		if k.exact {
			steps = append(steps, blocks.SFPUStep{Op: kir.SFPUAddScalar, Param: -1})
		}
		k.c.ForPeeled("gp", gdnPages(k.gRows), func(kir.Expr) { k.c.Unary(k.cb.g, k.cb.egp, steps) })
	}
}

// gdnPacked are the writer's addresses of the packed results.
type gdnPacked struct{ sz, eg kir.Var }

// writerPackedStart emits the writer's start: rows 1..31 of the silu_z
// pages cleared, then the wait for the packed results.
func (r *gdnRec) writerPackedStart(w *kir.Builder) gdnPacked {
	var pk gdnPacked
	if r.zRows > 0 {
		sz := blocks.Reserve(w, r.cb.sz, kir.Ci(r.vc), "sz")
		blocks.FillWords(w, sz, r.vc*r.z.Type.DType.TileBytes(), 0)
		pk.sz = blocks.WaitFront(w, r.cb.szp, kir.Ci(gdnPages(r.zRows)), "szp")
	}
	if r.gRows > 0 {
		pk.eg = blocks.WaitFront(w, r.cb.egp, kir.Ci(gdnPages(r.gRows)), "egp")
	}
	return pk
}

// writerPackedItem emits the moves of item li's rows of the packed
// results into its exp_g and silu_z pages (pushed).
func (r *gdnRec) writerPackedItem(w *kir.Builder, pk gdnPacked, li kir.Expr) {
	if r.gRows > 0 {
		eb, page := blocks.ElemBytes(r.f), r.f.TileBytes()
		eg := blocks.Reserve(w, r.cb.eg, kir.C(1), "eg")
		src := kir.Add(kir.Add(pk.eg, kir.Mul(kir.Div(li, kir.Ci(ir.TileSize)), kir.Ci(page))), blocks.FaceOffset(kir.Mod(li, kir.Ci(ir.TileSize)), kir.C(0), eb))
		blocks.StoreElem(w, eg, blocks.LoadElem(src, eb), eb)
		w.CBPushBack(r.cb.eg, kir.C(1))
	}
	if r.zRows > 0 {
		page := r.z.Type.DType.TileBytes()
		sz := blocks.Reserve(w, r.cb.sz, kir.Ci(r.vc), "sz")
		w.For("v", kir.C(0), kir.Ci(r.vc), func(v kir.Var) {
			j := w.Let("j", kir.Add(kir.Mul(li, kir.Ci(r.vc)), v))
			src := kir.Add(pk.sz, kir.Mul(kir.Div(j, kir.Ci(ir.TileSize)), kir.Ci(page)))
			blocks.CopyTileRow(w, src, kir.Mod(j, kir.Ci(ir.TileSize)), kir.Add(sz, kir.Mul(v, kir.Ci(page))), kir.C(0), r.ebZ)
		})
		w.NoCAsyncReadBarrier()
		w.CBPushBack(r.cb.sz, kir.Ci(r.vc))
	}
}

// writerPackedEnd pops the packed results.
func (r *gdnRec) writerPackedEnd(w *kir.Builder) {
	if r.zRows > 0 {
		w.CBPopFront(r.cb.szp, kir.Ci(gdnPages(r.zRows)))
	}
	if r.gRows > 0 {
		w.CBPopFront(r.cb.egp, kir.Ci(gdnPages(r.gRows)))
	}
}
