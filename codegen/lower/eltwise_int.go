package lower

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// lowerAddScalarInt lowers add_scalar on a row-major uint32 or int32
// tensor (the device loop's position advancing by one): one core, one
// data-movement kernel that reads each page into L1, adds the value to
// every 32-bit word with integer arithmetic (wrapping modulo 2^32, two's
// complement for int32) and writes the page to the result. No compute
// kernel runs; the result may be the operand's own buffer (a state
// updated in place): each page is read before it is written.
func lowerAddScalarInt(op *ir.Op, ctx *Context) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	dt := x.Type.DType
	if dt != ir.UInt32 && dt != ir.Int32 {
		return nil, fmt.Errorf("rule int-scalar: integer add_scalar takes uint32 or int32, got %s", dt)
	}
	if x.Type.Layout != ir.RowMajorLayout || out.Type.Layout != ir.RowMajorLayout || out.Type.DType != dt || !x.Type.Shape.Equal(out.Type.Shape) {
		return nil, fmt.Errorf("rule int-scalar: integer add_scalar maps a row-major %s tensor to one of the same type, got %s -> %s", dt, x.Type, out.Type)
	}
	v, ok := op.Attrs["value"].(float64)
	if !ok || v != math.Trunc(v) || math.Abs(v) > 1<<31 {
		return nil, fmt.Errorf("rule int-scalar: add_scalar on %s takes an integral value, got %v", dt, op.Attrs["value"])
	}
	pages, words := x.Type.Shape.Rows2D(), x.Type.Shape.Cols2D()
	pageBytes := words * dt.ElemBytes()
	sp := startProgram(op, ctx, Split{Items: pages, Cores: 1, PerCore: pages})
	cb := sp.cbs.Pages(blocks.ScratchCB, "page", dt, ctx.Target.DRAMPageSize(pageBytes), 1)
	sp.planned("add_scalar")

	rd := sp.reader()
	xAcc, oAcc := sp.bind(rd, "x_addr", x), sp.bind(rd, "out_addr", out)
	add := rd.CompileArg("value", uint32(int32(v)))
	b := rd.Builder()
	l1 := blocks.Scratch(b, cb, "page")
	b.For("p", kir.C(0), kir.Ci(pages), func(p kir.Var) {
		blocks.ReadPageTo(b, xAcc, p, l1)
		b.NoCAsyncReadBarrier()
		b.For("w", kir.C(0), kir.Ci(words), func(w kir.Var) {
			at := b.Let("at", kir.Add(l1, kir.Mul(w, kir.C(4))))
			b.L1Write32(at, kir.Add(kir.L1Read32{Addr: at}, add))
		})
		b.NoCAsyncWrite(l1, oAcc.PageAddr(p), kir.Ci(pageBytes))
		b.NoCAsyncWriteBarrier()
	})
	blocks.ReleaseScratch(b, cb)
	return sp.done(sp.p)
}
