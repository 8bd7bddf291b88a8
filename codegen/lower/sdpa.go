package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// sdpa_decode: for q [B, Hq, D] and the caches k, v [B, Hkv, L, D],
// out[b, h] = softmax_t<=pos_b(scale * q[b, h] . k[b, h/G, t]) . v[b, h/G, t],
// pos_b = pos[0] (pos [1]) or pos[b] (pos [B]): the reader of user b's
// core reads its word of pos's page.
//
// One core per user b. For each kv head j the program attends all Hq query
// rows of the user (one tile row: Hq <= 32) to head j and the writer keeps
// the rows of the heads of group j (GQA by addressing: no repeated k/v).
// Per kv head the compute kernel
//
//  1. computes score tiles S_t = scale * Q K_t^T over the D tiles
//     (matmul_tiles with in1 transposed, fp32 DEST) and adds the reader's
//     mask tile (0 for positions <= pos, -inf after), into a resident fp32
//     CB of Lt tiles;
//  2. takes the row maxima (reduce_tile<MAX, REDUCE_ROW>), exponentiates
//     S_t - max (sub_tiles_bcast_cols, exp), sums the rows
//     (reduce_tile<SUM, REDUCE_ROW>), takes the reciprocal and scales the
//     probabilities (mul_tiles_bcast_cols);
//  3. accumulates P V over the Lt tiles for each of the D tiles and packs
//     the result.
//
// The kernel runs over the whole cache length L (its loop counts cannot
// depend on pos, which only the data-movement kernels read); the reader
// feeds zero tiles for key and value tiles past pos and zeroes the rows
// past pos of the tile holding it, so stale cache contents never reach the
// result.

