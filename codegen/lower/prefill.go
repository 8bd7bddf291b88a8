package lower

import (
	"cmp"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Prefill ops: fill_cache, tril, cumsum, conv_depthwise and tril_inverse
// (sdpa_prefill is in sdpa.go).
//
//   - fill_cache writes S consecutive positions: a blocks.Gather whose map
//     takes cache rows pos..pos+S-1 from new and every other row from the
//     cache (in place: only the tile rows holding those positions).
//   - tril keeps the elements on and below the diagonal with an
//     element-wise Gather (zero fill).
//   - cumsum along the last dim is x @ U with U the upper-triangular ones
//     matrix, along the second-to-last L @ x with L lower-triangular; the
//     reader generates the triangle, ones and zero tiles (pairsProgram).
//   - conv_depthwise sums over the K taps the products of x shifted down by
//     j rows with tap row j (copied into row 0, broadcast over the rows),
//     accumulated through an fp32 CB. One batch and at most
//     maxWholeTileTaps taps: the reader reads an output tile's two x tiles
//     whole and builds the shifted tiles in L1 (convWholeTiles); otherwise
//     both come from Gathers.
//   - tril_inverse of one tile: with A = -strictly_lower(x), (I + L)^-1 =
//     sum_{k<32} A^k = (I + A)(I + A^2)(I + A^4)(I + A^8)(I + A^16) since
//     A^32 = 0, four squarings and four products of fp32 tiles.

func lowerFillCache(op *ir.Op, ctx *Context) (*kir.Program, error) {
	cache, nw, pos, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Result()
	if err := cmp.Or(checkCacheRows(op), layoutOperands(cache, nw, out), checkPos(pos)); err != nil {
		return nil, err
	}
	cs, ns := cache.Type.Shape, nw.Type.Shape
	if cs.Rank() != 4 || ns.Rank() != 4 || ns[0] != cs[0] || ns[1] != cs[1] || ns[2] > cs[2] || ns[3] != cs[3] || !out.Type.Shape.Equal(cs) {
		return nil, fmt.Errorf("rule cache-shape: want cache [B,H,L,D], new [B,H,S<=L,D] and a result shaped like the cache, got %s, %s, %s", cs, ns, out.Type.Shape)
	}
	L, S := cs[2], ns[2]
	ci := blocks.ImageOf(cs)
	inPlace := ctx.BufferName(out) == ctx.BufferName(cache)
	sp := startProgram(op, ctx, PlanSplit(ci.Pages, ctx.Target.NumWorkers(), 2*EltwiseTileCycles, 0, 0))
	cbOut := sp.cbs.Output("out", out.Type.DType, 2)
	slots := []int{sp.cbs.Scratch("cache_tile", cache.Type.DType, 1), sp.cbs.Scratch("new_tile", nw.Type.DType, 1)}
	cbPos := sp.cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, 4, 1)
	cbPosW := -1
	if inPlace {
		cbPosW = sp.cbs.Pages(blocks.ScratchCB, "pos_writer", ir.UInt32, 4, 1)
	}
	sp.planned("fill_cache")
	// touched: page pg lies in a tile row holding one of the new positions.
	touched := func(pg, posv kir.Expr) kir.Expr {
		tr := kir.Mod(kir.Div(pg, kir.Ci(ci.Ct)), kir.Ci(ci.Rt))
		return kir.LAnd(kir.Ge(tr, kir.Div(posv, kir.Ci(ir.TileSize))), kir.Le(tr, kir.Div(kir.Add(posv, kir.Ci(S-1)), kir.Ci(ir.TileSize))))
	}
	rd := sp.reader()
	cAcc, nAcc, pAcc := sp.bind(rd, "cache_addr", cache), sp.bind(rd, "new_addr", nw), sp.bind(rd, "pos_addr", pos)
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	posv := readPos(b, pAcc, cbPos)
	g := &blocks.Gather{Out: ci, DType: out.Type.DType, Seg: blocks.SegFor(cs[3]),
		Sources: []blocks.GatherSource{{Acc: cAcc, Image: ci}, {Acc: nAcc, Image: blocks.ImageOf(ns)}},
		Map: func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			l := b.Let("l", kir.Mod(row, kir.Ci(L)))
			inNew := b.Let("in_new", kir.LAnd(kir.Ge(l, posv), kir.Lt(l, kir.Add(posv, kir.Ci(S)))))
			bh := kir.Div(row, kir.Ci(L))
			return []blocks.Run{
				{Cond: kir.Eq(inNew, kir.C(0)), Src: 0, Row: row, Col: col},
				{Cond: inNew, Src: 1, Row: kir.Add(kir.Mul(bh, kir.Ci(S)), kir.Sub(l, posv)), Col: col},
			}
		}}
	sp.fail(g.Check())
	g.Begin(b, slots)
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		pg := b.Let("pg", kir.Add(rstart, i))
		if inPlace {
			b.If(touched(pg, posv), func() { g.Page(b, cbOut, pg) })
		} else {
			g.Page(b, cbOut, pg)
		}
	})
	g.End(b)
	blocks.ReleaseScratch(b, cbPos)

	wr, oAcc := sp.writerOf("out_addr", out)
	wstart, wcount := wr.RuntimeArg("start_tile"), wr.RuntimeArg("num_tiles")
	b = wr.Builder()
	if inPlace {
		wpos := readPos(b, sp.bind(wr, "pos_addr", pos), cbPosW)
		b.For("i", kir.C(0), wcount, func(i kir.Var) {
			pg := b.Let("pg", kir.Add(wstart, i))
			b.If(touched(pg, wpos), func() { blocks.WritePage(b, oAcc, cbOut, pg) })
		})
		blocks.ReleaseScratch(b, cbPosW)
	} else {
		blocks.WritePages(b, oAcc, cbOut, wstart, wcount)
	}
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}

