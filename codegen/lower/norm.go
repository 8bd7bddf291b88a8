package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Norm family: rms_norm(x [..., H], w [H]) = x * rsqrt(mean(x^2)
// + eps) * (w + offset), and rms_norm_plain(x) without the weight. Tile
// rows (32 rows of x) are split over the grid, one core per tile row while
// cores last. Per tile row the compute kernel
//
//  1. squares every x tile on the SFPU into a resident CB (fp32 when it
//     fits L1 next to the x tiles, else bf16); x is copied to DEST through
//     SrcA (it is an FPU operand in step 3), so fp32 x is squared as tf32;
//  2. sums them over the row with matmul_tiles against a ones column tile
//     (bf16, 1.0 in column 0: blocks.OnesColumnTile) accumulated in one
//     fp32 DEST tile (the row sums land in column 0, in full fp32: unlike
//     reduce_tile<SUM, REDUCE_ROW>, whose sums pass through a bf16 SrcB
//     after every tile, the matmul keeps them in DEST), then on the SFPU
//     multiplies by 1/H, adds eps and takes rsqrt, and packs that to an
//     fp32 CB;
//  3. per x tile multiplies x by the column broadcast of that tile
//     (mul_tiles_bcast_cols); without a weight that is the result, else it
//     goes to an fp32 CB and is multiplied by the row broadcast of the
//     weight tile (mul_tiles_bcast_rows) into the result. With offset != 0
//     each weight tile first gets offset added on the SFPU (fp32).
//
// The x tiles of a row stay resident for steps 1 and 3; weight tiles are
// streamed for every row. H must be a multiple of 32 (padding must not
// enter the mean).
//
// # Split rows
//
// When there are few tile rows (decode: batch <= 32 is one tile row), a
// row on one core is compute-bound, so each tile row instead gets a group
// of C consecutive cores (row-major; C from PlanNormSplit, e.g. 40 for
// H = 5120, 27 in the all_reduce_add_rmsnorm tail, which has 27 cores
// left beside the ring) and core k of a group takes a contiguous chunk of the row's
// tiles (norm_split.go; also used by add_rmsnorm and the
// all_reduce_add_rmsnorm tail). This applies while every row can have at
// least two cores (rows <= cores / 2); beyond that one core per row as
// above. Per core:
//
//  1. the reader reads the chunk's x and weight tiles; compute squares
//     them on the SFPU (fp32, CB x_squared), sums them by matmul_tiles
//     against the ones column in column order into one fp32 DEST tile
//     (the chunk's row sums in column 0, as the one-core pipeline does
//     for a whole row) and packs it to CB partial_sums;
//  2. the group exchanges those tiles (multicore.Exchange, semaphores 0
//     and 1, or 1 and 2 in the collective tail, whose 0 is the ring's
//     "done"): the writer sends the tile to page k (its place in the
//     group) of the leader's CB group_partial_sums; the leader's compute
//     adds the C partials in core order with add_binary_tile (fp32 exact),
//     multiplies by 1/H, adds eps and takes rsqrt; its writer multicasts
//     that tile into CB rsqrt_mean of every core of the group. From about
//     12 cores (NormExchangeFan) the adds run on a two-level tree: the
//     group's cores form subgroups of F ~ sqrt(C) cores (e.g. 7 of 27:
//     7, 7, 7, 6), each core sends its tile to its subgroup's first core,
//     which adds its subgroup's in core order and sends the sum to the
//     leader's CB (semaphore 2, or cclSemNormSub in the tail); the leader
//     adds its own subgroup's sum and then the others' in order;
//  3. compute multiplies the chunk by the column broadcast of rsqrt and the
//     row broadcast of (w + offset) as in step 3 above, and the writer
//     writes the result chunk.
//
// Deadlock freedom: besides the exchange's own argument, each core's
// partial needs only that core's reader (x is read in full before the
// weights, and every x and weight CB holds a whole chunk). Programs that
// also write h (add_rmsnorm, the tail) drain it in the writer before the
// exchange, since compute produces all of it before its squares.
//
// Numerics: the squares are the same fp32 tiles as on one core and each
// chunk is summed in the same column order; the row sum is then those C
// partials added in fp32 (in core order, or on the tree per subgroup and
// then the subgroups' sums in order), so it differs from one core's
// running sum only in the rounding of C-1 additions. The reference
// evaluator (sim/ref normRows) adds as the program does when told its
// chunking (kir.Program.RowSplit, ref.Options.RowSplit); without it, it
// keeps the one-core running sum: the two sums differ in the last bits
// in most rows, but the result only where that moves the rsqrt across a
// tf32 step (the multiply reads it as tf32), with random data about 1
// row in 1,300 to 2,500 at H = 5120.
// The partials must not be added on the FPU: it reads fp32 operands as
// tf32, an extra truncation biased low, which failed the 27B small-config
// check. The leader's serial work is C unpacks and adds (NormGatherCycles
// each), not a reduce of the whole row; on the tree F + C/F - 1 of them
// and one hop (NormHopCycles), which PlanNormSplit counts.

func lowerRMSNorm(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
	}
	return normProgram(op, ctx, nil, nil, op.Operands[1], eps, offset, nil)
}

