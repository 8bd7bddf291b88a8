package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Row-streamed norm tail with the weight kept (cachedWeight): a tail core
// of a row stream norms a row every time the ring completes one of its
// rows, and the last of them ends the program, so the row's norm is
// what the program waits for after the ring's last packet. The plain tail
// reads the weight again for every row and adds the offset to every
// weight tile again (copy, add, pack: a quarter of the row's norm). Here
// the reader reads the weight once, the compute adds the offset once into
// a resident fp32 copy (the same tiles the plain tail packs per row, so
// the same bits) and every row's scaling reads that copy.
//
// The L1 for the copy comes from h's squares: the plain tail keeps the
// whole row's squares (fp32) and sums them in one DEST section; here the
// squares go in blocks of sqBlock tiles and the running sum (column 0 of
// DEST[0]) is packed at fp32 after each block and copied back (unpacked
// straight to DEST at fp32, exact) before the next: the same additions in
// the same order, so the same sum, rsqrt and normed bits.
//
// Since the row's norm is what the program waits for, its per-tile
// overhead counts: the squares and the scaling's two products go four
// tiles per DEST section (scaleBlock: one init of each product, one
// packer reconfiguration and one section handshake per block instead of
// per tile; each tile's unpacks, products and packs unchanged, so the
// same bits), the writer writes a block per barrier, and a row read from
// DRAM (past the kept rows) lands in blocks that the squares take as
// they come (rowBlockReads).

// cachedWeight reports whether the tail keeps its weight resident (a row
// stream whose CBs fit L1 with it); postcondition: tl.sqBlock() pages of
// squares then suffice.
func (tl *cclTail) cachedWeight() bool {
	if !keepRowWeight || tl.stream == nil || tl.w == nil || tl.res != nil {
		return false
	}
	return tl.cachedBytes(1) <= tl.ctx.Target.L1Budget()
}

// cachedBytes is the L1 of a cached-weight tail's CBs (cachedCBs) with
// an h CB of hRows rows.
func (tl *cclTail) cachedBytes(hRows int) int {
	wb := tl.w.Type.DType.TileBytes()
	if tl.offset != 0 {
		wb = ir.FP32.TileBytes() // the fp32 weight+offset copy (the weight streams through 2*blk pages)
	}
	blk := tl.weightBlock()
	sb := tl.scaleBlock()
	return tl.wt*(hRows*tl.dt.TileBytes()+wb) + 2*blk*tl.w.Type.DType.TileBytes() + (tl.sqBlock()+4+max(sb, 2))*ir.FP32.TileBytes() + 2*sb*tl.dt.TileBytes() + ir.BF16.TileBytes()
}

// scaleBlock is the tiles a cached-weight tail scales per DEST section
// (cachedCompute): a divisor of every core's share of a row (wt, or wt/g
// in a last row's group) that fits DEST at fp32 (four tiles half-sync),
// so the two products' inits, the packer's reconfigurations and the
// section's handshakes are paid once per block, not per tile. Each tile's
// products and packs are those of a block of one: the same bits.
func (tl *cclTail) scaleBlock() int {
	g := 1
	if tl.stream != nil {
		g = tl.stream.g
	}
	return largestDivisor(tl.wt/g, scaleBlockMax)
}

// weightBlock is the tiles of the weight a cached-weight tail reads per
// barrier (its weight CB holds two blocks), once, before its rows: eight
// (not the plain tail's 16, which reads the weight for every row), so the
// L1 goes to scaleBlock's pages.
func (tl *cclTail) weightBlock() int { return largestDivisor(tl.wt, 8) }

// scaleBlockMax bounds scaleBlock: the fp32 tiles DEST holds half-sync.
var scaleBlockMax = 4

// keptRows is how many of a tail core's rows its h CB keeps for the
// adders to write (rowSignal.kept): the most, up to the core's rows, whose
// CBs fit L1 with the weight kept; 0 when the tail keeps none (not a
// cached-weight tail, or keepRowsInL1 off). Postcondition: cachedCBs sizes
// the h CB for that many rows.
func (tl *cclTail) keptRows() int {
	if !keepRowsInL1 || !tl.cachedWeight() {
		return 0
	}
	n0 := tl.stream.maxRows(tl.linkTiles)
	if keptRowsMax > 0 {
		n0 = min(n0, keptRowsMax)
	}
	for n := n0; n >= 1; n-- {
		if tl.cachedBytes(n) <= tl.ctx.Target.L1Budget() {
			return n
		}
	}
	return 0
}

