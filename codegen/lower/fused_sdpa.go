package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// sdpa_decode_gated and sdpa_prefill_gated: attention over the KV cache up
// to pos (decode: one query token per user; prefill: S tokens at
// positions pos..pos+S-1, causal), times sigmoid(gate), heads
// concatenated into the o_proj input layout:
//
//	decode:  out[b,0,h*D+i] = r(o[b,h,i]) * r(sigmoid(gate[b,h,i]))
//	prefill: out[b,s,h*D+i] = r(o[b,h,s,i]) * r(sigmoid(gate[b,s,h,i]))
//
// with r rounding to q's (gate's) dtype. One work item is one tile row of
// query rows attending one kv head; items are split over the cores, one per
// core while cores last:
//
//   - decode: item (user b, kv head j, D chunk); its rows are the G =
//     H/Hkv query heads of the group (GQA by addressing: the reader
//     gathers rows b*H + j*G + g of q and gate with blocks.Gather; k is
//     read once per item, v for the chunk's D tiles); the writer copies
//     row g of each result tile into row 0 of the output tile of head
//     j*G + g. While the grid has a core for each, a kv head's Dt tiles
//     are split into the most equal chunks that fit (27B: 2 kv heads x 8
//     chunks of one D tile on 16 cores): every chunk computes the scores
//     over all of D, which costs Lt*Dt tile products, and P V only for its
//     own tiles.
//   - prefill: item (user b, q head h, token tile row st); its rows are up
//     to 32 tokens of head h (q's own tile row, read as pages); the reader
//     gathers the gate rows of those tokens; the result tiles are the
//     output tiles (rows are tokens in both).
//
// Per item the compute kernel
//
//  1. per cache tile t: DEST = mask_t (copy_tile, exact: 0 where visible,
//     -inf after), += Q K_t^T over the D tiles (matmul_tiles, in1
//     transposed, fp32 DEST), * scale; packed to a resident fp32 CB of Lt
//     tiles;
//  2. row maxima (reduce_tile MAX REDUCE_ROW), negated, packed to bf16
//     (the stabiliser m; any value near the maximum serves, and the bf16
//     tile enters the next step exactly);
//  3. per tile: DEST = S_t (copy_tile: the scores CB is also read by the
//     FPU, so it is not unpacked to DEST and the copy is tf32) + (-m)
//     broadcast over the columns by a matmul with a tile whose row 0 is
//     ones, exp; packed to fp32;
//  4. row sums (reduce_tile SUM), reciprocal;
//  5. per D tile: P V over the Lt tiles (matmul_tiles, fp32 DEST), times
//     the reciprocal (bcast cols) packed to q's dtype (o's rounding
//     point); sigmoid(gate) packed to gate's dtype (its rounding point);
//     their product packed to the result.
//
// Like sdpa_decode the kernel runs over the whole cache length (its loop
// counts cannot depend on pos, which only the data-movement kernels read):
// the reader feeds zero tiles past the last visible position and zeroes
// the rows past it in the tile holding it, so stale cache contents never
// reach the result; the mask tiles come from three constant tiles (zeros,
// -inf, decode's boundary tile) copied locally, and prefill builds the
// one or two tiles per item that cross the causal diagonal element by
// element.

// sdpaDims are the sizes of one gated SDPA.
type sdpaDims struct {
	B, H, Hkv, G int
	S, D, L      int
	Dt, Lt, St   int
	items        int
}

