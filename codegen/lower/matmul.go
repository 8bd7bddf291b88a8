package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Matmul family: the decode matmul [M <= 32, K] x [K, N], built by the
// fused-matmul engine of fused_common.go with one part of one weight (so
// the plain and fused decode matmuls share one reader, compute and writer).

func lowerMatmul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	f := &fusedMatmul{op: op, act: op.Operands[0], parts: []mmPart{{weights: []*ir.Value{op.Operands[1]}, out: op.Result()}}}
	return f.lower(ctx)
}

// subBlock emits `sb = min(dest, count - nb)` into b and returns sb: the
// size of the output sub-block starting at tile nb of count.
func subBlock(b *kir.Builder, count kir.Expr, nb kir.Var, dest int) kir.Var {
	return blocks.BlockLen(b, "sb", count, nb, dest)
}
