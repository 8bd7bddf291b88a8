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

// bmmProgram lowers bmm, or bmm_transpose_b when transB (b [.., N, K]).
func bmmProgram(op *ir.Op, ctx *Context, transB bool) (*kir.Program, error) {
	a, bv, out := op.Operands[0], op.Operands[1], op.Result()
	if err := requireTiles(a, bv, out); err != nil {
		return nil, err
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
	return pairsProgram(op, ctx, tileOperand(a, ai, true, pad), bo, ai.Ct, transB)
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
}

// tileOperand is the pairOperand that reads v (tile image im): for result
// tile (bb, mt, nt) and inner step k, its tile (bb, mt, k) when left, else
// (bb, k, nt). With pad the reader zeroes the tile's padding before
// pushing it (device programs may leave garbage there, and 0 * NaN is NaN).
func tileOperand(v *ir.Value, im blocks.Image, left, pad bool) pairOperand {
	return pairOperand{dt: v.Type.DType, value: v, emit: func(b *kir.Builder, acc *blocks.Access, cb int, bb, mt, nt, k kir.Expr) {
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
	return o
}

// pairsProgram is the program of out[.., m, n] = sum_k a[.., m, k] b[.., k,
// n] over kt inner tiles: the result tiles are split over the grid, the
// reader emits the kt (a, b) tile pairs of each result tile, compute
// accumulates matmul_tiles in fp32 DEST (with b's tiles transposed when
// transB) and packs, the writer stores.
func pairsProgram(op *ir.Op, ctx *Context, a, bo pairOperand, kt int, transB bool) (*kir.Program, error) {
	out := op.Result()
	oi := blocks.ImageOf(out.Type.Shape)
	sp := startProgram(op, ctx, PlanSplit(oi.Pages, ctx.Target.NumWorkers(), kt*MatmulTileCycles(ctx.Fidelity), 0, 0))
	cbA := sp.cbs.Input("a", a.dt, 2)
	cbB := sp.cbs.Input("b", bo.dt, 2)
	cbOut := sp.cbs.Output("out", out.Type.DType, 2)
	sp.planned(op.Name())

	// Reader: per result tile (batch, mt, nt), the pairs for k < kt.
	rd := sp.reader()
	aAcc, bAcc := sp.bind(rd, "a_addr", a.value), sp.bind(rd, "b_addr", bo.value)
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		pg := b.Let("page", kir.Add(rstart, i))
		nt := b.Let("nt", kir.Mod(pg, kir.Ci(oi.Ct)))
		q := b.Let("q", kir.Div(pg, kir.Ci(oi.Ct)))
		mt := b.Let("mt", kir.Mod(q, kir.Ci(oi.Rt)))
		bb := b.Let("bb", kir.Div(q, kir.Ci(oi.Rt)))
		b.For("k", kir.C(0), kir.Ci(kt), func(kk kir.Var) {
			a.emit(b, aAcc, cbA, bb, mt, nt, kk)
			bo.emit(b, bAcc, cbB, bb, mt, nt, kk)
		})
	})

	cp, c, ccount := sp.rangeCompute("num_tiles")
	c.MatmulStartup(cbA, cbB, cbOut)
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		c.Acquire()
		c.For("k", kir.C(0), kir.Ci(kt), func(kir.Var) {
			c.B.CBWaitFront(cbA, kir.C(1))
			c.B.CBWaitFront(cbB, kir.C(1))
			c.Matmul(cbA, cbB, kir.C(0), kir.C(0), kir.C(0), transB)
			c.B.CBPopFront(cbA, kir.C(1))
			c.B.CBPopFront(cbB, kir.C(1))
		})
		c.PackOut(cbOut, 1)
	})
	return sp.finish(out, cbOut, rd, cp)
}