func lowerSDPADecode(op *ir.Op, ctx *Context) (*kir.Program, error) {
	q, k, v, pos, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Result()
	scale, err := sdpaPreamble(op, "sdpa_decode", "pos", pos, q, k, v, out)
	if err != nil {
		return nil, err
	}
	qs, ks := q.Type.Shape, k.Type.Shape
	if qs.Rank() != 3 || ks.Rank() != 4 || !ks.Equal(v.Type.Shape) || ks[0] != qs[0] || ks[3] != qs[2] || qs[1]%ks[1] != 0 || !out.Type.Shape.Equal(qs) {
		return nil, fmt.Errorf("rule sdpa-shape: want q [B,Hq,D], k and v [B,Hkv,L,D] with Hq a multiple of Hkv and a result shaped like q, got %s, %s, %s -> %s", qs, ks, v.Type.Shape, out.Type.Shape)
	}
	B, Hq, D := qs[0], qs[1], qs[2]
	Hkv, L := ks[1], ks[2]
	G := Hq / Hkv
	if Hq > ir.TileSize || D%ir.TileSize != 0 || L%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule sdpa-tiles: the decode attention keeps one tile row of query heads (Hq <= 32) and whole tiles of D and L; got Hq %d, D %d, L %d", Hq, D, L)
	}
	dt, lt := D/ir.TileSize, L/ir.TileSize
	sp, err := newSplitProgram(op, ctx, Split{Items: B, Cores: B, PerCore: 1})
	if err != nil {
		return nil, err
	}
	cbs := sp.cbs
	ab := attnCBs{q: cbs.Input("q", q.Type.DType, dt), k: cbs.Input("k", k.Type.DType, 2), v: cbs.Input("v", v.Type.DType, 2),
		mask: cbs.Input("mask", ir.FP32, 2), scaler: cbs.Input("scaler", ir.BF16, 1), ones: cbs.Input("ones_column", ir.BF16, 1)}
	cbPos := cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, posPageBytes(ctx.Target, pos), 1)
	ab.out, ab.raw, ab.s, ab.max = cbs.Output("out", out.Type.DType, 2), cbs.Scratch("scores_raw", ir.FP32, 2), cbs.Scratch("scores", ir.FP32, lt), cbs.Scratch("row_max", ir.FP32, 1)
	ab.p, ab.sum, ab.pn = cbs.Scratch("exp", ir.FP32, lt), cbs.Scratch("recip_sum", ir.FP32, 1), cbs.Scratch("probs", ir.FP32, lt)
	cbAsm := cbs.Pages(blocks.ScratchCB, "assembly", out.Type.DType, out.Type.DType.TileBytes(), dt)
	sp.planned(fmt.Sprintf("sdpa_decode over a cache of %d positions", L))

	// Reader: q, then per kv head the key tiles (t, d) with the mask tile
	// after each t, then the value tiles (d, t).
	rd := sp.reader()
	qAcc, kAcc, vAcc, pAcc := sp.bind(rd, "q_addr", q), sp.bind(rd, "k_addr", k), sp.bind(rd, "v_addr", v), sp.bind(rd, "pos_addr", pos)
	if sp.err != nil {
		return nil, sp.err
	}
	user := rd.RuntimeArg("user")
	b := rd.Builder()
	blocks.ScalerTile(b, ab.scaler, 1)
	blocks.OnesColumnTile(b, ab.ones)
	posv := readPosPage(b, pAcc, cbPos, pos).of(b, user, "upos")
	blocks.ReadPages(b, qAcc, ab.q, kir.Mul(user, kir.Ci(dt)), kir.Ci(dt))
	b.For("j", kir.C(0), kir.Ci(Hkv), func(j kir.Var) {
		kvTiles(b, kvReader{k: kAcc, v: vAcc, cbK: ab.k, cbV: ab.v, cbMask: ab.mask, kdt: k.Type.DType, vdt: v.Type.DType, lt: lt, dt: dt},
			kir.Add(kir.Mul(user, kir.Ci(Hkv)), j), posv, func(kir.Expr) kir.Expr { return posv })
	})
	blocks.ReleaseScratch(b, cbPos)

	// Compute.
	_, c := sp.compute()
	c.MatmulStartup(ab.q, ab.k, ab.raw)
	c.B.CBWaitFront(ab.scaler, kir.C(1))
	c.B.CBWaitFront(ab.ones, kir.C(1))
	c.B.CBWaitFront(ab.q, kir.Ci(dt))
	c.For("j", kir.C(0), kir.Ci(Hkv), func(kir.Var) { attend(c, ab, lt, dt, scale) })
	c.B.CBPopFront(ab.q, kir.Ci(dt))
	c.B.CBPopFront(ab.scaler, kir.C(1))
	c.B.CBPopFront(ab.ones, kir.C(1))

	// Writer: assemble the user's output tiles from the rows of each
	// group, then write them.
	wr, oAcc := sp.writerOf("out_addr", out)
	if sp.err != nil {
		return nil, sp.err
	}
	wuser := wr.RuntimeArg("user")
	b = wr.Builder()
	oeb := blocks.ElemBytes(out.Type.DType)
	if oeb == 0 {
		return nil, fmt.Errorf("rule sdpa-dtype: the writer assembles rows of a bf16 or fp32 result, not %s", out.Type.DType)
	}
	tb := out.Type.DType.TileBytes()
	b.CBReserveBack(cbAsm, kir.Ci(dt))
	b.CBPushBack(cbAsm, kir.Ci(dt))
	asm := blocks.WaitFront(b, cbAsm, kir.Ci(dt), "asm_tiles")
	blocks.FillWords(b, asm, dt*tb, 0)
	b.For("j", kir.C(0), kir.Ci(Hkv), func(j kir.Var) {
		b.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) {
			src := blocks.WaitFront(b, ab.out, kir.C(1), "src")
			dst := b.Let("dst", kir.Add(asm, kir.Mul(d, kir.Ci(tb))))
			b.For("r", kir.Mul(j, kir.Ci(G)), kir.Mul(kir.Add(j, kir.C(1)), kir.Ci(G)), func(r kir.Var) {
				for col := 0; col < ir.TileSize; col += blocks.FaceDim {
					off := b.Let("off", blocks.FaceOffset(r, kir.Ci(col), oeb))
					blocks.CopyRun(b, kir.Add(src, off), kir.Add(dst, off), blocks.FaceDim, oeb, blocks.FaceDim*oeb)
				}
			})
			b.NoCAsyncReadBarrier()
			b.CBPopFront(ab.out, kir.C(1))
		})
	})
	b.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) {
		b.NoCAsyncWrite(kir.Add(asm, kir.Mul(d, kir.Ci(tb))), oAcc.PageAddr(kir.Add(kir.Mul(wuser, kir.Ci(dt)), d)), kir.Ci(tb))
	})
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(cbAsm, kir.Ci(dt))
	for i, core := range sp.cores {
		rd.SetRuntimeArgs(core, kir.U32(uint32(i)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(i)))
	}
	return sp.p, nil
}

// attnCBs are the CBs of the attention compute pipeline (attend).
type attnCBs struct {
	q, k, v, mask, scaler, ones, out int
	raw, s, max, p, sum, pn          int
}