func lowerTril(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x := op.Operands[0]
	diag, ok := op.Attrs["diagonal"].(int)
	if !ok {
		return nil, fmt.Errorf("rule attr: tril needs an int attribute \"diagonal\"")
	}
	xs := x.Type.Shape
	if xs.Rank() < 2 {
		return nil, fmt.Errorf("rule matrix-rank: x %s needs rank >= 2", xs)
	}
	rows := xs[xs.Rank()-2]
	if tilesAligned(xs) && blocks.ElemBytes(x.Type.DType) > 0 && x.Type.Layout == ir.TileLayout && op.Result().Type.Layout == ir.TileLayout && x.Type.DType == op.Result().Type.DType {
		return trilTiles(op, ctx, diag)
	}
	return relayoutProgram(op, ctx, []*ir.Value{x}, 1, true, 0, func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		i := kir.Mod(row, kir.Ci(rows))
		var keep kir.Expr // col - i <= diag
		if diag >= 0 {
			keep = kir.Le(col, kir.Add(i, kir.Ci(diag)))
		} else {
			keep = kir.Le(kir.Add(col, kir.Ci(-diag)), i)
		}
		return []blocks.Run{{Cond: keep, Src: 0, Row: row, Col: col}}
	})
}

// tilesAligned reports whether the matrices of shape s are whole tiles
// (both last dims multiples of 32; rank >= 2).
func tilesAligned(s ir.Shape) bool {
	r := s.Rank()
	return r >= 2 && s[r-1]%ir.TileSize == 0 && s[r-2]%ir.TileSize == 0
}

