package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// mmNorm is a fused matmul's RMSNorm prologue (rmsnorm_matmul): the
// activation is x normalised with weight w, eps and offset. Every matmul
// core reads x and the norm weight and computes the normalised activation
// row itself (the RMSNorm steps of norm.go: x^2 on the SFPU, reduce_tile
// row sums against a scaler of 1, *1/K, +eps, rsqrt, x * rsqrt (column
// broadcast), * (wn + offset) (row broadcast)), packed into the activation
// CB in x's dtype — the rounding r of the Doc line — before the matmul
// reads it. The alternative, one core normalising and multicasting the row
// to the others, saves the redundant ~4 eltwise tile ops per K tile on
// every core but needs a semaphore handshake across the grid; in decode
// every core reads the whole activation row anyway, the prologue is small
// next to the weight stream of a big matmul (the 27B lm_head at 1x2: 4
// tile ops per K tile against 160 x 194 weight tiles per core), and it
// keeps the program free of inter-core synchronisation. The cost model
// charges the prologue to each core.
type mmNorm struct {
	w           *ir.Value
	eps, offset float64
	x, scaler   int     // input CBs (set by inputCBs)
	nc          normCBs // the norm's CBs (set by scratchCBs)
	xAcc, wnAcc *blocks.Access
}

// coreCycles is the prologue's cost on every core for Kt = kt: reading the
// norm weight; square, reduce and two multiplies per tile.
func (n *mmNorm) coreCycles(kt int) int {
	return kt*n.w.Type.DType.TileBytes()/NoCBytesPerCycle + 4*kt*EltwiseTileCycles
}

// inputCBs adds the CBs of x (kt tiles of adt) and the scaler.
func (n *mmNorm) inputCBs(cbs *blocks.CBPlan, adt ir.DType, kt int) {
	n.x = cbs.Input("x", adt, kt)
	n.scaler = cbs.Input("scaler", ir.BF16, 1)
}

// scratchCBs adds the activation CB the prologue fills (returned) and the
// norm's CBs: squares in fp32 when the resident rows fit next to x and the
// activation, else bf16.
func (n *mmNorm) scratchCBs(cbs *blocks.CBPlan, t *target.Target, adt ir.DType, kt int) int {
	sq := ir.FP32
	if kt*(2*adt.TileBytes()+ir.FP32.TileBytes())+64<<10 > t.L1Budget() {
		sq = ir.BF16
	}
	act := cbs.Scratch("act", adt, kt)
	n.nc = fusedNormCBs(cbs, n.x, n.scaler, act, n.w.Type.DType, kt, n.offset, sq)
	return act
}

// bindReader declares the reader's x and norm-weight addresses.
func (n *mmNorm) bindReader(ab *accessBinder, rd *kir.Kernel, x *ir.Value) {
	n.xAcc = ab.bind(rd, "x_addr", x)
	n.wnAcc = ab.bind(rd, "wn_addr", n.w)
}

// readRow emits the reads of tile row r of x and of the norm weight (kt
// tiles each).
func (n *mmNorm) readRow(b *kir.Builder, f *fusedMatmul, r, kt kir.Expr) {
	blocks.ReadPages(b, n.xAcc, n.x, f.rowPage(r, kt, kir.C(0)), kt)
	blocks.ReadPages(b, n.wnAcc, n.nc.w, kir.C(0), kt)
}

// startup emits compute's startup and the wait for the scaler (popped by
// the engine after the last row).
func (n *mmNorm) startup(c *blocks.Compute) {
	c.Startup(n.x, n.scaler, n.nc.sq)
	c.B.CBWaitFront(n.scaler, kir.C(1))
}

// row emits the prologue of one tile row of kt tiles (kt the compile-time
// value ktn): the normalised row pushed to the activation CB.
func (n *mmNorm) row(c *blocks.Compute, kt kir.Expr, ktn int) {
	c.B.Comment("RMSNorm prologue: the normalised activation row, rounded to x's dtype")
	n.nc.row(c, kt, ktn*ir.TileSize, n.eps, n.offset)
}