// keepRowWeight enables cachedWeight (tests turn it off to compare).
var keepRowWeight = true

// sqBlock is the squares a cached-weight tail sums per DEST section.
func (tl *cclTail) sqBlock() int { return largestDivisor(tl.wt, 8) }

// cachedCBs adds the cached-weight tail's norm CBs to cbs (tail CBs with
// only c.norm set; c.norm.wo is the resident weight(+offset) copy, or -1
// when c.norm.w itself holds the whole weight) and the partial sum CB.
func (tl *cclTail) cachedCBs(cbs *blocks.CBPlan, c *tailCBs) (partial int) {
	n := &c.norm
	blk := tl.weightBlock()
	hRows := max(tl.stream.kept, 1) // the kept rows, written by the adders
	n.x = cbs.Input("h_row", tl.dt, hRows*tl.wt)
	n.scaler = cbs.Input("scaler", ir.BF16, 1)
	if tl.offset != 0 {
		n.w = cbs.Input("weight", tl.w.Type.DType, 2*blk)
	} else {
		n.w = cbs.Input("weight", tl.w.Type.DType, tl.wt)
	}
	sb := tl.scaleBlock()
	n.out = cbs.Output("normed", tl.dt, 2*sb)
	n.sq = cbs.Scratch("h_squared", ir.FP32, tl.sqBlock())
	partial = cbs.Scratch("sum_squares_partial", ir.FP32, 1)
	n.rs = cbs.Scratch("rsqrt_mean", ir.FP32, 1)
	n.xn = cbs.Scratch("h_normed", ir.FP32, max(sb, 2))
	if tl.offset != 0 {
		n.wo = cbs.Scratch("weight_plus_offset", ir.FP32, tl.wt)
	}
	return partial
}

// rowBlockReads emits the read of the row of h at page first into its
// slot of cb in blocks of rowReadBlock tiles, each pushed as it lands (the
// compute squares a block at a time: blockedSumSquares), rather than the
// whole row under one barrier. Produces wt pages of cb.
func (tl *cclTail) rowBlockReads(b *kir.Builder, a *blocks.Access, cb int, first kir.Expr) {
	blk := tl.rowReadBlock()
	b.For("rb", kir.C(0), kir.Ci(tl.wt/blk), func(rb kir.Var) {
		blocks.ReadPagesBatch(b, a, cb, kir.Add(first, kir.Mul(rb, kir.Ci(blk))), kir.Ci(blk))
	})
}

// rowReadBlock is the tiles of a block of rowBlockReads: a divisor of wt
// (a multiple of sqBlock when wt allows).
func (tl *cclTail) rowReadBlock() int { return largestDivisor(tl.wt, rowReadBlockMax) }

// rowReadBlockMax bounds rowReadBlock; picked on the predictions of the
// 4,096-token prefill's all_reduce_add_rmsnorm.
var rowReadBlockMax = 8

// cachedWeightReads emits the reader's one read of the whole weight (in
// blocks of blk tiles), before its rows.
func (tl *cclTail) cachedWeightReads(b *kir.Builder, wAcc *blocks.Access, w int) {
	blk := tl.weightBlock()
	b.Comment("The weight once: the compute keeps it (with its offset) for every row.")
	b.For("wb", kir.C(0), kir.Ci(tl.wt/blk), func(wb kir.Var) {
		blocks.ReadPagesBatch(b, wAcc, w, kir.Mul(wb, kir.Ci(blk)), kir.Ci(blk))
	})
}

