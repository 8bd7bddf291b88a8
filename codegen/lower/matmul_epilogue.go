package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// mmEpilogue is what a fused matmul (matmul_engine.go) does with the
// products of each sub-block of at most dest output tiles. An epilogue is
// built per lowering (it keeps the CB indices scratch hands out) and says
// everything the engine needs of it: its inputs (CBs and the reader's
// stream), its scratch CBs, where each weight's products are packed, its
// per-sub-block compute and its cost. The writer side is the engine's:
// every epilogue leaves its result tiles in the result CB. A new epilogue
// is one type implementing these methods (embedding epiPlain for the
// defaults); TestMatmulEpilogueInOneFile defines one in its test file.
type mmEpilogue interface {
	// inputs are the values the epilogue reads besides the products, each
	// of the result's shape: the engine gives input i an input CB of dest
	// pages named inputs()[i].name and the reader pushes the sub-block's
	// tiles of it there after the sub-block's weights.
	inputs() []mmInput
	// tileOps is the number of tile operations per output tile the cost
	// model charges (EltwiseTileCycles each).
	tileOps() int
	// scratch adds the epilogue's scratch CBs to cbs, after the result
	// CBs: odt is the (first) result's dtype, dest the sub-block capacity.
	scratch(cbs *blocks.CBPlan, odt ir.DType, dest int)
	// dst is the CB the packed products of the part's weight slot go to
	// (one page per tile, rounded to that CB's dtype); out is the part's
	// result CB.
	dst(slot, out int) int
	// compute emits the epilogue of a sub-block of sb tiles, after every
	// slot's products are packed to dst: it consumes those sb pages of each
	// dst other than out and of each input CB in[i] and pushes sb result
	// tiles to out.
	compute(c *blocks.Compute, sb kir.Var, in []int, out int)
}

// mmInput is an epilogue input: a value of the result's shape streamed
// per sub-block (its CB and the reader's runtime arg name_addr are named
// after name).
type mmInput struct {
	name string
	v    *ir.Value
}

// epiPlain: the packed products are the result (matmul, matmul2/3/4,
// rmsnorm_matmul; each sibling's tiles go to its own result, CBs are shared
// between parts of one dtype since parts are processed in order). Other
// epilogues embed it for its defaults: no inputs, no cost, no scratch.
type epiPlain struct{}

func (epiPlain) inputs() []mmInput                            { return nil }
func (epiPlain) tileOps() int                                 { return 0 }
func (epiPlain) scratch(*blocks.CBPlan, ir.DType, int)        {}
func (epiPlain) dst(_, out int) int                           { return out }
func (epiPlain) compute(*blocks.Compute, kir.Var, []int, int) {}

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

func (e *epiAdd) scratch(cbs *blocks.CBPlan, odt ir.DType, dest int) {
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
// (r(a @ w_gate), r(a @ w_up)); per tile the SFPU applies silu to the gate
// tile, packed (r(silu)), and the FPU multiplies it by the up tile (the
// fp32 product of the two stored values; exact for bf16 at HiFi4), packed
// (r).
type epiSwiGLU struct {
	epiPlain
	gate, up, silu int // scratch CBs
}

func (e *epiSwiGLU) tileOps() int { return 2 }

func (e *epiSwiGLU) scratch(cbs *blocks.CBPlan, odt ir.DType, dest int) {
	e.gate = cbs.Scratch("gate", odt, dest)
	e.up = cbs.Scratch("up", odt, dest)
	e.silu = cbs.Scratch("silu_gate", odt, 1)
}

func (e *epiSwiGLU) dst(slot, _ int) int {
	if slot == 0 {
		return e.gate
	}
	return e.up
}

func (e *epiSwiGLU) compute(c *blocks.Compute, sb kir.Var, _ []int, out int) {
	c.B.Comment("epilogue: silu(gate), rounded, times up")
	c.For("j", kir.C(0), sb, func(kir.Var) {
		c.Unary(e.gate, e.silu, []blocks.SFPUStep{{Op: kir.SFPUSiLU}})
		c.BinaryTile(kir.EltMul, blocks.BcastNone, e.silu, e.up, out, false, nil)
	})
}
