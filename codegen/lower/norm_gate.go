package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// norm_layout_gate (passes FuseNormLayoutGate): the GDN prefill's gated
// norm silu(z) * rms_norm(o, w) after its head merge [B,H,S,Dv] ->
// [B,S,H*Dv], in one program. It is rms_norm's program (normProgram, whole
// tile rows of x per core, never split) whose every normed tile, still
// packed as the composed norm stores it (x's dtype, fp32), is multiplied
// by u(z) as unary_mul's program does (u's tile rounded to z's dtype, then
// the FPU's multiply, u(z) first) and written straight to the result page
// the layout_chain moves it to. The chain moves whole tiles (reshapes and
// transposes, ir.ChainMovesTiles), so x page p is result page q(p), q the
// inverse chain's tile map; the reader reads z's pages q(p) of a row next
// to x's row (one barrier, two rows in flight in the CBs), the writer
// writes the products to pages q(p). The result is the composed programs'
// bit for bit; the normed and moved values are never stored.

// normGate is a gated norm's tail (normProgram's gate): z is read at the
// result pages page maps x's pages to, gated by step and multiplied by the
// normed tiles; the products are written at those pages.
type normGate struct {
	z    *ir.Value
	step blocks.SFPUStep
	page func(b *kir.Builder, p kir.Expr) kir.Expr
}

// readRow reads x's pages first .. first+count-1 into CB x and z's pages
// q(first) .. q(first+count-1) into CB z, all in flight, one barrier, then
// pushes both (count pages each).
func (g *normGate) readRow(b *kir.Builder, xAcc, zAcc *blocks.Access, x, z int, first, count kir.Expr) {
	xl1 := blocks.Reserve(b, x, count, "xl1")
	zl1 := blocks.Reserve(b, z, count, "zl1")
	b.For("i", kir.C(0), count, func(i kir.Var) {
		p := b.Let("x_page", kir.Add(first, i))
		b.NoCAsyncRead(xAcc.PageAddr(p), kir.Add(xl1, kir.Mul(i, kir.Ci(xAcc.PageSize()))), kir.Ci(xAcc.PageSize()))
		q := b.Let("out_page", g.page(b, p))
		b.NoCAsyncRead(zAcc.PageAddr(q), kir.Add(zl1, kir.Mul(i, kir.Ci(zAcc.PageSize()))), kir.Ci(zAcc.PageSize()))
	})
	b.NoCAsyncReadBarrier()
	b.CBPushBack(x, count)
	b.CBPushBack(z, count)
}

// finish adds the writer (each row's wt products, CB out, to their result
// pages q(p), one barrier a row) and the arguments.
func (g *normGate) finish(sp *splitProgram, out *ir.Value, cbOut int, rd, cp *kir.Kernel, wt int) (*kir.Program, error) {
	wr, oAcc := sp.writerOf("out_addr", out)
	wn := wr.CompileArg("wt", uint32(wt))
	wstart, wrows := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
	b := wr.Builder()
	b.For("r", kir.C(0), wrows, func(r kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(wstart, r), wn))
		blocks.WritePagesBatch(b, oAcc, cbOut, wn, func(i kir.Expr) kir.Expr {
			return b.Let("out_page", g.page(b, kir.Add(first, i)))
		})
	})
	sp.plan.SetArgs(sp.cores, rd, cp, wr)
	return sp.done(sp.p)
}

func lowerNormLayoutGate(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
	}
	step, err := unaryMulStep(op, op.Operands[2].Type.DType)
	if err != nil {
		return nil, err
	}
	x, w, z, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Result()
	if err := requireTiles(x, w, z, out); err != nil {
		return nil, err
	}
	if !z.Type.Shape.Equal(out.Type.Shape) || z.Type.DType != out.Type.DType {
		return nil, fmt.Errorf("rule eltwise-shape: %s: z %s %s and the result %s %s must have one shape and dtype", op.Name(), z.Type.Shape, z.Type.DType, out.Type.Shape, out.Type.DType)
	}
	steps, err := ir.ParseLayoutChain(op.Str("steps"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.Name(), err)
	}
	types, err := ir.LayoutChainTypes(x.Type, steps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.Name(), err)
	}
	xs, os := x.Type.Shape, types[len(types)-1].Shape
	shapes := make([]ir.Shape, len(types))
	for i, tt := range types {
		shapes[i] = tt.Shape
	}
	if !os.Equal(out.Type.Shape) || !chainMovesTiles(xs, steps, shapes) {
		return nil, fmt.Errorf("rule norm-layout-gate-chain: %s: the steps %q must move x %s's whole tiles onto the result %s", op.Name(), op.Str("steps"), xs, out.Type.Shape)
	}
	inv, invShapes, err := inverseLayoutChain(xs, steps, shapes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.Name(), err)
	}
	maps, _, err := composeLayoutSteps(os, inv, invShapes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.Name(), err)
	}
	gate := &normGate{z: z, step: step, page: tileSourcePage(maps, os, xs)}
	return normProgram(op, ctx, nil, gate, w, eps, offset, nil)
}

// inverseLayoutChain is the chain that undoes steps (reshapes and
// transposes only) from x's shape xs, steps[i] giving shapes[i]: the steps
// last to first, each reshape back to its operand's shape, each transpose
// as it is; it returns the steps and the shape after each (the last xs).
func inverseLayoutChain(xs ir.Shape, steps []ir.LayoutStep, shapes []ir.Shape) ([]ir.LayoutStep, []ir.Shape, error) {
	n := len(steps)
	inv := make([]ir.LayoutStep, 0, n)
	invShapes := make([]ir.Shape, 0, n)
	for i := n - 1; i >= 0; i-- {
		in := xs
		if i > 0 {
			in = shapes[i-1]
		}
		switch st := steps[i]; st.Op {
		case ir.OpReshape:
			inv = append(inv, ir.LayoutStep{Op: ir.OpReshape, Attrs: ir.Attrs{"shape": []int(in.Clone())}})
		case ir.OpTranspose:
			inv = append(inv, st)
		default:
			return nil, nil, fmt.Errorf("rule norm-layout-gate-chain: step %d (%s) has no inverse; only reshape and transpose", i, st)
		}
		invShapes = append(invShapes, in)
	}
	return inv, invShapes, nil
}
