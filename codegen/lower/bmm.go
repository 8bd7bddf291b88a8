package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Batched matmul (activation x activation): out[.., m, n] = sum_k a[.., m,
// k] * b[.., k, n]. The result tiles (every batch's Mt x Nt) are split over
// the grid. For each result tile the reader streams the Kt pairs of a and b
// tiles; when K is not a multiple of 32 it zeroes the padding columns of
// a's last K tile and the padding rows of b's (device programs may leave
// garbage in padding, and 0 * NaN is NaN). Compute accumulates matmul_tiles
// over K in fp32 DEST at the context's fidelity and packs the tile in the
// result's dtype.

func lowerBMM(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return bmmProgram(op, ctx, false)
}

// lowerBMMTransposeB is lowerBMM of a and b [.., N, K]: the reader streams
// b's tile (n, k) where bmm streams (k, n), and compute unpacks it
// transposed (matmul_tiles with in1 transposed), so no program moves b.
func lowerBMMTransposeB(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return bmmProgram(op, ctx, true)
}

// lowerBMMTransposeBMul is lowerBMMTransposeB with the elementwise multiply
// by c (operand 2, the result's shape and dtype) as its epilogue: compute
// packs each result tile's product to an L1 scratch tile of the result
// dtype, the reader pushes c's tile after the tile's K pairs, and the FPU
// multiplies the two (product first, as the composed mul reads them) into
// the result tile. The values are those of bmm_transpose_b then mul, bit
// for bit; the product never goes to DRAM.
func lowerBMMTransposeBMul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return bmmProgram(op, ctx, true)
}

// lowerBMMScaleB is lowerBMM of a and b scaled row by row by c [.., K, 1]
// (operand 2): the reader pushes c's tile of each inner step after b's,
// compute first multiplies each of the result tile's kt b tiles by c's
// column broadcast (the FPU's mul with bcast cols, as the composed mul
// computes it) into an L1 scratch tile of b's dtype, then accumulates the
// products from those. The values are those of mul then bmm, bit for bit;
// the scaled b never goes to DRAM. K must be whole tiles (rule
// bmm-scale-k) and at most maxScaleBTiles of them (rule bmm-scale-kt: the
// kt scaled tiles and a tiles wait in L1 together).
func lowerBMMScaleB(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return bmmProgram(op, ctx, false)
}

// maxScaleBTiles bounds the inner tiles of bmm_scale_b (see lowerBMMScaleB).
const maxScaleBTiles = 8

