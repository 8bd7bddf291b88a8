package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Fused ops of the common fusion families (ir/opspec/fused.go,
// fusedCommonOps; the collectives are lowered elsewhere). Every program is
// assembled from package blocks and reproduces the rounding points of the
// op's Doc line: a value the composed chain stores in some dtype is packed
// into a CB of that dtype before the next step reads it.
//
// # add_rmsnorm
//
// Tile rows are split over the grid as in norm.go. Per row the FPU adds a
// and b tile by tile (fp32) and packs each sum twice, to the h result and
// to a resident CB of a's dtype (r(h)); the RMSNorm steps then run on the
// resident rounded h and produce normed.
//
// # eltwise_chain
//
// Tiles are split as for an eltwise op. Each tile is copied into fp32
// DEST and the steps run on the SFPU one after the other; between two
// steps the tile is rounded to x's dtype exactly as the composed ops
// stored it: packed into a one-page CB of that dtype and unpacked again
// (blocks.Compute.RoundThrough; nothing to do for fp32). The last step is
// packed into the result.
//
// # embedding_reshape
//
// When the reshape keeps the tile image of the gathered rows [T, H] (the
// one-token decode [1, H] -> [1, 1, H]) the result has the embedding's
// pages and the embedding lowering writes it directly. Otherwise (several
// users: [B, H] -> [B, 1, H] puts each user's row in its own tile row; any
// other regrouping), for a tile-layout table, blocks.Gather assembles the
// reshaped result's tiles: output element e of the flattened result is
// column e % H of table row ids[e / H]. A row-major table with a
// regrouping reshape is an error (rule embedding-reshape-view).

// fusedNormCBs adds the CBs normCBs.row needs besides x, the scaler and
// out: the weight stream (wdt), the wt squares in sq format, rsqrt, x *
// rsqrt and weight + offset when offset != 0.
func fusedNormCBs(cbs *blocks.CBPlan, x, scaler, out int, wdt ir.DType, wt int, offset float64, sq ir.DType) normCBs {
	n := normCBs{x: x, scaler: scaler, out: out, wo: -1}
	n.w = cbs.Input("norm_weight", wdt, 2)
	n.sq = cbs.Scratch("x_squared", sq, wt)
	n.rs = cbs.Scratch("rsqrt_mean", ir.FP32, 1)
	n.xn = cbs.Scratch("x_normed", ir.FP32, 2)
	if offset != 0 {
		n.wo = cbs.Scratch("weight_plus_offset", ir.FP32, 2)
	}
	return n
}

// lowerAddRMSNorm: h = r(a + b), normed = r(rmsnorm(h) * (w + offset)).
func lowerAddRMSNorm(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
	}
	t := ctx.Target
	a, bv, w := op.Operands[0], op.Operands[1], op.Operands[2]
	h, normed := op.Results[0], op.Results[1]
	if err := requireTiles(a, bv, w, h, normed); err != nil {
		return nil, err
	}
	xs := a.Type.Shape
	hd := xs.Cols2D()
	if hd == 0 || hd%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule rmsnorm-hidden: the last dim %d of a must be a multiple of %d (tile padding must not enter the mean)", hd, ir.TileSize)
	}
	if !bv.Type.Shape.Equal(xs) || !h.Type.Shape.Equal(xs) || !normed.Type.Shape.Equal(xs) {
		return nil, fmt.Errorf("rule eltwise-shape: b %s and the results %s, %s must have a's shape %s", bv.Type.Shape, h.Type.Shape, normed.Type.Shape, xs)
	}
	if w.Type.Shape.Numel() != hd || w.Type.Shape.Rows2D() != 1 {
		return nil, fmt.Errorf("rule norm-weight: weight %s must be a row vector of the %d elements of a's last dim", w.Type.Shape, hd)
	}
	wt := hd / ir.TileSize
	rows := xs.Tiles() / wt
	if ns := planNormSplit(t, rows, wt, 0, t.NumWorkers(), normTileCycles+EltwiseTileCycles+2*UnpackTileCycles); ns != nil {
		ns.h, ns.eps, ns.offset = hd, eps, offset
		ns.live = blocks.LiveRows(xs)
		return addRMSNormSplit(op, ctx, ns)
	}
	// A tile row costs an add and about four norm tile ops per tile.
	sp := startProgram(op, ctx, PlanSplit(rows, t.NumWorkers(), 5*wt*EltwiseTileCycles, 0, 0))
	rdt := h.Type.DType
	sq := ir.FP32
	if (rdt.TileBytes()+ir.FP32.TileBytes())*wt > t.L1Budget()*3/4 {
		sq = ir.BF16
	}
	cbA := sp.cbs.Input("a", a.Type.DType, 2)
	cbB := sp.cbs.Input("b", bv.Type.DType, 2)
	cbScaler := sp.cbs.Input("scaler", ir.BF16, 1)
	cbHOut := sp.cbs.Output("h", rdt, 2)
	cbNOut := sp.cbs.Output("normed", normed.Type.DType, 2)
	cbH := sp.cbs.Scratch("h_row", rdt, wt)
	nc := fusedNormCBs(sp.cbs, cbH, cbScaler, cbNOut, w.Type.DType, wt, offset, sq)
	sp.planned(fmt.Sprintf("add_rmsnorm over H = %d keeps %d h and h^2 tiles per core", hd, wt))

	// Reader: the scaler, then per tile row its a and b tiles in pairs and
	// the weight tiles.
	rd := sp.reader()
	aAcc, bAcc, wAcc := sp.bind(rd, "a_addr", a), sp.bind(rd, "b_addr", bv), sp.bind(rd, "w_addr", w)
	rWt := rd.CompileArg("wt", uint32(wt))
	rstart, rrows := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	blocks.OnesColumnTile(b, cbScaler)
	b.For("r", kir.C(0), rrows, func(r kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(rstart, r), rWt))
		b.For("j", kir.C(0), rWt, func(j kir.Var) {
			blocks.ReadPage(b, aAcc, cbA, kir.Add(first, j))
			blocks.ReadPage(b, bAcc, cbB, kir.Add(first, j))
		})
		blocks.ReadPages(b, wAcc, nc.w, kir.C(0), rWt)
	})

	cp, c, crows := sp.rangeCompute("num_rows")
	cb := c.B
	c.Startup(cbA, cbB, cbH)
	cb.CBWaitFront(cbScaler, kir.C(1))
	c.For("r", kir.C(0), crows, func(kir.Var) {
		cb.Comment("h = a + b, stored to the result and kept (rounded) for the norm")
		c.For("j", kir.C(0), kir.Ci(wt), func(kir.Var) {
			c.BinaryTileTo(kir.EltAdd, blocks.BcastNone, cbA, cbB, cbH, cbHOut)
		})
		nc.row(c, kir.Ci(wt), hd, eps, offset)
	})
	cb.CBPopFront(cbScaler, kir.C(1))

	// Writer: per row, the h tiles then the normed tiles.
	wr := newWriter(sp.p, sp.rs)
	hAcc, nAcc := sp.bind(wr, "h_addr", h), sp.bind(wr, "normed_addr", normed)
	wWt := wr.CompileArg("wt", uint32(wt))
	wstart, wrows := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
	b = wr.Builder()
	b.For("r", kir.C(0), wrows, func(r kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(wstart, r), wWt))
		blocks.WritePages(b, hAcc, cbHOut, first, wWt)
		blocks.WritePages(b, nAcc, cbNOut, first, wWt)
	})

	sp.plan.SetArgs(sp.cores, rd, cp, wr)
	return sp.done(sp.p)
}