// attend emits the compute of one query tile row (the dt tiles waited for
// in a.q, not popped) against one kv head: Lt score tiles from dt key
// tiles each (a.k, in (t, d) order) plus the mask tile of each t (a.mask),
// the row softmax with max subtraction, and the dt output tiles (packed to
// a.out) from the value tiles (a.v, in (d, t) order).
func attend(c *blocks.Compute, a attnCBs, lt, dt int, scale float64) {
	cb := c.B
	cb.Comment("scores: scale * q k^T + mask")
	c.For("t", kir.C(0), kir.Ci(lt), func(kir.Var) {
		c.Acquire()
		c.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) {
			cb.CBWaitFront(a.k, kir.C(1))
			c.Matmul(a.q, a.k, d, kir.C(0), kir.C(0), true)
			cb.CBPopFront(a.k, kir.C(1))
		})
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(scale)}, kir.C(0))
		c.PackOut(a.raw, 1)
		c.BinaryTile(kir.EltAdd, blocks.BcastNone, a.raw, a.mask, a.s, false, nil)
	})
	cb.Comment("softmax over the row")
	reduceRows(c, "t", kir.ReduceMax, a.s, a.scaler, a.max, lt)
	cb.CBWaitFront(a.max, kir.C(1))
	c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
		c.Acquire()
		c.Binary(kir.EltSub, blocks.BcastCols, a.s, a.max, tt, kir.C(0), kir.C(0))
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, kir.C(0))
		c.PackOut(a.p, 1)
	})
	cb.CBPopFront(a.max, kir.C(1))
	cb.CBPopFront(a.s, kir.Ci(lt))
	sumRows(c, "t", a.p, a.ones, a.sum, lt, blocks.SFPUStep{Op: kir.SFPURecip})
	cb.CBWaitFront(a.sum, kir.C(1))
	c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastCols, a.p, a.sum, tt, kir.C(0), kir.C(0))
		c.PackOut(a.pn, 1)
	})
	cb.CBPopFront(a.sum, kir.C(1))
	cb.CBPopFront(a.p, kir.Ci(lt))
	cb.Comment("p v")
	cb.CBWaitFront(a.pn, kir.Ci(lt))
	c.For("d", kir.C(0), kir.Ci(dt), func(kir.Var) {
		c.Acquire()
		c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
			cb.CBWaitFront(a.v, kir.C(1))
			c.Matmul(a.pn, a.v, tt, kir.C(0), kir.C(0), false)
			cb.CBPopFront(a.v, kir.C(1))
		})
		c.PackOut(a.out, 1)
	})
	cb.CBPopFront(a.pn, kir.Ci(lt))
}

// kvReader is what kvTiles reads: the key and value caches and the CBs
// their tiles and the mask tiles go to.
type kvReader struct {
	k, v             *blocks.Access
	cbK, cbV, cbMask int
	kdt, vdt         ir.DType
	lt, dt           int
}

// kvTiles emits, in a reader, the tiles attend consumes for one kv head
// (head = b*Hkv + j, an expression): the key tiles (t, d) with the fp32
// mask tile after each t, then the value tiles (d, t). Cache tiles past
// position last are pushed as zero tiles and the rows past last of the
// tile holding it are zeroed, so stale cache contents never reach the
// result; mask element (r, c) of tile t is 0 when t*32 + c <= limit(r) and
// -inf otherwise.
func kvTiles(b *kir.Builder, kv kvReader, head kir.Expr, last kir.Var, limit func(r kir.Expr) kir.Expr) {
	ptr := b.Let("ptr", kir.Div(last, kir.Ci(ir.TileSize)))
	cacheTile := func(acc *blocks.Access, cb int, dtype ir.DType, tt, d kir.Expr) {
		l1 := blocks.Reserve(b, cb, kir.C(1), "l1")
		b.IfElse(kir.Gt(tt, ptr), func() {
			blocks.FillWords(b, l1, dtype.TileBytes(), 0)
		}, func() {
			blocks.ReadPageTo(b, acc, kir.Add(kir.Mul(kir.Add(kir.Mul(head, kir.Ci(kv.lt)), tt), kir.Ci(kv.dt)), d), l1)
			b.NoCAsyncReadBarrier()
			b.If(kir.Eq(tt, ptr), func() {
				blocks.ZeroRows(b, l1, kir.Add(kir.Mod(last, kir.Ci(ir.TileSize)), kir.C(1)), blocks.ElemBytes(dtype))
			})
		})
		b.CBPushBack(cb, kir.C(1))
	}
	b.For("t", kir.C(0), kir.Ci(kv.lt), func(tt kir.Var) {
		b.For("d", kir.C(0), kir.Ci(kv.dt), func(d kir.Var) { cacheTile(kv.k, kv.cbK, kv.kdt, tt, d) })
		b.Comment("mask: 0 for visible positions, -inf after")
		m := blocks.Reserve(b, kv.cbMask, kir.C(1), "m")
		b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
			lim := b.Let("lim", limit(r))
			b.For("c", kir.C(0), kir.Ci(ir.TileSize), func(c kir.Var) {
				hidden := kir.Gt(kir.Add(kir.Mul(tt, kir.Ci(ir.TileSize)), c), lim)
				b.L1Write32(kir.Add(m, blocks.FaceOffset(r, c, 4)), kir.Mul(hidden, kir.C(0xFF800000)))
			})
		})
		b.CBPushBack(kv.cbMask, kir.C(1))
	})
	b.For("d", kir.C(0), kir.Ci(kv.dt), func(d kir.Var) {
		b.For("t", kir.C(0), kir.Ci(kv.lt), func(tt kir.Var) { cacheTile(kv.v, kv.cbV, kv.vdt, tt, d) })
	})
}

