package blocks

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