func lowerRMSNormPlain(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, ok := op.Attrs["eps"].(float64)
	if !ok {
		return nil, fmt.Errorf("rule attr: %s needs a float attribute \"eps\"", op.Name())
	}
	return normProgram(op, ctx, nil, nil, nil, eps, 0, nil)
}

// chainSFPUSteps parses an "ops" chain (ir.ParseChainSteps) into the SFPU
// steps a fused program runs on its result tiles, each step's result
// rounded to dt (the chain's dtype): for bf16, the op
// sfpu.Op.ForBF16Result names (sim/ref chainSteps
// picks the same); a step without an SFPU operation is an error (rule
// eltwise-chain-op).
// normChainAttrs are a weightless norm chain's eps and SFPU steps (its
// "eps" and "ops" attributes).
func normChainAttrs(op *ir.Op) (float64, []blocks.SFPUStep, error) {
	eps, ok := op.Attrs["eps"].(float64)
	s, ok2 := op.Attrs["ops"].(string)
	if !ok || !ok2 {
		return 0, nil, fmt.Errorf("rule attr: %s needs a float attribute \"eps\" and a string attribute \"ops\"", op.Name())
	}
	post, err := chainSFPUSteps(s, op.Result().Type.DType)
	return eps, post, err
}

func chainSFPUSteps(s string, dt ir.DType) ([]blocks.SFPUStep, error) {
	chain, err := ir.ParseChainSteps(s)
	if err != nil {
		return nil, err
	}
	post := make([]blocks.SFPUStep, len(chain))
	for i, st := range chain {
		sf, ok := sfpuOps[st.Op]
		if !ok {
			return nil, fmt.Errorf("rule eltwise-chain-op: step %d (%s) of %q has no SFPU operation", i, st, s)
		}
		if dt == ir.BF16 {
			sf = sf.ForBF16Result()
		}
		post[i] = blocks.SFPUStep{Op: sf, Param: float32(st.Value)}
	}
	return post, nil
}

// lowerRMSNormPlainChain: rms_norm_plain_chain (passes
// FuseNormPlainChain), the weightless norm whose result tile, still in
// fp32 DEST, gets the chain's SFPU steps before it is packed: rounded to
// the result's dtype before each step as the composed norm and chain
// store it (RoundThrough; nothing to do for fp32), where the composed
// chain was a program of its own reading and writing every tile again.
func lowerRMSNormPlainChain(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, post, err := normChainAttrs(op)
	if err != nil {
		return nil, err
	}
	if x, out := op.Operands[0], op.Result(); x.Type.DType != out.Type.DType {
		return nil, fmt.Errorf("rule eltwise-shape: result %s must have x's dtype %s", out.Type.DType, x.Type.DType)
	}
	return normProgram(op, ctx, nil, nil, nil, eps, 0, post)
}

