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
// the tail's last tile row: padding). A block of concatRowsBlock result
// pages has its source tiles in flight under one barrier and its copies
// under another. The row-run relayout of other concats moves a face row
// per run: 816 us predicted for [1,3,5120] ++ [1,4096,5120] bf16.

// concatRowsBlock is the result pages a reader builds per barrier.
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

// concatRows lowers a concatHeadRows concat (see the section above).
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
	sp := startProgram(op, ctx, planStream(pages, t.NumWorkers(), 3*ps, 2, 8*L1ReadLatencyCycles))
	slot := target.AlignUp(ps, t.DRAMReadAlign)
	cbOut := sp.cbs.Pages(blocks.InputCB, "pages", out.Type.DType, slot, 2*concatRowsBlock)
	cbSrc := sp.cbs.Pages(blocks.ScratchCB, "sources", out.Type.DType, slot, 2*concatRowsBlock)
	sp.planned("row concat")
	rd := sp.reader()
	hAcc, tAcc := sp.bind(rd, "head_addr", head), sp.bind(rd, "tail_addr", tail)
	rstart, rcount := rd.RuntimeArg("start_page"), rd.RuntimeArg("num_pages")
	b := rd.Builder()
	src := blocks.ScratchPages(b, cbSrc, 2*concatRowsBlock, "src")
	// Row 0 of the result: the head's rows, then the tail's from tile 0
	// (source 1). Rows tr >= 1: the tail's tile rows tr-1 (source 0) and tr.
	first := faceRowRuns(eb, func(r int) (int, int) {
		if r < n0 {
			return 0, r
		}
		return 1, r - n0
	})
	shifted := shiftRuns(ir.TileSize-n0, eb)
	b.For("blk", kir.C(0), kir.Div(kir.Add(rcount, kir.Ci(concatRowsBlock-1)), kir.Ci(concatRowsBlock)), func(blk kir.Var) {
		base := b.Let("base", kir.Mul(blk, kir.Ci(concatRowsBlock)))
		n := b.LetT("n", kir.U32T, kir.Sub(rcount, base))
		b.If(kir.Gt(n, kir.Ci(concatRowsBlock)), func() { b.Assign(n, kir.Ci(concatRowsBlock)) })
		// info for page j: its tile row and column, and whether the tail
		// has tile row tr
		page := func(j kir.Var) (tr, tc, bo kir.Var) {
			pg := b.Let("page", kir.Add(rstart, kir.Add(base, j)))
			bo = b.Let("bo", kir.Div(pg, kir.Ci(oi.TilesPerMat)))
			m := b.Let("m", kir.Mod(pg, kir.Ci(oi.TilesPerMat)))
			return b.Let("tr", kir.Div(m, kir.Ci(ct))), b.Let("tc", kir.Mod(m, kir.Ci(ct))), bo
		}
		b.Comment("the source tiles of the block's result pages, in flight at once")
		b.For("j", kir.C(0), n, func(j kir.Var) {
			tr, tc, bo := page(j)
			s0 := b.Let("s0", kir.Add(src, kir.Mul(j, kir.Ci(2*slot))))
			tailPage := func(row kir.Expr) kir.Expr {
				return kir.Add(kir.Add(kir.Mul(bo, kir.Ci(ti.TilesPerMat)), kir.Mul(row, kir.Ci(ct))), tc)
			}
			b.IfElse(kir.Eq(tr, kir.C(0)), func() {
				blocks.ReadPageTo(b, hAcc, kir.Add(kir.Mul(bo, kir.Ci(ct)), tc), s0)
			}, func() {
				blocks.ReadPageTo(b, tAcc, tailPage(kir.Sub(tr, kir.C(1))), s0)
			})
			b.If(kir.Lt(tr, kir.Ci(ti.Rt)), func() {
				blocks.ReadPageTo(b, tAcc, tailPage(tr), kir.Add(s0, kir.Ci(slot)))
			})
		})
		b.NoCAsyncReadBarrier()
		d0 := blocks.Reserve(b, cbOut, n, "d0")
		b.Comment("each result tile from its two source tiles (face-row runs)")
		b.For("j", kir.C(0), n, func(j kir.Var) {
			tr, _, _ := page(j)
			s0 := b.Let("s0", kir.Add(src, kir.Mul(j, kir.Ci(2*slot))))
			d := b.Let("d", kir.Add(d0, kir.Mul(j, kir.Ci(slot))))
			copies := func(runs []copyRun) {
				for _, r := range runs {
					blocks.LocalCopy(b, kir.Add(s0, kir.Ci(r.tile*slot+r.src)), kir.Add(d, kir.Ci(r.dst)), r.n)
				}
			}
			b.IfElse(kir.Eq(tr, kir.C(0)), func() { copies(first) }, func() {
				var own, next []copyRun
				for _, r := range shifted {
					if r.tile == 0 {
						own = append(own, r)
					} else {
						next = append(next, r)
					}
				}
				copies(own)
				b.If(kir.Lt(tr, kir.Ci(ti.Rt)), func() { copies(next) })
			})
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cbOut, n)
	})
	blocks.ReleaseScratchPages(b, cbSrc, 2*concatRowsBlock)
	wr, dAcc := sp.writerOf("dst_addr", out)
	wstart, wcount := wr.RuntimeArg("start_page"), wr.RuntimeArg("num_pages")
	blocks.WritePages(wr.Builder(), dAcc, cbOut, wstart, wcount)
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}