func sdpaGatedDims(op *ir.Op, prefill bool) (sdpaDims, error) {
	q, k, v, gate, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[4], op.Result()
	qs, ks := q.Type.Shape, k.Type.Shape
	d := sdpaDims{S: 1}
	if !prefill {
		if qs.Rank() != 3 || ks.Rank() != 4 || !ks.Equal(v.Type.Shape) || ks[0] != qs[0] || ks[3] != qs[2] || ks[1] == 0 || qs[1]%ks[1] != 0 ||
			!gate.Type.Shape.Equal(qs) || !out.Type.Shape.Equal(ir.Shape{qs[0], 1, qs[1] * qs[2]}) {
			return d, fmt.Errorf("rule sdpa-shape: want q and gate [B,H,D], k and v [B,Hkv,L,D] with H a multiple of Hkv and a result [B,1,H*D], got %s, %s, %s, %s -> %s", qs, ks, v.Type.Shape, gate.Type.Shape, out.Type.Shape)
		}
		d.B, d.H, d.D = qs[0], qs[1], qs[2]
	} else {
		if qs.Rank() != 4 || ks.Rank() != 4 || !ks.Equal(v.Type.Shape) || ks[0] != qs[0] || ks[3] != qs[3] || ks[1] == 0 || qs[1]%ks[1] != 0 || qs[2] > ks[2] ||
			!gate.Type.Shape.Equal(ir.Shape{qs[0], qs[2], qs[1], qs[3]}) || !out.Type.Shape.Equal(ir.Shape{qs[0], qs[2], qs[1] * qs[3]}) {
			return d, fmt.Errorf("rule sdpa-shape: want q [B,H,S,D], gate [B,S,H,D], k and v [B,Hkv,L>=S,D] with H a multiple of Hkv and a result [B,S,H*D], got %s, %s, %s, %s -> %s", qs, ks, v.Type.Shape, gate.Type.Shape, out.Type.Shape)
		}
		d.B, d.H, d.S, d.D = qs[0], qs[1], qs[2], qs[3]
	}
	d.Hkv, d.L = ks[1], ks[2]
	d.G = d.H / d.Hkv
	if d.D%ir.TileSize != 0 || (!prefill && d.G > ir.TileSize) {
		return d, fmt.Errorf("rule sdpa-tiles: D must be whole tiles and (decode) a kv head's group of query heads one tile row (H/Hkv <= 32); got D %d, H/Hkv = %d", d.D, d.G)
	}
	d.Dt, d.Lt, d.St = d.D/ir.TileSize, (d.L+ir.TileSize-1)/ir.TileSize, (d.S+ir.TileSize-1)/ir.TileSize
	if prefill {
		d.items = d.B * d.H * d.St
	} else {
		d.items = d.B * d.Hkv
	}
	return d, nil
}

func lowerSDPADecodeGated(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return sdpaGated(op, ctx, false)
}

func lowerSDPAPrefillGated(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return sdpaGated(op, ctx, true)
}