// normProgram is the norm's program; post are SFPU steps applied to each
// result tile of a weightless norm before it is packed (rms_norm_plain_chain;
// nil: none). src, when set, is where the reader takes the normalised
// values from (layout_norm_plain_chain: a relayout of its operand); nil:
// op's first operand, page by page. gate, when set (with a weight), gates
// each normed tile and places it (norm_layout_gate); the result then has
// x's tiles in another shape.
func normProgram(op *ir.Op, ctx *Context, src *normSource, gate *normGate, w *ir.Value, eps, offset float64, post []blocks.SFPUStep) (*kir.Program, error) {
	t := ctx.Target
	x, out := op.Operands[0], op.Result()
	if err := requireTiles(x, out, w); err != nil {
		return nil, err
	}
	xt := x.Type
	if src != nil {
		xt = src.typ
	}
	xs := xt.Shape
	h := xs.Cols2D()
	if h%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule rmsnorm-hidden: the last dim %d of x must be a multiple of %d (tile padding must not enter the mean)", h, ir.TileSize)
	}
	if w != nil && (w.Type.Shape.Numel() != h || w.Type.Shape.Rows2D() != 1) {
		return nil, fmt.Errorf("rule norm-weight: weight %s must be a row vector of the %d elements of x's last dim", w.Type.Shape, h)
	}
	if gate == nil && !out.Type.Shape.Equal(xs) {
		return nil, fmt.Errorf("rule eltwise-shape: result %s must have x's shape %s", out.Type.Shape, xs)
	}
	if gate != nil && (w == nil || src != nil || len(post) > 0) {
		return nil, fmt.Errorf("rule norm-gate: %s gates a weighted norm of its operand without chain steps", op.Name())
	}
	wt := h / ir.TileSize
	rows := xs.Tiles() / wt
	if ns := planNormSplit(t, rows, wt, 0, t.NumWorkers(), normTileCycles); ns != nil && src == nil && gate == nil {
		ns.h, ns.eps = h, eps
		ns.live = blocks.LiveRows(xs)
		if w != nil {
			ns.offset = offset
		}
		return normSplitProgram(op, ctx, ns, x, w, out, post)
	}
	// A tile row costs about four eltwise tile ops per x tile, far more
	// than a core's dispatch: one tile row per core while cores last.
	tileOps := 4
	if gate != nil {
		tileOps = 6 // and the gate's unary and multiply
	}
	sp := startProgram(op, ctx, PlanSplit(rows, t.NumWorkers(), tileOps*wt*EltwiseTileCycles, 0, 0))
	sqFormat := ir.FP32
	if (xt.DType.TileBytes()+ir.FP32.TileBytes())*wt > t.L1Budget()*3/4 {
		sqFormat = ir.BF16
	}
	n := normCBs{w: -1, wo: -1, xn: -1}
	// A relayout's reader (src) gathers or maps its pages: two rows of x
	// let it fetch the next row while compute works on this one.
	xRows, outPages := 1, 2
	if src != nil || gate != nil {
		xRows, outPages = 2, 2*wt
	}
	n.x = sp.cbs.Input("x", xt.DType, xRows*wt)
	var slots []int
	if src != nil && src.gather != nil {
		slots = []int{sp.cbs.Scratch("src0_tile", x.Type.DType, 1)}
	}
	n.scaler = sp.cbs.Input("scaler", ir.BF16, 1)
	wBlock := largestDivisor(wt, 16) // weight tiles read per barrier
	if w != nil {
		n.w = sp.cbs.Input("weight", w.Type.DType, 2*wBlock)
	}
	n.out = sp.cbs.Output("out", out.Type.DType, outPages)
	if gate != nil {
		n.gated, n.gout, n.gstep = true, n.out, gate.step
		n.gz = sp.cbs.Input("z", gate.z.Type.DType, 2*wt)
		n.gu = sp.cbs.Scratch("gate", gate.z.Type.DType, 1)
		n.out = sp.cbs.Scratch("normed", xt.DType, 2)
	}
	n.sq = sp.cbs.Scratch("x_squared", sqFormat, wt)
	n.rs = sp.cbs.Scratch("rsqrt_mean", ir.FP32, 1)
	if w != nil {
		n.xn = sp.cbs.Scratch("x_normed", ir.FP32, 2)
	}
	if w != nil && offset != 0 {
		n.wo = sp.cbs.Scratch("weight_plus_offset", ir.FP32, 2)
	}
	n.addPost(sp.cbs, post, out.Type.DType)
	sp.planned(fmt.Sprintf("%s over H = %d keeps %d x and x^2 tiles per core", op.Name(), h, wt))

	// Reader: the scaler tile, then per tile row its x tiles and the
	// weight tiles.
	rd := sp.reader()
	xAcc, wAcc := sp.bind(rd, "x_addr", x), sp.bind(rd, "w_addr", w)
	var zAcc *blocks.Access
	if gate != nil {
		zAcc = sp.bind(rd, "z_addr", gate.z)
	}
	rWt := rd.CompileArg("wt", uint32(wt))
	rstart, rrows := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	blocks.OnesColumnTile(b, n.scaler)
	if src != nil && src.gather != nil {
		src.gather.Sources = []blocks.GatherSource{{Acc: xAcc, Image: blocks.ImageOf(x.Type.Shape)}}
		sp.fail(src.gather.Check())
	}
	b.For("r", kir.C(0), rrows, func(r kir.Var) {
		// The row's x tiles all in flight, then the weight in blocks.
		first := kir.Mul(kir.Add(rstart, r), rWt)
		switch {
		case gate != nil:
			gate.readRow(b, xAcc, zAcc, n.x, n.gz, first, rWt)
		case src == nil:
			blocks.ReadPagesBatch(b, xAcc, n.x, first, rWt)
		case src.gather != nil:
			src.gather.Emit(b, n.x, slots, first, rWt)
		default:
			src.readTiles(b, xAcc, n.x, first, rWt)
		}
		if w != nil {
			b.For("wb", kir.C(0), kir.Ci(wt/wBlock), func(wb kir.Var) {
				blocks.ReadPagesBatch(b, wAcc, n.w, kir.Mul(wb, kir.Ci(wBlock)), kir.Ci(wBlock))
			})
		}
	})

	cp, c := sp.compute()
	cWt := cp.CompileArg("wt", uint32(wt))
	crows := cp.RuntimeArg("num_rows")
	cb := c.B
	c.Startup(n.x, n.scaler, n.out)
	cb.CBWaitFront(n.scaler, kir.C(1))
	c.For("r", kir.C(0), crows, func(kir.Var) { n.row(c, cWt, h, eps, offset) })
	cb.CBPopFront(n.scaler, kir.C(1))
	if gate != nil {
		return gate.finish(sp, out, n.gout, rd, cp, wt)
	}
	return sp.finishRows(out, n.out, rd, cp, "wt", wt)
}

