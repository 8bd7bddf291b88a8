package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// mmEpilogue is what a fused matmul (matmul_engine.go) does with the
// products of each sub-block of at most dest output tiles: its inputs, its
// CBs, where each weight's products are packed, its compute and its cost.
// The data movement is the engine's: the reader streams the inputs, the
// writer stores the result tiles the epilogue leaves in the result CB (or,
// for an epilogue on gathered rows, gathers and scatters the live rows:
// matmul_gather.go). An
// epilogue is built per lowering (it keeps its CB indices); a new one is
// one type (TestMatmulEpilogueInOneFile defines one in its test file).
type mmEpilogue interface {
	// inputs are values of the result's shape the epilogue reads: input i
	// gets an input CB of dest pages (in[i] of compute), named after it,
	// and the reader pushes the sub-block's tiles to it after the weights.
	inputs() []mmInput
	// tileOps is the cost model's tile operations per output tile.
	tileOps() int
	// scratch adds the epilogue's scratch CBs, after the result CBs: odt is
	// the (first) result's dtype, dest the sub-block capacity; live > 0
	// offers the epilogue gathered rows (gathers): every output tile has
	// live live rows and a sub-block's fit one tile; 0: it must not gather.
	scratch(cbs *blocks.CBPlan, odt ir.DType, dest, live int)
	// gathers are the gatherings the writer does per sub-block, in order,
	// when the epilogue works on the sub-block's live rows gathered into
	// one tile (nil: tile by tile). compute then pushes one tile to out per
	// sub-block, row t*live+u holding row u of the sub-block's tile t,
	// which the writer scatters to the result (writeGathered).
	gathers() []mmGather
	// dst is the CB the products of weight slot are packed to (a page per
	// tile, rounded to its dtype); out is the part's result CB.
	dst(slot, out int) int
	// packed emits what the epilogue does with weight slot's sb tiles as
	// soon as they are packed to dst(slot, out), before the next slot's
	// products: work that then runs while the next weights stream in.
	packed(c *blocks.Compute, slot int, sb kir.Var)
	// compute emits the epilogue of a sub-block of sb tiles after every
	// slot's products are packed: it consumes the sb pages of each dst
	// other than out and of each in[i] and pushes sb result tiles to out.
	compute(c *blocks.Compute, sb kir.Var, in []int, out int)
	// fpuMul reports whether compute multiplies on the FPU for a result of
	// dtype odt (its products then depend on the kernel's math fidelity).
	fpuMul(odt ir.DType) bool
	// transposed is asked once, after scratch: on reports whether every
	// product is a C^T tile in DEST (weights on SrcB, matmul_srcb.go),
	// is32 whether the compute kernel's DEST is fp32. It
	// returns whether the epilogue takes them so, packed untransposed to
	// its dst CBs; it then transposes each result tile in DEST before
	// packing it to out (false: the engine transposes every product).
	transposed(on, is32 bool) bool
}

// mmInput is an epilogue input; its CB and the reader's address argument
// (name_addr) are named after name.
type mmInput struct {
	name string
	v    *ir.Value
}

// epiPlain: the packed products are the result (matmul, matmul2/3/4,
// rmsnorm_matmul; each sibling's tiles go to its own result, CBs are shared
// between parts of one dtype since parts are processed in order). An
// epilogue may embed it for its defaults: no inputs, no cost, no scratch.
type epiPlain struct{}

func (epiPlain) fpuMul(ir.DType) bool { return false }

func (epiPlain) inputs() []mmInput                            { return nil }
func (epiPlain) tileOps() int                                 { return 0 }
func (epiPlain) scratch(*blocks.CBPlan, ir.DType, int, int)   {}
func (epiPlain) gathers() []mmGather                          { return nil }
func (epiPlain) dst(_, out int) int                           { return out }
func (epiPlain) compute(*blocks.Compute, kir.Var, []int, int) {}
func (epiPlain) packed(*blocks.Compute, int, kir.Var)         {}
func (epiPlain) transposed(bool, bool) bool                   { return false }

// epiAdd (matmul_add): out = r(residual + r(a @ w)): the product is packed
// to an intermediate CB of the result dtype (r), then the FPU adds the
// residual tile (fp32 sum of the two stored values) and packs (r).
type epiAdd struct {
	epiPlain
	residual *ir.Value
	product  int // scratch CB
}

func (e *epiAdd) inputs() []mmInput { return []mmInput{{"residual", e.residual}} }
func (e *epiAdd) tileOps() int      { return 1 }
func (e *epiAdd) dst(int, int) int  { return e.product }