// bmmProgram lowers bmm, or bmm_transpose_b when transB (b [.., N, K]),
// bmm_transpose_b_mul (a third operand: the epilogue multiply) and
// bmm_scale_b (a third operand: b's row scales).
func bmmProgram(op *ir.Op, ctx *Context, transB bool) (*kir.Program, error) {
	a, bv, out := op.Operands[0], op.Operands[1], op.Result()
	if err := requireTiles(a, bv, out); err != nil {
		return nil, err
	}
	var ex pairExtra
	switch op.Kind {
	case ir.OpBMMTransposeBMul:
		ex.mulBy = op.Operands[2]
		if err := requireTiles(ex.mulBy); err != nil {
			return nil, err
		}
		if !ex.mulBy.Type.Shape.Equal(out.Type.Shape) || ex.mulBy.Type.DType != out.Type.DType {
			return nil, fmt.Errorf("rule bmm-mul-operand: %s multiplies its product %s %s by %s %s %s; want one shape and dtype", op.Name(), out.Type.Shape, out.Type.DType, ex.mulBy, ex.mulBy.Type.Shape, ex.mulBy.Type.DType)
		}
	case ir.OpBMMScaleB:
		ex.scaleB = op.Operands[2]
		if err := requireTiles(ex.scaleB); err != nil {
			return nil, err
		}
		bs := bv.Type.Shape
		want := bs.Clone()
		want[want.Rank()-1] = 1
		if !ex.scaleB.Type.Shape.Equal(want) || ex.scaleB.Type.DType != bv.Type.DType {
			return nil, fmt.Errorf("rule bmm-scale-operand: %s scales b %s %s by %s %s %s; want %s %s", op.Name(), bs, bv.Type.DType, ex.scaleB, ex.scaleB.Type.Shape, ex.scaleB.Type.DType, want, bv.Type.DType)
		}
		if k := bs[bs.Rank()-2]; k%ir.TileSize != 0 || k/ir.TileSize > maxScaleBTiles {
			return nil, fmt.Errorf("rule bmm-scale-k: %s: b %s has K = %d; want a multiple of %d of at most %d tiles", op.Name(), bs, k, ir.TileSize, maxScaleBTiles)
		}
	}
	as, bs := a.Type.Shape, bv.Type.Shape
	r := as.Rank()
	if r < 2 || bs.Rank() != r {
		return nil, fmt.Errorf("rule bmm-rank: want a [.., M, K] and b [.., K, N] of equal rank >= 2, got %s and %s", as, bs)
	}
	for d := 0; d < r-2; d++ {
		if as[d] != bs[d] {
			return nil, fmt.Errorf("rule bmm-batch: leading dim %d differs (%d vs %d)", d, as[d], bs[d])
		}
	}
	k, bk := as[r-1], bs[r-2]
	if transB {
		bk = bs[r-1]
	}
	if bk != k {
		return nil, fmt.Errorf("rule bmm-inner: a %s has K=%d, b %s has K=%d", as, k, bs, bk)
	}
	ai, bi := blocks.ImageOf(as), blocks.ImageOf(bs)
	pad := k%ir.TileSize != 0
	if pad {
		for _, v := range []*ir.Value{a, bv} {
			if eb := blocks.ElemBytes(v.Type.DType); eb != 2 && eb != 4 {
				return nil, fmt.Errorf("rule bmm-k: K = %d is not a multiple of %d, so the reader zeroes K padding, which needs bf16 or fp32 operands; %s is %s", k, ir.TileSize, v, v.Type.DType)
			}
		}
	}
	bo := tileOperand(bv, bi, false, pad)
	if transB {
		bo = transposedOperand(bv, bi, pad)
	}
	return pairsProgram(op, ctx, tileOperand(a, ai, true, pad), bo, ai.Ct, transB, ex)
}

// pairExtra is what a tile-pair matmul program does besides the products:
// at most one of an epilogue multiply by mulBy (the result's shape and
// dtype) and b's row scales scaleB (b's shape with a last dim of 1).
type pairExtra struct {
	mulBy, scaleB *ir.Value
}

// pairOperand is one side of a tile-pair matmul program: a tensor read by
// page (value non-nil; emit gets its Access) or tiles the reader generates
// (value nil; emit gets a nil Access).
type pairOperand struct {
	dt    ir.DType
	value *ir.Value
	// emit produces one page of cb: the operand tile for result tile
	// (batch bb, row mt, column nt) and inner step k.
	emit func(b *kir.Builder, acc *blocks.Access, cb int, bb, mt, nt, k kir.Expr)
	// page, when non-nil, is the page emit reads as is (no padding to
	// zero): a reader may then issue it with other reads under one
	// barrier.
	page func(bb, mt, nt, k kir.Expr) kir.Expr
	// genCycles is the reader's time to generate one tile with stores
	// (0: the tile is read); the split charges it per inner step.
	genCycles int
}

// tileOperand is the pairOperand that reads v (tile image im): for result
// tile (bb, mt, nt) and inner step k, its tile (bb, mt, k) when left, else
// (bb, k, nt). With pad the reader zeroes the tile's padding before
// pushing it (device programs may leave garbage there, and 0 * NaN is NaN).
func tileOperand(v *ir.Value, im blocks.Image, left, pad bool) pairOperand {
	var page func(bb, mt, nt, k kir.Expr) kir.Expr
	if !pad {
		page = func(bb, mt, nt, k kir.Expr) kir.Expr {
			row, col := k, nt
			if left {
				row, col = mt, k
			}
			return kir.Add(kir.Mul(kir.Add(kir.Mul(bb, kir.Ci(im.Rt)), row), kir.Ci(im.Ct)), col)
		}
	}
	return pairOperand{dt: v.Type.DType, value: v, page: page, emit: func(b *kir.Builder, acc *blocks.Access, cb int, bb, mt, nt, k kir.Expr) {
		row, col := k, nt
		if left {
			row, col = mt, k
		}
		pg := kir.Add(kir.Mul(kir.Add(kir.Mul(bb, kir.Ci(im.Rt)), row), kir.Ci(im.Ct)), col)
		if !pad {
			blocks.ReadPage(b, acc, cb, pg)
			return
		}
		l1 := blocks.Reserve(b, cb, kir.C(1), "l1")
		blocks.ReadPageTo(b, acc, pg, l1)
		b.NoCAsyncReadBarrier()
		blocks.ZeroImagePadding(b, l1, im, blocks.ElemBytes(v.Type.DType), row, col)
		b.CBPushBack(cb, kir.C(1))
	}}
}