// lowerEltwiseChain: the SFPU steps of the ops attribute (chainSFPUSteps,
// the one parse the fused chains share) on each tile in fp32 DEST,
// rounded to x's dtype between steps; for an fp32 x one chain statement
// (Compute.SFPUSteps: one pass over DEST).
func lowerEltwiseChain(op *ir.Op, ctx *Context) (*kir.Program, error) {
	s, ok := op.Attrs["ops"].(string)
	if !ok {
		return nil, fmt.Errorf("rule attr: %s needs a string attribute \"ops\"", op.Name())
	}
	if _, err := ir.ParseEltwiseChain(s); err != nil {
		return nil, err // the chain-length rule; chainSFPUSteps parses the steps
	}
	steps, err := chainSFPUSteps(s, op.Result().Type.DType)
	if err != nil {
		return nil, err
	}
	x, out := op.Operands[0], op.Result()
	if err := requireTiles(x, out); err != nil {
		return nil, err
	}
	if !x.Type.Shape.Equal(out.Type.Shape) || x.Type.DType != out.Type.DType {
		return nil, fmt.Errorf("rule eltwise-shape: result %s %s must have the operand's shape and dtype %s %s", out.Type.Shape, out.Type.DType, x.Type.Shape, x.Type.DType)
	}
	dt := x.Type.DType
	sfpu := 0
	for _, st := range steps {
		sfpu += int(kir.SFPUTable[st.Op].Cycles)
	}
	sp := startProgram(op, ctx, planStream(x.Type.Shape.Tiles(), ctx.Target.NumWorkers(), 2*dt.TileBytes(), 1, UnpackTileCycles+sfpu+len(steps)*PackTileCycles))
	cbIn := sp.cbs.Input("in", dt, 2)
	cbOut := sp.cbs.Output("out", dt, 2)
	cbRound := -1
	if blocks.Rounds(dt) {
		cbRound = sp.cbs.Scratch("rounded", dt, 1)
	}
	sp.planned("eltwise_chain")

	rd := sp.reader()
	xAcc := sp.bind(rd, "x_addr", x)
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	blocks.ReadPages(rd.Builder(), xAcc, cbIn, rstart, rcount)

	cp, c, ccount := sp.rangeCompute("num_tiles")
	c.Startup(cbIn, cbIn, cbOut)
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		c.B.CBWaitFront(cbIn, kir.C(1))
		c.Acquire()
		c.Copy(cbIn, kir.C(0), kir.C(0))
		c.B.CBPopFront(cbIn, kir.C(1))
		if cbRound < 0 {
			c.SFPUSteps(steps, kir.C(0)) // fp32: one pass over DEST
		}
		for i, st := range steps {
			if cbRound < 0 {
				break
			}
			if i > 0 {
				c.B.Comment(fmt.Sprintf("round to %s, as %s stored it", dt, steps[i-1].Op))
				c.RoundThrough(cbRound)
			}
			c.SFPU(st, kir.C(0))
		}
		c.PackOut(cbOut, 1)
	})

	return sp.finish(out, cbOut, rd, cp)
}

