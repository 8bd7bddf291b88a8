package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// gdn_recurrence: see the package's GDN doc in fused_gdn.go.

// gdnRecurrenceAttrs reads the four float attributes.
func gdnRecurrenceAttrs(op *ir.Op) (l2Eps, l2Scale, scale, normEps float32, err error) {
	var v [4]float32
	for i, name := range []string{"l2_eps", "l2_scale", "scale", "norm_eps"} {
		f, ok := op.Attrs[name].(float64)
		if !ok {
			return 0, 0, 0, 0, fmt.Errorf("rule attr: %s needs a float attribute %q", op.Name(), name)
		}
		v[i] = float32(f)
	}
	return v[0], v[1], v[2], v[3], nil
}

func lowerGDNRecurrence(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	x, beta, g, s, zv, nw := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Operands[4], op.Operands[5]
	out, ns := op.Results[0], op.Results[1]
	for _, v := range append(append([]*ir.Value(nil), op.Operands...), op.Results...) {
		if err := requireTile("value", v); err != nil {
			return nil, err
		}
	}
	l2Eps, l2Scale, scale, normEps, err := gdnRecurrenceAttrs(op)
	if err != nil {
		return nil, err
	}
	ss, xs := s.Type.Shape, x.Type.Shape
	if ss.Rank() != 4 || xs.Rank() != 3 || xs[0] != ss[0] || xs[1] != 1 {
		return nil, fmt.Errorf("rule gdn-recurrence-shape: want state [B, H, Dk, Dv] and qkv [B, 1, C], got %s and %s", ss, xs)
	}
	B, H, Dk, Dv, C := ss[0], ss[1], ss[2], ss[3], xs[2]
	if Dk%ir.TileSize != 0 || Dv%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule gdn-recurrence-head-dim: key dim %d and value dim %d must be multiples of %d (heads are whole tiles)", Dk, Dv, ir.TileSize)
	}
	kw2 := C - H*Dv
	if kw2 <= 0 || kw2%(2*Dk) != 0 || H%(kw2/(2*Dk)) != 0 {
		return nil, fmt.Errorf("rule gdn-recurrence-heads: qkv has %d channels; want 2*Hk*%d + %d*%d with Hk dividing %d", C, Dk, H, Dv, H)
	}
	kw := kw2 / 2
	G := H / (kw / Dk)
	f := s.Type.DType
	if f != ir.BF16 && f != ir.FP32 {
		return nil, fmt.Errorf("rule gdn-recurrence-state-dtype: state %s is %s; the recurrence rounds to the state's dtype element by element, which needs bf16 or fp32", s, f)
	}
	if ns.Type.DType != f {
		return nil, fmt.Errorf("rule gdn-recurrence-state-dtype: new state is %s but the state is %s", ns.Type.DType, f)
	}
	ebX, err := gdnEB("qkv", x)
	if err != nil {
		return nil, err
	}
	ebZ, err := gdnEB("z", zv)
	if err != nil {
		return nil, err
	}
	ebBeta, err := gdnEB("beta", beta)
	if err != nil {
		return nil, err
	}
	ebG, err := gdnEB("g", g)
	if err != nil {
		return nil, err
	}
	ebW := blocks.ElemBytes(nw.Type.DType) // 0: read whole pages
	if ebW != 2 && ebW != 4 {
		ebW = 0
	}
	dz := zv.Type.DType
	kt, vt := Dk/ir.TileSize, Dv/ir.TileSize
	ctx3 := C / ir.TileSize // qkv tiles per user row
	ctz := H * vt           // z and out tiles per user row

	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	// One item is vc value tiles of one head: the whole head (vc = vt),
	// or, while the grid has a core for every value tile of every head,
	// one value tile, a group of vt cores per head that exchange the
	// output norm's partial sums (see the GDN doc).
	vc := vt
	if vt > 1 && B*H*vt <= t.NumWorkers() && !blocks.Rounds(f) {
		vc = 1 // fp32 state only: the exchange's fp32 tiles share the new-state CB
	}
	groups := vt / vc // cores per head
	items := B * H * groups
	// One item is ~4*Kt*vc tile products plus reading and writing its
	// state: far above a core's dispatch cost, so one item per core.
	perItem := 4*kt*vc*MatmulTileCycles(ctx.Fidelity) + 2*kt*vc*f.TileBytes()/NoCBytesPerCycle
	plan := PlanSplit(items, t.NumWorkers(), perItem, 0, 0)
	if groups > 1 {
		// The cores of a head exchange partial sums once per program:
		// each holds exactly one item.
		plan = Split{Items: items, Cores: items, PerCore: 1}
	}
	cores, rs := firstCores(t, plan.Cores)

	cbs := blocks.NewCBPlan(p, t, rs)
	dx := x.Type.DType
	cbQ := cbs.Input("q", dx, kt)
	cbQ2 := cbs.Input("q_copy", dx, kt)
	cbK := cbs.Input("k", dx, kt)
	cbK2 := cbs.Input("k_copy", dx, kt)
	cbV := cbs.Input("v", dx, vc)
	cbZ := cbs.Input("z", dz, vc)
	cbW := cbs.Input("norm_w", nw.Type.DType, vc)
	cbBeta := cbs.Input("beta", beta.Type.DType, 1)
	cbG := cbs.Input("g", g.Type.DType, 1)
	cbS := cbs.Input("state", f, 2*gdnStateBatch)
	zeroBytes := max(dx.TileBytes(), dz.TileBytes())
	cbZero := cbs.Pages(blocks.ScratchCB, "zeros", dx, zeroBytes, 1)
	cbR := cbs.Scratch("rsqrt", ir.FP32, 1)
	cbQn := cbs.Scratch("q_normed", f, kt)
	cbKn := cbs.Scratch("k_normed", f, kt)
	cbKc := cbs.Scratch("k_column", f, kt)
	cbEg := cbs.Scratch("exp_g", f, 1)
	cbSd := cbs.Scratch("state_decayed", f, kt*vc)
	cbD := cbs.Scratch("delta", f, vc)
	exact := !blocks.Rounds(f) // fp32 state: the r() of the Doc line are identities
	cbDb, cbKS, cbOuter, cbOb, cbRound, cbEye, cbEd, cbSf, cbSdF := -1, -1, -1, -1, -1, -1, -1, -1, -1
	if exact {
		// The state is copied into DEST exactly (c_state unpacks straight
		// to DEST) and multiplied by the decrement through the FPU: a
		// second CB holds the same tiles for the FPU operand.
		cbSf = cbs.Input("state_fpu", f, 2*gdnStateBatch)
		cbSdF = cbs.Scratch("state_decayed_fpu", f, kt*vc)
		cbDb = cbs.Scratch("delta_beta", f, vc)
		cbEye = cbs.Input("identity", f, 1)
		cbEd = cbs.Scratch("decrement_diag", f, 1)
	} else {
		cbKS = cbs.Scratch("k_state", f, 1)
		cbOuter = cbs.Scratch("outer", f, 1)
		cbOb = cbs.Scratch("outer_beta", f, 1)
		cbRound = cbs.Scratch("round", f, 1)
	}
	cbSp := cbs.Scratch("state_new_column", f, kt)
	cbO := cbs.Scratch("o", f, vc)
	cbO2 := cbs.Scratch("o_copy", f, vc)
	cbOn1, cbOn := -1, -1
	if vc < vt {
		// One fp32 CB of two pages carries o_scaled and then o_normed (the
		// program's CBs are at the 32 limit with the exchange).
		cbOn1 = cbs.Scratch("o_scaled_normed", ir.FP32, 2)
		cbOn = cbOn1
	} else {
		cbOn1 = cbs.Scratch("o_scaled", ir.FP32, 1)
		cbOn = cbs.Scratch("o_normed", f, 1)
	}
	cbSz := cbs.Scratch("silu_z", dz, 1)
	cbSout := cbs.Output("new_state", f, kt) // a value column of S', written under one barrier
	cbOut := cbs.Output("out", out.Type.DType, vc)
	// The output norm's exchange between the cores of a head (groups > 1):
	// the norm-split exchange of norm_split.go on groups of vt cores.
	// The partial sum and the leader's rsqrt tile (fp32, compute ->
	// writer) follow the S' tiles through the new-state CB, in that order.
	var xch *multicore.Exchange
	cbRsOut := cbR
	if groups > 1 {
		xch = &multicore.Exchange{T: t, Group: groups, Cores: cores, Ranges: rs, Page: ir.FP32.TileBytes(), Bytes: rowSumBytes(1), // o is one row
			PartialName: "partial sums (column 0 of its live rows)", ResultName: "rsqrt tile"}
		xch.Result = cbs.Input("rsqrt_out", ir.FP32, 1)
		xch.Partial, xch.Local = cbSout, cbSout
		xch.Gather = cbs.Input("group_partial_sums", ir.FP32, groups)
		cbRsOut = xch.Result
	}
	if err := cbs.Err(fmt.Sprintf("gdn_recurrence keeps a %dx%d state of %s per head (%d value tiles per core)", Dk, Dv, f, vc)); err != nil {
		return nil, err
	}
	if xch != nil {
		xch.AddSemaphores(p, 0, 1)
	}

	// Reader.
	rd := newReader(p, rs)
	xAcc, err := accessOf(ctx, rd, "qkv_addr", x)
	if err != nil {
		return nil, err
	}
	zAcc, err := accessOf(ctx, rd, "z_addr", zv)
	if err != nil {
		return nil, err
	}
	wAcc, err := accessOf(ctx, rd, "norm_w_addr", nw)
	if err != nil {
		return nil, err
	}
	btAcc, err := accessOf(ctx, rd, "beta_addr", beta)
	if err != nil {
		return nil, err
	}
	gAcc, err := accessOf(ctx, rd, "g_addr", g)
	if err != nil {
		return nil, err
	}
	sAcc, err := accessOf(ctx, rd, "state_addr", s)
	if err != nil {
		return nil, err
	}
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	zeros := blocks.Scratch(b, cbZero, "zeros")
	blocks.FillWords(b, zeros, zeroBytes, 0)
	// Per item, one DRAM batch of the small inputs: the live row of q, k,
	// v, z and the norm weight (rows 1..31 cleared afterwards) and the 64
	// bytes of the beta and g tiles that hold the item's scalar, all in
	// flight under one barrier; the local clears and copies under a second
	// and third; then the state, streamed while compute normalises q and k.
	type rowTiles struct {
		acc     *blocks.Access
		cb, cb2 int
		first   kir.Expr
		n, eb   int // eb 0: whole pages, not cleared
		l1, l1b kir.Var
	}
	type scalar struct {
		acc *blocks.Access
		cb  int
		eb  int
		l1  kir.Var
		r   kir.Var
	}
	b.For("i", rstart, kir.Add(rstart, rcount), func(i kir.Var) {
		head := b.Let("head", kir.Div(i, kir.Ci(groups))) // b*H + h
		v0 := b.Let("v0", kir.Mul(kir.Mod(i, kir.Ci(groups)), kir.Ci(vc)))
		u := b.Let("u", kir.Div(head, kir.Ci(H)))
		h := b.Let("h", kir.Mod(head, kir.Ci(H)))
		xrow := b.Let("xrow", kir.Mul(u, kir.Ci(ctx3)))
		qt := b.Let("qt", kir.Add(xrow, kir.Mul(kir.Div(h, kir.Ci(G)), kir.Ci(kt))))
		b.Comment("the live row of q and k of key head h/G, v of value head h (tiles of the packed conv output), z and the norm weight; the scalars' 64 bytes; all in flight")
		vt0 := b.Let("vt0", kir.Add(kir.Add(kir.Mul(h, kir.Ci(vt)), kir.Ci(2*kw/ir.TileSize)), v0))
		zt := b.Let("zt", kir.Add(kir.Add(kir.Mul(u, kir.Ci(ctz)), kir.Mul(h, kir.Ci(vt))), v0))
		ts := []*rowTiles{
			{acc: xAcc, cb: cbQ, cb2: cbQ2, first: qt, n: kt, eb: ebX},
			{acc: xAcc, cb: cbK, cb2: cbK2, first: kir.Add(qt, kir.Ci(kw/ir.TileSize)), n: kt, eb: ebX},
			{acc: xAcc, cb: cbV, cb2: -1, first: kir.Add(xrow, vt0), n: vc, eb: ebX},
			{acc: zAcc, cb: cbZ, cb2: -1, first: zt, n: vc, eb: ebZ},
			{acc: wAcc, cb: cbW, cb2: -1, first: v0, n: vc, eb: ebW},
		}
		for _, rt := range ts {
			b.CBReserveBack(rt.cb, kir.Ci(rt.n))
			rt.l1 = b.Let("row", kir.GetWritePtr{CB: rt.cb})
			for j := 0; j < rt.n; j++ {
				blocks.ReadTileLive(b, rt.acc, kir.Add(rt.first, kir.Ci(j)), kir.Add(rt.l1, kir.Ci(j*rt.acc.PageSize())), 1, rt.eb)
			}
		}
		// scalars: element (head%32, 0) of column tensor acc, moved to (0, 0)
		// for a scalar broadcast after the barrier.
		scs := []*scalar{{acc: btAcc, cb: cbBeta, eb: ebBeta}, {acc: gAcc, cb: cbG, eb: ebG}}
		for _, sc := range scs {
			b.CBReserveBack(sc.cb, kir.C(1))
			sc.l1 = b.Let("sc", kir.GetWritePtr{CB: sc.cb})
			sc.r = b.Let("sr", kir.Mod(head, kir.Ci(ir.TileSize)))
			off := b.Let("soff", kir.And(blocks.FaceOffset(sc.r, kir.C(0), sc.eb), kir.C(^uint32(63))))
			b.NoCAsyncRead(sc.acc.PageAddrAtExpr(kir.Div(head, kir.Ci(ir.TileSize)), off), kir.Add(sc.l1, off), kir.C(64))
		}
		sbase := b.Let("sbase", kir.Add(kir.Mul(head, kir.Ci(kt*vt)), v0))
		page := func(j kir.Expr) kir.Expr {
			if vc == vt {
				return kir.Add(sbase, j)
			}
			return kir.Add(sbase, kir.Add(kir.Mul(kir.Div(j, kir.Ci(vc)), kir.Ci(vt)), kir.Mod(j, kir.Ci(vc))))
		}
		b.NoCAsyncReadBarrier()
		for _, rt := range ts {
			for j := 0; j < rt.n && rt.eb != 0; j++ {
				blocks.ClearRows(b, kir.Add(rt.l1, kir.Ci(j*rt.acc.PageSize())), zeros, 1, rt.eb)
			}
		}
		for _, rt := range ts {
			if rt.cb2 >= 0 {
				b.CBReserveBack(rt.cb2, kir.Ci(rt.n))
				rt.l1b = b.Let("row2", kir.GetWritePtr{CB: rt.cb2})
			}
		}
		for _, sc := range scs {
			b.If(kir.Ne(sc.r, kir.C(0)), func() { blocks.MoveElem(b, sc.l1, sc.r, kir.C(0), sc.l1, kir.C(0), kir.C(0), sc.eb) })
		}
		b.NoCAsyncReadBarrier()
		// The copies after the clears: they copy the cleared tiles.
		for _, rt := range ts {
			if rt.cb2 >= 0 {
				blocks.LocalCopy(b, rt.l1, rt.l1b, rt.n*rt.acc.PageSize())
			}
		}
		b.NoCAsyncReadBarrier()
		for _, rt := range ts {
			if rt.cb2 >= 0 {
				b.CBPushBack(rt.cb2, kir.Ci(rt.n))
			}
			b.CBPushBack(rt.cb, kir.Ci(rt.n))
		}
		for _, sc := range scs {
			b.CBPushBack(sc.cb, kir.C(1))
		}
		b.Comment("the item's state tiles (row j, value tiles v0..), streamed")
		if exact {
			blocks.ReadPagesTwiceBatchOf(b, sAcc, cbS, cbSf, kir.Ci(kt*vc), gdnStateBatch, page)
		} else {
			blocks.ReadPagesInBatchesOf(b, sAcc, cbS, kir.Ci(kt*vc), gdnStateBatch, page)
		}
	})
	blocks.ReleaseScratch(b, cbZero)

	// Compute.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	ccount := cp.RuntimeArg("count")
	var cleader kir.ArgRef
	if xch != nil {
		cleader = cp.RuntimeArg("leader")
	}
	c := blocks.NewCompute(p, cp)
	cb := c.B
	one, z0 := kir.C(1), kir.C(0)
	sfpu := func(op kir.SFPUOp, param float32) { c.SFPU(blocks.SFPUStep{Op: op, Param: param}, z0) }
	roundTo := func() {
		if !exact {
			c.RoundThrough(cbRound)
		}
	}
	// rsqrtOf: DEST[0](0,0) = sum over the n tiles of a of a^2 (a times the
	// transpose of its copy a2), then rsqrt(sum * inv + eps) packed to cbR
	// and waited for. a and a2 stay at the front.
	rsqrtOf := func(a, a2, n int, inv, eps float32) {
		cb.CBWaitFront(a, kir.Ci(n))
		cb.CBWaitFront(a2, kir.Ci(n))
		c.Acquire()
		c.ForPeeled("t", n, func(j kir.Expr) { c.Matmul(a, a2, j, j, z0, true) })
		sfpu(kir.SFPUMulScalar, inv)
		sfpu(kir.SFPUAddScalar, eps)
		sfpu(kir.SFPURsqrt, 0)
		c.PackOut(cbR, 1)
		cb.CBWaitFront(cbR, one)
	}
	c.Startup(cbQ, cbQ2, cbR)
	if exact {
		cb.CBWaitFront(cbEye, one)
	}
	c.For("i", z0, ccount, func(kir.Var) {
		cb.Comment("q = r(r(r(q * rsqrt(mean(q^2) + l2_eps)) * l2_scale) * scale)")
		rsqrtOf(cbQ, cbQ2, kt, 1/float32(Dk), l2Eps)
		c.ForPeeled("kt", kt, func(j kir.Expr) {
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastScalar, cbQ, cbR, j, z0, z0)
			roundTo()
			sfpu(kir.SFPUMulScalar, l2Scale)
			roundTo()
			sfpu(kir.SFPUMulScalar, scale)
			c.PackOut(cbQn, 1)
		})
		cb.CBPopFront(cbR, one)
		cb.CBPopFront(cbQ, kir.Ci(kt))
		cb.CBPopFront(cbQ2, kir.Ci(kt))

		cb.Comment("k = r(r(k * rsqrt(mean(k^2) + l2_eps)) * l2_scale), and k as column tiles")
		rsqrtOf(cbK, cbK2, kt, 1/float32(Dk), l2Eps)
		c.ForPeeled("kt", kt, func(j kir.Expr) {
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastScalar, cbK, cbR, j, z0, z0)
			roundTo()
			sfpu(kir.SFPUMulScalar, l2Scale)
			c.PackOut(cbKn, 1)
		})
		cb.CBPopFront(cbR, one)
		cb.CBPopFront(cbK, kir.Ci(kt))
		cb.CBPopFront(cbK2, kir.Ci(kt))
		cb.CBWaitFront(cbKn, kir.Ci(kt))
		c.ForPeeled("kt", kt, func(j kir.Expr) {
			c.Acquire()
			c.Transpose(cbKn, j, z0)
			c.PackOut(cbKc, 1)
		})

		cb.Comment("S = r(state * r(exp(g)))")
		if exact {
			// S + S x diag(exp(g) - 1): the state is copied into DEST
			// exactly and only the decrement is read through the tf32
			// source registers, so truncation costs |exp(g) - 1| * 2^-10
			// of S per step instead of 2^-10 (which would shrink a state
			// that barely decays by a fixed fraction every step).
			c.Unary(cbG, cbEg, []blocks.SFPUStep{{Op: kir.SFPUExp}, {Op: kir.SFPUAddScalar, Param: -1}})
			c.BinaryTileKeepA(kir.EltMul, blocks.BcastScalar, cbEye, cbEg, cbEd)
			cb.CBWaitFront(cbEd, one)
			c.ForPeeled("t", kt*vc, func(kir.Expr) {
				cb.CBWaitFront(cbS, one)
				cb.CBWaitFront(cbSf, one)
				c.Acquire()
				c.Copy(cbS, z0, z0)
				c.Matmul(cbSf, cbEd, z0, z0, z0, false)
				cb.CBPopFront(cbS, one)
				cb.CBPopFront(cbSf, one)
				c.PackOutTo(cbSd, cbSdF) // copied exactly below; read by the FPU in k^T S
			})
			cb.CBPopFront(cbEd, one)
		} else {
			c.Unary(cbG, cbEg, []blocks.SFPUStep{{Op: kir.SFPUExp}})
			cb.CBWaitFront(cbEg, one)
			c.ForPeeled("t", kt*vc, func(kir.Expr) {
				cb.CBWaitFront(cbS, one)
				c.Acquire()
				c.Binary(kir.EltMul, blocks.BcastScalar, cbS, cbEg, z0, z0, z0)
				cb.CBPopFront(cbS, one)
				c.PackOut(cbSd, 1)
			})
			cb.CBPopFront(cbEg, one)
		}

		cb.Comment("d = r(v - r(k^T S)) per value tile")
		cb.CBWaitFront(cbSd, kir.Ci(kt*vc))
		cbSdM := cbSd // the decayed state as an FPU operand
		if exact {
			cbSdM = cbSdF
			cb.CBWaitFront(cbSdF, kir.Ci(kt*vc))
		}
		cb.CBWaitFront(cbV, kir.Ci(vc))
		// kS accumulates k^T S for value tile v into DEST[0].
		kS := func(v kir.Expr) {
			c.ForPeeled("kt", kt, func(j kir.Expr) {
				c.Matmul(cbKn, cbSdM, j, kir.Add(kir.Mul(j, kir.Ci(vc)), v), z0, false)
			})
		}
		c.ForPeeled("vt", vc, func(v kir.Expr) {
			c.Acquire()
			if exact {
				// -(-v + k^T S): no fp32 value is read back through
				// the tf32 source registers.
				c.Copy(cbV, v, z0)
				sfpu(kir.SFPUNegative, 0)
				kS(v)
				sfpu(kir.SFPUNegative, 0)
				c.PackOut(cbD, 1)
				return
			}
			kS(v)
			c.PackOut(cbKS, 1)
			cb.CBWaitFront(cbKS, one)
			c.Acquire()
			c.Binary(kir.EltSub, blocks.BcastNone, cbV, cbKS, v, z0, z0)
			cb.CBPopFront(cbKS, one)
			c.PackOut(cbD, 1)
		})
		cb.CBPopFront(cbV, kir.Ci(vc))

		cb.Comment("S' = r(S + r(r(k d^T) * beta)), o = r(q^T S'), column by column")
		cb.CBWaitFront(cbD, kir.Ci(vc))
		cb.CBWaitFront(cbBeta, one)
		cb.CBWaitFront(cbKc, kir.Ci(kt))
		cb.CBWaitFront(cbQn, kir.Ci(kt))
		if exact {
			c.ForPeeled("vt", vc, func(v kir.Expr) {
				c.Acquire()
				c.Binary(kir.EltMul, blocks.BcastScalar, cbD, cbBeta, v, z0, z0)
				c.PackOut(cbDb, 1)
			})
			cb.CBWaitFront(cbDb, kir.Ci(vc))
		}
		c.For("vt", z0, kir.Ci(vc), func(v kir.Var) {
			c.ForPeeled("kt", kt, func(j kir.Expr) {
				sd := kir.Add(kir.Mul(j, kir.Ci(vc)), v)
				c.Acquire()
				if exact {
					// S + k (x) (d * beta), accumulated onto S in DEST.
					c.Copy(cbSd, sd, z0)
					c.Matmul(cbKc, cbDb, j, v, z0, false)
				} else {
					c.Matmul(cbKc, cbD, j, v, z0, false)
					c.PackOut(cbOuter, 1)
					cb.CBWaitFront(cbOuter, one)
					c.Acquire()
					c.Binary(kir.EltMul, blocks.BcastScalar, cbOuter, cbBeta, z0, z0, z0)
					cb.CBPopFront(cbOuter, one)
					c.PackOut(cbOb, 1)
					cb.CBWaitFront(cbOb, one)
					c.Acquire()
					c.Binary(kir.EltAdd, blocks.BcastNone, cbSd, cbOb, sd, z0, z0)
					cb.CBPopFront(cbOb, one)
				}
				c.PackOutTo(cbSout, cbSp)
			})
			cb.CBWaitFront(cbSp, kir.Ci(kt))
			c.Acquire()
			c.ForPeeled("kt", kt, func(j kir.Expr) { c.Matmul(cbQn, cbSp, j, j, z0, false) })
			cb.CBPopFront(cbSp, kir.Ci(kt))
			c.PackOutTo(cbO, cbO2)
		})
		if exact {
			cb.CBPopFront(cbDb, kir.Ci(vc))
		}
		cb.CBPopFront(cbD, kir.Ci(vc))
		cb.CBPopFront(cbBeta, one)
		cb.CBPopFront(cbKc, kir.Ci(kt))
		cb.CBPopFront(cbQn, kir.Ci(kt))
		cb.CBPopFront(cbKn, kir.Ci(kt))
		cb.CBPopFront(cbSd, kir.Ci(kt*vc))
		if exact {
			cb.CBPopFront(cbSdF, kir.Ci(kt*vc))
		}

		cb.Comment("out = r_z(r_z(silu(z)) * r(rmsnorm(o) * norm_w))")
		if xch == nil {
			rsqrtOf(cbO, cbO2, vc, 1/float32(Dv), normEps)
		} else {
			cb.Comment("the head's sum(o^2) over its cores: this core's partial to the writer, the leader adds them (SFPU, fp32) and the writer broadcasts rsqrt")
			cb.CBWaitFront(cbO, kir.Ci(vc))
			cb.CBWaitFront(cbO2, kir.Ci(vc))
			c.Acquire()
			c.ForPeeled("t", vc, func(j kir.Expr) { c.Matmul(cbO, cbO2, j, j, z0, true) })
			c.PackOut(xch.Partial, 1)
			xch.Combine(c, cleader, "", func() {
				sfpu(kir.SFPUMulScalar, 1/float32(Dv))
				sfpu(kir.SFPUAddScalar, normEps)
				sfpu(kir.SFPURsqrt, 0)
			})
			cb.CBWaitFront(cbRsOut, one)
		}
		cb.CBWaitFront(cbW, kir.Ci(vc))
		cb.CBWaitFront(cbZ, kir.Ci(vc))
		c.ForPeeled("vt", vc, func(v kir.Expr) {
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastScalar, cbO, cbRsOut, v, z0, z0)
			c.PackOut(cbOn1, 1)
			cb.CBWaitFront(cbOn1, one)
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastRows, cbOn1, cbW, z0, v, z0)
			cb.CBPopFront(cbOn1, one)
			c.PackOut(cbOn, 1)
			c.Acquire()
			c.Copy(cbZ, v, z0)
			sfpu(kir.SFPUSiLU, 0)
			c.PackOut(cbSz, 1)
			c.BinaryTile(kir.EltMul, blocks.BcastNone, cbSz, cbOn, cbOut, false, nil)
		})
		cb.CBPopFront(cbRsOut, one)
		cb.CBPopFront(cbO, kir.Ci(vc))
		cb.CBPopFront(cbO2, kir.Ci(vc))
		cb.CBPopFront(cbW, kir.Ci(vc))
		cb.CBPopFront(cbZ, kir.Ci(vc))
	})
	if exact {
		cb.CBPopFront(cbEye, one)
	}

	// Writer.
	wr := newWriter(p, rs)
	nsAcc, err := accessOf(ctx, wr, "new_state_addr", ns)
	if err != nil {
		return nil, err
	}
	oAcc, err := accessOf(ctx, wr, "out_addr", out)
	if err != nil {
		return nil, err
	}
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	var ea multicore.ExchangeArgs
	if xch != nil {
		ea = xch.Declare(wr)
	}
	w := wr.Builder()
	if exact {
		// The writer is idle until the first new state tile, so it builds
		// the identity while the reader's first reads are in flight.
		w.Comment("the identity tile (fp32)")
		w.CBReserveBack(cbEye, kir.C(1))
		eye := w.Let("eye", kir.GetWritePtr{CB: cbEye})
		blocks.FillWords(w, eye, f.TileBytes(), 0)
		w.For("d", kir.C(0), kir.Ci(ir.TileSize), func(d kir.Var) {
			w.L1Write32(kir.Add(eye, blocks.FaceOffset(d, d, 4)), kir.C(blocks.FillWord(ir.FP32, 1)))
		})
		w.CBPushBack(cbEye, kir.C(1))
	}
	w.For("i", wstart, kir.Add(wstart, wcount), func(i kir.Var) {
		head := w.Let("head", kir.Div(i, kir.Ci(groups)))
		v0 := w.Let("v0", kir.Mul(kir.Mod(i, kir.Ci(groups)), kir.Ci(vc)))
		base := w.Let("sbase", kir.Add(kir.Mul(head, kir.Ci(kt*vt)), v0))
		w.For("vt", kir.C(0), kir.Ci(vc), func(v kir.Var) {
			blocks.WritePagesBatch(w, nsAcc, cbSout, kir.Ci(kt), func(j kir.Expr) kir.Expr { return kir.Add(base, kir.Add(kir.Mul(j, kir.Ci(vt)), v)) })
		})
		if xch != nil {
			xch.Emit(w, ea)
		}
		ot := w.Let("ot", kir.Add(kir.Add(kir.Mul(kir.Div(head, kir.Ci(H)), kir.Ci(ctz)), kir.Mul(kir.Mod(head, kir.Ci(H)), kir.Ci(vt))), v0))
		blocks.WritePagesBatch(w, oAcc, cbOut, kir.Ci(vc), func(j kir.Expr) kir.Expr { return kir.Add(ot, j) })
	})

	for i, core := range cores {
		st, n := plan.Range(i)
		rd.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)))
		wv := []kir.ArgValue{kir.U32(uint32(st)), kir.U32(uint32(n))}
		if xch == nil {
			cp.SetRuntimeArgs(core, kir.U32(uint32(n)))
		} else {
			ex, err := xch.Values(i, wr.NoC)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op.Name(), err)
			}
			cp.SetRuntimeArgs(core, kir.U32(uint32(n)), ex[0]) // ex[0]: leader
			wv = append(wv, ex...)
		}
		wr.SetRuntimeArgs(core, wv...)
	}
	return p, nil
}

// gdnStateBatch is the number of state pages the recurrence's reader
// moves per barrier (its state CBs hold two such blocks).
const gdnStateBatch = 4