func (e *epiAdd) scratch(cbs *blocks.CBPlan, odt ir.DType, dest, _ int) {
	e.product = cbs.Scratch("product", odt, dest)
}

func (e *epiAdd) compute(c *blocks.Compute, sb kir.Var, in []int, out int) {
	c.B.Comment("epilogue: residual + the rounded product")
	c.For("j", kir.C(0), sb, func(kir.Var) {
		c.BinaryTile(kir.EltAdd, blocks.BcastNone, in[0], e.product, out, false, nil)
	})
}

// epiSwiGLU (matmul_swiglu; the part has the gate and the up weight):
// gate and up tiles of the same output columns are accumulated on the same
// core, one after the other, and packed to two CBs of the result dtype
// (r(a @ w_gate), r(a @ w_up)). Tile by tile: as soon as the gate tiles
// are packed the SFPU applies silu to each (silu_bf16 for a bf16 result), packed (r(silu)), while the up
// weights stream in; after the up tiles it multiplies each silu tile by
// its up tile, packed (r): for a bf16 result both are copied to DEST and
// multiplied on the SFPU (mul_binary_tile: the fp32 product of two bf16
// values is exact, as the FPU's at HiFi4, and leaves the kernel's
// fidelity to the matmul alone), otherwise on the FPU.
// A resident program that frees its one-row activation early (popEarly)
// runs the silu after the up products instead, once the row is freed:
// the same tiles, so the same values.
//
// With the weights on SrcB the products are C^T tiles in DEST
// (matmul_srcb.go). For a bf16 result (tile by tile, SFPU multiply) the
// epilogue takes them as they are: gate^T and up^T are packed untransposed,
// silu and the multiply run on the transposed tiles and only the product
// is transposed back in DEST before its pack, one transpose_wh_dest a
// result tile instead of two. Silu, the multiply and the bf16 roundings
// are element by element and a transpose only moves values, so every
// value is the one of the transposed-products path, bit for bit (a
// block-float result shares exponents along rows: not taken).
//
// With few live rows (decode: B rows per tile, B x the sub-block <= 32;
// the engine offers them, scratch's live) the writer gathers the live rows
// of the sub-block's gate tiles into one tile and those of its up tiles
// into another (mmGather), so silu and the multiply run once per
// sub-block instead of once per tile, after the up products: the writer
// gathers the up rows while the SFPU computes silu. Both are elementwise,
// so the rows' values are those of the tile-by-tile path, bit for bit.
type epiSwiGLU struct {
	epiPlain
	slots [2]int // scratch CBs: gate, up
	silu  int    // scratch CB: the sub-block's silu(gate) tiles (one when gathered)
	// rows are the one-page CBs the writer gathers the gate and up rows
	// to; gathered reports whether it does.
	rows     [2]int
	gathered bool
	fpu      bool // the multiply runs on the FPU
	// siluOp is silu, or silu_bf16 for a bf16 result (siluFor).
	siluOp kir.SFPUOp
	// t: the gate and up tiles are C^T tiles (transposed); mul transposes
	// each product back in DEST, is32 the kernel's fp32 DEST mode.
	t, is32 bool
	// half is half the sub-block's DEST capacity: the tiles of a group of
	// the multiply (mulGroups; 0: tile by tile)
	half int
}

// siluFor is the silu whose result is packed as dt: silu_bf16 for bf16
// (its error, under 2^-17.5, is below what the bf16 rounding keeps; the
// reference evaluator picks the same, sim/ref evalMatmulSwiGLU), silu
// otherwise.
func siluFor(dt ir.DType) kir.SFPUOp {
	if dt == ir.BF16 {
		return kir.SFPUSiLU.ForBF16Result()
	}
	return kir.SFPUSiLU
}

func (e *epiSwiGLU) fpuMul(odt ir.DType) bool { return odt != ir.BF16 }

func (e *epiSwiGLU) tileOps() int        { return 2 }
func (e *epiSwiGLU) dst(slot, _ int) int { return e.slots[slot] }

func (e *epiSwiGLU) scratch(cbs *blocks.CBPlan, odt ir.DType, dest, live int) {
	e.slots = [2]int{cbs.Scratch("gate", odt, dest), cbs.Scratch("up", odt, dest)}
	e.siluOp = siluFor(odt)
	e.fpu = e.fpuMul(odt)
	e.gathered = live > 0
	e.half = dest / 2
	if !e.gathered {
		e.silu = cbs.Scratch("silu_gate", odt, dest)
		return
	}
	e.rows = [2]int{cbs.Scratch("gate_rows", odt, 1), cbs.Scratch("up_rows", odt, 1)}
	e.silu = cbs.Scratch("silu_gate", odt, 1)
}

