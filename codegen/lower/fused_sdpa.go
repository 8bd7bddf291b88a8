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
// with r rounding to q's (gate's) dtype. This file holds what both share
// (the checks, the operands' reader set-up, decodeItem and groupTiles,
// which gather a decode item's query and gate rows, prefillItem, which
// reads a prefill item's query rows and builds its causal masks, the K
// cache reader cacheTilesInto, the writers). Both run an online softmax over
// chunks of the cache, so their cost follows the position and their L1
// does not depend on the cache length: decode is flash decoding
// (flash_sdpa.go), prefill flash attention on one core per item
// (flash_prefill.go, reusing flash decoding's compute kernel).

// sdpaDims are the sizes of one gated SDPA.
type sdpaDims struct{ B, H, Hkv, G, S, D, L, Dt, Lt, St, items int }

// sdpaGatedDims checks the operand shapes of a gated SDPA.
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

// gatedSDPA is a gated SDPA program under construction.
type gatedSDPA struct {
	*splitProgram           // its err: also a failure while emitting
	op                      *ir.Op
	prefill                 bool
	q, k, v, pos, gate, out *ir.Value
	scale                   float64
	d                       sdpaDims
	// the prefill reader moves kBlk K tiles (along a row) per barrier
	kBlk int
	// CBs; slotQ, asm < 0 in prefill
	cbQ, cbK, cbV, mask, cbGate, scaler, slotQ, slotG, consts, cbPos int
	scores, attn, sig, cbOut, asm                                    int
	rd, cp, wr                                                       *kir.Kernel
	qAcc, kAcc, vAcc, pAcc, gAcc                                     *blocks.Access
	gq, gg                                                           *blocks.Gather // gq nil in prefill
	groupRows                                                        bool           // decode, a user's heads in one tile row: groupTiles
	posv, lptr, lrow, zero, ninf, bound                              kir.Var        // reader: flashSDPA.reader, prefillReader
}

// sdpaItem is what the reader knows of its current work item.
type sdpaItem struct {
	head           kir.Var          // kv head b*Hkv + j
	mask           func(tt kir.Var) // (prefill) emits the mask of cache tile tt into the reserved page
	user, groupRow kir.Var          // groupRows: the user, the group's first row
}

// negInf is the bits of fp32 -inf.
const negInf = 0xFF800000

// sdpaGated checks op and builds its program: decode by flashDecode,
// prefill by flashBuild with one core per item.
func sdpaGated(op *ir.Op, ctx *Context, prefill bool) (*kir.Program, error) {
	o := op.Operands
	s := &gatedSDPA{op: op, prefill: prefill, q: o[0], k: o[1], v: o[2], pos: o[3], gate: o[4], out: op.Result()}
	var err error
	if s.scale, err = sdpaPreamble(op, op.Name(), "", s.pos, s.q, s.k, s.v, s.gate, s.out); err != nil {
		return nil, err
	}
	if s.d, err = sdpaGatedDims(op, prefill); err != nil {
		return nil, err
	}
	for _, x := range []*ir.Value{s.q, s.k, s.v, s.gate, s.out} {
		if blocks.ElemBytes(x.Type.DType) == 0 && ((x != s.k && x != s.v) || !blocks.RowsMovable(x.Type.DType)) {
			return nil, fmt.Errorf("rule sdpa-dtype: %s is %s; the program moves single rows, which needs bf16 or fp32 (the caches may also be bfp8_b: their rows are cleared by their mantissas)", x, x.Type.DType)
		}
	}
	if !prefill {
		return flashDecode(s, ctx)
	}
	return flashPrefill(s, ctx)
}