// trilTiles is tril of whole-tile matrices (tilesAligned, a dtype data
// movement handles): a page copy whose reader zeroes, in each tile it
// read, the elements above the diagonal before it hands the page on.
// Element (r, c) of tile (tr, tc) of a matrix is kept when 32 tc + c <=
// 32 tr + r + diagonal, so row r of the tile loses columns lo(r) = r + B -
// A .. 31 (all of them when r + B <= A) with A = 32 tc + max(0,
// -diagonal), B = 32 tr + max(0, diagonal) + 1; a tile under the band
// loses none. The values kept are copied, so the result is x's bits.
// (The row-run relayout of other shapes moves one element per run: 336 us
// predicted for the GDN prefill's [1,24,128,32,32] fp32 at 4,096 tokens.)
func trilTiles(op *ir.Op, ctx *Context, diag int) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	xs := x.Type.Shape
	ps, pages, err := PageLayout(x.Type)
	if err != nil {
		return nil, fmt.Errorf("value %s: %w", x, err)
	}
	eb := blocks.ElemBytes(x.Type.DType)
	im := blocks.ImageOf(xs)
	ct := xs[xs.Rank()-1] / ir.TileSize
	t := ctx.Target
	// A partial tile's stores: about half its elements.
	sp := startProgram(op, ctx, planStream(pages, t.NumWorkers(), 2*ps, 1, ir.TileSize*ir.TileSize/2*FillStoreCycles))
	cb := sp.cbs.Pages(blocks.InputCB, "pages", x.Type.DType, target.AlignUp(ps, t.DRAMReadAlign), 2)
	sp.planned("tril")
	rd := sp.reader()
	sAcc := sp.bind(rd, "src_addr", x)
	rstart, rcount := rd.RuntimeArg("start_page"), rd.RuntimeArg("num_pages")
	b := rd.Builder()
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		pg := b.Let("page", kir.Add(rstart, i))
		l1 := blocks.Reserve(b, cb, kir.C(1), "l1")
		blocks.ReadPageTo(b, sAcc, pg, l1)
		m := b.Let("m", kir.Mod(pg, kir.Ci(im.TilesPerMat)))
		a := b.Let("a", kir.Add(kir.Mul(kir.Mod(m, kir.Ci(ct)), kir.Ci(ir.TileSize)), kir.Ci(max(0, -diag))))
		bb := b.Let("b", kir.Add(kir.Mul(kir.Div(m, kir.Ci(ct)), kir.Ci(ir.TileSize)), kir.Ci(max(0, diag)+1)))
		b.NoCAsyncReadBarrier()
		b.Comment("zero the elements above the diagonal: columns lo(r)..31 of row r")
		b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
			rb := b.Let("rb", kir.Add(r, bb))
			lo := b.LetT("lo", kir.U32T, kir.C(0))
			b.If(kir.Gt(rb, a), func() { b.Assign(lo, kir.Sub(rb, a)) })
			b.For("c", lo, kir.Ci(ir.TileSize), func(c kir.Var) {
				blocks.StoreElem(b, kir.Add(l1, blocks.FaceOffset(r, c, eb)), kir.C(0), eb)
			})
		})
		b.CBPushBack(cb, kir.C(1))
	})
	wr, dAcc := sp.writerOf("dst_addr", out)
	wstart, wcount := wr.RuntimeArg("start_page"), wr.RuntimeArg("num_pages")
	blocks.WritePages(wr.Builder(), dAcc, cb, wstart, wcount)
	sp.plan.SetArgs(sp.cores, rd, nil, wr)
	return sp.done(sp.p)
}

// triangleTile emits one page of a generated bf16 tile into cb: ones where
// keep(r, c) (an expression of the in-tile row and column) holds, zeros
// elsewhere.
// triangleTileCycles is triangleTile's time: one store per element.
const triangleTileCycles = ir.TileSize * ir.TileSize * FillStoreCycles

func triangleTile(b *kir.Builder, cb int, keep func(r, c kir.Expr) kir.Expr) {
	l1 := blocks.Reserve(b, cb, kir.C(1), "tri")
	b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
		b.For("c", kir.C(0), kir.Ci(ir.TileSize), func(c kir.Var) {
			blocks.StoreElem(b, kir.Add(l1, blocks.FaceOffset(r, c, 2)), kir.Mul(keep(r, c), kir.C(0x3F80)), 2)
		})
	})
	b.CBPushBack(cb, kir.C(1))
}

