package blocks

import "github.com/tcc-dev/tcc/codegen/kir"

// MatmulConfig configures the unpacker and the FPU for Matmul(in0, in1,
// ..., transpose) without issuing a tile op (reconfig_data_format and
// matmul_init only when they change). Call it before a loop of Matmul
// calls: the loop then starts configured, and the init is not repeated
// inside its body.
func (c *Compute) MatmulConfig(in0, in1 int, transpose bool) {
	c.unpack(in1, in0)
	c.setFPU(fpuMode{kind: fpuMatmul, a: in0, b: in1, transpose: transpose})
}

// PackConfig configures the packer for CB cb (pack_reconfig_data_format
// only when the format changes). Call it before a loop of Pack calls to
// keep the reconfiguration out of the loop body.
func (c *Compute) PackConfig(cb int) { c.packTo(cb) }

// MatmulBlockConfig configures the unpacker for in0 x in1 and initialises
// block matmul for output sub-blocks of ct tiles wide, one tile row
// (matmul_block_init with rt = 1, kt the in0 row stride). It always emits
// the init, since ct may change between sub-blocks; call it once per
// sub-block, before the products.
func (c *Compute) MatmulBlockConfig(in0, in1 int, ct, kt kir.Expr) {
	c.MatmulBlockConfigRows(in0, in1, ct, kir.C(1), kt)
}

// MatmulBlockConfigRows is MatmulBlockConfig for sub-blocks of rt rows
// of in0 tiles (MatmulBlockRows).
func (c *Compute) MatmulBlockConfigRows(in0, in1 int, ct, rt, kt kir.Expr) {
	c.matmulBlockConfig(in0, in1, false, ct, rt, kt)
}

// MatmulBlockConfigTransposed is MatmulBlockConfigRows with every in1 tile
// transposed on unpack (mm_block_init_short's transpose; the products of
// MatmulBlockTransposed).
func (c *Compute) MatmulBlockConfigTransposed(in0, in1 int, ct, rt, kt kir.Expr) {
	c.matmulBlockConfig(in0, in1, true, ct, rt, kt)
}

func (c *Compute) matmulBlockConfig(in0, in1 int, transpose bool, ct, rt, kt kir.Expr) {
	c.unpack(in1, in0)
	s := &c.state
	if s.masked {
		c.B.ReduceUninit()
		s.masked = false
	}
	c.B.MatmulBlockInit(in0, in1, transpose, ct, rt, kt)
	s.fpuKnown, s.fpu = true, fpuMode{kind: fpuMatmulBlock, a: in0, b: in1, transpose: transpose}
}

// MatmulBlock accumulates DEST[dst+c] += in0[t0] x in1[t1+c] for c < ct
// (one K step of a one-row sub-block; ct and kt as the last
// MatmulBlockConfig gave them).
func (c *Compute) MatmulBlock(in0, in1 int, t0, t1, dst, ct, kt kir.Expr) {
	c.B.MatmulBlock(in0, in1, t0, t1, dst, false, ct, kir.C(1), kt)
}

// MatmulBlockRows accumulates DEST[dst+r*ct+c] += in0[t0+r*kt] x
// in1[t1+c] for r < rt, c < ct (one K step of an rt x ct sub-block; ct,
// rt and kt as the last MatmulBlockConfigRows gave them).
func (c *Compute) MatmulBlockRows(in0, in1 int, t0, t1, dst, ct, rt, kt kir.Expr) {
	c.B.MatmulBlock(in0, in1, t0, t1, dst, false, ct, rt, kt)
}

// MatmulBlockTransposed accumulates DEST[dst+r*ct+c] += in0[t0+r*kt] x
// in1[t1+c]^T for r < rt, c < ct (each in1 tile transposed on unpack; ct,
// rt and kt as the last MatmulBlockConfigTransposed gave them).
func (c *Compute) MatmulBlockTransposed(in0, in1 int, t0, t1, dst, ct, rt, kt kir.Expr) {
	c.B.MatmulBlock(in0, in1, t0, t1, dst, true, ct, rt, kt)
}