// readerSetup adds the reader kernel (s.rd) with the operands' buffer
// arguments and sets up the gathers of the query and gate rows (s.gq,
// s.gg) and whether the decode group's rows are moved whole
// (s.groupRows).
func (s *gatedSDPA) readerSetup() error {
	d, Dt := s.d, s.d.Dt
	rd := newReader(s.p, s.rs)
	s.qAcc, s.kAcc, s.vAcc, s.pAcc, s.gAcc = s.bind(rd, "q_addr", s.q), s.bind(rd, "k_addr", s.k), s.bind(rd, "v_addr", s.v), s.bind(rd, "pos_addr", s.pos), nil
	if !s.prefill {
		s.gAcc = s.bind(rd, "gate_addr", s.gate) // prefill: the writer reads the gate (prefillWriter)
	}
	if s.err != nil {
		return s.err
	}
	s.rd = rd
	seg, rows := blocks.SegFor(d.D), blocks.ImageOf(ir.Shape{d.G, d.D})
	if s.prefill {
		rows = blocks.ImageOf(ir.Shape{d.S, d.D})
	} else {
		s.gq = &blocks.Gather{Out: rows, DType: s.q.Type.DType, Seg: seg, Fill: true, Sources: []blocks.GatherSource{{Acc: s.qAcc, Image: blocks.ImageOf(s.q.Type.Shape)}}}
	}
	s.gg = &blocks.Gather{Out: rows, DType: s.gate.Type.DType, Seg: seg, Fill: true, Sources: []blocks.GatherSource{{Acc: s.gAcc, Image: blocks.ImageOf(s.gate.Type.Shape)}}}
	if err := s.gg.Check(); err != nil {
		return err
	}
	qim, gim := blocks.ImageOf(s.q.Type.Shape), blocks.ImageOf(s.gate.Type.Shape)
	s.groupRows = !s.prefill && qim.R == d.H && qim.Rt == 1 && gim.R == d.H && gim.Rt == 1 && qim.Ct == Dt && gim.Ct == Dt
	return nil
}

// prefillGatePages is the pages of the prefill writer's gate staging slot
// (gateRows: one span, at most a page, per row of a result tile, all in
// flight under one barrier): min(32, S) pages.
func prefillGatePages(d sdpaDims) int { return min(ir.TileSize, d.S) }

// decodeItem emits decode item i's (kv head b*Hkv + j) group query rows
// (rows b*H + j*G + g of q, gathered, or groupTiles) and sets the gate
// gather's row map to the group's rows.
func (s *gatedSDPA) decodeItem(b *kir.Builder, i kir.Var) sdpaItem {
	d, Dt := s.d, s.d.Dt
	var it sdpaItem
	it.head = b.Let("head", i) // b*Hkv + j
	if s.groupRows {
		it.user = b.Let("user", kir.Div(it.head, kir.Ci(d.Hkv)))
		it.groupRow = b.Let("group_row", kir.Mul(kir.Mod(it.head, kir.Ci(d.Hkv)), kir.Ci(d.G)))
		b.Comment("the group's query rows: q's tiles whole, the group's rows moved to the top")
		s.groupTiles(b, s.cbQ, s.qAcc, s.q, "q_l1", it, Dt, func(dd int) kir.Expr { return kir.Ci(dd) })
	} else {
		first := b.Let("first", kir.Add(kir.Mul(kir.Div(it.head, kir.Ci(d.Hkv)), kir.Ci(d.H)), kir.Mul(kir.Mod(it.head, kir.Ci(d.Hkv)), kir.Ci(d.G))))
		rowMap := func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			return []blocks.Run{{Src: 0, Row: kir.Add(first, row), Col: col}}
		}
		s.gq.Map, s.gg.Map = rowMap, rowMap
		b.Comment("the group's query rows")
		b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) { s.gq.Page(b, s.cbQ, dd) })
	}
	return it
}

// groupTiles emits the push into cb of n tiles of x, tile j user's page
// user*Dt + col(j) read whole, the group's G rows moved to rows 0..G-1
// by local copies of face-row runs (the other rows hold heads no result
// row reads) instead of gathering them segment by segment. A failure is
// left in s.err.
func (s *gatedSDPA) groupTiles(b *kir.Builder, cb int, a *blocks.Access, x *ir.Value, name string, it sdpaItem, n int, col func(j int) kir.Expr) {
	b.CBReserveBack(cb, kir.Ci(n))
	l1 := b.Let(name, kir.GetWritePtr{CB: cb})
	for j := range n {
		dst := kir.Expr(l1)
		if cb == s.cbQ {
			dst = kir.Add(l1, kir.Ci(j*a.PageSize()))
		}
		blocks.ReadPageTo(b, a, kir.Add(kir.Mul(it.user, kir.Ci(s.d.Dt)), col(j)), dst)
	}
	b.NoCAsyncReadBarrier()
	// One branch per possible first row f, a multiple of G below H (the
	// two row ranges never overlap).
	for f := s.d.G; f+s.d.G <= s.d.H; f += s.d.G {
		b.If(kir.Eq(it.groupRow, kir.Ci(f)), func() {
			for j := range n {
				tile := kir.Add(l1, kir.Ci(j*a.PageSize()))
				if err := blocks.CopyRows(b, tile, tile, f, 0, s.d.G, blocks.ElemBytes(x.Type.DType)); err != nil {
					s.err = err
				}
			}
		})
	}
	b.NoCAsyncReadBarrier()
	b.CBPushBack(cb, kir.Ci(n))
}

