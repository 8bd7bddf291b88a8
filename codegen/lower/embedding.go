package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Data family: the embedding row gather out[t, :] = table[ids[t], :].
//
// The ids are row-major uint32 (or int32), one page per user (leading
// dims flattened); the output is in tile layout. No compute kernel runs: the reader assembles the output
// tiles and the writer stores them. Ids are not range-checked on the
// device: an id outside [0, V) reads outside the table.
//
// A row-major table [V, H] has one page per row, so a token's row is one
// whole-page read. Tile rows of the output (32 tokens) are split over the
// grid, one core per tile row; the reader reads the ids page and the rows
// of its tokens into L1, then assembles every output tile with local NoC
// copies of 16-element face-row segments (zero-filling the tile first from
// a zeroed page when the tile row has fewer than 32 tokens).
//
// A tile-layout table is gathered with blocks.Gather: output tiles are
// split over the grid; for each output row the reader loads the table
// tile holding row ids[t] and copies the row's face-row runs.

// checkEmbedding checks the dtypes an embedding gathers with: uint32 or
// int32 ids, a bf16 or fp32 table and a tile-layout result of the table's
// dtype.
func checkEmbedding(ids, table, out *ir.Value) error {
	switch {
	case ids.Type.DType != ir.UInt32 && ids.Type.DType != ir.Int32:
		return fmt.Errorf("rule embedding-ids: ids %s must be uint32 or int32", ids.Type.DType)
	case table.Type.DType != ir.BF16 && table.Type.DType != ir.FP32:
		return fmt.Errorf("rule embedding-table-layout: the table must be bf16 or fp32 (data movement cannot split block-float rows); %s is %s %s", table.Name, table.Type.DType, table.Type.Layout)
	case out.Type.DType != table.Type.DType:
		return fmt.Errorf("rule embedding-dtype: result dtype %s must be the table's %s", out.Type.DType, table.Type.DType)
	}
	return requireTile("result", out)
}

func lowerEmbedding(op *ir.Op, ctx *Context) (*kir.Program, error) {
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	if err := checkEmbedding(ids, table, out); err != nil {
		return nil, err
	}
	if ids.Type.Layout != ir.RowMajorLayout || ids.Type.Shape.Rank() < 1 {
		return nil, fmt.Errorf("rule embedding-ids: ids must be row-major token ids, one row per user (shape [T], [B, T], or [.., B, T] with the leading dims flattened into users), got %s in %s layout", ids.Type.Shape, ids.Type.Layout)
	}
	if users := ids.Type.Shape.Rows2D(); users > 1 && table.Type.Layout != ir.TileLayout {
		return nil, fmt.Errorf("rule embedding-ids: ids of %d users (%s) need a tile-layout table; a row-major table takes one row of ids", users, ids.Type.Shape)
	}
	ts := table.Type.Shape
	if ts.Rank() != 2 {
		return nil, fmt.Errorf("rule embedding-table: table must be [vocab, hidden], got %s", ts)
	}
	users, tokens, h := ids.Type.Shape.Rows2D(), ids.Type.Shape.Cols2D(), ts[1]
	if h%ir.TileSize != 0 && table.Type.Layout != ir.TileLayout {
		return nil, fmt.Errorf("rule embedding-hidden: hidden size %d of a row-major table must be a multiple of %d (a tile-layout table may be narrower)", h, ir.TileSize)
	}
	ht := (h + ir.TileSize - 1) / ir.TileSize
	tileRows := users * ((tokens + ir.TileSize - 1) / ir.TileSize)
	if out.Type.Shape.Tiles() != tileRows*ht || out.Type.Shape.Rows2D() != users*tokens {
		return nil, fmt.Errorf("rule embedding-shape: result %s must be %d users' %d rows (%d tile rows) of %d tiles", out.Type.Shape, users, tokens, tileRows, ht)
	}
	if table.Type.Layout == ir.TileLayout {
		return embeddingTiled(op, ctx)
	}
	return embeddingRowMajor(op, ctx)
}

