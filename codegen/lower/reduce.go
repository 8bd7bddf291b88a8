package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Reduce family (besides argmax): sum over any axis and mean over the last.
// Result tiles are split over the grid; for each result tile the reader
// streams the n operand tiles that fold into it, zeroing their padding
// (device programs may leave garbage there), and compute folds them in
// fp32 DEST:
//
//   - over the last dim: matmul_tiles against the ones column tile
//     (blocks.OnesColumnTile) accumulates the row sums of the n tiles of
//     a tile row into column 0 in the fp32 DEST (mean then multiplies by
//     1/N on the SFPU). reduce_tile<SUM, REDUCE_ROW> would move the sums
//     through a bf16 SrcB after every tile, keeping their upper 16 bits;
//   - over the second-to-last dim: reduce_tile<SUM, REDUCE_COL> accumulates
//     the column sums of the n tiles of a tile column into row 0;
//   - over a leading dim: the n tiles are copied into DEST one after the
//     other and added element-wise on the SFPU (add_binary_tile), the
//     running sum staying in DEST[0]: a float32 sum in index order. (The
//     FPU's add_tiles would overwrite DEST, so its running sum would have
//     to go through a CB and SrcA, which reads it as tf32 at every step.)

func lowerSum(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x := op.Operands[0]
	ax, err := axisAttr(op, "axis", max(x.Type.Shape.Rank(), 1))
	if err != nil {
		return nil, err
	}
	return reduceProgram(op, ctx, ax, 1)
}

func lowerMean(op *ir.Op, ctx *Context) (*kir.Program, error) {
	s := op.Operands[0].Type.Shape
	if s.Rank() == 0 {
		return nil, fmt.Errorf("rule rank: cannot average a scalar")
	}
	return reduceProgram(op, ctx, s.Rank()-1, float32(1/float64(s.Cols2D())))
}

func reduceProgram(op *ir.Op, ctx *Context, ax int, scale float32) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if err := requireTiles(x, out); err != nil {
		return nil, err
	}
	eb := blocks.ElemBytes(x.Type.DType)
	if eb != 2 && eb != 4 {
		return nil, fmt.Errorf("rule reduce-dtype: the reader zeroes tile padding of bf16 or fp32 operands, not %s", x.Type.DType)
	}
	xd := matDims(x.Type.Shape)
	od := matDims(out.Type.Shape)
	r := len(xd)
	ax += len(xd) - max(x.Type.Shape.Rank(), 1)
	xi, oi := blocks.ImageOf(xd), blocks.ImageOf(od)
	if oi.Pages != out.Type.Shape.Tiles() || len(od) != r {
		return nil, fmt.Errorf("rule reduce-shape: result %s does not keep the reduced axis of %s", out.Type.Shape, x.Type.Shape)
	}
	// n operand pages fold into each result page: reduce_tile along dim,
	// or over a leading dim (lead) SFPU adds; inPage maps (result page p,
	// step k) to the operand page.
	var n int
	dim, lead := kir.ReduceRow, false
	var inPage func(p, k kir.Expr) kir.Expr
	switch ax {
	case r - 1:
		n = xi.Ct
		inPage = func(p, k kir.Expr) kir.Expr { return kir.Add(kir.Mul(p, kir.Ci(xi.Ct)), k) }
	case r - 2:
		n, dim = xi.Rt, kir.ReduceCol
		inPage = func(p, k kir.Expr) kir.Expr {
			tc := kir.Mod(p, kir.Ci(oi.Ct))
			bb := kir.Div(p, kir.Ci(oi.Ct))
			return kir.Add(kir.Mul(kir.Add(kir.Mul(bb, kir.Ci(xi.Rt)), k), kir.Ci(xi.Ct)), tc)
		}
	default:
		n, lead = xd[ax], true
		inner := 1 // operand tiles between consecutive indices of the axis
		for _, d := range xd[ax+1 : r-2] {
			inner *= d
		}
		inner *= xi.TilesPerMat
		inPage = func(p, k kir.Expr) kir.Expr {
			// p = (outer*inner + rest); operand page = (outer*n + k)*inner + rest.
			outer := kir.Div(p, kir.Ci(inner))
			rest := kir.Mod(p, kir.Ci(inner))
			return kir.Add(kir.Mul(kir.Add(kir.Mul(outer, kir.Ci(n)), k), kir.Ci(inner)), rest)
		}
	}
	if scale != 1 && ax != r-1 {
		return nil, fmt.Errorf("rule reduce-mean: mean reduces the last dim only")
	}
	sp := startProgram(op, ctx, PlanSplit(oi.Pages, ctx.Target.NumWorkers(), n*EltwiseTileCycles, 0, 0))
	cbX := sp.cbs.Input("x", x.Type.DType, 2)
	cbScaler := sp.cbs.Input("scaler", ir.BF16, 1)
	cbOut := sp.cbs.Output("out", out.Type.DType, 2)
	sp.planned("reduce")

	rd := sp.reader()
	xAcc := sp.bind(rd, "x_addr", x)
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	if dim == kir.ReduceRow && !lead {
		blocks.OnesColumnTile(b, cbScaler)
	} else {
		blocks.ScalerTile(b, cbScaler, 1)
	}
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		pg := b.Let("page", kir.Add(rstart, i))
		b.For("k", kir.C(0), kir.Ci(n), func(k kir.Var) {
			ip := b.Let("ip", inPage(pg, k))
			l1 := blocks.Reserve(b, cbX, kir.C(1), "l1")
			blocks.ReadPageTo(b, xAcc, ip, l1)
			b.NoCAsyncReadBarrier()
			q := kir.Div(ip, kir.Ci(xi.Ct))
			blocks.ZeroImagePadding(b, l1, xi, eb, kir.Mod(q, kir.Ci(xi.Rt)), kir.Mod(ip, kir.Ci(xi.Ct)))
			b.CBPushBack(cbX, kir.C(1))
		})
	})

	cp, c, ccount := sp.rangeCompute("num_tiles")
	c.Startup(cbX, cbScaler, cbOut)
	c.B.CBWaitFront(cbScaler, kir.C(1))
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		if lead {
			c.Acquire()
			c.B.CBWaitFront(cbX, kir.C(1))
			c.Copy(cbX, kir.C(0), kir.C(0))
			c.B.CBPopFront(cbX, kir.C(1))
			c.For("k", kir.C(1), kir.Ci(n), func(kir.Var) {
				c.B.CBWaitFront(cbX, kir.C(1))
				c.Copy(cbX, kir.C(0), kir.C(1))
				c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
				c.B.CBPopFront(cbX, kir.C(1))
			})
			c.PackOut(cbOut, 1)
			return
		}
		c.Acquire()
		c.For("k", kir.C(0), kir.Ci(n), func(kir.Var) {
			c.B.CBWaitFront(cbX, kir.C(1))
			if dim == kir.ReduceRow {
				c.Matmul(cbX, cbScaler, kir.C(0), kir.C(0), kir.C(0), false)
			} else {
				c.Reduce(kir.ReduceSum, dim, cbX, cbScaler, cbOut, kir.C(0), kir.C(0), kir.C(0))
			}
			c.B.CBPopFront(cbX, kir.C(1))
		})
		if scale != 1 {
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: scale}, kir.C(0))
		}
		c.PackOut(cbOut, 1)
	})
	c.B.CBPopFront(cbScaler, kir.C(1))
	return sp.finish(out, cbOut, rd, cp)
}
