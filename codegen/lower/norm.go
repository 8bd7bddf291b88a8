package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Norm family: rmsnorm(x [..., H], w [H]) = x * rsqrt(mean(x^2) + eps) *
// (w + offset). Tile rows (32 rows of x) are split over the grid, one core
// per tile row while cores last. Per tile row the compute kernel
//
//  1. squares every x tile on the SFPU into a bf16 CB (Wt tiles);
//  2. sums them over the row with reduce_tile<SUM, REDUCE_ROW> against a
//     scaler tile of 1.0 into one fp32 DEST tile (the row sums land in
//     column 0), then on the SFPU multiplies by 1/H in fp32, adds eps and
//     takes rsqrt, and packs that to an fp32 CB;
//  3. per x tile multiplies x by the column broadcast of that tile
//     (mul_tiles_bcast_cols) into an fp32 CB, then multiplies that by the
//     row broadcast of the weight tile (mul_tiles_bcast_rows) into the
//     output.
//
// The weight is read once per core. With offset != 0 the compute kernel
// first adds offset to each weight tile on the SFPU (fp32 DEST) and keeps
// the Wt results in an fp32 CB; with offset 0 the weight tiles are used as
// read. The x tiles of a row stay resident for steps 1 and 3.

// scalerWordOne is two bf16 1.0 values, the scaler tile's row-0 fill.
const scalerWordOne = 0x3F803F80

