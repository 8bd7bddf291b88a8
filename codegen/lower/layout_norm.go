package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// layout_norm_plain_chain (passes FuseLayoutNormPlainChain): the weightless
// norm chain (lowerRMSNormPlainChain, whole tile rows per core) whose reader
// assembles each tile row of the moved values straight from the operand,
// as the layout_chain's own program would: a chain that moves whole tiles
// (chainMovesTiles: the GDN prefill's q and k head splits) reads the row's
// source pages all in flight, one barrier, into an x CB of two rows (the
// next row is fetched while compute works on one); any other chain gathers each
// tile with blocks.Gather (zeros in the padding, as the layout_chain's
// program stores them). The x CB holds the moved dtype (bf16): the norm
// reads every x tile through SrcA or into DEST, where a bf16 value and
// its fp32 widening are the same number, so the result is the composed
// programs' bit for bit, and the moved [B,H,S,D] values are never written
// nor read again. Rows are never split over cores (the split path reads
// x chunks directly).

// normSource is where a norm's reader takes the normalised values from:
// typ is their type (the x CB's dtype and the normalised shape); page maps
// a result page to its source page when the chain moves whole tiles, else
// gather assembles each page (its Sources set by normProgram).
type normSource struct {
	typ    ir.TensorType
	page   func(b *kir.Builder, p kir.Expr) kir.Expr
	gather *blocks.Gather
}

// readTiles reads result pages first .. first+count-1 (count pages of cb
// reserved at once) from their source pages of acc, all in flight, then
// pushes them.
func (s *normSource) readTiles(b *kir.Builder, acc *blocks.Access, cb int, first, count kir.Expr) {
	l1 := blocks.Reserve(b, cb, count, "l1")
	b.For("i", kir.C(0), count, func(i kir.Var) {
		src := b.Let("src_page", s.page(b, kir.Add(first, i)))
		b.NoCAsyncRead(acc.PageAddr(src), kir.Add(l1, kir.Mul(i, kir.Ci(acc.PageSize()))), kir.Ci(acc.PageSize()))
	})
	b.NoCAsyncReadBarrier()
	b.CBPushBack(cb, count)
}

func lowerLayoutNormPlainChain(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, post, err := normChainAttrs(op)
	if err != nil {
		return nil, err
	}
	x, out := op.Operands[0], op.Result()
	steps, shapes, moved, err := layoutChainSteps(op)
	if err != nil {
		return nil, err
	}
	if x.Type.DType != out.Type.DType && (x.Type.DType != ir.BF16 || out.Type.DType != ir.FP32) {
		return nil, fmt.Errorf("rule layout-chain-dtype: %s moves %s values into a %s result; only bf16 to fp32 converts exactly", op.Name(), x.Type.DType, out.Type.DType)
	}
	if err := layoutOperands(x); err != nil {
		return nil, err
	}
	maps, seg, err := composeLayoutSteps(x.Type.Shape, steps, shapes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.Name(), err)
	}
	xs, os := x.Type.Shape, moved.Shape
	src := &normSource{typ: ir.TensorType{Shape: os, DType: x.Type.DType, Layout: ir.TileLayout}}
	if chainMovesTiles(xs, steps, shapes) {
		src.page = tileSourcePage(maps, xs, os)
	} else {
		oim := blocks.ImageOf(os)
		src.gather = &blocks.Gather{Out: oim, DType: x.Type.DType, Seg: seg, Fill: oim.R%ir.TileSize != 0 || oim.C%ir.TileSize != 0, Map: gatherMap(maps, xs, os)}
	}
	return normProgram(op, ctx, src, nil, nil, eps, 0, post)
}
