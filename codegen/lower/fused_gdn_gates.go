package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// lowerGDNPrefillGates: gdn_prefill_gates (passes/fuse_gdn_gates.go), the
// GDN prefill's gates per token in one program. The tile rows of a and b
// ([B, S, H]: B * ceil(S/32) rows of Ct = ceil(H/32) tiles) are split over
// the grid. Each core first reads the Ct tiles of a_log and dt_bias and
// computes -exp(a_log) once (copy into fp32 DEST, exp, multiply by -1 on
// the SFPU, packed to fp32 as the composed chain stores it), holding it
// and dt_bias through its rows. Per tile, as the composed ops compute it:
//
//	g    = (softplus(a + bcast_rows(dt_bias))) * bcast_rows(-exp(a_log))   FPU add, SFPU softplus, fp32 pack, FPU multiply
//	beta = sigmoid(b), rounded to b's dtype (RoundThrough), packed as fp32
//
// The operands' composed typecasts to fp32 widen exactly, so the FPU and
// copy read the stored bf16 tiles with the same values. Results g and beta
// go to their own pages (the operands' page numbers).
func lowerGDNPrefillGates(op *ir.Op, ctx *Context) (*kir.Program, error) {
	if len(op.Operands) != 4 || len(op.Results) != 2 {
		return nil, fmt.Errorf("rule gdn-prefill-gates-results: %s wants 4 operands and 2 results, has %d and %d", op.Name(), len(op.Operands), len(op.Results))
	}
	a, bv, al, dt := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3]
	g, beta := op.Results[0], op.Results[1]
	if err := requireTiles(a, bv, al, dt, g, beta); err != nil {
		return nil, err
	}
	s := a.Type.Shape
	if s.Rank() != 3 || !bv.Type.Shape.Equal(s) || !g.Type.Shape.Equal(s) || !beta.Type.Shape.Equal(s) {
		return nil, fmt.Errorf("rule gdn-prefill-gates-shape: a %s, b %s and the results %s, %s must all be [B, S, H]", s, bv.Type.Shape, g.Type.Shape, beta.Type.Shape)
	}
	H := s[2]
	if al.Type.Shape.Numel() != H || dt.Type.Shape.Numel() != H {
		return nil, fmt.Errorf("rule gdn-gates-vectors: a_log %s and dt_bias %s must have %d elements (a's last dim)", al.Type.Shape, dt.Type.Shape, H)
	}
	if g.Type.DType != ir.FP32 || beta.Type.DType != ir.FP32 {
		return nil, fmt.Errorf("rule gdn-prefill-gates-dtype: results must be fp32, got g %s and beta %s", g.Type.DType, beta.Type.DType)
	}
	im := blocks.ImageOf(s)
	ct := im.Ct
	if v := blocks.ImageOf(ir.Shape{1, H}); v.Ct != ct || blocks.ImageOf(al.Type.Shape).Ct != ct || blocks.ImageOf(dt.Type.Shape).Ct != ct ||
		al.Type.Shape.Rows2D() != 1 || dt.Type.Shape.Rows2D() != 1 {
		return nil, fmt.Errorf("rule gdn-gates-vectors: a_log %s and dt_bias %s must be one row of %d tiles", al.Type.Shape, dt.Type.Shape, ct)
	}
	rows := im.B * im.Rt
	softplus, sigmoid := sfpuOps[ir.OpSoftplus], sfpuOps[ir.OpSigmoid]
	exp, neg := sfpuOps[ir.OpExp], sfpuOps[ir.OpMulScalar]
	tileCycles := 3*UnpackTileCycles + 2*EltwiseTileCycles + int(kir.SFPUTable[softplus].Cycles+kir.SFPUTable[sigmoid].Cycles) + 3*PackTileCycles
	setup := ct * (2*UnpackTileCycles + int(kir.SFPUTable[exp].Cycles+kir.SFPUTable[neg].Cycles) + PackTileCycles)
	sp := startProgram(op, ctx, PlanSplit(rows, ctx.Target.NumWorkers(), ct*tileCycles, setup, 0))
	bdt := bv.Type.DType
	cbA := sp.cbs.Input("a", a.Type.DType, 2)
	cbB := sp.cbs.Input("b", bdt, 2)
	cbALog := sp.cbs.Input("a_log", al.Type.DType, ct)
	cbDt := sp.cbs.Input("dt_bias", dt.Type.DType, ct)
	cbG := sp.cbs.Output("g", ir.FP32, 2)
	cbBeta := sp.cbs.Output("beta", ir.FP32, 2)
	cbNegA := sp.cbs.Scratch("neg_exp_a_log", ir.FP32, ct)
	cbSp := sp.cbs.Scratch("softplus", ir.FP32, 1)
	cbRound := -1
	if blocks.Rounds(bdt) {
		cbRound = sp.cbs.Scratch("sigmoid_rounded", bdt, 1)
	}
	sp.planned("gdn_prefill_gates")

	// Reader: a_log and dt_bias once, then per tile row its a and b tiles
	// in pairs.
	rd := sp.reader()
	aAcc, bAcc := sp.bind(rd, "a_addr", a), sp.bind(rd, "b_addr", bv)
	alAcc, dtAcc := sp.bind(rd, "a_log_addr", al), sp.bind(rd, "dt_bias_addr", dt)
	rCt := rd.CompileArg("ct", uint32(ct))
	rstart, rrows := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	blocks.ReadPages(b, alAcc, cbALog, kir.C(0), rCt)
	blocks.ReadPages(b, dtAcc, cbDt, kir.C(0), rCt)
	b.For("r", kir.C(0), rrows, func(r kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(rstart, r), rCt))
		b.For("j", kir.C(0), rCt, func(j kir.Var) {
			blocks.ReadPage(b, aAcc, cbA, kir.Add(first, j))
			blocks.ReadPage(b, bAcc, cbB, kir.Add(first, j))
		})
	})

	cp, c, crows := sp.rangeCompute("num_rows")
	cb := c.B
	c.Startup(cbA, cbDt, cbG)
	cb.Comment("-exp(a_log) once, as the composed exp and mul_scalar(-1) compute it")
	cb.CBWaitFront(cbALog, kir.Ci(ct))
	for j := 0; j < ct; j++ {
		c.Acquire()
		c.Copy(cbALog, kir.Ci(j), kir.C(0))
		c.SFPUSteps([]blocks.SFPUStep{{Op: exp}, {Op: neg, Param: -1}}, kir.C(0))
		c.PackOut(cbNegA, 1)
	}
	cb.CBPopFront(cbALog, kir.Ci(ct))
	cb.CBWaitFront(cbNegA, kir.Ci(ct))
	cb.CBWaitFront(cbDt, kir.Ci(ct))
	c.For("r", kir.C(0), crows, func(kir.Var) {
		c.For("j", kir.C(0), kir.Ci(ct), func(j kir.Var) {
			cb.Comment("g = softplus(a + dt_bias) * -exp(a_log)")
			cb.CBWaitFront(cbA, kir.C(1))
			c.Acquire()
			c.Binary(kir.EltAdd, blocks.BcastRows, cbA, cbDt, kir.C(0), j, kir.C(0))
			c.SFPU(blocks.SFPUStep{Op: softplus}, kir.C(0))
			cb.CBPopFront(cbA, kir.C(1))
			c.PackOut(cbSp, 1)
			cb.CBWaitFront(cbSp, kir.C(1))
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastRows, cbSp, cbNegA, kir.C(0), j, kir.C(0))
			cb.CBPopFront(cbSp, kir.C(1))
			c.PackOut(cbG, 1)
			cb.Comment("beta = sigmoid(b), stored as b's dtype, widened to fp32")
			cb.CBWaitFront(cbB, kir.C(1))
			c.Acquire()
			c.Copy(cbB, kir.C(0), kir.C(0))
			c.SFPU(blocks.SFPUStep{Op: sigmoid}, kir.C(0))
			cb.CBPopFront(cbB, kir.C(1))
			if cbRound >= 0 {
				c.RoundThrough(cbRound)
			}
			c.PackOut(cbBeta, 1)
		})
	})
	cb.CBPopFront(cbNegA, kir.Ci(ct))
	cb.CBPopFront(cbDt, kir.Ci(ct))

	// Writer: per tile row, its g tiles then its beta tiles.
	wr := newWriter(sp.p, sp.rs)
	gAcc, betaAcc := sp.bind(wr, "g_addr", g), sp.bind(wr, "beta_addr", beta)
	wCt := wr.CompileArg("ct", uint32(ct))
	wstart, wrows := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
	b = wr.Builder()
	b.For("r", kir.C(0), wrows, func(r kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(wstart, r), wCt))
		b.For("j", kir.C(0), wCt, func(j kir.Var) {
			blocks.WritePages(b, gAcc, cbG, kir.Add(first, j), kir.C(1))
			blocks.WritePages(b, betaAcc, cbBeta, kir.Add(first, j), kir.C(1))
		})
	})

	sp.plan.SetArgs(sp.cores, rd, cp, wr)
	return sp.done(sp.p)
}
