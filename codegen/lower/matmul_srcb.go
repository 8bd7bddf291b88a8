package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Weights on SrcB (ir.WeightsOnSrcB): a weight stored in transposed tiles
// (layout tile_t: stored tile (k, n) holds W's tile (k, n) transposed,
// which is W^T's tile (n, k)) is read into its CB in the same page order
// as any weight, and multiplied as C^T = W^T X^T: in0 (SrcB) is the
// weight, one matmul_block row per weight column of the sub-block (rt =
// the columns, kt_dim 1: the sub-block's columns are consecutive pages),
// in1 (SrcA) the activation tile transposed on unpack (ct = 1), so DEST
// tile j accumulates C^T's tile (n+j, m) over K in the same order as the
// SrcA product; transpose_wh_dest then turns each into C's tile (m, n+j)
// before the packer (its init replaces the FPU's: the next product
// initialises matmul_block again, which MatmulBlockConfig always does).

// onSrcB reports whether w is multiplied on SrcB (stored in transposed
// tiles).
func onSrcB(w *ir.Value) bool { return ir.WeightSourceOf(w) == ir.WeightsOnSrcB }

// allOnSrcB reports whether every weight of every part is on SrcB (every
// product is then a C^T tile before productDone's transposes).
func (m *mmProgram) allOnSrcB() bool {
	for _, pt := range m.parts {
		for _, w := range pt.weights {
			if !onSrcB(w) {
				return false
			}
		}
	}
	return true
}

// blockConfig is product's matmul_block init for a sub-block of sb
// columns of the weight in wcb (on SrcB when wT).
func (m *mmProgram) blockConfig(c *blocks.Compute, wT bool, wcb int, sb kir.Var, kt kir.Expr) {
	if wT {
		c.MatmulBlockConfigTransposed(wcb, m.cbAct, kir.C(1), sb, kir.C(1))
		return
	}
	c.MatmulBlockConfig(m.cbAct, wcb, sb, kt)
}

// blockStep is one K step of a one-row sub-block: DEST[j] += activation
// tile a x weight tile w+j for j < sb (on SrcB when wT: DEST[j] += W^T
// tile w+j x a^T, the C^T tile).
func (m *mmProgram) blockStep(c *blocks.Compute, wT bool, wcb int, a, w kir.Expr, sb kir.Var, kt kir.Expr) {
	if wT {
		c.MatmulBlockTransposed(wcb, m.cbAct, w, a, kir.C(0), kir.C(1), sb, kir.C(1))
		return
	}
	c.MatmulBlock(m.cbAct, wcb, a, w, kir.C(0), sb, kt)
}

// productDone ends a product whose first n DEST tiles hold its results
// (C^T tiles when wT: each transposed in place first, unless the
// epilogue takes them as they are, m.epiT) and packs them to dst
// (packDest).
func (m *mmProgram) productDone(c *blocks.Compute, wT bool, dst int, n kir.Expr) {
	if wT && !m.epiT {
		is32 := m.cp.Compute.FP32DestAccEn
		c.For("t", kir.C(0), n, func(t kir.Var) { c.TransposeDest(t, is32) })
	}
	packDest(c, dst, n)
}
