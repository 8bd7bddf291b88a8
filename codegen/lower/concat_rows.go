package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Row concat of a short head: concat along the rows of [..., n0, C] and
// [..., n1, C] with n0 < 32 rows, the GDN prefill's conv state (3 rows)
// before the step's tokens. Every result tile is built from whole tiles
// with local L1 copies of face-row runs, as the conv builds its shifted
// tiles (shiftRuns): result tile row 0 is the head's n0 rows over the
// first 32 - n0 rows of the tail's tile row 0, and result tile row tr >= 1
// is the tail's rows 32 tr - n0 .. 32 tr + 31 - n0, the last n0 rows of
// its tile row tr-1 over the first 32 - n0 of tile row tr (absent past
// the tail's last tile row: padding). A unit of up to concatRowsBlock
// result pages of one tile row has its source tiles in flight under one
// barrier and its copies under another; the reader walks down the tile
// rows and keeps the tail tiles it read for the unit above. The row-run relayout of other concats moves a face row
// per run: 816 us predicted for [1,3,5120] ++ [1,4096,5120] bf16.

// concatRowsBlock is the most result pages a reader builds per barrier.
const concatRowsBlock = 8

// concatHeadRows reports whether op is a concat concatRows lowers: two
// tile-layout operands and a result of one element dtype data movement
// handles, in DRAM, joined along the rows (axis rank-2, rank >= 2), the
// first of fewer than 32 rows, the other dims equal.
func concatHeadRows(op *ir.Op, ax int) bool {
	out := op.Result()
	os := out.Type.Shape
	r := os.Rank()
	if len(op.Operands) != 2 || r < 2 || ax != r-2 || blocks.ElemBytes(out.Type.DType) == 0 || out.Type.Layout != ir.TileLayout || out.Type.Mem.Kind != ir.DRAMInterleaved {
		return false
	}
	for _, v := range op.Operands {
		s := v.Type.Shape
		if v.Type.DType != out.Type.DType || v.Type.Layout != ir.TileLayout || v.Type.Mem.Kind != ir.DRAMInterleaved || s.Rank() != r {
			return false
		}
		for d := range r {
			if d != ax && s[d] != os[d] {
				return false
			}
		}
	}
	return op.Operands[0].Type.Shape[ax] < ir.TileSize
}

// faceRowRuns lists the L1 copies that build a tile whose row r comes from
// row src(r) of source tile tile(r) (in L1 order, merged into maximal runs
// contiguous in source and destination), eb bytes an element; rows with
// tile(r) < 0 are not copied.
func faceRowRuns(eb int, from func(r int) (tile, row int)) []copyRun {
	row := blocks.FaceDim * eb
	var runs []copyRun
	for f := 0; f < 4; f++ {
		for fr := 0; fr < blocks.FaceDim; fr++ {
			r, c := (f/2)*blocks.FaceDim+fr, (f%2)*blocks.FaceDim
			tile, s := from(r)
			if tile < 0 {
				continue
			}
			cr := copyRun{tile: tile, src: blocks.FaceOffsetConst(s, c, eb), dst: blocks.FaceOffsetConst(r, c, eb), n: row}
			runs = appendRun(runs, cr)
		}
	}
	return runs
}

// concatRowsUnit is the result pages a unit of the row concat's work
// spans: W = gcd(ct, concatRowsBlock) adjacent pages of one tile row.
func concatRowsUnit(ct int) int {
	w := concatRowsBlock
	for ct%w != 0 {
		w /= 2
	}
	return w
}