func lowerRMSNorm(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	x, w, out := op.Operands[0], op.Operands[1], op.Result()
	for _, v := range []*ir.Value{x, w, out} {
		if err := requireTile("value", v); err != nil {
			return nil, err
		}
	}
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule attr: rmsnorm needs float attributes \"eps\" and \"offset\"")
	}
	xs := x.Type.Shape
	h := xs.Cols2D()
	if h%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule rmsnorm-hidden: the last dim %d of x must be a multiple of %d (tile padding must not enter the mean)", h, ir.TileSize)
	}
	if w.Type.Shape.Numel() != h || w.Type.Shape.Rows2D() != 1 {
		return nil, fmt.Errorf("rule norm-weight: weight %s must be a row vector of the %d elements of x's last dim", w.Type.Shape, h)
	}
	if !out.Type.Shape.Equal(xs) {
		return nil, fmt.Errorf("rule eltwise-shape: result %s must have x's shape %s", out.Type.Shape, xs)
	}
	wt := h / ir.TileSize
	rows := xs.Tiles() / wt
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	// A tile row costs about four eltwise tile ops per x tile, far more
	// than a core's dispatch: one tile row per core while cores last.
	plan := PlanSplit(rows, t.NumWorkers(), 4*wt*EltwiseTileCycles, 0, 0)
	cores, rs := firstCores(t, plan.Cores)
	hasOffset := offset != 0

	const (
		cbX, cbW, cbScaler = cbIn0, cbIn1, cbIn2
		cbSq, cbWo, cbRs   = cbIm0, cbIm1, cbIm2
		cbXn               = cbIm3
	)
	wPages := wt
	if hasOffset {
		wPages = 2
	}
	p.AddCB(tileCB(cbX, x.Type.DType, wt, rs, "x"))
	p.AddCB(tileCB(cbW, w.Type.DType, wPages, rs, "weight"))
	p.AddCB(tileCB(cbScaler, ir.BF16, 1, rs, "scaler"))
	p.AddCB(tileCB(cbSq, ir.BF16, wt, rs, "x_squared"))
	if hasOffset {
		p.AddCB(tileCB(cbWo, ir.FP32, wt, rs, "weight_plus_offset"))
	}
	p.AddCB(tileCB(cbRs, ir.FP32, 1, rs, "rsqrt_mean"))
	p.AddCB(tileCB(cbXn, ir.FP32, 2, rs, "x_normed"))
	p.AddCB(tileCB(cbOut, out.Type.DType, 2, rs, "out"))
	if err := checkL1(p, ctx, fmt.Sprintf("rmsnorm over H = %d keeps %d x, x^2 and weight tiles per core", h, wt)); err != nil {
		return nil, err
	}

	// Reader: the scaler tile, the weight tiles, then the x tile rows.
	rd := newReader(p, rs)
	xAddr := rd.CommonArg("x_addr", kir.BufferAddr(ctx.BufferName(x), 0))
	wAddr := rd.CommonArg("w_addr", kir.BufferAddr(ctx.BufferName(w), 0))
	rWt := rd.CompileArg("wt", uint32(wt))
	rstart, rrows := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	b.Comment("scaler tile: 1.0 in row 0 of every face, zero elsewhere")
	b.CBReserveBack(cbScaler, kir.C(1))
	sp := b.Let("scaler", kir.GetWritePtr{CB: cbScaler})
	b.For("i", kir.C(0), kir.Ci(ir.BF16.TileBytes()/4), func(i kir.Var) {
		b.L1Write32(kir.Add(sp, kir.Mul(i, kir.C(4))), kir.C(0))
	})
	b.For("f", kir.C(0), kir.C(4), func(f kir.Var) {
		b.For("i", kir.C(0), kir.C(8), func(i kir.Var) {
			b.L1Write32(kir.Add(sp, kir.Add(kir.Mul(f, kir.C(512)), kir.Mul(i, kir.C(4)))), kir.C(scalerWordOne))
		})
	})
	b.CBPushBack(cbScaler, kir.C(1))
	b.For("j", kir.C(0), rWt, func(j kir.Var) {
		readPage(b, t, cbW, wAddr, j, w.Type.DType.TileBytes())
	})
	b.For("r", kir.C(0), rrows, func(r kir.Var) {
		b.For("j", kir.C(0), rWt, func(j kir.Var) {
			readPage(b, t, cbX, xAddr, kir.Add(kir.Mul(kir.Add(rstart, r), rWt), j), x.Type.DType.TileBytes())
		})
	})

	// Compute.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	cWt := cp.CompileArg("wt", uint32(wt))
	crows := cp.RuntimeArg("num_rows")
	b = cp.Builder()
	// pack emits the pack of DEST[0] into one page of cb after tile_regs_commit.
	pack := func(cb int) {
		b.TileRegsCommit()
		b.CBReserveBack(cb, kir.C(1))
		b.TileRegsWait()
		b.PackTile(kir.C(0), cb)
		b.TileRegsRelease()
		b.CBPushBack(cb, kir.C(1))
	}
	b.HWStartup(cbX, cbScaler, cbOut)
	wCB := cbW
	if hasOffset {
		wCB = cbWo
		b.Comment("weight + offset, kept for every row")
		b.ReconfigDataFormat(cbW, cbW)
		b.PackReconfigDataFormat(cbWo)
		b.CopyTileInit(cbW)
		b.SFPUInit(kir.SFPUAddScalar)
		b.For("j", kir.C(0), cWt, func(kir.Var) {
			b.CBWaitFront(cbW, kir.C(1))
			b.TileRegsAcquire()
			b.CopyTile(cbW, kir.C(0), kir.C(0))
			b.SFPUScalar(kir.SFPUAddScalar, kir.C(0), float32(offset))
			b.CBPopFront(cbW, kir.C(1))
			pack(cbWo)
		})
	}
	b.CBWaitFront(wCB, cWt)
	b.CBWaitFront(cbScaler, kir.C(1))
	b.For("r", kir.C(0), crows, func(kir.Var) {
		b.CBWaitFront(cbX, cWt)
		b.Comment("x^2")
		b.ReconfigDataFormat(cbX, cbX)
		b.PackReconfigDataFormat(cbSq)
		b.CopyTileInit(cbX)
		b.SFPUInit(kir.SFPUSquare)
		b.For("j", kir.C(0), cWt, func(j kir.Var) {
			b.TileRegsAcquire()
			b.CopyTile(cbX, j, kir.C(0))
			b.SFPU(kir.SFPUSquare, kir.C(0))
			pack(cbSq)
		})
		b.Comment("rsqrt(sum(x^2) / H + eps), in column 0")
		b.CBWaitFront(cbSq, cWt)
		b.ReconfigDataFormat(cbSq, cbScaler)
		b.PackReconfigDataFormat(cbRs)
		b.ReduceInit(kir.ReduceSum, kir.ReduceRow, cbSq, cbScaler, cbRs)
		b.TileRegsAcquire()
		b.For("j", kir.C(0), cWt, func(j kir.Var) {
			b.ReduceTile(kir.ReduceSum, kir.ReduceRow, cbSq, cbScaler, j, kir.C(0), kir.C(0))
		})
		b.ReduceUninit()
		b.SFPUInit(kir.SFPUMulScalar)
		b.SFPUScalar(kir.SFPUMulScalar, kir.C(0), float32(1/float64(h)))
		b.SFPUInit(kir.SFPUAddScalar)
		b.SFPUScalar(kir.SFPUAddScalar, kir.C(0), float32(eps))
		b.SFPUInit(kir.SFPURsqrt)
		b.SFPU(kir.SFPURsqrt, kir.C(0))
		pack(cbRs)
		b.CBPopFront(cbSq, cWt)
		b.CBWaitFront(cbRs, kir.C(1))
		b.Comment("x * rsqrt (column broadcast) * weight (row broadcast)")
		b.For("j", kir.C(0), cWt, func(j kir.Var) {
			b.ReconfigDataFormat(cbX, cbRs)
			b.PackReconfigDataFormat(cbXn)
			b.BcastInit(kir.EltMul, kir.BcastCols, cbX, cbRs)
			b.TileRegsAcquire()
			b.BcastTiles(kir.EltMul, kir.BcastCols, cbX, cbRs, j, kir.C(0), kir.C(0))
			pack(cbXn)
			b.CBWaitFront(cbXn, kir.C(1))
			b.ReconfigDataFormat(cbXn, wCB)
			b.PackReconfigDataFormat(cbOut)
			b.BcastInit(kir.EltMul, kir.BcastRows, cbXn, wCB)
			b.TileRegsAcquire()
			b.BcastTiles(kir.EltMul, kir.BcastRows, cbXn, wCB, kir.C(0), j, kir.C(0))
			pack(cbOut)
			b.CBPopFront(cbXn, kir.C(1))
		})
		b.CBPopFront(cbRs, kir.C(1))
		b.CBPopFront(cbX, cWt)
	})
	b.CBPopFront(wCB, cWt)
	b.CBPopFront(cbScaler, kir.C(1))

	// Writer.
	wr := newWriter(p, rs)
	oAddr := wr.CommonArg("out_addr", kir.BufferAddr(ctx.BufferName(out), 0))
	wWt := wr.CompileArg("wt", uint32(wt))
	wstart, wrows := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
	b = wr.Builder()
	b.For("i", kir.C(0), kir.Mul(wrows, wWt), func(i kir.Var) {
		writePage(b, t, cbOut, oAddr, kir.Add(kir.Mul(wstart, wWt), i), out.Type.DType.TileBytes())
	})

	for i, c := range cores {
		s, n := plan.Range(i)
		rd.SetRuntimeArgs(c, kir.U32(uint32(s)), kir.U32(uint32(n)))
		cp.SetRuntimeArgs(c, kir.U32(uint32(n)))
		wr.SetRuntimeArgs(c, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
	return p, nil
}

// checkL1 fails with a clear message when the CBs of p on one core do not
// fit the L1 budget (all CBs of a lowering share the same cores).
func checkL1(p *kir.Program, ctx *Context, what string) error {
	used := 0
	for _, cb := range p.CBs {
		used += target.AlignUp(cb.Bytes(), ctx.Target.L1Align)
	}
	if used > ctx.Target.L1Budget() {
		return fmt.Errorf("rule l1-budget: %s: its CBs need %d bytes per core, the L1 budget is %d bytes", what, used, ctx.Target.L1Budget())
	}
	return nil
}