func embeddingTiled(op *ir.Op, ctx *Context) (*kir.Program, error) {
	ids, table := op.Operands[0], op.Operands[1]
	users, tokens := ids.Type.Shape.Rows2D(), ids.Type.Shape.Cols2D()
	stride := idsRowStride(ctx, ids)
	return embeddingFromTiles(op, ctx, "embedding", func(g *blocks.Gather, idsL1 kir.Var) {
		g.Seg = blocks.SegFor(table.Type.Shape[1])
		// Zero padding rows and columns (a table narrower than a tile,
		// e.g. RoPE rows of 16, leaves columns without a run).
		g.Fill = tokens%ir.TileSize != 0 || table.Type.Shape[1]%ir.TileSize != 0
		g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			// Output row u*T + t is user u's token t (the flattened image row).
			at := kir.Add(idsL1, kir.Mul(row, kir.C(4)))
			if users > 1 {
				at = kir.Add(idsL1, kir.Add(kir.Mul(kir.Div(row, kir.Ci(tokens)), kir.Ci(stride)), kir.Mul(kir.Mod(row, kir.Ci(tokens)), kir.C(4))))
			}
			return []blocks.Run{{Src: 0, Row: kir.L1Read32{Addr: at}, Col: col}}
		}
	})
}

// idsRowStride is the L1 distance between the staged pages of a row-major
// ids tensor (one page per user): the page rounded up to the DRAM read
// alignment, so each page's read lands at its DRAM offset modulo 64.
func idsRowStride(ctx *Context, ids *ir.Value) int {
	return ctx.Target.DRAMPageSize(ids.Type.Shape.Cols2D() * ids.Type.DType.ElemBytes())
}

// embeddingFromTiles lowers an embedding (op: ids, table -> out) that
// gathers from a tile-layout table. The result's tiles are split over the
// grid; the reader stages the ids row in L1 and emits a blocks.Gather whose
// Out (out's image), DType (out's) and Sources (the table, source 0) are
// set here and whose Seg, Fill and Map shape(g, idsL1) sets, idsL1 being
// the L1 address of the ids; the writer stores the tiles. what names the
// program in CB-capacity errors.
func embeddingFromTiles(op *ir.Op, ctx *Context, what string, shape func(g *blocks.Gather, idsL1 kir.Var)) (*kir.Program, error) {
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	users, tokens := ids.Type.Shape.Rows2D(), ids.Type.Shape.Cols2D()
	oim := blocks.ImageOf(out.Type.Shape)
	sp := startProgram(op, ctx, PlanSplit(oim.Pages, ctx.Target.NumWorkers(), 2*ir.TileSize*EltwiseTileCycles, 0, 0))
	idsPage := tokens * ids.Type.DType.ElemBytes()
	if users > 1 {
		idsPage = users * idsRowStride(ctx, ids)
	}
	cbIds := sp.cbs.Pages(blocks.ScratchCB, "ids", ids.Type.DType, idsPage, 1)
	cbSlot := sp.cbs.Scratch("table_tile", table.Type.DType, 1)
	cbTiles := sp.cbs.Output("tiles", out.Type.DType, 2)
	sp.planned(what)

	rd := sp.reader()
	idsAcc, tabAcc := sp.bind(rd, "ids_addr", ids), sp.bind(rd, "table_addr", table)
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	idsL1 := blocks.Scratch(b, cbIds, "ids")
	if users == 1 {
		blocks.ReadPageTo(b, idsAcc, kir.C(0), idsL1)
	} else {
		for u := range users {
			blocks.ReadPageTo(b, idsAcc, kir.Ci(u), kir.Add(idsL1, kir.Ci(u*idsRowStride(ctx, ids))))
		}
	}
	b.NoCAsyncReadBarrier()
	g := &blocks.Gather{
		Out: oim, DType: out.Type.DType,
		Sources: []blocks.GatherSource{{Acc: tabAcc, Image: blocks.ImageOf(table.Type.Shape)}},
	}
	shape(g, idsL1)
	sp.fail(g.Check())
	g.Emit(b, cbTiles, []int{cbSlot}, rstart, rcount)
	blocks.ReleaseScratch(b, cbIds)

	return sp.finish(out, cbTiles, rd, nil)
}

