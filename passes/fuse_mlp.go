package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// MLP family (pass fuse-blocks): the SwiGLU MLP's gate and up projections
// with their silu * mul epilogue become one matmul_swiglu program. The
// to_memory that moves the normed activation into L1 for the two matmuls
// is folded in: the fused program reads the activation where it is (a
// decode activation is one row per user, read whole by every core anyway).
var _ = registerRules("mlp", ruleMLPSwiGLU)

// mlpInput matches the activation the MLP matmuls read: either to_memory(x)
// (named "tm", so the gate and up operands must be the same to_memory op)
// or x itself.
func mlpInput() *rw.Pattern {
	return rw.OneOf(rw.Op(ir.OpToMemory, rw.Var("x")).As("tm"), rw.Var("x"))
}

func ruleMLPSwiGLU() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseMLPSwiGLU",
		Rewrite: "mul(silu(matmul(to_memory?(x), w_gate)), matmul(to_memory?(x), w_up)) => matmul_swiglu(x, w_gate, w_up)",
		Pattern: rw.Op(ir.OpMul,
			rw.Op(ir.OpSiLU, rw.Op(ir.OpMatmul, mlpInput(), rw.Var("wg")).As("gate")).As("act"),
			rw.Op(ir.OpMatmul, mlpInput(), rw.Var("wu")).As("up")),
		Where: func(m *rw.Match) bool {
			x, wg, wu := m.Value("x"), m.Value("wg"), m.Value("wu")
			if !x.Type.DType.IsFloat() || !wg.Type.Shape.Equal(wu.Type.Shape) || wg.Type.Dist != wu.Type.Dist {
				return false
			}
			// Every value the composed chain stores (gate, silu, up, product)
			// is in x's dtype: the rounding points matmul_swiglu reproduces.
			return sameDType(x.Type.DType, m.Op("gate"), m.Op("act"), m.Op("up"), m.Root)
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpMatmulSwiGLU, []*ir.Value{m.Value("x"), m.Value("wg"), m.Value("wu")}, nil)
			return []*ir.Value{v}, err
		},
	}
}
