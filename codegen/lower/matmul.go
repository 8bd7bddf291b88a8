package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Matmul family: the decode matmul [M <= 32, K] x [K, N] and its fused
// forms (matmul2/3/4, matmul_add, rmsnorm_matmul, matmul_swiglu), each a
// fusedMatmul of the engine of matmul_engine.go: its parts, its prologue
// (matmul_prologue.go) and its epilogue (matmul_epilogue.go). The plain
// and fused decode matmuls share one reader, compute and writer.

func lowerMatmul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	f := &fusedMatmul{op: op, act: op.Operands[0], parts: []mmPart{{weights: []*ir.Value{op.Operands[1]}, out: op.Result()}}}
	return f.lower(ctx)
}

// lowerMatmulMulti: matmul2/3/4, sibling matmuls of one activation, one
// part per weight.
func lowerMatmulMulti(op *ir.Op, ctx *Context) (*kir.Program, error) {
	users, err := ir.MatmulUsers(op.Attrs)
	if err != nil {
		return nil, err
	}
	f := &fusedMatmul{op: op, act: op.Operands[0], users: users}
	for i, w := range op.Operands[1:] {
		f.parts = append(f.parts, mmPart{weights: []*ir.Value{w}, out: op.Results[i]})
	}
	return f.lower(ctx)
}

func lowerMatmulAdd(op *ir.Op, ctx *Context) (*kir.Program, error) {
	f := &fusedMatmul{op: op, act: op.Operands[0], epi: &epiAdd{residual: op.Operands[2]},
		parts: []mmPart{{weights: []*ir.Value{op.Operands[1]}, out: op.Result()}}}
	return f.lower(ctx)
}

func lowerRMSNormMatmul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
	}
	f := &fusedMatmul{op: op, act: op.Operands[0], norm: &mmNorm{w: op.Operands[1], eps: eps, offset: offset},
		parts: []mmPart{{weights: []*ir.Value{op.Operands[2]}, out: op.Result()}}}
	return f.lower(ctx)
}

func lowerMatmulSwiGLU(op *ir.Op, ctx *Context) (*kir.Program, error) {
	f := &fusedMatmul{op: op, act: op.Operands[0], epi: &epiSwiGLU{},
		parts: []mmPart{{weights: []*ir.Value{op.Operands[1], op.Operands[2]}, out: op.Result()}}}
	return f.lower(ctx)
}

// subBlock emits `sb = min(dest, count - nb)` into b and returns sb: the
// size of the output sub-block starting at tile nb of count.
func subBlock(b *kir.Builder, count kir.Expr, nb kir.Var, dest int) kir.Var {
	return blocks.BlockLen(b, "sb", count, nb, dest)
}
