package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Rotary: out = x * cos + rotate_half(x) * sin over x's last dim R, with
// rotate_half(x)[i] = -x[i + R/2] for i < R/2 and x[i - R/2] otherwise.
// Result tiles are split over the grid. Per result tile the reader pushes
// the x tile; the half-swapped tile x[(i + R/2) mod R] assembled by
// blocks.Gather; and the cos and sin tiles paired with it (numpy
// broadcasting by addressing, bcast rows when the tables have one row), the
// sin tile with the sign of its columns i < R/2 flipped, which supplies
// rotate_half's minus. Compute multiplies x by cos and the swapped tile by
// the signed sin into fp32 CBs and adds them into the result (the add
// reads the fp32 products as tf32; sim/ref models it, rotaryFPU).

func lowerRotary(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, cos, sin, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Result()
	if err := layoutOperands(x, out); err != nil {
		return nil, err
	}
	for _, v := range []*ir.Value{cos, sin} {
		if err := requireTile("table", v); err != nil {
			return nil, err
		}
		if blocks.ElemBytes(v.Type.DType) == 0 {
			return nil, fmt.Errorf("rule rotary-dtype: the reader flips signs in the sin table, which must be bf16 or fp32, not %s", v.Type.DType)
		}
	}
	xs := x.Type.Shape
	if xs.Rank() == 0 || xs.Cols2D()%2 != 0 {
		return nil, fmt.Errorf("rule rotary-even: x %s needs an even last dim", xs)
	}
	R := xs.Cols2D()
	half := R / 2
	pc, bc, err := bcastPlan(cos.Type.Shape, xs)
	if err != nil {
		return nil, fmt.Errorf("rule rotary-broadcast: cos: %v", err)
	}
	ps, bs, err := bcastPlan(sin.Type.Shape, xs)
	if err != nil || bs != bc || cos.Type.Shape.Cols2D() != R || sin.Type.Shape.Cols2D() != R {
		return nil, fmt.Errorf("rule rotary-broadcast: cos %s and sin %s must broadcast alike to x %s with last dim %d", cos.Type.Shape, sin.Type.Shape, xs, R)
	}
	if bc == blocks.BcastCols || bc == blocks.BcastScalar {
		return nil, fmt.Errorf("rule rotary-broadcast: cos %s must have x's last dim", cos.Type.Shape)
	}
	xi := blocks.ImageOf(xs)
	sp := startProgram(op, ctx, PlanSplit(xi.Pages, ctx.Target.NumWorkers(), 8*EltwiseTileCycles, 0, 0))
	cbX := sp.cbs.Input("x", x.Type.DType, 2)
	cbXr := sp.cbs.Input("x_swapped", x.Type.DType, 2)
	cbCos := sp.cbs.Input("cos", cos.Type.DType, 2)
	cbSin := sp.cbs.Input("sin_signed", sin.Type.DType, 2)
	cbSlot := sp.cbs.Scratch("x_tile", x.Type.DType, 1)
	cbOut := sp.cbs.Output("out", out.Type.DType, 2)
	cbT1 := sp.cbs.Scratch("x_cos", ir.FP32, 1)
	cbT2 := sp.cbs.Scratch("xr_sin", ir.FP32, 1)
	sp.planned("rotary")

	rd := sp.reader()
	xAcc, cAcc, sAcc := sp.bind(rd, "x_addr", x), sp.bind(rd, "cos_addr", cos), sp.bind(rd, "sin_addr", sin)
	g := &blocks.Gather{Out: xi, DType: x.Type.DType, Seg: blocks.SegFor(half, R),
		Sources: []blocks.GatherSource{{Acc: xAcc, Image: xi}},
		Map: func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			return []blocks.Run{{Src: 0, Row: row, Col: kir.Mod(kir.Add(col, kir.Ci(half)), kir.Ci(R))}}
		}}
	sp.fail(g.Check())
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	g.Begin(b, []int{cbSlot})
	seb := blocks.ElemBytes(sin.Type.DType)
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		page := b.Let("page", kir.Add(rstart, i))
		blocks.ReadPage(b, xAcc, cbX, page)
		g.Page(b, cbXr, page)
		blocks.ReadPage(b, cAcc, cbCos, pageFor(pc, page))
		l1 := blocks.Reserve(b, cbSin, kir.C(1), "l1")
		blocks.ReadPageTo(b, sAcc, pageFor(ps, page), l1)
		b.NoCAsyncReadBarrier()
		tc := b.Let("tcs", kir.Mod(page, kir.Ci(xi.Ct)))
		for k := 0; k < xi.Ct; k++ {
			if n := min(ir.TileSize, half-k*ir.TileSize); n > 0 {
				b.If(kir.Eq(tc, kir.Ci(k)), func() { blocks.NegateCols(b, l1, seb, 0, n) })
			}
		}
		b.CBPushBack(cbSin, kir.C(1))
	})
	g.End(b)

	cpk, c, ccount := sp.rangeCompute("num_tiles")
	c.Startup(cbX, cbCos, cbOut)
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		c.BinaryTile(kir.EltMul, bc, cbX, cbCos, cbT1, false, nil)
		c.BinaryTile(kir.EltMul, bc, cbXr, cbSin, cbT2, false, nil)
		c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbT1, cbT2, cbOut, false, nil)
	})

	return sp.finish(out, cbOut, rd, cpk)
}