// normTileCycles is the plan's estimate of one x tile's norm compute on
// one core: about four tile ops and six operand unpacks (square, reduce,
// two broadcast multiplies).
const normTileCycles = 4*EltwiseTileCycles + 6*UnpackTileCycles + 4*PackTileCycles

// normSplitProgram is normProgram for few tile rows: ns's groups of cores
// per row (norm_split.go). Core i reads its chunk of x and of the weight,
// the writer runs the exchange and then writes the chunk's results.
func normSplitProgram(op *ir.Op, ctx *Context, ns *normSplit, x, w, out *ir.Value, post []blocks.SFPUStep) (*kir.Program, error) {
	sp := startProgramOn(op, ctx, ns.cores, ns.ranges)
	cbX := sp.cbs.Input("x", x.Type.DType, ns.per)
	cbScaler := sp.cbs.Input("scaler", ir.BF16, 1)
	cbOut := sp.cbs.Output("out", out.Type.DType, ns.outPages())
	ns.addCBs(sp.cbs, cbX, cbScaler, cbOut, w, ir.FP32)
	ns.cb.addPost(sp.cbs, post, out.Type.DType)
	sp.planned(fmt.Sprintf("%s over H = %d split over %d cores per tile row keeps %d x and x^2 tiles per core", op.Name(), ns.h, ns.group, ns.per))
	ns.ex.AddSemaphores(sp.p, 0, 1, 2)
	sp.p.RowSplit = ns.rowSplit()

	rd := sp.reader()
	xAcc, wAcc := sp.bind(rd, "x_addr", x), sp.bind(rd, "w_addr", w)
	rstart, rcol, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("col"), rd.RuntimeArg("count")
	b := rd.Builder()
	// x's live rows and the weight chunk's row in flight while the scaler
	// is built, one barrier.
	xl1 := blocks.Reserve(b, cbX, rcount, "xl1")
	blocks.ReadTilesLive(b, xAcc, xl1, rstart, rcount, blocks.LiveRows(x.Type.Shape), blocks.ElemBytes(x.Type.DType))
	ns.issueWeights(b, wAcc, rcol, rcount)
	blocks.OnesColumnTile(b, cbScaler)
	b.NoCAsyncReadBarrier()
	b.CBPushBack(cbX, rcount)
	ns.pushWeights(b, rcount)

	cp, c := sp.compute()
	ccount, cleader := cp.RuntimeArg("count"), ns.ex.ComputeDeclare(cp)
	c.Startup(cbX, cbScaler, cbOut)
	c.B.CBWaitFront(cbScaler, kir.C(1))
	ns.compute(c, ccount, cleader)
	c.B.CBPopFront(cbScaler, kir.C(1))

	wr, oAcc := sp.writerOf("out_addr", out)
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	ea := ns.ex.Declare(wr)
	ns.ex.Emit(wr.Builder(), ea)
	ns.writeChunk(wr.Builder(), oAcc, cbOut, wstart, wcount)

	sp.fail(ns.setArgs(op.Name(), rd, cp, wr, nil))
	return sp.done(sp.p)
}

