package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// sdpa_decode: for q [B, Hq, D] and the caches k, v [B, Hkv, L, D],
// out[b, h] = softmax_t<=pos(scale * q[b, h] . k[b, h/G, t]) . v[b, h/G, t].
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
	t := ctx.Target
	q, k, v, pos, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Result()
	for _, x := range []*ir.Value{q, k, v, out} {
		if err := requireTile("value", x); err != nil {
			return nil, err
		}
	}
	if err := checkPos(pos); err != nil {
		return nil, err
	}
	scale, ok := op.Attrs["scale"].(float64)
	if !ok {
		return nil, fmt.Errorf("rule attr: sdpa_decode needs a float attribute \"scale\"")
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
	for _, x := range []*ir.Value{k, v} {
		if blocks.ElemBytes(x.Type.DType) == 0 {
			return nil, fmt.Errorf("rule sdpa-dtype: the reader zeroes cache rows past pos, which needs a bf16 or fp32 cache, not %s", x.Type.DType)
		}
	}
	dt, lt := D/ir.TileSize, L/ir.TileSize
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	cores, rs := firstCores(t, B)
	cbs := blocks.NewCBPlan(p, t, rs)
	cbQ := cbs.Input("q", q.Type.DType, dt)
	cbK := cbs.Input("k", k.Type.DType, 2)
	cbV := cbs.Input("v", v.Type.DType, 2)
	cbMask := cbs.Input("mask", ir.FP32, 2)
	cbScaler := cbs.Input("scaler", ir.BF16, 1)
	cbPos := cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, pos.Type.DType.ElemBytes(), 1)
	cbOut := cbs.Output("out", out.Type.DType, 2)
	cbRaw := cbs.Scratch("scores_raw", ir.FP32, 2)
	cbS := cbs.Scratch("scores", ir.FP32, lt)
	cbMax := cbs.Scratch("row_max", ir.FP32, 1)
	cbP := cbs.Scratch("exp", ir.FP32, lt)
	cbSum := cbs.Scratch("recip_sum", ir.FP32, 1)
	cbPn := cbs.Scratch("probs", ir.FP32, lt)
	cbAsm := cbs.Pages(blocks.ScratchCB, "assembly", out.Type.DType, out.Type.DType.TileBytes(), dt)
	if err := cbs.Err(fmt.Sprintf("sdpa_decode over a cache of %d positions", L)); err != nil {
		return nil, err
	}

	// Reader: q, then per kv head the key tiles (t, d) with the mask tile
	// after each t, then the value tiles (d, t).
	rd := newReader(p, rs)
	qAcc, err := accessOf(ctx, rd, "q_addr", q)
	if err != nil {
		return nil, err
	}
	kAcc, err := accessOf(ctx, rd, "k_addr", k)
	if err != nil {
		return nil, err
	}
	vAcc, err := accessOf(ctx, rd, "v_addr", v)
	if err != nil {
		return nil, err
	}
	pAcc, err := accessOf(ctx, rd, "pos_addr", pos)
	if err != nil {
		return nil, err
	}
	user := rd.RuntimeArg("user")
	b := rd.Builder()
	blocks.ScalerTile(b, cbScaler, 1)
	posv := readPos(b, pAcc, cbPos)
	ptr := b.Let("ptr", kir.Div(posv, kir.Ci(ir.TileSize)))
	blocks.ReadPages(b, qAcc, cbQ, kir.Mul(user, kir.Ci(dt)), kir.Ci(dt))
	// cacheTile pushes cache tile (t, d) of head (user, j), zero past pos.
	cacheTile := func(acc *blocks.Access, cb int, dtype ir.DType, j, tt, d kir.Expr) {
		b.CBReserveBack(cb, kir.C(1))
		l1 := b.Let("l1", kir.GetWritePtr{CB: cb})
		b.IfElse(kir.Gt(tt, ptr), func() {
			blocks.FillWords(b, l1, dtype.TileBytes(), 0)
		}, func() {
			head := kir.Add(kir.Mul(user, kir.Ci(Hkv)), j)
			blocks.ReadPageTo(b, acc, kir.Add(kir.Mul(kir.Add(kir.Mul(head, kir.Ci(lt)), tt), kir.Ci(dt)), d), l1)
			b.NoCAsyncReadBarrier()
			b.If(kir.Eq(tt, ptr), func() {
				blocks.ZeroRows(b, l1, kir.Add(kir.Mod(posv, kir.Ci(ir.TileSize)), kir.C(1)), blocks.ElemBytes(dtype))
			})
		})
		b.CBPushBack(cb, kir.C(1))
	}
	b.For("j", kir.C(0), kir.Ci(Hkv), func(j kir.Var) {
		b.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
			b.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) { cacheTile(kAcc, cbK, k.Type.DType, j, tt, d) })
			b.Comment("mask: 0 for positions <= pos, -inf after")
			b.CBReserveBack(cbMask, kir.C(1))
			m := b.Let("m", kir.GetWritePtr{CB: cbMask})
			b.For("c", kir.C(0), kir.Ci(ir.TileSize), func(c kir.Var) {
				val := b.Let("mv", kir.Mul(kir.Gt(kir.Add(kir.Mul(tt, kir.Ci(ir.TileSize)), c), posv), kir.C(0xFF800000)))
				b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
					b.L1Write32(kir.Add(m, blocks.FaceOffset(r, c, 4)), val)
				})
			})
			b.CBPushBack(cbMask, kir.C(1))
		})
		b.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) {
			b.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) { cacheTile(vAcc, cbV, v.Type.DType, j, tt, d) })
		})
	})
	blocks.ReleaseScratch(b, cbPos)

	// Compute.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	c := blocks.NewCompute(p, cp)
	cb := c.B
	c.MatmulStartup(cbQ, cbK, cbRaw)
	cb.CBWaitFront(cbScaler, kir.C(1))
	cb.CBWaitFront(cbQ, kir.Ci(dt))
	c.For("j", kir.C(0), kir.Ci(Hkv), func(kir.Var) {
		cb.Comment("scores: scale * q k^T + mask")
		c.For("t", kir.C(0), kir.Ci(lt), func(kir.Var) {
			c.Acquire()
			c.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) {
				cb.CBWaitFront(cbK, kir.C(1))
				c.Matmul(cbQ, cbK, d, kir.C(0), kir.C(0), true)
				cb.CBPopFront(cbK, kir.C(1))
			})
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(scale)}, kir.C(0))
			c.PackOut(cbRaw, 1)
			c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbRaw, cbMask, cbS, false, nil)
		})
		cb.Comment("softmax over the row")
		cb.CBWaitFront(cbS, kir.Ci(lt))
		c.Acquire()
		c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
			c.Reduce(kir.ReduceMax, kir.ReduceRow, cbS, cbScaler, cbMax, tt, kir.C(0), kir.C(0))
		})
		c.PackOut(cbMax, 1)
		cb.CBWaitFront(cbMax, kir.C(1))
		c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
			c.Acquire()
			c.Binary(kir.EltSub, blocks.BcastCols, cbS, cbMax, tt, kir.C(0), kir.C(0))
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, kir.C(0))
			c.PackOut(cbP, 1)
		})
		cb.CBPopFront(cbMax, kir.C(1))
		cb.CBPopFront(cbS, kir.Ci(lt))
		cb.CBWaitFront(cbP, kir.Ci(lt))
		c.Acquire()
		c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
			c.Reduce(kir.ReduceSum, kir.ReduceRow, cbP, cbScaler, cbSum, tt, kir.C(0), kir.C(0))
		})
		c.SFPU(blocks.SFPUStep{Op: kir.SFPURecip}, kir.C(0))
		c.PackOut(cbSum, 1)
		cb.CBWaitFront(cbSum, kir.C(1))
		c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastCols, cbP, cbSum, tt, kir.C(0), kir.C(0))
			c.PackOut(cbPn, 1)
		})
		cb.CBPopFront(cbSum, kir.C(1))
		cb.CBPopFront(cbP, kir.Ci(lt))
		cb.Comment("p v")
		cb.CBWaitFront(cbPn, kir.Ci(lt))
		c.For("d", kir.C(0), kir.Ci(dt), func(kir.Var) {
			c.Acquire()
			c.For("t", kir.C(0), kir.Ci(lt), func(tt kir.Var) {
				cb.CBWaitFront(cbV, kir.C(1))
				c.Matmul(cbPn, cbV, tt, kir.C(0), kir.C(0), false)
				cb.CBPopFront(cbV, kir.C(1))
			})
			c.PackOut(cbOut, 1)
		})
		cb.CBPopFront(cbPn, kir.Ci(lt))
	})
	cb.CBPopFront(cbQ, kir.Ci(dt))
	cb.CBPopFront(cbScaler, kir.C(1))

	// Writer: assemble the user's output tiles from the rows of each
	// group, then write them.
	wr := newWriter(p, rs)
	oAcc, err := accessOf(ctx, wr, "out_addr", out)
	if err != nil {
		return nil, err
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
	b.CBWaitFront(cbAsm, kir.Ci(dt))
	asm := b.Let("asm", kir.GetReadPtr{CB: cbAsm})
	blocks.FillWords(b, asm, dt*tb, 0)
	b.For("j", kir.C(0), kir.Ci(Hkv), func(j kir.Var) {
		b.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) {
			b.CBWaitFront(cbOut, kir.C(1))
			src := b.Let("src", kir.GetReadPtr{CB: cbOut})
			dst := b.Let("dst", kir.Add(asm, kir.Mul(d, kir.Ci(tb))))
			b.For("r", kir.Mul(j, kir.Ci(G)), kir.Mul(kir.Add(j, kir.C(1)), kir.Ci(G)), func(r kir.Var) {
				for col := 0; col < ir.TileSize; col += blocks.FaceDim {
					off := b.Let("off", blocks.FaceOffset(r, kir.Ci(col), oeb))
					blocks.CopyRun(b, kir.Add(src, off), kir.Add(dst, off), blocks.FaceDim, oeb, blocks.FaceDim*oeb)
				}
			})
			b.NoCAsyncReadBarrier()
			b.CBPopFront(cbOut, kir.C(1))
		})
	})
	b.For("d", kir.C(0), kir.Ci(dt), func(d kir.Var) {
		b.NoCAsyncWrite(kir.Add(asm, kir.Mul(d, kir.Ci(tb))), oAcc.PageAddr(kir.Add(kir.Mul(wuser, kir.Ci(dt)), d)), kir.Ci(tb))
	})
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(cbAsm, kir.Ci(dt))
	for i, core := range cores {
		rd.SetRuntimeArgs(core, kir.U32(uint32(i)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(i)))
	}
	return p, nil
}
