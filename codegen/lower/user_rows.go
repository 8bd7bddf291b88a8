package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Users' rows: the reshapes [B, 1, X] <-> [1, B, X] in tile layout that
// pass pack-rows inserts (B <= 32 users at decode). Both views hold the
// same elements; the first keeps user b in row 0 of tile row b, the
// second in row b of one tile row. Tile column j of every user moves
// together, so the X/32 columns are split over the grid and each moves
// only live rows:
//
//   - pack ([B,1,X] -> [1,B,X]): the reader reads the first 64 bytes of
//     faces 0 and 1 of tile (b, j) for every user b (row 0, two 64-byte
//     reads each, into 64-byte slots so source and destination agree
//     modulo 64 as Blackhole's DRAM reads need), copies each user's two
//     face-row runs into row b of the packed tile with local NoC reads,
//     and the writer stores the tile. Rows B..31 of the packed tile are
//     padding and are not cleared (device programs may leave garbage in
//     padding; the row-wise programs that read packed rows never mix rows).
//   - unpack ([1,B,X] -> [B,1,X]): the reader reads rows 0..B-1 of packed
//     tile j (blocks.ReadRowsTo), and the writer stores row b's two
//     face-row runs straight into row 0 of tile (b, j) (DRAM writes need
//     16-byte alignment only; a face row is 32 or 64 bytes). Rows 1..31 of
//     the result tiles are padding and are not written.

// userRowsReshape reports whether reshape x -> out is a pack (pack true)
// or unpack of users' rows this file lowers, and returns B.
func userRowsReshape(x, out *ir.Value) (users int, pack, ok bool) {
	xs, os := x.Type.Shape, out.Type.Shape
	if x.Type.Layout != ir.TileLayout || out.Type.Layout != ir.TileLayout || xs.Rank() != 3 || os.Rank() != 3 || xs[2] != os[2] {
		return 0, false, false
	}
	if eb := blocks.ElemBytes(x.Type.DType); eb != 2 && eb != 4 {
		return 0, false, false
	}
	switch {
	case xs[1] == 1 && os[0] == 1 && xs[0] == os[1] && xs[0] > 1 && xs[0] <= ir.TileSize:
		return xs[0], true, true
	case xs[0] == 1 && os[1] == 1 && xs[1] == os[0] && xs[1] > 1 && xs[1] <= ir.TileSize:
		return xs[1], false, true
	}
	return 0, false, false
}

func lowerUserRows(op *ir.Op, ctx *Context, users int, pack bool) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	dt := x.Type.DType
	eb := blocks.ElemBytes(dt)
	xt := tilesWide(x.Type.Shape)
	// Per column: B reads (or writes) of two runs each, issued one by one.
	perCol := 2 * users * 40
	sp := startProgram(op, ctx, PlanSplit(xt, ctx.Target.NumWorkers(), perCol, 0, 0))
	cbTile := sp.cbs.Output("tiles", dt, 2)
	cbStage := -1
	if pack {
		cbStage = sp.cbs.Pages(blocks.ScratchCB, "user_rows", dt, users*blocks.GatherRowSlot, 1)
	}
	sp.planned(fmt.Sprintf("reshape of %d users' rows", users))

	rd := sp.reader()
	xAcc := sp.bind(rd, "x_addr", x)
	rstart, rcount := rd.RuntimeArg("start_col"), rd.RuntimeArg("num_cols")
	b := rd.Builder()
	var stage kir.Var
	if pack {
		stage = blocks.Scratch(b, cbStage, "rows")
	}
	b.For("j", rstart, kir.Add(rstart, rcount), func(j kir.Var) {
		l1 := blocks.Reserve(b, cbTile, kir.C(1), "tile")
		if pack {
			b.Comment("row 0 of every user's tile j into its row of the packed tile")
			blocks.GatherRows(b, xAcc, stage, l1, users, eb, func(u int) kir.Expr { return kir.Add(kir.Ci(u*xt), j) })
		} else {
			blocks.ReadRowsTo(b, xAcc, j, l1, users, eb)
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cbTile, kir.C(1))
	})
	if pack {
		blocks.ReleaseScratch(b, cbStage)
	}

	wr, oAcc := sp.writerOf("out_addr", out)
	wstart, wcount := wr.RuntimeArg("start_col"), wr.RuntimeArg("num_cols")
	w := wr.Builder()
	if pack {
		blocks.WritePages(w, oAcc, cbTile, wstart, wcount)
	} else {
		writeUserRows(w, oAcc, cbTile, users, xt, eb, wstart, wcount)
	}
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}

// writeUserRows emits the unpack writer of the family doc: for the count
// tiles j = start.. of cb (tile j of one packed tile row of users live
// rows, eb-byte elements), row u's two face-row runs are written straight
// into row 0 of page u*cols + j of oAcc, the per-user [users, 1, 32*cols]
// tensor.
func writeUserRows(w *kir.Builder, oAcc *blocks.Access, cb, users, cols, eb int, start, count kir.Expr) {
	seg := blocks.FaceDim * eb
	w.For("j", start, kir.Add(start, count), func(j kir.Var) {
		l1 := blocks.WaitFront(w, cb, kir.C(1), "tile")
		for u := range users {
			page := kir.Add(kir.Ci(u*cols), j)
			for half := range 2 {
				w.NoCAsyncWrite(kir.Add(l1, kir.Ci(blocks.RowOffset(u, half, eb))), oAcc.PageAddrAt(page, blocks.RowOffset(0, half, eb)), kir.Ci(seg))
			}
		}
		w.NoCAsyncWriteBarrier()
		w.CBPopFront(cb, kir.C(1))
	})
}