func lowerCumsum(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if err := requireTiles(x, out); err != nil {
		return nil, err
	}
	if eb := blocks.ElemBytes(x.Type.DType); eb != 2 && eb != 4 {
		return nil, fmt.Errorf("rule cumsum-dtype: the reader zeroes tile padding of bf16 or fp32 operands, not %s", x.Type.DType)
	}
	xd := matDims(x.Type.Shape)
	r := len(xd)
	ax, err := axisAttr(op, "axis", max(x.Type.Shape.Rank(), 1))
	if err != nil {
		return nil, err
	}
	ax += r - max(x.Type.Shape.Rank(), 1)
	xi := blocks.ImageOf(xd)
	// tri emits the (row tile i, column tile j) tile of the ones triangle
	// {(R, C): C >= R} (upper) or {C <= R} (lower).
	tri := func(upper bool) pairOperand {
		return pairOperand{dt: ir.BF16, genCycles: triangleTileCycles, emit: func(b *kir.Builder, _ *blocks.Access, cb int, bb, mt, nt, k kir.Expr) {
			i, j := k, nt // upper: U[k, nt]
			if !upper {
				i, j = mt, k // lower: L[mt, k]
			}
			ti, tj := b.Let("ti", i), b.Let("tj", j)
			triangleTile(b, cb, func(r, c kir.Expr) kir.Expr {
				R := kir.Add(kir.Mul(ti, kir.Ci(ir.TileSize)), r)
				C := kir.Add(kir.Mul(tj, kir.Ci(ir.TileSize)), c)
				if upper {
					return kir.Le(R, C)
				}
				return kir.Le(C, R)
			})
		}}
	}
	switch ax {
	case r - 1:
		return pairsProgram(op, ctx, tileOperand(x, xi, true, true), tri(true), xi.Ct, false, pairExtra{})
	case r - 2:
		return pairsProgram(op, ctx, tri(false), tileOperand(x, xi, false, true), xi.Rt, false, pairExtra{})
	}
	return nil, fmt.Errorf("rule cumsum-axis: cumsum runs along one of the last two dims (a triangular matmul), not axis %d of %s", op.Attrs["axis"], x.Type.Shape)
}

// lowerConvDepthwiseChain: conv_depthwise_chain (passes
// FuseConvDepthwiseChain), the conv whose summed tile gets the chain's
// SFPU steps before it is packed, each after a rounding to the result's
// dtype as the composed conv and chain store it (RoundThrough); also
// conv_depthwise_state_chain (passes FuseConvDepthwiseStateChain), whose
// reader takes the rows before x's first from the state
// (convStateWholeTiles).
func lowerConvDepthwiseChain(op *ir.Op, ctx *Context) (*kir.Program, error) {
	s, ok := op.Attrs["ops"].(string)
	if !ok {
		return nil, fmt.Errorf("rule attr: %s needs a string attribute \"ops\"", op.Name())
	}
	post, err := chainSFPUSteps(s, op.Result().Type.DType)
	if err != nil {
		return nil, err
	}
	return convDepthwiseProgram(op, ctx, post)
}

func lowerConvDepthwise(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return convDepthwiseProgram(op, ctx, nil)
}