// concatRows lowers a concatHeadRows concat (see the section above). Its
// work is units of W = concatRowsUnit(ct) pages of one result tile row,
// numbered down the tile rows of each group of W tile columns (unit u:
// batch u / (G Rt), group (u / Rt) % G, tile row u % Rt for G = ct/W
// groups and Rt result tile rows), split in ranges over the grid. Unit
// (tr, g) needs the tail's tile rows tr-1 and tr of its columns, and the
// unit before it in the range read tile row tr-1 as its own second
// source: the reader keeps that set of W tiles (two sets of W slots,
// alternating) and reads only tile row tr, so each tail tile is read
// about once (once more at each range's start), not twice.
func concatRows(op *ir.Op, ctx *Context) (*kir.Program, error) {
	head, tail, out := op.Operands[0], op.Operands[1], op.Result()
	ps, pages, err := PageLayout(out.Type)
	if err != nil {
		return nil, err
	}
	t := ctx.Target
	eb := blocks.ElemBytes(out.Type.DType)
	oi, ti := blocks.ImageOf(out.Type.Shape), blocks.ImageOf(tail.Type.Shape)
	n0 := head.Type.Shape[head.Type.Shape.Rank()-2]
	ct := oi.Ct
	W := concatRowsUnit(ct)
	G := ct / W
	units := pages / W
	// Per unit: W pages read (about once) and W written.
	sp := startProgram(op, ctx, planStream(units, t.NumWorkers(), 2*W*ps, 1, 8*W*L1ReadLatencyCycles))
	slot := target.AlignUp(ps, t.DRAMReadAlign)
	cbOut := sp.cbs.Pages(blocks.InputCB, "pages", out.Type.DType, slot, 2*W)
	cbSrc := sp.cbs.Pages(blocks.ScratchCB, "sources", out.Type.DType, slot, 2*W)
	sp.planned("row concat")
	rd := sp.reader()
	hAcc, tAcc := sp.bind(rd, "head_addr", head), sp.bind(rd, "tail_addr", tail)
	rstart, rcount := rd.RuntimeArg("start_unit"), rd.RuntimeArg("num_units")
	b := rd.Builder()
	src := blocks.ScratchPages(b, cbSrc, 2*W, "src")
	// Row 0 of the result: the head's rows, then the tail's from tile 0
	// (source 1). Rows tr >= 1: the tail's tile rows tr-1 (source 0) and tr.
	first := faceRowRuns(eb, func(r int) (int, int) {
		if r < n0 {
			return 0, r
		}
		return 1, r - n0
	})
	var own, next []copyRun
	for _, r := range shiftRuns(ir.TileSize-n0, eb) {
		if r.tile == 0 {
			own = append(own, r)
		} else {
			next = append(next, r)
		}
	}
	// unit is unit u's batch, first tile column and tile row.
	unit := func(b *kir.Builder, u kir.Expr) (bo, c0, tr kir.Var) {
		bo = b.Let("bo", kir.Div(u, kir.Ci(G*oi.Rt)))
		r := b.Let("r", kir.Mod(u, kir.Ci(G*oi.Rt)))
		return bo, b.Let("c0", kir.Mul(kir.Div(r, kir.Ci(oi.Rt)), kir.Ci(W))), b.Let("tr", kir.Mod(r, kir.Ci(oi.Rt)))
	}
	set := kir.Ci(W * slot)
	b.For("k", kir.C(0), rcount, func(k kir.Var) {
		bo, c0, tr := unit(b, kir.Add(rstart, k))
		// s0 holds the unit's first sources (the previous unit's second
		// when it continues the column group), s1 its second.
		s0 := b.Let("s0", kir.Add(src, kir.Mul(kir.Mod(kir.Add(k, kir.C(1)), kir.C(2)), set)))
		s1 := b.Let("s1", kir.Add(src, kir.Mul(kir.Mod(k, kir.C(2)), set)))
		tailPage := func(row, w kir.Expr) kir.Expr {
			return kir.Add(kir.Add(kir.Mul(bo, kir.Ci(ti.TilesPerMat)), kir.Mul(row, kir.Ci(ct))), kir.Add(c0, w))
		}
		b.Comment("the unit's source tiles not yet in L1, in flight at once")
		b.IfElse(kir.Eq(tr, kir.C(0)), func() {
			b.For("w", kir.C(0), kir.Ci(W), func(w kir.Var) {
				blocks.ReadPageTo(b, hAcc, kir.Add(kir.Mul(bo, kir.Ci(ct)), kir.Add(c0, w)), kir.Add(s0, kir.Mul(w, kir.Ci(slot))))
			})
		}, func() {
			b.If(kir.Eq(k, kir.C(0)), func() {
				b.For("w", kir.C(0), kir.Ci(W), func(w kir.Var) {
					blocks.ReadPageTo(b, tAcc, tailPage(kir.Sub(tr, kir.C(1)), w), kir.Add(s0, kir.Mul(w, kir.Ci(slot))))
				})
			})
		})
		b.If(kir.Lt(tr, kir.Ci(ti.Rt)), func() {
			b.For("w", kir.C(0), kir.Ci(W), func(w kir.Var) {
				blocks.ReadPageTo(b, tAcc, tailPage(tr, w), kir.Add(s1, kir.Mul(w, kir.Ci(slot))))
			})
		})
		b.NoCAsyncReadBarrier()
		d0 := blocks.Reserve(b, cbOut, kir.Ci(W), "d0")
		b.Comment("each result tile from its two source tiles (face-row runs)")
		b.For("w", kir.C(0), kir.Ci(W), func(w kir.Var) {
			off := b.Let("off", kir.Mul(w, kir.Ci(slot)))
			d := b.Let("d", kir.Add(d0, off))
			copies := func(runs []copyRun) {
				for _, r := range runs {
					base := s0
					if r.tile == 1 {
						base = s1
					}
					blocks.LocalCopy(b, kir.Add(kir.Add(base, off), kir.Ci(r.src)), kir.Add(d, kir.Ci(r.dst)), r.n)
				}
			}
			b.IfElse(kir.Eq(tr, kir.C(0)), func() { copies(first) }, func() {
				copies(own)
				b.If(kir.Lt(tr, kir.Ci(ti.Rt)), func() { copies(next) })
			})
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cbOut, kir.Ci(W))
	})
	blocks.ReleaseScratchPages(b, cbSrc, 2*W)
	wr, dAcc := sp.writerOf("dst_addr", out)
	wstart, wcount := wr.RuntimeArg("start_unit"), wr.RuntimeArg("num_units")
	w := wr.Builder()
	w.For("k", kir.C(0), wcount, func(k kir.Var) {
		bo, c0, tr := unit(w, kir.Add(wstart, k))
		base := w.Let("base", kir.Add(kir.Add(kir.Mul(bo, kir.Ci(oi.TilesPerMat)), kir.Mul(tr, kir.Ci(ct))), c0))
		blocks.WritePagesBatch(w, dAcc, cbOut, kir.Ci(W), func(j kir.Expr) kir.Expr { return kir.Add(base, j) })
	})
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}