// transposedOperand is the right pairOperand that reads v [.., N, K]
// (tile image im) for a product with v transposed: for result tile (bb,
// mt, nt) and inner step k, its tile (bb, nt, k), which compute unpacks
// transposed.
func transposedOperand(v *ir.Value, im blocks.Image, pad bool) pairOperand {
	o := tileOperand(v, im, true, pad)
	emit := o.emit
	o.emit = func(b *kir.Builder, acc *blocks.Access, cb int, bb, _, nt, k kir.Expr) {
		emit(b, acc, cb, bb, nt, nt, k)
	}
	if page := o.page; page != nil {
		o.page = func(bb, _, nt, k kir.Expr) kir.Expr { return page(bb, nt, nt, k) }
	}
	return o
}

// pairsProgram is the program of out[.., m, n] = sum_k a[.., m, k] b[.., k,
// n] over kt inner tiles: the result tiles are split over the grid, the
// reader emits the kt (a, b) tile pairs of each result tile, compute
// accumulates matmul_tiles in fp32 DEST (with b's tiles transposed when
// transB) and packs, the writer stores. With ex.mulBy the reader also
// pushes mulBy's tile of each result tile after its pairs, compute packs
// the product to a scratch tile and the FPU multiplies it by that tile
// into the result. With ex.scaleB the reader pushes scaleB's tile (bb, k)
// after each pair, and compute first multiplies the result tile's kt b
// tiles by their scale columns (bcast cols) into kt scratch tiles, then
// accumulates the products with those.
func pairsProgram(op *ir.Op, ctx *Context, a, bo pairOperand, kt int, transB bool, ex pairExtra) (*kir.Program, error) {
	out := op.Result()
	oi := blocks.ImageOf(out.Type.Shape)
	mulBy, scaleB := ex.mulBy, ex.scaleB
	// The fused forms read each inner step's tiles under one barrier
	// when no K padding needs zeroing.
	batched := (mulBy != nil || scaleB != nil) && a.page != nil && bo.page != nil
	work := kt * MatmulTileCycles(ctx.Fidelity)
	if mulBy != nil {
		work += 2*UnpackTileCycles + EltwiseTileCycles + 2*PackTileCycles
	}
	if scaleB != nil {
		work += kt * (2*UnpackTileCycles + EltwiseTileCycles + PackTileCycles)
	}
	// The reader generating tiles runs alongside compute: a result tile
	// costs whichever of the two is slower.
	work = max(work, kt*(a.genCycles+bo.genCycles))
	sp := startProgram(op, ctx, PlanSplit(oi.Pages, ctx.Target.NumWorkers(), work, 0, 0))
	aPages := 2
	if scaleB != nil {
		aPages = max(2, kt) // the a tiles wait while compute scales the kt b tiles
	}
	cbA := sp.cbs.Input("a", a.dt, aPages)
	cbB := sp.cbs.Input("b", bo.dt, 2)
	cbC, cbProd, cbScale, cbScaled := -1, -1, -1, -1
	if mulBy != nil {
		cbC = sp.cbs.Input("c", mulBy.Type.DType, 2)
	}
	if scaleB != nil {
		cbScale = sp.cbs.Input("scale", scaleB.Type.DType, 2)
	}
	cbOut := sp.cbs.Output("out", out.Type.DType, 2)
	if mulBy != nil {
		cbProd = sp.cbs.Scratch("product", out.Type.DType, 1)
	}
	if scaleB != nil {
		cbScaled = sp.cbs.Scratch("scaled", bo.dt, kt)
	}
	sp.planned(op.Name())

	// Reader: per result tile (batch, mt, nt), the pairs for k < kt.
	rd := sp.reader()
	aAcc, bAcc := sp.bind(rd, "a_addr", a.value), sp.bind(rd, "b_addr", bo.value)
	var cAcc, sAcc *blocks.Access
	if mulBy != nil {
		cAcc = sp.bind(rd, "c_addr", mulBy)
	}
	if scaleB != nil {
		sAcc = sp.bind(rd, "scale_addr", scaleB)
	}
	si := blocks.Image{}
	if scaleB != nil {
		si = blocks.ImageOf(scaleB.Type.Shape)
	}
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		pg := b.Let("page", kir.Add(rstart, i))
		nt := b.Let("nt", kir.Mod(pg, kir.Ci(oi.Ct)))
		q := b.Let("q", kir.Div(pg, kir.Ci(oi.Ct)))
		mt := b.Let("mt", kir.Mod(q, kir.Ci(oi.Rt)))
		bb := b.Let("bb", kir.Div(q, kir.Ci(oi.Rt)))
		if batched {
			// The fused forms issue each inner step's reads (and, with
			// the first, mulBy's tile) under one barrier.
			var lc kir.Var
			if mulBy != nil {
				lc = blocks.Reserve(b, cbC, kir.C(1), "lc")
				blocks.ReadPageTo(b, cAcc, pg, lc)
			}
			b.For("k", kir.C(0), kir.Ci(kt), func(kk kir.Var) {
				la := blocks.Reserve(b, cbA, kir.C(1), "la")
				lb := blocks.Reserve(b, cbB, kir.C(1), "lb")
				blocks.ReadPageTo(b, aAcc, a.page(bb, mt, nt, kk), la)
				blocks.ReadPageTo(b, bAcc, bo.page(bb, mt, nt, kk), lb)
				if scaleB != nil {
					ls := blocks.Reserve(b, cbScale, kir.C(1), "ls")
					blocks.ReadPageTo(b, sAcc, kir.Add(kir.Mul(bb, kir.Ci(si.Rt)), kk), ls)
				}
				b.NoCAsyncReadBarrier()
				b.CBPushBack(cbA, kir.C(1))
				b.CBPushBack(cbB, kir.C(1))
				if scaleB != nil {
					b.CBPushBack(cbScale, kir.C(1))
				}
			})
			if mulBy != nil {
				b.CBPushBack(cbC, kir.C(1))
			}
			return
		}
		b.For("k", kir.C(0), kir.Ci(kt), func(kk kir.Var) {
			a.emit(b, aAcc, cbA, bb, mt, nt, kk)
			bo.emit(b, bAcc, cbB, bb, mt, nt, kk)
			if scaleB != nil {
				blocks.ReadPage(b, sAcc, cbScale, kir.Add(kir.Mul(bb, kir.Ci(si.Rt)), kk))
			}
		})
		if mulBy != nil {
			blocks.ReadPage(b, cAcc, cbC, pg)
		}
	})

	cp, c, ccount := sp.rangeCompute("num_tiles")
	in1 := cbB
	if scaleB != nil {
		in1 = cbScaled
	}
	c.MatmulStartup(cbA, in1, cbOut)
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		if scaleB != nil {
			c.For("k", kir.C(0), kir.Ci(kt), func(kir.Var) {
				c.BinaryTile(kir.EltMul, blocks.BcastCols, cbB, cbScale, cbScaled, false, nil)
			})
		}
		c.Acquire()
		c.For("k", kir.C(0), kir.Ci(kt), func(kir.Var) {
			c.B.CBWaitFront(cbA, kir.C(1))
			c.B.CBWaitFront(in1, kir.C(1))
			c.Matmul(cbA, in1, kir.C(0), kir.C(0), kir.C(0), transB)
			c.B.CBPopFront(cbA, kir.C(1))
			c.B.CBPopFront(in1, kir.C(1))
		})
		if mulBy == nil {
			c.PackOut(cbOut, 1)
			return
		}
		c.PackOut(cbProd, 1)
		c.BinaryTile(kir.EltMul, blocks.BcastNone, cbProd, cbC, cbOut, false, nil)
	})
	return sp.finish(out, cbOut, rd, cp)
}