// sdpa_prefill: for q [B, Hq, S, D] and the caches k, v [B, Hkv, L, D],
// query s of head h attends to positions t <= pos + s of kv head h/G. The
// work units are (b, h, query tile row) split over the grid; each unit
// runs the decode pipeline (attend) on its query tile row against kv head
// h/G with a per-row mask (visible: t <= pos + s) and writes its D tiles
// straight to the result.
func lowerSDPAPrefill(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	q, k, v, pos, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Result()
	scale, err := sdpaPreamble(op, "sdpa_prefill", "the last position", pos, q, k, v, out)
	if err != nil {
		return nil, err
	}
	qs, ks := q.Type.Shape, k.Type.Shape
	if qs.Rank() != 4 || ks.Rank() != 4 || !ks.Equal(v.Type.Shape) || ks[0] != qs[0] || ks[3] != qs[3] || qs[1]%ks[1] != 0 || !out.Type.Shape.Equal(qs) {
		return nil, fmt.Errorf("rule sdpa-shape: want q [B,Hq,S,D], k and v [B,Hkv,L,D] with Hq a multiple of Hkv and a result shaped like q, got %s, %s, %s -> %s", qs, ks, v.Type.Shape, out.Type.Shape)
	}
	Hq, S, D := qs[1], qs[2], qs[3]
	Hkv, L := ks[1], ks[2]
	G := Hq / Hkv
	if D%ir.TileSize != 0 || L%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule sdpa-tiles: the attention needs whole tiles of D and L; got D %d, L %d", D, L)
	}
	dt, lt := D/ir.TileSize, L/ir.TileSize
	st := (S + ir.TileSize - 1) / ir.TileSize
	units := qs[0] * Hq * st
	sp, err := newSplitProgram(op, ctx, PlanSplit(units, t.NumWorkers(), lt*dt*4*MatmulTileCycles(ctx.Fidelity), 0, 0))
	if err != nil {
		return nil, err
	}
	ab := attnCBs{
		q: sp.cbs.Input("q", q.Type.DType, dt), k: sp.cbs.Input("k", k.Type.DType, 2), v: sp.cbs.Input("v", v.Type.DType, 2),
		mask: sp.cbs.Input("mask", ir.FP32, 2), scaler: sp.cbs.Input("scaler", ir.BF16, 1), ones: sp.cbs.Input("ones_column", ir.BF16, 1), out: sp.cbs.Output("out", out.Type.DType, 2),
		raw: sp.cbs.Scratch("scores_raw", ir.FP32, 2), s: sp.cbs.Scratch("scores", ir.FP32, lt), max: sp.cbs.Scratch("row_max", ir.FP32, 1),
		p: sp.cbs.Scratch("exp", ir.FP32, lt), sum: sp.cbs.Scratch("recip_sum", ir.FP32, 1), pn: sp.cbs.Scratch("probs", ir.FP32, lt),
	}
	cbPos := sp.cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, pos.Type.DType.ElemBytes(), 1)
	sp.planned(fmt.Sprintf("sdpa_prefill over a cache of %d positions", L))

	rd := sp.reader()
	qAcc, kAcc, vAcc, pAcc := sp.bind(rd, "q_addr", q), sp.bind(rd, "k_addr", k), sp.bind(rd, "v_addr", v), sp.bind(rd, "pos_addr", pos)
	if sp.err != nil {
		return nil, sp.err
	}
	rstart, rcount := rd.RuntimeArg("start_unit"), rd.RuntimeArg("num_units")
	b := rd.Builder()
	blocks.ScalerTile(b, ab.scaler, 1)
	blocks.OnesColumnTile(b, ab.ones)
	posv := readPos(b, pAcc, cbPos)
	b.For("u", rstart, kir.Add(rstart, rcount), func(u kir.Var) {
		qt := b.Let("qt", kir.Mod(u, kir.Ci(st)))
		bh := b.Let("bh", kir.Div(u, kir.Ci(st)))
		head := b.Let("head", kir.Add(kir.Mul(kir.Div(bh, kir.Ci(Hq)), kir.Ci(Hkv)), kir.Div(kir.Mod(bh, kir.Ci(Hq)), kir.Ci(G))))
		blocks.ReadPages(b, qAcc, ab.q, kir.Mul(u, kir.Ci(dt)), kir.Ci(dt))
		last := b.LetT("last", kir.U32T, kir.Add(posv, kir.Add(kir.Mul(qt, kir.Ci(ir.TileSize)), kir.Ci(ir.TileSize-1))))
		b.If(kir.Gt(last, kir.Add(posv, kir.Ci(S-1))), func() { b.Assign(last, kir.Add(posv, kir.Ci(S-1))) })
		row0 := b.Let("row0", kir.Add(posv, kir.Mul(qt, kir.Ci(ir.TileSize))))
		kvTiles(b, kvReader{k: kAcc, v: vAcc, cbK: ab.k, cbV: ab.v, cbMask: ab.mask, kdt: k.Type.DType, vdt: v.Type.DType, lt: lt, dt: dt},
			head, last, func(r kir.Expr) kir.Expr { return kir.Add(row0, r) })
	})
	blocks.ReleaseScratch(b, cbPos)

	cp, c := sp.compute()
	ccount := cp.RuntimeArg("num_units")
	c.MatmulStartup(ab.q, ab.k, ab.raw)
	c.B.CBWaitFront(ab.scaler, kir.C(1))
	c.B.CBWaitFront(ab.ones, kir.C(1))
	c.For("u", kir.C(0), ccount, func(kir.Var) {
		c.B.CBWaitFront(ab.q, kir.Ci(dt))
		attend(c, ab, lt, dt, scale)
		c.B.CBPopFront(ab.q, kir.Ci(dt))
	})
	c.B.CBPopFront(ab.scaler, kir.C(1))
	c.B.CBPopFront(ab.ones, kir.C(1))

	wr, oAcc := sp.writerOf("out_addr", out)
	if sp.err != nil {
		return nil, sp.err
	}
	wstart, wcount := wr.RuntimeArg("start_unit"), wr.RuntimeArg("num_units")
	blocks.WritePages(wr.Builder(), oAcc, ab.out, kir.Mul(wstart, kir.Ci(dt)), kir.Mul(wcount, kir.Ci(dt)))
	setItemArgs(sp.cores, sp.plan, rd, cp, wr, func(int) int { return 1 })
	return sp.p, nil
}