// transposed takes C^T products for the tile-by-tile SFPU multiply
// (a bf16 result, not gathered). one transpose a tile => two
func (e *epiSwiGLU) transposed(on, is32 bool) bool {
	e.t, e.is32 = on && !e.gathered && !e.fpu, is32
	return e.t
}

func (e *epiSwiGLU) gathers() []mmGather {
	if !e.gathered {
		return nil
	}
	return []mmGather{{from: e.slots[0], to: e.rows[0]}, {from: e.slots[1], to: e.rows[1]}}
}

func (e *epiSwiGLU) packed(c *blocks.Compute, slot int, sb kir.Var) {
	if slot != 0 {
		return
	}
	if e.gathered {
		c.B.Comment("silu of the gate's live rows, gathered by the writer, rounded, while the up weights stream in")
		c.Unary(e.rows[0], e.silu, []blocks.SFPUStep{{Op: e.siluOp}})
		return
	}
	c.B.Comment("silu(gate), rounded, while the up weights stream in")
	c.For("j", kir.C(0), sb, func(kir.Var) {
		c.Unary(e.slots[0], e.silu, []blocks.SFPUStep{{Op: e.siluOp}})
	})
}

func (e *epiSwiGLU) compute(c *blocks.Compute, sb kir.Var, _ []int, out int) {
	if e.gathered {
		c.B.Comment("epilogue: silu(gate) times up on the sub-block's live rows, gathered by the writer")
		e.mul(c, e.rows[1], out)
		return
	}
	if e.fpu || e.half == 0 {
		c.B.Comment("epilogue: silu(gate) times up")
		c.For("j", kir.C(0), sb, func(kir.Var) { e.mul(c, e.slots[1], out) })
		return
	}
	e.mulGroups(c, sb, out)
}

// mulGroups emits out = r(silu * up) for the sb tiles in groups of up to
// e.half: each group's silu and up tiles are copied page by page (no
// multi-page block, so no ring straddling) to DEST[i] and DEST[half+i],
// multiplied on the SFPU into DEST[i], transposed when e.t, and packed
// page by page: one copy init, one transpose init and one DEST section a
// group instead of a tile. The same operations on the same values as mul.
// a section a tile => a section a group
func (e *epiSwiGLU) mulGroups(c *blocks.Compute, sb kir.Var, out int) {
	c.B.Comment("epilogue: silu(gate) times up, in groups of tiles in DEST")
	up, half := e.slots[1], kir.Ci(e.half)
	c.ForStep("g", kir.C(0), sb, half, func(g kir.Var) {
		n := blocks.BlockLenOf(c.B, "n", sb, g, half)
		c.Acquire()
		c.For("i", kir.C(0), n, func(i kir.Var) {
			for _, x := range []struct {
				cb  int
				dst kir.Expr
			}{{e.silu, i}, {up, kir.Add(i, half)}} {
				c.B.CBWaitFront(x.cb, kir.C(1))
				c.CopyShared(x.cb, kir.C(0), x.dst)
				c.B.CBPopFront(x.cb, kir.C(1))
			}
		})
		c.For("i", kir.C(0), n, func(i kir.Var) { c.SFPUBinary(kir.SFPUMulBinary, i, kir.Add(i, half)) })
		if e.t {
			c.For("i", kir.C(0), n, func(i kir.Var) { c.TransposeDest(i, e.is32) })
		}
		packDest(c, out, n)
	})
}

// mul emits one page of out = r(silu * up): the front pages of e.silu and
// up, each consumed.
func (e *epiSwiGLU) mul(c *blocks.Compute, up, out int) {
	if e.fpu {
		c.BinaryTile(kir.EltMul, blocks.BcastNone, e.silu, up, out, false, nil)
		return
	}
	c.B.CBWaitFront(e.silu, kir.C(1))
	c.B.CBWaitFront(up, kir.C(1))
	c.Acquire()
	cp := c.CopyShared // one copy init for both bf16 CBs
	if e.gathered {
		cp = c.Copy // (decode's kernels as they were)
	}
	cp(e.silu, kir.C(0), kir.C(0))
	cp(up, kir.C(0), kir.C(1))
	c.SFPUBinary(kir.SFPUMulBinary, kir.C(0), kir.C(1))
	if e.t {
		c.TransposeDest(kir.C(0), e.is32)
	}
	c.B.CBPopFront(e.silu, kir.C(1))
	c.B.CBPopFront(up, kir.C(1))
	c.PackOut(out, 1)
}