// normCBs are the CBs of RMSNorm's compute steps on one tile row: x holds
// the row's tiles (all resident), scaler the bf16 ones column tile
// (blocks.OnesColumnTile, the matmul's in1 that sums rows); w streams
// the weight tiles (-1: no weight) and wo takes weight + offset (-1: no
// offset); out receives the result tiles; sq (x^2, one page per tile of
// the row), rs (one fp32 tile) and xn (fp32, with a weight) are scratch.
// Without a weight, post are SFPU steps on each result tile before it is
// packed, each after a rounding to the result's dtype through postRound
// (-1: none, fp32).
//
// With a gate (gated: norm_layout_gate) out is the normed tiles' scratch
// CB: each is multiplied by gstep of the matching z tile (CB gz, through
// the one-page scratch gu) into gout.
type normCBs struct {
	x, scaler, w, wo, out, sq, rs, xn int
	gz, gu, gout                      int
	gated                             bool
	gstep                             blocks.SFPUStep
	post                              []blocks.SFPUStep
	postRound                         int
}

// addPost sets n's post steps (see normCBs) for a result of dtype dt,
// adding the rounding CB they need.
func (n *normCBs) addPost(cbs *blocks.CBPlan, post []blocks.SFPUStep, dt ir.DType) {
	n.post, n.postRound = post, -1
	if len(post) > 0 && blocks.Rounds(dt) {
		n.postRound = cbs.Scratch("normed_rounded", dt, 1)
	}
}

// row emits the compute of one tile row of wt tiles of an H = h wide
// RMSNorm (steps 1-3 of the family doc): it waits for the wt x tiles,
// consumes one weight tile per x tile (with a weight), pushes wt result
// tiles to out and pops the x tiles. The scaler tile must have been
// waited for.
func (n normCBs) row(c *blocks.Compute, wt kir.Expr, h int, eps, offset float64) {
	c.B.CBWaitFront(n.x, wt)
	n.sumSquares(c, wt, "rsqrt(sum(x^2) / H + eps), in column 0")
	n.rsqrtOf(c, h, eps)
	c.PackOut(n.rs, 1)
	c.B.CBPopFront(n.sq, wt)
	n.scale(c, wt, offset)
	c.B.CBPopFront(n.x, wt)
}