// lowerEmbeddingReshape: the embedding gather writing the reshaped result.
func lowerEmbeddingReshape(op *ir.Op, ctx *Context) (*kir.Program, error) {
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	if table.Type.Shape.Rank() != 2 {
		return nil, fmt.Errorf("rule embedding-table: table must be [vocab, hidden], got %s", table.Type.Shape)
	}
	hd := table.Type.Shape[1]
	im := blocks.ImageOf(out.Type.Shape)
	own := blocks.ImageOf(append(ids.Type.Shape.Clone(), hd)) // the embedding's result
	// flat: the result is the [users*tokens, H] image, which the
	// embedding writes when every user's rows fill whole tile rows.
	tokens := ids.Type.Shape.Numel()
	flat := im.B == 1 && im.R == tokens && im.C == hd && (ids.Type.Shape.Rows2D() == 1 || ids.Type.Shape.Cols2D()%ir.TileSize == 0)
	if out.Type.Layout == ir.TileLayout && (flat || im.B == own.B && im.R == own.R && im.C == own.C) {
		// The reshape keeps the tile image of the embedding's result (a
		// [1, H] row viewed as [1, 1, H]; [B, 1, 1, H] as [B, 1, H]): the
		// embedding's own pages.
		return lowerEmbedding(op, ctx)
	}
	if table.Type.Layout != ir.TileLayout {
		return nil, fmt.Errorf("rule embedding-reshape-view: the result %s does not have the tile image of the %d gathered rows of %d elements; regrouping them needs a tile-layout table (the row-major table %s is gathered a whole row at a time)", out.Type.Shape, ids.Type.Shape.Numel(), hd, table.Type.Shape)
	}
	return embeddingRegrouped(op, ctx)
}

// embeddingRegrouped gathers into a result whose 2-D view differs from
// [tokens, H]: output element e (row-major over the result) is element e %
// H of table row ids[e / H] (ids row-major over all users' pages).
func embeddingRegrouped(op *ir.Op, ctx *Context) (*kir.Program, error) {
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	if err := checkEmbedding(ids, table, out); err != nil {
		return nil, err
	}
	if ids.Type.Layout != ir.RowMajorLayout || ids.Type.Shape.Rank() < 1 {
		return nil, fmt.Errorf("rule embedding-ids: ids must be row-major token ids, one row per user (shape [T] or [B, T]), got %s in %s layout", ids.Type.Shape, ids.Type.Layout)
	}
	users, tokens, hd := ids.Type.Shape.Rows2D(), ids.Type.Shape.Cols2D(), table.Type.Shape[1]
	if hd == 0 || tokens == 0 {
		return nil, fmt.Errorf("rule embedding-shape: %d ids of a table with %d columns gather nothing", tokens, hd)
	}
	if out.Type.Shape.Numel() != users*tokens*hd {
		return nil, fmt.Errorf("rule reshape-numel: %d ids x %d columns do not fill the result %s", users*tokens, hd, out.Type.Shape)
	}
	stride := idsRowStride(ctx, ids)
	return embeddingFromTiles(op, ctx, "embedding_reshape", func(g *blocks.Gather, idsL1 kir.Var) {
		oim := g.Out
		g.Seg = blocks.SegFor(hd, oim.C)
		g.Fill = oim.R%ir.TileSize != 0 || oim.C%ir.TileSize != 0
		g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			e := b.Let("e", kir.Add(kir.Mul(row, kir.Ci(oim.C)), col))
			t := kir.Div(e, kir.Ci(hd)) // the id's index, row-major over the ids
			at := kir.Add(idsL1, kir.Mul(t, kir.C(4)))
			if users > 1 { // user u's ids page sits at u * stride
				at = kir.Add(idsL1, kir.Add(kir.Mul(kir.Div(t, kir.Ci(tokens)), kir.Ci(stride)), kir.Mul(kir.Mod(t, kir.Ci(tokens)), kir.C(4))))
			}
			return []blocks.Run{{Src: 0, Row: kir.L1Read32{Addr: at}, Col: kir.Mod(e, kir.Ci(hd))}}
		}
	})
}