func embeddingRowMajor(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	tokens, h, eb := ids.Type.Shape.Cols2D(), table.Type.Shape[1], table.Type.DType.ElemBytes()
	rowBytes := h * eb
	if rowBytes > t.MaxNoCPacket {
		return nil, fmt.Errorf("rule embedding-row: a table row is %d bytes; one row must be one NoC read of at most %d bytes", rowBytes, t.MaxNoCPacket)
	}
	ht := h / ir.TileSize
	tileRows := (tokens + ir.TileSize - 1) / ir.TileSize
	sp := startProgram(op, ctx, PlanSplit(tileRows, t.NumWorkers(), ht*EltwiseTileCycles, 0, 0))
	rowsPerTile := min(tokens, ir.TileSize)
	idsPage := tokens * ids.Type.DType.ElemBytes()
	tileBytes := out.Type.DType.TileBytes()
	partial := tokens%ir.TileSize != 0

	cbIds := sp.cbs.Pages(blocks.InputCB, "ids", ids.Type.DType, idsPage, 1)
	cbRows := sp.cbs.Pages(blocks.InputCB, "rows", table.Type.DType, rowBytes, rowsPerTile)
	cbZero := -1
	if partial {
		cbZero = sp.cbs.Scratch("zeros", out.Type.DType, 1)
	}
	cbOut := sp.cbs.Output("tiles", out.Type.DType, 2)
	sp.planned(fmt.Sprintf("the embedding stages %d rows of %d bytes per core", rowsPerTile, rowBytes))

	// Reader: ids, rows, tilize.
	rd := sp.reader()
	idsAcc, tabAcc := sp.bind(rd, "ids_addr", ids), sp.bind(rd, "table_addr", table)
	rTokens := rd.CompileArg("tokens", uint32(tokens))
	rHt := rd.CompileArg("ht", uint32(ht))
	rstart, rcount := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	blocks.ReadPage(b, idsAcc, cbIds, kir.C(0))
	idsL1 := blocks.WaitFront(b, cbIds, kir.C(1), "ids")
	var zeros kir.Var
	if partial {
		b.Comment("a zeroed tile for the padding rows")
		zp := blocks.Reserve(b, cbZero, kir.C(1), "zp")
		blocks.FillWords(b, zp, tileBytes, 0)
		b.CBPushBack(cbZero, kir.C(1))
		zeros = blocks.WaitFront(b, cbZero, kir.C(1), "zeros")
	}
	b.For("tr", rstart, kir.Add(rstart, rcount), func(tr kir.Var) {
		t0 := b.Let("t0", kir.Mul(tr, kir.Ci(ir.TileSize)))
		valid := b.LetT("valid", kir.U32T, kir.Sub(rTokens, t0))
		b.If(kir.Gt(valid, kir.Ci(ir.TileSize)), func() { b.Assign(valid, kir.Ci(ir.TileSize)) })
		b.Comment("gather the token rows")
		rw := blocks.Reserve(b, cbRows, kir.Ci(rowsPerTile), "rw")
		b.For("r", kir.C(0), valid, func(r kir.Var) {
			id := b.Let("id", kir.L1Read32{Addr: kir.Add(idsL1, kir.Mul(kir.Add(t0, r), kir.C(4)))})
			b.NoCAsyncRead(tabAcc.PageAddr(id), kir.Add(rw, kir.Mul(r, kir.Ci(rowBytes))), kir.Ci(rowBytes))
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cbRows, kir.Ci(rowsPerTile))
		rr := blocks.WaitFront(b, cbRows, kir.Ci(rowsPerTile), "rr")
		b.Comment("tilize: copy 16-element face-row segments into tile order")
		b.For("c", kir.C(0), rHt, func(c kir.Var) {
			tp := blocks.Reserve(b, cbOut, kir.C(1), "tp")
			if partial {
				b.If(kir.Lt(valid, kir.Ci(ir.TileSize)), func() {
					blocks.LocalCopy(b, zeros, tp, tileBytes)
					b.NoCAsyncReadBarrier()
				})
			}
			b.For("r", kir.C(0), valid, func(r kir.Var) {
				src := b.Let("src", kir.Add(rr, kir.Add(kir.Mul(r, kir.Ci(rowBytes)), kir.Mul(c, kir.Ci(ir.TileSize*eb)))))
				dst := b.Let("dst", kir.Add(tp, kir.Add(
					kir.Mul(kir.Div(r, kir.C(16)), kir.Ci(2*256*eb)),
					kir.Mul(kir.Mod(r, kir.C(16)), kir.Ci(16*eb)))))
				for half := 0; half < 2; half++ {
					blocks.LocalCopy(b, kir.Add(src, kir.Ci(half*16*eb)), kir.Add(dst, kir.Ci(half*256*eb)), 16*eb)
				}
			})
			b.NoCAsyncReadBarrier()
			b.CBPushBack(cbOut, kir.C(1))
		})
		b.CBPopFront(cbRows, kir.Ci(rowsPerTile))
	})
	if partial {
		b.CBPopFront(cbZero, kir.C(1))
	}
	b.CBPopFront(cbIds, kir.C(1))
	return sp.finishRows(out, cbOut, rd, nil, "ht", ht)
}