// sumSquares emits steps 1 and 2 up to the row sums: the squares of the
// first cnt x tiles (already waited for) into sq, then (after comment)
// their matmul_tiles against the ones column tile (CB scaler) accumulated
// into DEST[0] of an acquired DEST, left there (column 0 holds the row
// sums, the other columns zero) for the caller to pack; the caller pops
// the cnt sq pages after packing. The sums stay in the fp32 DEST from
// the first tile to the last: reduce_tile<SUM, REDUCE_ROW> would move
// them through a bf16 SrcB after every tile (tt-llk's llk_math_reduce.h),
// keeping only their upper 16 bits.
func (n normCBs) sumSquares(c *blocks.Compute, cnt kir.Expr, comment string) {
	c.B.Comment("x^2")
	c.For("j", kir.C(0), cnt, func(j kir.Var) {
		c.Acquire()
		c.Copy(n.x, j, kir.C(0))
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUSquare}, kir.C(0))
		c.PackOut(n.sq, 1)
	})
	c.B.Comment(comment)
	c.B.CBWaitFront(n.sq, cnt)
	c.Acquire()
	c.For("j", kir.C(0), cnt, func(j kir.Var) {
		c.Matmul(n.sq, n.scaler, j, kir.C(0), kir.C(0), false)
	})
}

// rsqrtOf emits the SFPU tail of step 2 on DEST[0]: sum / H + eps, then
// rsqrt.
func (normCBs) rsqrtOf(c *blocks.Compute, h int, eps float64) {
	c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(1 / float64(h))}, kir.C(0))
	c.SFPU(blocks.SFPUStep{Op: kir.SFPUAddScalar, Param: float32(eps)}, kir.C(0))
	c.SFPU(blocks.SFPUStep{Op: kir.SFPURsqrt}, kir.C(0))
}

// scale emits step 3 on the first cnt x tiles (already waited for): it
// waits for the rsqrt tile in rs, consumes one weight tile per x tile
// (with a weight), pushes cnt result tiles to out and pops rs (not x).
func (n normCBs) scale(c *blocks.Compute, cnt kir.Expr, offset float64) {
	c.B.CBWaitFront(n.rs, kir.C(1))
	c.B.Comment("x * rsqrt (column broadcast) [* weight (row broadcast)]")
	c.For("j", kir.C(0), cnt, func(j kir.Var) {
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastCols, n.x, n.rs, j, kir.C(0), kir.C(0))
		if n.w < 0 {
			if n.postRound < 0 {
				c.SFPUSteps(n.post, kir.C(0)) // fp32: one pass over DEST
			}
			for _, st := range n.post {
				if n.postRound < 0 {
					break
				}
				c.RoundThrough(n.postRound)
				c.SFPU(st, kir.C(0))
			}
			c.PackOut(n.out, 1)
			return
		}
		c.PackOut(n.xn, 1)
		wCB := n.w
		if n.wo >= 0 {
			wCB = n.wo
			c.Unary(n.w, n.wo, []blocks.SFPUStep{{Op: kir.SFPUAddScalar, Param: float32(offset)}})
		}
		c.BinaryTile(kir.EltMul, blocks.BcastRows, n.xn, wCB, n.out, false, nil)
		if n.gated {
			c.Unary(n.gz, n.gu, []blocks.SFPUStep{n.gstep})
			c.BinaryTile(kir.EltMul, blocks.BcastNone, n.gu, n.out, n.gout, false, nil)
		}
	})
	c.B.CBPopFront(n.rs, kir.C(1))
}

// largestDivisor is the largest divisor of n that is at most limit.
func largestDivisor(n, limit int) int {
	for d := min(n, limit); d > 1; d-- {
		if n%d == 0 {
			return d
		}
	}
	return 1
}