// cachedCompute emits the cached-weight tail's compute after the scaler
// wait: the resident weight(+offset) copy, then count rows (normCBs.row's
// arithmetic, the squares summed in blocks, the whole row; the scaling
// only of tiles col0 .. col0+cols-1, a row group's share), then it pops
// the copy.
func (tl *cclTail) cachedCompute(k *blocks.Compute, n normCBs, partial int, count, col0, cols kir.Expr) {
	wt := kir.Ci(tl.wt)
	wc := n.w
	if n.wo >= 0 {
		wc = n.wo
		k.B.Comment("weight + offset once, kept for every row")
		k.For("j", kir.C(0), wt, func(kir.Var) {
			k.Unary(n.w, n.wo, []blocks.SFPUStep{{Op: kir.SFPUAddScalar, Param: float32(tl.offset)}})
		})
	}
	k.B.CBWaitFront(wc, wt)
	k.For("r", kir.C(0), count, func(kir.Var) {
		tl.blockedSumSquares(k, n, partial)
		k.B.CBWaitFront(n.x, wt)
		k.B.CBWaitFront(n.rs, kir.C(1))
		sb := tl.scaleBlock()
		k.B.Comment(fmt.Sprintf("x * rsqrt (column broadcast) * kept weight (row broadcast), %d tiles per DEST section", sb))
		k.ForStep("j", col0, kir.Add(col0, cols), kir.Ci(sb), func(j kir.Var) {
			k.Acquire()
			for i := range sb {
				k.Binary(kir.EltMul, blocks.BcastCols, n.x, n.rs, kir.Add(j, kir.Ci(i)), kir.C(0), kir.Ci(i))
			}
			k.PackOut(n.xn, sb)
			k.B.CBWaitFront(n.xn, kir.Ci(sb))
			k.Acquire()
			for i := range sb {
				k.Binary(kir.EltMul, blocks.BcastRows, n.xn, wc, kir.Ci(i), kir.Add(j, kir.Ci(i)), kir.Ci(i))
			}
			k.B.CBPopFront(n.xn, kir.Ci(sb))
			k.PackOut(n.out, sb)
		})
		k.B.CBPopFront(n.rs, kir.C(1))
		k.B.CBPopFront(n.x, wt)
	})
	k.B.CBPopFront(wc, wt)
}

// blockedSumSquares emits rsqrt(sum(x^2)/H + eps) of the row at the
// front of n.x into one page of n.rs: per block of sqBlock tiles (waited
// for block by block, so a row read from DRAM in blocks is squared as it
// lands: rowBlockReads) the squares,
// then their matmuls against the ones column accumulated into DEST[0] on
// top of the previous blocks' sum (copied back exactly from partial).
func (tl *cclTail) blockedSumSquares(k *blocks.Compute, n normCBs, partial int) {
	bs, blocksN := tl.sqBlock(), tl.wt/tl.sqBlock()
	k.B.Comment("x^2 in blocks; the running sum kept at fp32 between them")
	k.For("sb", kir.C(0), kir.Ci(blocksN), func(sb kir.Var) {
		k.B.CBWaitFront(n.x, kir.Mul(kir.Add(sb, kir.C(1)), kir.Ci(bs)))
		q := largestDivisor(bs, scaleBlockMax) // squares per DEST section
		k.ForStep("j", kir.C(0), kir.Ci(bs), kir.Ci(q), func(j kir.Var) {
			k.Acquire()
			for i := range q {
				k.Copy(n.x, kir.Add(kir.Mul(sb, kir.Ci(bs)), kir.Add(j, kir.Ci(i))), kir.Ci(i))
				k.SFPU(blocks.SFPUStep{Op: kir.SFPUSquare}, kir.Ci(i))
			}
			k.PackOut(n.sq, q)
		})
		k.B.CBWaitFront(n.sq, kir.Ci(bs))
		k.Acquire()
		if blocksN > 1 {
			k.If(kir.Ne(sb, kir.C(0)), func() {
				k.B.CBWaitFront(partial, kir.C(1))
				k.Copy(partial, kir.C(0), kir.C(0))
				k.B.CBPopFront(partial, kir.C(1))
			}, nil)
		}
		k.For("j", kir.C(0), kir.Ci(bs), func(j kir.Var) {
			k.Matmul(n.sq, n.scaler, j, kir.C(0), kir.C(0), false)
		})
		last := func() {
			n.rsqrtOf(k, tl.wt*ir.TileSize, tl.eps)
			k.PackOut(n.rs, 1)
		}
		if blocksN == 1 {
			last()
		} else {
			k.If(kir.Eq(sb, kir.Ci(blocksN-1)), last, func() { k.PackOut(partial, 1) })
		}
		k.B.CBPopFront(n.sq, kir.Ci(bs))
	})
}
