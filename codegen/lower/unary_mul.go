package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// lowerUnaryMul lowers unary_mul (out = r(r(u(x)) * y), the GDN prefill's
// norm gate silu(z) * o): one streaming eltwise program. Per result tile
// the reader pushes x's and y's tiles; compute runs u on the SFPU as the
// unary op's program does (copy to DEST, the SFPU step, pack to an L1
// scratch tile of x's dtype: the rounding the composed op stores), then
// the FPU multiplies that tile by y's (u(x) first, as the composed mul
// reads them) into the result. The values are those of u then mul, bit
// for bit; u(x) never goes to DRAM. Errors name rule unary-mul-op (op is
// not a unary SFPU op) or eltwise-shape.
func lowerUnaryMul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	step, err := unaryMulStep(op, op.Operands[0].Type.DType)
	if err != nil {
		return nil, err
	}
	sf := step.Op
	x, y, out := op.Operands[0], op.Operands[1], op.Result()
	if err := requireTiles(x, y, out); err != nil {
		return nil, err
	}
	if !x.Type.Shape.Equal(out.Type.Shape) || !y.Type.Shape.Equal(out.Type.Shape) || out.Type.DType != x.Type.DType {
		return nil, fmt.Errorf("rule eltwise-shape: %s: x %s %s, y %s and the result %s %s must have one shape, the result x's dtype", op.Name(), x.Type.Shape, x.Type.DType, y.Type.Shape, out.Type.Shape, out.Type.DType)
	}
	cycles := int(kir.SFPUTable[sf].Cycles) + PackTileCycles + UnpackTileCycles + EltwiseTileCycles
	var cbU int
	return eltwiseProgramScratch(op, ctx, []eltInput{{v: x}, {v: y}}, cycles,
		func(cbs *blocks.CBPlan) { cbU = cbs.Scratch("unary", x.Type.DType, 1) },
		func(c *blocks.Compute, in []int, out int) {
			c.Unary(in[0], cbU, []blocks.SFPUStep{step})
			c.BinaryTile(kir.EltMul, blocks.BcastNone, cbU, in[1], out, false, nil)
		})
}

// unaryMulStep is the SFPU step of op's unary (attribute op, with its
// value when it takes one): unary_mul's and norm_layout_gate's gate,
// whose result is rounded to dt (sfpu.Op.ForBF16Result's op for bf16, as
// sim/ref's sfpuEvalTo).
func unaryMulStep(op *ir.Op, dt ir.DType) (blocks.SFPUStep, error) {
	name, _ := op.Attrs["op"].(string)
	kind, ok := ir.LookupOp(name)
	sf, ok2 := sfpuOps[kind]
	if !ok || !ok2 {
		return blocks.SFPUStep{}, fmt.Errorf("rule unary-mul-op: %s: op %q is not a unary SFPU op", op.Name(), name)
	}
	if dt == ir.BF16 {
		sf = sf.ForBF16Result()
	}
	step := blocks.SFPUStep{Op: sf}
	if sf.HasParam() {
		v, ok := op.Attrs["value"].(float64)
		if !ok {
			return blocks.SFPUStep{}, fmt.Errorf("rule attr: %s (%s) needs a float attribute \"value\"", op.Name(), name)
		}
		step.Param = float32(v)
	}
	return step, nil
}