// convDepthwiseProgram is conv_depthwise's program; post are SFPU steps
// on each summed tile before it is packed (nil: none), each after a
// rounding to the result's dtype.
func convDepthwiseProgram(op *ir.Op, ctx *Context, post []blocks.SFPUStep) (*kir.Program, error) {
	x, w, out := op.Operands[0], op.Operands[1], op.Result()
	state, err := convState(op)
	if err != nil {
		return nil, err
	}
	if state != nil {
		x, w = op.Operands[1], op.Operands[2]
	}
	if err := cmp.Or(layoutOperands(x, out), requireTile("taps", w)); err != nil {
		return nil, err
	}
	xs, ws := x.Type.Shape, w.Type.Shape
	r := xs.Rank()
	T := 0
	if r >= 2 {
		T = xs[r-2]
		if state != nil {
			T += state.Type.Shape[r-2] // the joined rows
		}
	}
	if r < 2 || ws.Rank() != 2 || ws[1] != xs[r-1] || ws[0] > T || w.Type.DType != x.Type.DType {
		return nil, fmt.Errorf("rule conv-shape: want x [.., T, C] and taps w [K, C] of x's dtype with K <= T, got %s and %s %s", xs, ws, w.Type.DType)
	}
	C, K := xs[r-1], ws[0]
	To := T - K + 1
	xi, oi := blocks.ImageOf(xs), blocks.ImageOf(out.Type.Shape)
	wrow := blocks.ImageOf(ir.Shape{1, C})
	sp := startProgram(op, ctx, PlanSplit(oi.Pages, ctx.Target.NumWorkers(), 3*K*EltwiseTileCycles, 0, 0))
	eb := blocks.ElemBytes(x.Type.DType)
	// Whole tiles: one batch (the output's tile rows are the source's
	// shifted by the tap) and few taps (all of an output tile's shifted
	// tiles are in flight at once).
	whole := xi.R == xs[r-2] && K <= maxWholeTileTaps && (eb == 2 || eb == 4)
	if state != nil && (!whole || state.Type.Shape[r-2] != K-1 || state.Type.DType != x.Type.DType) {
		return nil, fmt.Errorf("rule conv-state-shape: %s reads one batch of bf16 or fp32 x, a state of K-1 rows of x's dtype and at most %d taps, got state %s %s, x %s %s, taps %s",
			op.Name(), maxWholeTileTaps, state.Type.Shape, state.Type.DType, xs, x.Type.DType, ws)
	}
	xPages, wPages, slotPages := 2, 2, 1
	if whole {
		xPages, wPages, slotPages = 2*K, 2*K, 2
	}
	if state != nil {
		slotPages = 3 // the tile row above, the tile row, the state's tile
	}
	cbX := sp.cbs.Input("x_shifted", x.Type.DType, xPages)
	cbW := sp.cbs.Input("tap_row", w.Type.DType, wPages)
	cbOut := sp.cbs.Output("out", out.Type.DType, 2)
	cbAcc := sp.cbs.Scratch("acc", ir.FP32, 1)
	// Whole tiles with two taps or more: the K products of an output tile
	// at once (convCompute), the first into acc, the others into K-1 term
	// pages.
	termPages, together := 1, whole && K >= 2
	if together {
		termPages = K - 1
	}
	cbTmp := sp.cbs.Scratch("term", ir.FP32, termPages)
	xSlot := sp.cbs.Scratch("x_tile", x.Type.DType, slotPages)
	wSlot := sp.cbs.Scratch("w_tile", w.Type.DType, 1)
	cbRound := -1
	if len(post) > 0 && blocks.Rounds(out.Type.DType) {
		cbRound = sp.cbs.Scratch("conv_rounded", out.Type.DType, 1)
	}
	sp.planned("conv_depthwise")
	rd := sp.reader()
	xAcc, wAcc := sp.bind(rd, "x_addr", x), sp.bind(rd, "w_addr", w)
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	if whole {
		ct := convTiles{x: xAcc, w: wAcc, xi: xi, oi: oi, K: K, eb: eb, tileBytes: x.Type.DType.TileBytes(),
			cbX: cbX, cbW: cbW, xSlot: xSlot, wSlot: wSlot}
		if state != nil {
			ct.state = sp.bind(rd, "state_addr", state)
			convStateWholeTiles(b, ct, rstart, rcount)
		} else {
			convWholeTiles(b, ct, rstart, rcount)
		}
	} else {
		var tap kir.Var // the tap the maps below read
		seg := blocks.SegFor(C)
		gx := &blocks.Gather{Out: oi, DType: x.Type.DType, Seg: seg, Sources: []blocks.GatherSource{{Acc: xAcc, Image: xi}},
			Map: func(b *kir.Builder, row, col kir.Var) []blocks.Run {
				src := kir.Add(kir.Add(kir.Mul(kir.Div(row, kir.Ci(To)), kir.Ci(T)), kir.Mod(row, kir.Ci(To))), tap)
				return []blocks.Run{{Src: 0, Row: src, Col: col}}
			}}
		gw := &blocks.Gather{Out: wrow, DType: w.Type.DType, Seg: seg, Sources: []blocks.GatherSource{{Acc: wAcc, Image: blocks.ImageOf(ws)}},
			Map: func(b *kir.Builder, row, col kir.Var) []blocks.Run {
				return []blocks.Run{{Src: 0, Row: tap, Col: col}}
			}}
		sp.fail(gx.Check())
		sp.fail(gw.Check())
		gx.Begin(b, []int{xSlot})
		gw.Begin(b, []int{wSlot})
		b.For("i", kir.C(0), rcount, func(i kir.Var) {
			pg := b.Let("page", kir.Add(rstart, i))
			b.For("j", kir.C(0), kir.Ci(K), func(j kir.Var) {
				tap = j
				gx.Page(b, cbX, pg)
				gw.Page(b, cbW, kir.Mod(pg, kir.Ci(oi.Ct)))
			})
		})
		gx.End(b)
		gw.End(b)
	}

	cp, c, ccount := sp.rangeCompute("num_tiles")
	c.Startup(cbX, cbW, cbOut)
	if together {
		// the first rounding point: the result's page, or the chain's
		// first rounding; packed from the sum directly when bf16
		first := out.Type.DType
		if len(post) > 0 {
			first = ir.FP32
			if cbRound >= 0 {
				first = out.Type.DType
			}
		}
		cc := convCompute{cbX: cbX, cbW: cbW, cbOut: cbOut, cbAcc: cbAcc, cbTerms: cbTmp, cbRound: cbRound,
			K: K, dest: ctx.Target.DestTiles(false, true), direct: first == ir.BF16, post: post}
		c.For("i", kir.C(0), ccount, func(kir.Var) { cc.tile(c) })
		return sp.finish(out, cbOut, rd, cp)
	}
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		c.BinaryTile(kir.EltMul, blocks.BcastRows, cbX, cbW, cbAcc, false, nil)
		c.For("j", kir.C(1), kir.Ci(K), func(kir.Var) {
			c.BinaryTile(kir.EltMul, blocks.BcastRows, cbX, cbW, cbTmp, false, nil)
			c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbAcc, cbTmp, cbAcc, false, nil)
		})
		if len(post) == 0 {
			c.Unary(cbAcc, cbOut, nil)
			return
		}
		c.B.CBWaitFront(cbAcc, kir.C(1))
		c.Acquire()
		c.Copy(cbAcc, kir.C(0), kir.C(0))
		c.B.CBPopFront(cbAcc, kir.C(1))
		for _, st := range post {
			if cbRound >= 0 {
				c.RoundThrough(cbRound)
			}
			c.SFPU(st, kir.C(0))
		}
		c.PackOut(cbOut, 1)
	})

	return sp.finish(out, cbOut, rd, cp)
}