// sdpaPreamble checks what every attention lowering requires of its
// operands: each of tensors (q, k, v, ...) in tile layout (requireTile),
// pos a position operand (checkPos; the decode ops: checkDecodePos for
// q's batch) and, unless past is "", k and v bf16
// or fp32, as the reader zeroes their rows past past. It returns op's
// float attribute "scale"; kind names the op in the error when that
// attribute is missing.
func sdpaPreamble(op *ir.Op, kind, past string, pos *ir.Value, tensors ...*ir.Value) (float64, error) {
	if err := requireTiles(tensors...); err != nil {
		return 0, err
	}
	check := checkPos(pos)
	if k := op.Kind; k == ir.OpSDPADecode || k == ir.OpSDPADecodeGated {
		check = checkDecodePos(pos, tensors[0].Type.Shape[0])
	}
	if check != nil {
		return 0, check
	}
	for _, x := range tensors[1:3] {
		if past != "" && blocks.ElemBytes(x.Type.DType) == 0 {
			return 0, fmt.Errorf("rule sdpa-dtype: the reader zeroes cache rows past %s, which needs a bf16 or fp32 cache, not %s", past, x.Type.DType)
		}
	}
	scale, ok := op.Attrs["scale"].(float64)
	if !ok {
		return 0, fmt.Errorf("rule attr: %s needs a float attribute \"scale\"", kind)
	}
	return scale, nil
}
