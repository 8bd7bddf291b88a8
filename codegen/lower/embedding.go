package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Data family: the embedding row gather out[t, :] = table[ids[t], :].
//
// The ids are one row-major page of uint32 (or int32) in DRAM; the table is
// [V, H] in row-major layout, one page per row, so a token's row is one
// whole-page DRAM read. The output is in tile layout. Tile rows of the
// output (32 tokens) are split over the grid, one core per tile row.
//
// The kernel IR has no tilize instruction yet, so the reader tilizes with
// data movement: it reads the ids page and the rows of its tokens into L1,
// then assembles every output tile in a CB page with local NoC copies of
// 16-element face-row segments (zero-filling the tile first from a zeroed
// page when the tile row has fewer than 32 tokens), and the writer stores
// the tiles. No compute kernel runs. Ids are not range-checked on the
// device: an id outside [0, V) reads outside the table.

func lowerEmbedding(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	if ids.Type.DType != ir.UInt32 && ids.Type.DType != ir.Int32 {
		return nil, fmt.Errorf("rule embedding-ids: ids %s must be uint32 or int32", ids.Type.DType)
	}
	if ids.Type.Layout != ir.RowMajorLayout || ids.Type.Shape.Rows2D() != 1 {
		return nil, fmt.Errorf("rule embedding-ids: ids must be one row-major row of token ids (shape [T] or [1, T]), got %s in %s layout", ids.Type.Shape, ids.Type.Layout)
	}
	ts := table.Type.Shape
	if ts.Rank() != 2 {
		return nil, fmt.Errorf("rule embedding-table: table must be [vocab, hidden], got %s", ts)
	}
	if table.Type.Layout != ir.RowMajorLayout || (table.Type.DType != ir.BF16 && table.Type.DType != ir.FP32) {
		return nil, fmt.Errorf("rule embedding-table-layout: the table must be bf16 or fp32 in row_major layout (one page per row, so a token is one page read); %s is %s %s: declare it row-major in the model",
			table.Name, table.Type.DType, table.Type.Layout)
	}
	if err := requireTile("result", out); err != nil {
		return nil, err
	}
	if out.Type.DType != table.Type.DType {
		return nil, fmt.Errorf("rule embedding-dtype: result dtype %s must be the table's %s", out.Type.DType, table.Type.DType)
	}
	tokens, h, eb := ids.Type.Shape.Cols2D(), ts[1], table.Type.DType.ElemBytes()
	rowBytes := h * eb
	if h%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule embedding-hidden: hidden size %d must be a multiple of %d", h, ir.TileSize)
	}
	if rowBytes > t.MaxNoCPacket {
		return nil, fmt.Errorf("rule embedding-row: a table row is %d bytes; one row must be one NoC read of at most %d bytes", rowBytes, t.MaxNoCPacket)
	}
	ht := h / ir.TileSize
	tileRows := (tokens + ir.TileSize - 1) / ir.TileSize
	if out.Type.Shape.Tiles() != tileRows*ht {
		return nil, fmt.Errorf("rule embedding-shape: result %s must be %d tile rows of %d tiles", out.Type.Shape, tileRows, ht)
	}
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	plan := PlanSplit(tileRows, t.NumWorkers(), ht*EltwiseTileCycles, 0, 0)
	cores, rs := firstCores(t, plan.Cores)
	rowsPerTile := min(tokens, ir.TileSize)
	idsPage := tokens * ids.Type.DType.ElemBytes()
	tileBytes := out.Type.DType.TileBytes()
	partial := tokens%ir.TileSize != 0

	const cbIds, cbRows, cbZero = cbIn0, cbIn1, cbIm0
	p.AddCB(kir.CB{Index: cbIds, PageSize: idsPage, Pages: 1, Format: ids.Type.DType, Cores: rs, Name: "ids"})
	p.AddCB(kir.CB{Index: cbRows, PageSize: rowBytes, Pages: rowsPerTile, Format: table.Type.DType, Cores: rs, Name: "rows"})
	if partial {
		p.AddCB(tileCB(cbZero, out.Type.DType, 1, rs, "zeros"))
	}
	p.AddCB(tileCB(cbOut, out.Type.DType, 2, rs, "tiles"))
	if err := checkL1(p, ctx, fmt.Sprintf("the embedding stages %d rows of %d bytes per core", rowsPerTile, rowBytes)); err != nil {
		return nil, err
	}

	// Reader: ids, rows, tilize.
	rd := newReader(p, rs)
	idsAddr := rd.CommonArg("ids_addr", kir.BufferAddr(ctx.BufferName(ids), 0))
	tabAddr := rd.CommonArg("table_addr", kir.BufferAddr(ctx.BufferName(table), 0))
	rTokens := rd.CompileArg("tokens", uint32(tokens))
	rHt := rd.CompileArg("ht", uint32(ht))
	rstart, rcount := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	b.CBReserveBack(cbIds, kir.C(1))
	b.NoCAsyncRead(pageAddr(t, idsAddr, kir.C(0), idsPage), kir.GetWritePtr{CB: cbIds}, kir.Ci(idsPage))
	b.NoCAsyncReadBarrier()
	b.CBPushBack(cbIds, kir.C(1))
	b.CBWaitFront(cbIds, kir.C(1))
	idsL1 := b.Let("ids", kir.GetReadPtr{CB: cbIds})
	var zeros kir.Var
	if partial {
		b.Comment("a zeroed tile for the padding rows")
		b.CBReserveBack(cbZero, kir.C(1))
		zp := b.Let("zp", kir.GetWritePtr{CB: cbZero})
		b.For("i", kir.C(0), kir.Ci(tileBytes/4), func(i kir.Var) {
			b.L1Write32(kir.Add(zp, kir.Mul(i, kir.C(4))), kir.C(0))
		})
		b.CBPushBack(cbZero, kir.C(1))
		b.CBWaitFront(cbZero, kir.C(1))
		zeros = b.Let("zeros", kir.GetReadPtr{CB: cbZero})
	}
	local := func(addr kir.Expr) kir.Expr { return kir.NoCAddr{X: kir.MyNoCX{}, Y: kir.MyNoCY{}, Addr: addr} }
	b.For("tr", rstart, kir.Add(rstart, rcount), func(tr kir.Var) {
		t0 := b.Let("t0", kir.Mul(tr, kir.Ci(ir.TileSize)))
		valid := b.LetT("valid", kir.U32T, kir.Sub(rTokens, t0))
		b.If(kir.Gt(valid, kir.Ci(ir.TileSize)), func() { b.Assign(valid, kir.Ci(ir.TileSize)) })
		b.Comment("gather the token rows")
		b.CBReserveBack(cbRows, kir.Ci(rowsPerTile))
		rw := b.Let("rw", kir.GetWritePtr{CB: cbRows})
		b.For("r", kir.C(0), valid, func(r kir.Var) {
			id := b.Let("id", kir.L1Read32{Addr: kir.Add(idsL1, kir.Mul(kir.Add(t0, r), kir.C(4)))})
			b.NoCAsyncRead(pageAddr(t, tabAddr, id, rowBytes), kir.Add(rw, kir.Mul(r, kir.Ci(rowBytes))), kir.Ci(rowBytes))
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cbRows, kir.Ci(rowsPerTile))
		b.CBWaitFront(cbRows, kir.Ci(rowsPerTile))
		rr := b.Let("rr", kir.GetReadPtr{CB: cbRows})
		b.Comment("tilize: copy 16-element face-row segments into tile order")
		b.For("c", kir.C(0), rHt, func(c kir.Var) {
			b.CBReserveBack(cbOut, kir.C(1))
			tp := b.Let("tp", kir.GetWritePtr{CB: cbOut})
			if partial {
				b.If(kir.Lt(valid, kir.Ci(ir.TileSize)), func() {
					b.NoCAsyncRead(local(zeros), tp, kir.Ci(tileBytes))
					b.NoCAsyncReadBarrier()
				})
			}
			b.For("r", kir.C(0), valid, func(r kir.Var) {
				src := b.Let("src", kir.Add(rr, kir.Add(kir.Mul(r, kir.Ci(rowBytes)), kir.Mul(c, kir.Ci(ir.TileSize*eb)))))
				dst := b.Let("dst", kir.Add(tp, kir.Add(
					kir.Mul(kir.Div(r, kir.C(16)), kir.Ci(2*256*eb)),
					kir.Mul(kir.Mod(r, kir.C(16)), kir.Ci(16*eb)))))
				for half := 0; half < 2; half++ {
					b.NoCAsyncRead(local(kir.Add(src, kir.Ci(half*16*eb))), kir.Add(dst, kir.Ci(half*256*eb)), kir.Ci(16*eb))
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

	// Writer.
	wr := newWriter(p, rs)
	oAddr := wr.CommonArg("out_addr", kir.BufferAddr(ctx.BufferName(out), 0))
	wHt := wr.CompileArg("ht", uint32(ht))
	wstart, wcount := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
	b = wr.Builder()
	b.For("i", kir.C(0), kir.Mul(wcount, wHt), func(i kir.Var) {
		writePage(b, t, cbOut, oAddr, kir.Add(kir.Mul(wstart, wHt), i), tileBytes)
	})

	for i, c := range cores {
		s, n := plan.Range(i)
		rd.SetRuntimeArgs(c, kir.U32(uint32(s)), kir.U32(uint32(n)))
		wr.SetRuntimeArgs(c, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
	return p, nil
}