func lowerTrilInverse(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if err := layoutOperands(x, out); err != nil {
		return nil, err
	}
	xs := x.Type.Shape
	r := xs.Rank()
	if r < 2 || xs[r-1] != xs[r-2] || xs[r-1] > ir.TileSize || x.Type.DType != ir.FP32 {
		return nil, fmt.Errorf("rule tril-inverse: the device inverse takes fp32 square matrices of at most %d rows (one tile each), got %s %s", ir.TileSize, xs, x.Type.DType)
	}
	n := xs[r-1]
	im := blocks.ImageOf(xs)
	sp := startProgram(op, ctx, PlanSplit(im.Pages, ctx.Target.NumWorkers(), 9*MatmulTileCycles(ctx.Fidelity), 0, 0))
	cbL := sp.cbs.Input("strict_lower", ir.FP32, 1)
	cbI := sp.cbs.Input("identity", ir.FP32, 1)
	cbOut := sp.cbs.Output("out", ir.FP32, 2)
	cbA := sp.cbs.Scratch("a", ir.FP32, 1)
	cbA2 := sp.cbs.Scratch("a_copy", ir.FP32, 1)
	cbF := sp.cbs.Scratch("factor", ir.FP32, 1)
	cbP := sp.cbs.Scratch("product", ir.FP32, 1)
	sp.planned("tril_inverse")
	rd := sp.reader()
	xAcc := sp.bind(rd, "x_addr", x)
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	b.Comment("identity tile")
	id := blocks.Reserve(b, cbI, kir.C(1), "id")
	blocks.FillWords(b, id, ir.FP32.TileBytes(), 0)
	b.For("d", kir.C(0), kir.Ci(ir.TileSize), func(d kir.Var) {
		b.L1Write32(kir.Add(id, blocks.FaceOffset(d, d, 4)), kir.C(0x3F800000))
	})
	b.CBPushBack(cbI, kir.C(1))
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		l1 := blocks.Reserve(b, cbL, kir.C(1), "l1")
		blocks.ReadPageTo(b, xAcc, kir.Add(rstart, i), l1)
		b.NoCAsyncReadBarrier()
		b.Comment("keep the strictly lower part of the n x n matrix")
		b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(rr kir.Var) {
			from := b.LetT("from", kir.U32T, rr)
			b.If(kir.Ge(rr, kir.Ci(n)), func() { b.Assign(from, kir.C(0)) })
			b.For("c", from, kir.Ci(ir.TileSize), func(cc kir.Var) {
				b.L1Write32(kir.Add(l1, blocks.FaceOffset(rr, cc, 4)), kir.C(0))
			})
		})
		b.CBPushBack(cbL, kir.C(1))
	})

	cp, c, ccount := sp.rangeCompute("num_tiles")
	cb := c.B
	c.Startup(cbL, cbI, cbOut)
	cb.CBWaitFront(cbI, kir.C(1))
	// plusI: DEST[0] = I + a[0], packed into out; a is waited for, not popped.
	plusI := func(a, out int) {
		cb.CBWaitFront(a, kir.C(1))
		c.Acquire()
		c.Binary(kir.EltAdd, blocks.BcastNone, cbI, a, kir.C(0), kir.C(0), kir.C(0))
		c.PackOut(out, 1)
	}
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		cb.Comment("A = -L, kept twice (matmul reads two CBs); P = I + A")
		cb.CBWaitFront(cbL, kir.C(1))
		c.Acquire()
		c.Copy(cbL, kir.C(0), kir.C(0))
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, kir.C(0))
		cb.CBPopFront(cbL, kir.C(1))
		c.PackOutTo(cbA, cbA2)
		plusI(cbA2, cbP)
		for s := 0; s < 4; s++ {
			cb.Comment(fmt.Sprintf("A = A^2 (A^%d); P = P (I + A)", 2<<s))
			cb.CBWaitFront(cbA, kir.C(1))
			c.Acquire()
			c.Matmul(cbA, cbA2, kir.C(0), kir.C(0), kir.C(0), false)
			cb.CBPopFront(cbA, kir.C(1))
			cb.CBPopFront(cbA2, kir.C(1))
			c.PackOutTo(cbA, cbA2)
			plusI(cbA2, cbF)
			cb.CBWaitFront(cbP, kir.C(1))
			cb.CBWaitFront(cbF, kir.C(1))
			c.Acquire()
			c.Matmul(cbP, cbF, kir.C(0), kir.C(0), kir.C(0), false)
			cb.CBPopFront(cbP, kir.C(1))
			cb.CBPopFront(cbF, kir.C(1))
			if s == 3 {
				c.PackOut(cbOut, 1)
			} else {
				c.PackOut(cbP, 1)
			}
		}
		cb.CBWaitFront(cbA, kir.C(1))
		cb.CBPopFront(cbA, kir.C(1))
		cb.CBPopFront(cbA2, kir.C(1))
	})
	cb.CBPopFront(cbI, kir.C(1))

	return sp.finish(out, cbOut, rd, cp)
}
