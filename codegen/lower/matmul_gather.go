package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Gathered rows: at decode an output tile of a fused matmul has few live
// rows (one, or the B rows of B packed users), so an epilogue's tile
// operations on a sub-block of sb tiles do the work of one tile sb times.
// When the live rows of a sub-block fit one tile (gatherRows) an epilogue
// may have the writer gather them (mmEpilogue.gathers): the writer,
// otherwise idle until the results, copies rows 0..live-1 of the
// sub-block's tile t of a CB the products are packed to into rows
// t*live..t*live+live-1 of one tile (local NoC reads of whole face-row
// runs: two per run of rows that stays in one face band on both sides),
// the epilogue computes that one tile, and the writer stores its rows
// t*live+u as row u of result tile t. The rows of the gathered tiles past
// sb*live, and of the results past live, are padding and are not written
// (device programs may leave garbage in padding; the consumers of a
// decode row read its live rows only).

// mmGather is one gathering the writer does per sub-block of sb tiles: it
// copies the live rows of page t of CB from to rows t*live.. of one page
// of CB to, each page as soon as it is pushed, then pushes that page and
// pops the sb pages.
type mmGather struct{ from, to int }

// gatherRows is the live rows of each output tile when the writer can
// gather a sub-block's live rows into one tile: the activation is one
// tile row, the results are not stored per user (users), a sub-block
// holds at least two tiles (min(dest, PerCore); one tile gains nothing)
// whose live rows fit 32, and the results have 2- or 4-byte elements
// (whole face-row runs are byte ranges); else 0.
func (m *mmProgram) gatherRows() int {
	sub := min(m.dest, m.plan.PerCore)
	live := blocks.LiveRows(m.act.Type.Shape)
	if m.rows != 1 || m.users > 0 || sub < 2 || live*sub > ir.TileSize {
		return 0
	}
	for _, pt := range m.parts {
		if eb := blocks.ElemBytes(pt.out.Type.DType); eb != 2 && eb != 4 {
			return 0
		}
	}
	return live
}

// writeGathered emits the writer of part pt (result access oAcc, result
// CB out, the core's columns [start, start+count)) for an epilogue that
// works on gathered rows: per sub-block of sb <= dest tiles each of gs,
// then the sub-block's result tile scattered to the result: row t*live+u
// to row u of tile col+t. A sub-block's pages are contiguous in its CB of
// dest pages: every sub-block of a core but its last fills the CB, so each
// starts at the CB's first page.
func (m *mmProgram) writeGathered(w *kir.Builder, gs []mmGather, oAcc *blocks.Access, out int, pt mmPart, start, count kir.Expr) {
	live, sub := m.live, min(m.dest, m.plan.PerCore)
	odt := pt.out.Type.DType
	eb, tb := blocks.ElemBytes(odt), odt.TileBytes()
	// eachTile emits body(t) for the sub-block's tiles t < sb: unrolled up
	// to sub, tiles past the first under if (t < sb).
	eachTile := func(sb kir.Var, body func(t int)) {
		for t := range sub {
			if t == 0 {
				body(0)
				continue
			}
			w.If(kir.Lt(kir.Ci(t), sb), func() { body(t) })
		}
	}
	w.ForStep("nb", kir.C(0), count, kir.Ci(m.dest), func(nb kir.Var) {
		sb := blocks.BlockLen(w, "sb", count, nb, m.dest)
		col := w.Let("col", kir.Add(start, nb))
		for _, g := range gs {
			w.Comment("the live rows of the sub-block's tiles into one tile")
			tiles := blocks.WaitFront(w, g.from, kir.C(1), "tiles")
			rows := blocks.Reserve(w, g.to, kir.C(1), "rows")
			eachTile(sb, func(t int) {
				if t > 0 { // tile t's rows move while the next tiles are packed
					w.CBWaitFront(g.from, kir.Ci(t+1))
				}
				for _, r := range rowRuns(0, t*live, live) {
					for half := range 2 {
						blocks.LocalCopy(w, kir.Add(tiles, kir.Ci(t*tb+blocks.RowOffset(r.src, half, eb))),
							kir.Add(rows, kir.Ci(blocks.RowOffset(r.dst, half, eb))), r.n*blocks.FaceDim*eb)
					}
				}
			})
			w.NoCAsyncReadBarrier()
			w.CBPushBack(g.to, kir.C(1))
			w.CBPopFront(g.from, sb)
		}
		w.Comment("the result's rows to their tiles")
		res := blocks.WaitFront(w, out, kir.C(1), "result")
		write := func(page kir.Expr, r rowRun) {
			for half := range 2 {
				w.NoCAsyncWrite(kir.Add(res, kir.Ci(blocks.RowOffset(r.src, half, eb))), oAcc.PageAddrAt(page, blocks.RowOffset(r.dst, half, eb)), kir.Ci(r.n*blocks.FaceDim*eb))
			}
		}
		eachTile(sb, func(t int) {
			for _, r := range rowRuns(t*live, 0, live) {
				write(kir.Add(col, kir.Ci(t)), r)
			}
		})
		w.NoCAsyncWriteBarrier()
		w.CBPopFront(out, kir.C(1))
	})
}

// rowRun is a move of n tile rows from row src to row dst.
type rowRun struct{ src, dst, n int }

// rowRuns splits the move of rows src..src+n-1 to dst..dst+n-1 into runs
// that each stay in one face band (rows 0-15, 16-31) on both sides, so
// each half of a run is one contiguous byte range in both tiles.
func rowRuns(src, dst, n int) []rowRun {
	var runs []rowRun
	for n > 0 {
		k := min(n, blocks.FaceDim-src%blocks.FaceDim, blocks.FaceDim-dst%blocks.FaceDim)
		runs = append(runs, rowRun{src, dst, k})
		src, dst, n = src+k, dst+k, n-k
	}
	return runs
}