func sdpaGated(op *ir.Op, ctx *Context, prefill bool) (*kir.Program, error) {
	t := ctx.Target
	q, k, v, pos, gate, out := op.Operands[0], op.Operands[1], op.Operands[2], op.Operands[3], op.Operands[4], op.Result()
	scale, err := sdpaPreamble(op, op.Name(), pos, q, k, v, gate, out)
	if err != nil {
		return nil, err
	}
	d, err := sdpaGatedDims(op, prefill)
	if err != nil {
		return nil, err
	}
	for _, x := range []*ir.Value{q, k, v, gate, out} {
		if blocks.ElemBytes(x.Type.DType) == 0 {
			return nil, fmt.Errorf("rule sdpa-dtype: %s is %s; the program moves single rows, which needs bf16 or fp32 (block floats share exponents across a face row)", x, x.Type.DType)
		}
	}
	Dt, Lt := d.Dt, d.Lt
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	// decode: a kv head's item is split into `split` items of dc D tiles
	// each while the grid has a core for every one (each computes the
	// scores over all of D and its own dc tiles of P V); prefill: 1.
	split := 1
	if !prefill {
		for s := Dt; s > 1; s-- {
			if Dt%s == 0 && d.items*s <= t.NumWorkers() {
				split = s
				break
			}
		}
	}
	dc := Dt / split
	items := d.items * split
	plan := PlanSplit(items, t.NumWorkers(), (Lt*Dt+Lt*dc)*MatmulTileCycles(ctx.Fidelity), 0, 0)
	if split > 1 {
		plan = Split{Items: items, Cores: items, PerCore: 1}
	}
	cores, rs := firstCores(t, plan.Cores)
	cbs := blocks.NewCBPlan(p, t, rs)
	cbQ := cbs.Input("q", q.Type.DType, Dt)
	// The reader moves the cache in blocks of up to sdpaCacheBlock tiles
	// per barrier: K along a tile row, V down a tile column.
	kBlk, vBlk := largestDivisor(Dt, sdpaCacheBlock), largestDivisor(Lt, sdpaCacheBlock)
	cbK := cbs.Input("k", k.Type.DType, 2*kBlk)
	cbV := cbs.Input("v", v.Type.DType, 2*vBlk)
	cbMask := cbs.Input("mask", ir.FP32, 2)
	cbGate := cbs.Input("gate", gate.Type.DType, 2)
	cbScaler := cbs.Input("scaler", ir.BF16, 1)
	cbOnes := cbs.Input("ones_row", ir.BF16, 1)
	cbSlotQ := -1
	if !prefill {
		cbSlotQ = cbs.Scratch("q_tile", q.Type.DType, 1)
	}
	cbSlotG := cbs.Scratch("gate_tile", gate.Type.DType, 1)
	cbConst := cbs.Pages(blocks.ScratchCB, "const_tiles", ir.FP32, ir.FP32.TileBytes(), 3)
	cbPos := cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, pos.Type.DType.ElemBytes(), 1)
	cbS := cbs.Scratch("scores", ir.FP32, Lt)
	cbNegMax := cbs.Scratch("neg_row_max", ir.BF16, 1)
	cbP := cbs.Scratch("exp", ir.FP32, Lt)
	cbRecip := cbs.Scratch("recip_sum", ir.FP32, 1)
	cbPV := cbs.Scratch("pv", ir.FP32, 1)
	cbO := cbs.Scratch("attn", q.Type.DType, 1)
	cbSig := cbs.Scratch("sigmoid_gate", gate.Type.DType, 1)
	cbOut := cbs.Output("out", out.Type.DType, 2)
	cbAsm := -1
	if !prefill {
		cbAsm = cbs.Scratch("out_tiles", out.Type.DType, d.G)
	}
	if err := cbs.Err(fmt.Sprintf("%s over a cache of %d positions keeps two fp32 rows of %d score tiles", op.Name(), d.L, Lt)); err != nil {
		return nil, err
	}

	// Reader.
	rd := newReader(p, rs)
	ab := &accessBinder{ctx: ctx}
	qAcc, kAcc, vAcc, pAcc, gAcc := ab.bind(rd, "q_addr", q), ab.bind(rd, "k_addr", k), ab.bind(rd, "v_addr", v), ab.bind(rd, "pos_addr", pos), ab.bind(rd, "gate_addr", gate)
	if ab.err != nil {
		return nil, ab.err
	}
	seg := blocks.SegFor(d.D)
	rows := blocks.ImageOf(ir.Shape{d.G, d.D})
	if prefill {
		rows = blocks.ImageOf(ir.Shape{d.S, d.D})
	}
	var gq *blocks.Gather
	if !prefill {
		gq = &blocks.Gather{Out: rows, DType: q.Type.DType, Seg: seg, Fill: true, Sources: []blocks.GatherSource{{Acc: qAcc, Image: blocks.ImageOf(q.Type.Shape)}}}
	}
	gg := &blocks.Gather{Out: rows, DType: gate.Type.DType, Seg: seg, Fill: true, Sources: []blocks.GatherSource{{Acc: gAcc, Image: blocks.ImageOf(gate.Type.Shape)}}}
	if err := gg.Check(); err != nil {
		return nil, err
	}
	// Decode with a user's heads in one tile row (q and gate [B, H <= 32,
	// D]) reads the user's q and gate tiles whole and moves the group's G
	// rows (rows j*G.. of kv head j) to rows 0..G-1 with local copies,
	// instead of gathering them segment by segment into zero-filled tiles;
	// rows G..31 keep other heads' values, which no result row reads.
	qim, gim := blocks.ImageOf(q.Type.Shape), blocks.ImageOf(gate.Type.Shape)
	groupRows := !prefill && qim.R == d.H && qim.Rt == 1 && gim.R == d.H && gim.Rt == 1 && qim.Ct == Dt && gim.Ct == Dt
	var rowErr error
	var groupFirst, groupUser kir.Var // the group's first row in its user's tile row; the user
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	blocks.ScalerTile(b, cbScaler, 1)
	blocks.RowTile(b, cbOnes, ir.BF16, 0, 1)
	posv := readPos(b, pAcc, cbPos)
	// last is the last visible cache position of any query of the op.
	last := b.Let("last", kir.Add(posv, kir.Ci(d.S-1)))
	lptr := b.Let("lptr", kir.Div(last, kir.Ci(ir.TileSize)))
	lrow := b.Let("lrow", kir.Mod(last, kir.Ci(ir.TileSize)))
	b.Comment("constant tiles: zeros, -inf, and (decode) the mask of the tile holding pos")
	fb := ir.FP32.TileBytes()
	consts := blocks.ScratchPages(b, cbConst, 3, "consts")
	zero := b.Let("zero", consts)
	ninf := b.Let("ninf", kir.Add(consts, kir.Ci(fb)))
	bound := b.Let("bound", kir.Add(consts, kir.Ci(2*fb)))
	const negInf = 0xFF800000
	blocks.FillWords(b, zero, fb, 0)
	blocks.FillWords(b, ninf, fb, negInf)
	if !prefill {
		b.For("c", kir.C(0), kir.Ci(ir.TileSize), func(c kir.Var) {
			b.L1Write32(kir.Add(bound, blocks.FaceOffset(kir.C(0), c, 4)), kir.Mul(kir.Gt(c, lrow), kir.C(negInf)))
		})
		blocks.FillRowsFromRow0(b, bound, 4)
		gq.Begin(b, []int{cbSlotQ})
	}
	gg.Begin(b, []int{cbSlotG})
	// cacheTiles pushes n cache tiles of head, tile j being (tt(j), dd(j)),
	// zero past last: every read of the block in flight, one barrier, then
	// the rows past last cleared in the tile that holds it.
	cacheTiles := func(a *blocks.Access, cb int, dtype ir.DType, head kir.Expr, n int, tile func(j kir.Expr) (tt, dd kir.Expr)) {
		tb := dtype.TileBytes()
		b.CBReserveBack(cb, kir.Ci(n))
		base := b.Let("l1", kir.GetWritePtr{CB: cb})
		b.For("j", kir.C(0), kir.Ci(n), func(j kir.Var) {
			tt, dd := tile(j)
			l1 := b.Let("l1j", kir.Add(base, kir.Mul(j, kir.Ci(tb))))
			b.IfElse(kir.Gt(tt, lptr), func() {
				blocks.LocalCopy(b, zero, l1, tb)
			}, func() {
				blocks.ReadPageTo(b, a, kir.Add(kir.Mul(kir.Add(kir.Mul(head, kir.Ci(Lt)), tt), kir.Ci(Dt)), dd), l1)
			})
		})
		b.NoCAsyncReadBarrier()
		b.For("j", kir.C(0), kir.Ci(n), func(j kir.Var) {
			tt, _ := tile(j)
			b.If(kir.Eq(tt, lptr), func() {
				blocks.ZeroRowsFrom(b, kir.Add(base, kir.Mul(j, kir.Ci(tb))), zero, kir.Add(lrow, kir.C(1)), blocks.ElemBytes(dtype))
			})
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cb, kir.Ci(n))
	}
	b.For("i", rstart, kir.Add(rstart, rcount), func(i kir.Var) {
		var head, row0 kir.Var // kv head (b*Hkv + j); prefill: position of the item's first query
		var maskTile func(tt kir.Var)
		var dlo kir.Expr = kir.C(0) // the item's first D tile of P V
		if !prefill {
			head = b.Let("head", kir.Div(i, kir.Ci(split))) // b*Hkv + j
			dlo = b.Let("dlo", kir.Mul(kir.Mod(i, kir.Ci(split)), kir.Ci(dc)))
			if groupRows {
				groupUser = b.Let("user", kir.Div(head, kir.Ci(d.Hkv)))
				groupFirst = b.Let("group_row", kir.Mul(kir.Mod(head, kir.Ci(d.Hkv)), kir.Ci(d.G)))
			} else {
				first := b.Let("first", kir.Add(kir.Mul(kir.Div(head, kir.Ci(d.Hkv)), kir.Ci(d.H)), kir.Mul(kir.Mod(head, kir.Ci(d.Hkv)), kir.Ci(d.G))))
				rowMap := func(b *kir.Builder, row, col kir.Var) []blocks.Run {
					return []blocks.Run{{Src: 0, Row: kir.Add(first, row), Col: col}}
				}
				gq.Map, gg.Map = rowMap, rowMap
			}
			if groupRows {
				b.Comment("the group's query rows: q's tiles whole, the group's rows moved to the top")
				b.CBReserveBack(cbQ, kir.Ci(Dt))
				ql1 := b.Let("q_l1", kir.GetWritePtr{CB: cbQ})
				for dd := range Dt {
					blocks.ReadPageTo(b, qAcc, kir.Add(kir.Mul(groupUser, kir.Ci(Dt)), kir.Ci(dd)), kir.Add(ql1, kir.Ci(dd*qAcc.PageSize())))
				}
				b.NoCAsyncReadBarrier()
				if err := sdpaGroupToTop(b, groupFirst, ql1, Dt, qAcc.PageSize(), d.G, d.H, blocks.ElemBytes(q.Type.DType)); err != nil {
					rowErr = err
				}
				b.NoCAsyncReadBarrier()
				b.CBPushBack(cbQ, kir.Ci(Dt))
			} else {
				b.Comment("the group's query rows")
				b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) { gq.Page(b, cbQ, dd) })
			}
			maskTile = func(tt kir.Var) {
				m := b.Let("m", kir.GetWritePtr{CB: cbMask})
				b.IfElse(kir.Lt(tt, lptr), func() { blocks.LocalCopy(b, zero, m, fb) }, func() {
					b.IfElse(kir.Eq(tt, lptr), func() { blocks.LocalCopy(b, bound, m, fb) }, func() { blocks.LocalCopy(b, ninf, m, fb) })
				})
				b.NoCAsyncReadBarrier()
			}
		} else {
			st := b.Let("st", kir.Mod(i, kir.Ci(d.St)))
			bh := b.Let("bh", kir.Div(i, kir.Ci(d.St))) // b*H + h
			u, h := b.Let("u", kir.Div(bh, kir.Ci(d.H))), b.Let("h", kir.Mod(bh, kir.Ci(d.H)))
			head = b.Let("head", kir.Add(kir.Mul(u, kir.Ci(d.Hkv)), kir.Div(h, kir.Ci(d.G))))
			row0 = b.Let("row0", kir.Add(posv, kir.Mul(st, kir.Ci(ir.TileSize))))
			// gate [B,S,H,D]: token s of head h is row (b*S + s)*H + h.
			gg.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
				return []blocks.Run{{Src: 0, Row: kir.Add(kir.Mul(kir.Add(kir.Mul(u, kir.Ci(d.S)), row), kir.Ci(d.H)), h), Col: col}}
			}
			b.Comment("the head's query tile row: q's own pages")
			blocks.ReadPages(b, qAcc, cbQ, kir.Mul(i, kir.Ci(Dt)), kir.Ci(Dt))
			maskTile = func(tt kir.Var) {
				m := b.Let("m", kir.GetWritePtr{CB: cbMask})
				t0 := b.Let("t0", kir.Mul(tt, kir.Ci(ir.TileSize)))
				b.IfElse(kir.Le(kir.Add(t0, kir.Ci(ir.TileSize-1)), row0), func() { blocks.LocalCopy(b, zero, m, fb) }, func() {
					b.IfElse(kir.Gt(t0, kir.Add(row0, kir.Ci(ir.TileSize-1))), func() { blocks.LocalCopy(b, ninf, m, fb) }, func() {
						b.Comment("the tile crossing the causal diagonal: -inf where t*32 + c > pos + st*32 + r")
						b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
							qp := b.Let("qp", kir.Add(row0, r))
							b.For("c", kir.C(0), kir.Ci(ir.TileSize), func(c kir.Var) {
								b.L1Write32(kir.Add(m, blocks.FaceOffset(r, c, 4)), kir.Mul(kir.Gt(kir.Add(t0, c), qp), kir.C(negInf)))
							})
						})
					})
				})
				b.NoCAsyncReadBarrier()
			}
		}
		b.For("t", kir.C(0), kir.Ci(Lt), func(tt kir.Var) {
			b.CBReserveBack(cbMask, kir.C(1))
			maskTile(tt)
			b.CBPushBack(cbMask, kir.C(1))
			b.ForStep("d0", kir.C(0), kir.Ci(Dt), kir.Ci(kBlk), func(d0 kir.Var) {
				cacheTiles(kAcc, cbK, k.Type.DType, head, kBlk, func(j kir.Expr) (kir.Expr, kir.Expr) { return tt, kir.Add(d0, j) })
			})
		})
		b.For("d", dlo, kir.Add(dlo, kir.Ci(dc)), func(dd kir.Var) {
			b.ForStep("t0", kir.C(0), kir.Ci(Lt), kir.Ci(vBlk), func(t0 kir.Var) {
				cacheTiles(vAcc, cbV, v.Type.DType, head, vBlk, func(j kir.Expr) (kir.Expr, kir.Expr) { return kir.Add(t0, j), dd })
			})
			page := kir.Expr(dd)
			if prefill {
				page = kir.Add(kir.Mul(kir.Mod(i, kir.Ci(d.St)), kir.Ci(Dt)), dd)
			}
			if groupRows && !prefill {
				b.CBReserveBack(cbGate, kir.C(1))
				gl1 := b.Let("gate_l1", kir.GetWritePtr{CB: cbGate})
				blocks.ReadPageTo(b, gAcc, kir.Add(kir.Mul(groupUser, kir.Ci(Dt)), dd), gl1)
				b.NoCAsyncReadBarrier()
				if err := sdpaGroupToTop(b, groupFirst, gl1, 1, gAcc.PageSize(), d.G, d.H, blocks.ElemBytes(gate.Type.DType)); err != nil {
					rowErr = err
				}
				b.NoCAsyncReadBarrier()
				b.CBPushBack(cbGate, kir.C(1))
			} else {
				gg.Page(b, cbGate, page)
			}
		})
	})
	if rowErr != nil {
		return nil, rowErr
	}
	gg.End(b)
	if !prefill {
		gq.End(b)
	}
	blocks.ReleaseScratchPages(b, cbConst, 3)
	blocks.ReleaseScratch(b, cbPos)

	// Compute.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	citems := cp.RuntimeArg("items")
	c := blocks.NewCompute(p, cp)
	cb := c.B
	c.MatmulStartup(cbQ, cbK, cbS)
	cb.CBWaitFront(cbScaler, kir.C(1))
	cb.CBWaitFront(cbOnes, kir.C(1))
	c.For("i", kir.C(0), citems, func(kir.Var) {
		cb.CBWaitFront(cbQ, kir.Ci(Dt))
		cb.Comment("scores: (mask + q k^T) * scale")
		c.For("t", kir.C(0), kir.Ci(Lt), func(kir.Var) {
			c.Acquire()
			cb.CBWaitFront(cbMask, kir.C(1))
			c.Copy(cbMask, kir.C(0), kir.C(0))
			cb.CBPopFront(cbMask, kir.C(1))
			c.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) {
				cb.CBWaitFront(cbK, kir.C(1))
				c.Matmul(cbQ, cbK, dd, kir.C(0), kir.C(0), true)
				cb.CBPopFront(cbK, kir.C(1))
			})
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(scale)}, kir.C(0))
			c.PackOut(cbS, 1)
		})
		cb.Comment("softmax: -max, exp(s - max), 1/sum")
		cb.CBWaitFront(cbS, kir.Ci(Lt))
		c.Acquire()
		c.For("t", kir.C(0), kir.Ci(Lt), func(tt kir.Var) {
			c.Reduce(kir.ReduceMax, kir.ReduceRow, cbS, cbScaler, cbNegMax, tt, kir.C(0), kir.C(0))
		})
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, kir.C(0))
		c.PackOut(cbNegMax, 1)
		cb.CBWaitFront(cbNegMax, kir.C(1))
		c.For("t", kir.C(0), kir.Ci(Lt), func(tt kir.Var) {
			c.Acquire()
			c.Copy(cbS, tt, kir.C(0))
			c.Matmul(cbNegMax, cbOnes, kir.C(0), kir.C(0), kir.C(0), false)
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, kir.C(0))
			c.PackOut(cbP, 1)
		})
		cb.CBPopFront(cbNegMax, kir.C(1))
		cb.CBPopFront(cbS, kir.Ci(Lt))
		cb.CBWaitFront(cbP, kir.Ci(Lt))
		c.Acquire()
		c.For("t", kir.C(0), kir.Ci(Lt), func(tt kir.Var) {
			c.Reduce(kir.ReduceSum, kir.ReduceRow, cbP, cbScaler, cbRecip, tt, kir.C(0), kir.C(0))
		})
		c.SFPU(blocks.SFPUStep{Op: kir.SFPURecip}, kir.C(0))
		c.PackOut(cbRecip, 1)
		cb.CBWaitFront(cbRecip, kir.C(1))
		cb.Comment("per D tile of the item: (p v) / sum, times sigmoid(gate)")
		c.For("d", kir.C(0), kir.Ci(dc), func(kir.Var) {
			c.Acquire()
			c.For("t", kir.C(0), kir.Ci(Lt), func(tt kir.Var) {
				cb.CBWaitFront(cbV, kir.C(1))
				c.Matmul(cbP, cbV, tt, kir.C(0), kir.C(0), false)
				cb.CBPopFront(cbV, kir.C(1))
			})
			c.PackOut(cbPV, 1)
			cb.CBWaitFront(cbPV, kir.C(1))
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastCols, cbPV, cbRecip, kir.C(0), kir.C(0), kir.C(0))
			cb.CBPopFront(cbPV, kir.C(1))
			c.PackOut(cbO, 1)
			c.Unary(cbGate, cbSig, []blocks.SFPUStep{{Op: kir.SFPUSigmoid}})
			c.BinaryTile(kir.EltMul, blocks.BcastNone, cbO, cbSig, cbOut, false, nil)
		})
		cb.CBPopFront(cbRecip, kir.C(1))
		cb.CBPopFront(cbP, kir.Ci(Lt))
		cb.CBPopFront(cbQ, kir.Ci(Dt))
	})
	cb.CBPopFront(cbOnes, kir.C(1))
	cb.CBPopFront(cbScaler, kir.C(1))

	// Writer.
	wr := newWriter(p, rs)
	oAcc := ab.bind(wr, "out_addr", out)
	if ab.err != nil {
		return nil, ab.err
	}
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	b = wr.Builder()
	if prefill {
		// out [B,S,H*D]: tile row st of user b, tile column h*Dt + d.
		b.For("i", wstart, kir.Add(wstart, wcount), func(i kir.Var) {
			st := b.Let("st", kir.Mod(i, kir.Ci(d.St)))
			bh := b.Let("bh", kir.Div(i, kir.Ci(d.St)))
			u, h := kir.Div(bh, kir.Ci(d.H)), kir.Mod(bh, kir.Ci(d.H))
			first := b.Let("first", kir.Add(kir.Mul(kir.Add(kir.Mul(u, kir.Ci(d.St)), st), kir.Ci(d.H*Dt)), kir.Mul(h, kir.Ci(Dt))))
			blocks.WritePages(b, oAcc, cbOut, first, kir.Ci(Dt))
		})
	} else {
		// Row g of each result tile is row 0 of an output tile: the G
		// output tiles of a result tile are assembled in G zeroed pages
		// (only row 0 is ever rewritten), then written under one barrier.
		oeb, otb := blocks.ElemBytes(out.Type.DType), out.Type.DType.TileBytes()
		otiles := blocks.ScratchPages(b, cbAsm, d.G, "otiles")
		blocks.FillWords(b, otiles, d.G*otb, 0)
		b.For("i", wstart, kir.Add(wstart, wcount), func(i kir.Var) {
			head := b.Let("head", kir.Div(i, kir.Ci(split)))
			dlo := b.Let("dlo", kir.Mul(kir.Mod(i, kir.Ci(split)), kir.Ci(dc)))
			u := b.Let("u", kir.Div(head, kir.Ci(d.Hkv)))
			j := b.Let("j", kir.Mod(head, kir.Ci(d.Hkv)))
			first := b.Let("first", kir.Add(kir.Mul(u, kir.Ci(d.H*Dt)), kir.Mul(j, kir.Ci(d.G*Dt))))
			b.For("d", dlo, kir.Add(dlo, kir.Ci(dc)), func(dd kir.Var) {
				b.CBWaitFront(cbOut, kir.C(1))
				src := b.Let("src", kir.GetReadPtr{CB: cbOut})
				otile := func(g kir.Expr) kir.Expr { return kir.Add(otiles, kir.Mul(g, kir.Ci(otb))) }
				b.For("g", kir.C(0), kir.Ci(d.G), func(g kir.Var) {
					blocks.CopyTileRow(b, src, g, otile(g), kir.C(0), oeb)
				})
				b.NoCAsyncReadBarrier()
				b.For("g", kir.C(0), kir.Ci(d.G), func(g kir.Var) {
					b.NoCAsyncWrite(otile(g), oAcc.PageAddr(kir.Add(first, kir.Add(kir.Mul(g, kir.Ci(Dt)), dd))), kir.Ci(otb))
				})
				b.NoCAsyncWriteBarrier()
				b.CBPopFront(cbOut, kir.C(1))
			})
		})
		blocks.ReleaseScratchPages(b, cbAsm, d.G)
	}

	for ci, core := range cores {
		s, n := plan.Range(ci)
		rd.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
		cp.SetRuntimeArgs(core, kir.U32(uint32(n)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
	return p, nil
}

// sdpaCacheBlock bounds the KV-cache tiles the SDPA reader moves per
// barrier (its K and V CBs hold two blocks).
const sdpaCacheBlock = 8

// sdpaGroupToTop emits, for the n tiles of page size ps at L1 address l1
// (rows of a user's all heads), the move of rows first..first+G-1
// to rows 0..G-1 in each tile (first is a run-time multiple of G below
// all, so the two row ranges never overlap): one branch per possible
// first, local copies of face-row runs (blocks.CopyRows). The caller
// issues the read barrier.
func sdpaGroupToTop(b *kir.Builder, first kir.Var, l1 kir.Var, n, ps, g, all, eb int) error {
	var err error
	for f := g; f+g <= all; f += g {
		b.If(kir.Eq(first, kir.Ci(f)), func() {
			for j := range n {
				tile := kir.Add(l1, kir.Ci(j*ps))
				if e := blocks.CopyRows(b, tile, tile, f, 0, g, eb); e != nil {
					err = e
				}
			}
		})
	}
	return err
}
