package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Matmul family: the decode matmul [M <= 32, K] x [K, N] and its fused
// forms (matmul2/3/4, matmul_add, rmsnorm_matmul, matmul_swiglu), each a
// fusedMatmul of the engine of matmul_engine.go: its parts, its prologue
// (matmul_prologue.go) and its epilogue (matmul_epilogue.go). The plain
// and fused decode matmuls share one reader, compute and writer.

// lowerFusedMatmul lowers every op of the family (newFusedMatmul).
func lowerFusedMatmul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	f, err := newFusedMatmul(op)
	if err != nil {
		return nil, err
	}
	return f.lower(ctx)
}

// newFusedMatmul is op's engine description (not yet checked):
//   - matmul: one part of one weight;
//   - matmul2/3/4: sibling matmuls of one activation, one part per weight;
//   - matmul_add: one part, the residual added by the epilogue;
//   - rmsnorm_matmul: one part behind the RMSNorm prologue;
//   - matmul_swiglu: one part of the gate and up weights, the SwiGLU
//     epilogue.
func newFusedMatmul(op *ir.Op) (*fusedMatmul, error) {
	f := &fusedMatmul{op: op, act: op.Operands[0]}
	one := func(w *ir.Value) []mmPart { return []mmPart{{weights: []*ir.Value{w}, out: op.Result()}} }
	switch op.Kind {
	case ir.OpMatmul:
		f.parts = one(op.Operands[1])
	case ir.OpMatmul2, ir.OpMatmul3, ir.OpMatmul4:
		users, err := ir.MatmulUsers(op.Attrs)
		if err != nil {
			return nil, err
		}
		f.users = users
		for i, w := range op.Operands[1:] {
			f.parts = append(f.parts, mmPart{weights: []*ir.Value{w}, out: op.Results[i]})
		}
	case ir.OpMatmulAdd:
		f.epi, f.parts = &epiAdd{residual: op.Operands[2]}, one(op.Operands[1])
	case ir.OpRMSNormMatmul:
		eps, ok1 := op.Attrs["eps"].(float64)
		offset, ok2 := op.Attrs["offset"].(float64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
		}
		f.norm, f.parts = &mmNorm{w: op.Operands[1], eps: eps, offset: offset}, one(op.Operands[2])
	case ir.OpMatmulSwiGLU:
		f.epi = &epiSwiGLU{}
		f.parts = []mmPart{{weights: []*ir.Value{op.Operands[1], op.Operands[2]}, out: op.Result()}}
	default:
		return nil, fmt.Errorf("%s is not a matmul engine op", op.Name())
	}
	return f, nil
}