// prefillItem emits prefill item i's q tile row (q's own pages) and gate
// map; its masks are constant tiles but the one or two crossing the causal
// diagonal, built element by element.
func (s *gatedSDPA) prefillItem(b *kir.Builder, i kir.Var) sdpaItem {
	d, fb := s.d, ir.FP32.TileBytes()
	var it sdpaItem
	st := b.Let("st", kir.Mod(i, kir.Ci(d.St)))
	bh := b.Let("bh", kir.Div(i, kir.Ci(d.St))) // b*H + h
	u, h := b.Let("u", kir.Div(bh, kir.Ci(d.H))), b.Let("h", kir.Mod(bh, kir.Ci(d.H)))
	it.head = b.Let("head", kir.Add(kir.Mul(u, kir.Ci(d.Hkv)), kir.Div(h, kir.Ci(d.G))))
	row0 := b.Let("row0", kir.Add(s.posv, kir.Mul(st, kir.Ci(ir.TileSize)))) // position of the item's first query
	b.Comment("the head's query tile row: q's own pages")
	blocks.ReadPages(b, s.qAcc, s.cbQ, kir.Mul(i, kir.Ci(d.Dt)), kir.Ci(d.Dt))
	it.mask = func(tt kir.Var) {
		m := b.Let("m", kir.GetWritePtr{CB: s.mask})
		t0 := b.Let("t0", kir.Mul(tt, kir.Ci(ir.TileSize)))
		b.IfElse(kir.Le(kir.Add(t0, kir.Ci(ir.TileSize-1)), row0), func() { blocks.LocalCopy(b, s.zero, m, fb) }, func() {
			b.IfElse(kir.Gt(t0, kir.Add(row0, kir.Ci(ir.TileSize-1))), func() { blocks.LocalCopy(b, s.ninf, m, fb) }, func() {
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
	return it
}

// cacheTilesInto reads n cache tiles (tt(j), dd(j)) of head into the n
// reserved pages at base, zero past the last visible position: all reads
// in flight, one barrier, then the rows past it cleared in the tile
// holding it. The caller pushes them.
func (s *gatedSDPA) cacheTilesInto(b *kir.Builder, a *blocks.Access, base kir.Var, dtype ir.DType, head kir.Expr, n int, tile func(j kir.Expr) (tt, dd kir.Expr)) {
	tb := dtype.TileBytes()
	b.For("j", kir.C(0), kir.Ci(n), func(j kir.Var) {
		tt, dd := tile(j)
		l1 := b.Let("l1j", kir.Add(base, kir.Mul(j, kir.Ci(tb))))
		b.IfElse(kir.Gt(tt, s.lptr), func() {
			blocks.LocalCopy(b, s.zero, l1, tb)
		}, func() {
			blocks.ReadPageTo(b, a, kir.Add(kir.Mul(kir.Add(kir.Mul(head, kir.Ci(s.d.Lt)), tt), kir.Ci(s.d.Dt)), dd), l1)
		})
	})
	b.NoCAsyncReadBarrier()
	b.For("j", kir.C(0), kir.Ci(n), func(j kir.Var) {
		tt, _ := tile(j)
		b.If(kir.Eq(tt, s.lptr), func() {
			blocks.ZeroRowsFromDT(b, kir.Add(base, kir.Mul(j, kir.Ci(tb))), s.zero, kir.Add(s.lrow, kir.C(1)), dtype)
		})
	})
	b.NoCAsyncReadBarrier()
}

// reduceRows emits, in a compute kernel, the row reduction op of the n
// tiles of in (waited for, not popped; loop variable name) against the
// scaler tile into DEST 0, then steps, packed to one page of out.
func reduceRows(c *blocks.Compute, name string, op kir.ReduceOp, in, scaler, out, n int, steps ...blocks.SFPUStep) {
	c.B.CBWaitFront(in, kir.Ci(n))
	c.Acquire()
	c.For(name, kir.C(0), kir.Ci(n), func(t kir.Var) {
		c.Reduce(op, kir.ReduceRow, in, scaler, out, t, kir.C(0), kir.C(0))
	})
	c.SFPUSteps(steps, kir.C(0))
	c.PackOut(out, 1)
}

// sumRows emits, in a compute kernel, the row sums of the n tiles of in
// (waited for, not popped; loop variable name) by matmul_tiles against the
// ones column tile ones (blocks.OnesColumnTile) into DEST 0, then steps,
// packed to one page of out. The sums stay in the fp32 DEST (column 0,
// the other columns zero); reduce_tile<SUM, REDUCE_ROW> (reduceRows)
// would move them through a bf16 SrcB after every tile.
func sumRows(c *blocks.Compute, name string, in, ones, out, n int, steps ...blocks.SFPUStep) {
	c.B.CBWaitFront(in, kir.Ci(n))
	c.Acquire()
	c.For(name, kir.C(0), kir.Ci(n), func(t kir.Var) {
		c.Matmul(in, ones, t, kir.C(0), kir.C(0), false)
	})
	c.SFPUSteps(steps, kir.C(0))
	c.PackOut(out, 1)
}

// writer adds the writer (runtime args start, count: items). Prefill: a
// result tile is an output tile (tile row st, column h*Dt + d of user b).
// Decode (flash decoding's one-core groups): writeDecodeTiles per item.
func (s *gatedSDPA) writer() error { return s.writerEach(nil) }

// writerEach is writer with prefill's items visited by each (nil: start
// .. start+count-1).
func (s *gatedSDPA) writerEach(each func(b *kir.Builder, start, count kir.Expr, body func(i kir.Var))) error {
	d, Dt := s.d, s.d.Dt
	wr := newWriter(s.p, s.rs)
	oAcc := s.bind(wr, "out_addr", s.out)
	if s.err != nil {
		return s.err
	}
	s.wr = wr
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	b := wr.Builder()
	if s.prefill {
		if each == nil {
			each = func(b *kir.Builder, start, count kir.Expr, body func(i kir.Var)) {
				b.For("i", start, kir.Add(start, count), body)
			}
		}
		each(b, wstart, wcount, func(i kir.Var) {
			st := b.Let("st", kir.Mod(i, kir.Ci(d.St)))
			bh := b.Let("bh", kir.Div(i, kir.Ci(d.St)))
			u, h := kir.Div(bh, kir.Ci(d.H)), kir.Mod(bh, kir.Ci(d.H))
			first := b.Let("first", kir.Add(kir.Mul(kir.Add(kir.Mul(u, kir.Ci(d.St)), st), kir.Ci(d.H*Dt)), kir.Mul(h, kir.Ci(Dt))))
			blocks.WritePages(b, oAcc, s.cbOut, first, kir.Ci(Dt))
		})
		return nil
	}
	otiles := blocks.ScratchPages(b, s.asm, d.G, "otiles")
	blocks.FillWords(b, otiles, d.G*s.out.Type.DType.TileBytes(), 0)
	b.For("i", wstart, kir.Add(wstart, wcount), func(i kir.Var) {
		s.writeDecodeTiles(b, oAcc, otiles, b.Let("head", i))
	})
	blocks.ReleaseScratchPages(b, s.asm, d.G)
	return nil
}

// writeDecodeTiles emits the writes of decode item head's (b*Hkv + j)
// Dt result tiles (one page of cbOut each): row g of a result tile is row
// 0 of head j*G + g's output tile, assembled in the G zeroed pages at
// otiles (only row 0 is ever rewritten) and written under one barrier.
func (s *gatedSDPA) writeDecodeTiles(b *kir.Builder, oAcc *blocks.Access, otiles kir.Var, head kir.Var) {
	d, Dt := s.d, s.d.Dt
	oeb, otb := blocks.ElemBytes(s.out.Type.DType), s.out.Type.DType.TileBytes()
	otile := func(g kir.Expr) kir.Expr { return kir.Add(otiles, kir.Mul(g, kir.Ci(otb))) }
	u := b.Let("u", kir.Div(head, kir.Ci(d.Hkv)))
	j := b.Let("j", kir.Mod(head, kir.Ci(d.Hkv)))
	first := b.Let("first", kir.Add(kir.Mul(u, kir.Ci(d.H*Dt)), kir.Mul(j, kir.Ci(d.G*Dt))))
	b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) {
		src := blocks.WaitFront(b, s.cbOut, kir.C(1), "src")
		b.For("g", kir.C(0), kir.Ci(d.G), func(g kir.Var) {
			blocks.CopyTileRow(b, src, g, otile(g), kir.C(0), oeb)
		})
		b.NoCAsyncReadBarrier()
		b.For("g", kir.C(0), kir.Ci(d.G), func(g kir.Var) {
			b.NoCAsyncWrite(otile(g), oAcc.PageAddr(kir.Add(first, kir.Add(kir.Mul(g, kir.Ci(Dt)), dd))), kir.Ci(otb))
		})
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(s.cbOut, kir.C(1))
	})
}

// sdpaCacheBlock bounds the KV-cache tiles the SDPA reader moves per
// barrier (its K and V CBs hold two blocks).
const sdpaCacheBlock = 8
