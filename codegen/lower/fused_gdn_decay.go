package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// A gdn_chunk_scan's decay terms, once per item and g tile instead of
// once per chunk: row r of g's tile t holds chunk 32t + r's g, so
//
//	per chunk: e = r(exp(r(-(g - gl)))) of a column, egl = r(exp(gl))
//	  => per tile: E = r(exp(r(-(G - G[:, 31])))), X = r(exp(G)),
//	     chunk c's e_j = E[c%32, j], egl = X[c%32, 31]
//
// The compute runs the same sub, negation, rounding and exp on the same
// values (G from a CB that is an FPU operand only, as the column was; X
// from a copy-only CB, as gl's copy was), so every element is the value
// the step computes, bit for bit; the reader moves chunk c's row of E
// into column 0 of a cleared tile and X's element to (0, 0) of another.

// readGTiles emits the reader's g tiles of item bh: the scan's gTiles
// tiles of g twice (CBs gt and gcp) and their last columns as column 0 of
// cleared tiles (CB glc), then waits for the compute's decay rows (CBs
// erows and egrows, popped after the item's last chunk).
func (r *gdnChunk) readGTiles(b *kir.Builder, g *blocks.Access, bh kir.Expr) {
	c, n, tb := r.cb, r.gTiles(), r.f.TileBytes()
	b.Comment("the g tiles holding the item's chunks' rows, twice, and their last columns as column 0")
	gt := blocks.Reserve(b, c.gt, kir.Ci(n), "gt")
	gcp := blocks.Reserve(b, c.gcp, kir.Ci(n), "gcp")
	glc := blocks.Reserve(b, c.glc, kir.Ci(n), "glc")
	ps := kir.Ci(tb)
	b.For("t", kir.C(0), kir.Ci(n), func(t kir.Var) {
		pg := kir.Add(kir.Mul(bh, kir.Ci(r.gRt)), kir.Add(kir.Ci(r.c/ir.TileSize), t))
		b.NoCAsyncRead(g.PageAddr(pg), kir.Add(gt, kir.Mul(t, ps)), ps)
		b.NoCAsyncRead(g.PageAddr(pg), kir.Add(gcp, kir.Mul(t, ps)), ps)
	})
	blocks.FillWords(b, glc, n*tb, 0)
	b.NoCAsyncReadBarrier()
	last := kir.Ci(ir.TileSize - 1)
	b.For("t", kir.C(0), kir.Ci(n), func(t kir.Var) {
		src := b.Let("g_tile", kir.Add(gt, kir.Mul(t, ps)))
		dst := b.Let("gl_tile", kir.Add(glc, kir.Mul(t, ps)))
		b.For("row", kir.C(0), kir.Ci(ir.TileSize), func(row kir.Var) {
			blocks.MoveElem(b, src, row, last, dst, row, kir.C(0), r.eb)
		})
	})
	for _, cb := range []int{c.gt, c.gcp, c.glc} {
		b.CBPushBack(cb, kir.Ci(n))
	}
	b.Comment("the compute's decay rows of the item's g tiles")
	b.CBWaitFront(c.erows, kir.Ci(n))
	b.CBWaitFront(c.egrows, kir.Ci(n))
}

// readDecay emits the reader's chunk cur decay terms: row cur%32 of its
// decay rows tile as column 0 of a cleared tile (CB e) and element
// (cur%32, 31) of its exp(g) tile at (0, 0) of another (CB egl).
func (r *gdnChunk) readDecay(b *kir.Builder) {
	c, tb := r.cb, r.f.TileBytes()
	b.Comment("chunk c's decay column (row c%32 of its decay rows as a column) and exp(gl) at (0, 0)")
	t := kir.Mul(kir.Sub(kir.Div(r.cur, kir.Ci(ir.TileSize)), kir.Ci(r.c/ir.TileSize)), kir.Ci(tb))
	erow := b.Let("erow", kir.Add(kir.GetReadPtr{CB: c.erows}, t))
	egrow := b.Let("egrow", kir.Add(kir.GetReadPtr{CB: c.egrows}, t))
	gr := b.Let("grow", r.gRow())
	ecol := blocks.Reserve(b, c.e, kir.C(1), "ecol")
	egl := blocks.Reserve(b, c.egl, kir.C(1), "egl")
	blocks.FillWords(b, ecol, tb, 0)
	blocks.FillWords(b, egl, tb, 0)
	b.For("j", kir.C(0), kir.Ci(ir.TileSize), func(j kir.Var) {
		blocks.MoveElem(b, erow, gr, j, ecol, j, kir.C(0), r.eb)
	})
	blocks.MoveElem(b, egrow, gr, kir.Ci(ir.TileSize-1), egl, kir.C(0), kir.C(0), r.eb)
	b.CBPushBack(c.e, kir.C(1))
	b.CBPushBack(c.egl, kir.C(1))
}

// decayRows emits the compute's decay rows of an item: per g tile t,
// E_t = r(exp(r(-(G_t - G_t[:, 31])))) (the last column broadcast from
// CB glc) packed to CB erows, then X_t = r(exp(G_t)) from the copy-only
// CB gcp packed to CB egrows; round rounds DEST[0] to a bf16 state.
func (r *gdnChunk) decayRows(c *blocks.Compute, round func()) {
	n, z0, g := r.cb, kir.C(0), kir.Ci(r.gTiles())
	cb := c.B
	cb.Comment("the item's decay rows: E = r(exp(r(-(G - G[:, 31])))) per g tile")
	cb.CBWaitFront(n.gt, g)
	cb.CBWaitFront(n.glc, g)
	c.For("gt", z0, g, func(t kir.Var) {
		c.Acquire()
		c.Binary(kir.EltSub, blocks.BcastCols, n.gt, n.glc, t, t, z0)
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, z0)
		round()
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, z0)
		c.PackOut(n.erows, 1)
	})
	cb.CBPopFront(n.gt, g)
	cb.CBPopFront(n.glc, g)
	cb.Comment("and X = r(exp(G)) per g tile (exp(gl) of chunk c at (c%32, 31))")
	cb.CBWaitFront(n.gcp, g)
	c.For("gt", z0, g, func(t kir.Var) {
		c.Acquire()
		c.Copy(n.gcp, t, z0)
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, z0)
		c.PackOut(n.egrows, 1)
	})
	cb.CBPopFront(n.gcp, g)
}
