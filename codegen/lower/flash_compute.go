package lower

import (
	"math"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// The flash-decoding (and flash prefill) compute kernel: per chunk of
// cache tiles the masked, scaled scores, the online softmax's shift and
// rescale, the values, then the normalisation (one core per item) or the
// core's partial for the combine (flash_sdpa.go's doc).

// compute adds the compute kernel (see the file's doc). Runtime args:
// items and slot.
func (f *flashSDPA) compute() {
	s, Dt, C := f.gatedSDPA, f.d.Dt, f.chunk
	var c *blocks.Compute
	s.cp, c = fp32Compute(s.p, s.rs, s.ctx)
	items, slot := s.cp.RuntimeArg("items"), s.cp.RuntimeArg("slot")
	c.MatmulStartup(s.cbQ, s.cbK, s.scores)
	perItem := f.perItemPos()
	consts := []int{s.scaler, f.zeroT, f.onesT, f.posC}
	if perItem {
		consts = consts[:3] // the item's pos page comes with the item
	}
	for _, cb := range consts {
		c.B.CBWaitFront(cb, kir.C(1))
	}
	var sp flashSplit
	var lptr, lo, hi kir.Var
	span := func() {
		pos := c.B.Let("pos", kir.ReadTileValue{CB: f.posC, Tile: kir.C(0), Offset: kir.C(0)})
		if f.prefill {
			f.maskFrom = c.B.Let("mask_from", kir.ReadTileValue{CB: f.posC, Tile: kir.C(0), Offset: kir.Ci(prefillMaskWord)})
		}
		sp = f.flashSpan(c.B, pos, slot)
		lptr, lo, hi = sp.lptr, sp.lo, sp.hi
	}
	if !perItem {
		span()
	}
	if f.group > 1 {
		is, k := f.helper(c.B, slot)
		c.If(is, func() {
			c.B.Comment("helper: sigmoid of its gate tiles first, for its result tiles")
			c.ForStep("d", k, kir.Ci(Dt), kir.Ci(f.helpers), func(kir.Var) {
				c.Unary(s.cbGate, f.sigH, []blocks.SFPUStep{{Op: kir.SFPUSigmoid}})
			})
		}, nil)
	}
	stream := func() {
		c.For("i", kir.C(0), items, func(kir.Var) {
			if perItem {
				c.B.Comment("the item's user's position")
				c.B.CBWaitFront(f.posC, kir.C(1))
				span()
				c.B.CBPopFront(f.posC, kir.C(1))
			}
			qa := f.itemQ(c)
			c.ForStep("t0", lo, hi, kir.Ci(C), func(t0 kir.Var) {
				cend := chunkEnd(c.B, t0, hi, C)
				n := c.B.Let("n", kir.Sub(cend, t0))
				later := c.B.Let("later", kir.Ne(t0, lo)) // not the first chunk
				f.chunkScores(c, qa, t0, cend, lptr)
				f.chunkSoftmax(c, n, later)
				f.chunkValues(c, n, later)
			})
			c.B.CBPopFront(qa, kir.Ci(Dt))
			if f.group == 1 {
				f.normalise(c)
			} else {
				f.partial(c)
			}
		})
	}
	if f.group == 1 {
		stream()
	} else {
		c.If(kir.Lt(lo, hi), stream, nil)
		// the leader's merged tiles, rounded to q's dtype, go to the
		// helpers, which multiply them by sigmoid(gate)
		f.sc.MergeThen(c, slot, sp.used, nil)
		is, k := f.helper(c.B, slot)
		c.If(is, func() {
			c.B.Comment("helper: its result tiles from the leader, times sigmoid(gate)")
			c.ForStep("d", k, kir.Ci(Dt), kir.Ci(f.helpers), func(kir.Var) {
				c.BinaryTile(kir.EltMul, blocks.BcastNone, f.res, f.sigH, s.cbOut, false, nil)
			})
		}, nil)
	}
	for _, cb := range []int{f.posC, f.onesT, f.zeroT, s.scaler} {
		if cb != f.posC || !perItem {
			c.B.CBPopFront(cb, kir.C(1))
		}
	}
}

// perItemPos reports whether the program reads a position per item: pos
// [B] with group 1, whose cores may hold items of several users. With
// group > 1 a core's one item fixes its user, whose word the reader reads
// once, as it reads pos [1].
func (f *flashSDPA) perItemPos() bool { return f.prefill || f.group == 1 && perUserPos(f.pos) }

// qScaled reports whether the prefill program multiplies q by the scale
// once per item (q_scaled) rather than every score tile: the scale is a
// power of two (1/16 at D = 256) and q bf16 or fp32, so q * scale is
// exact in q's dtype, and so are the products and fp32 sums of the
// scores, each 2^e times those of q: (mask + (q * scale) K^T) equals
// (mask + q K^T) * scale bit for bit (but where a value would fall
// below fp32's normals), the order sim/ref's attendFlashFPU computes.
func qScaled(s *gatedSDPA) bool {
	fr, _ := math.Frexp(s.scale)
	dt := s.q.Type.DType
	return prefillQScaled && s.prefill && fr == 0.5 && (dt == ir.BF16 || dt == ir.FP32)
}

// prefillKRowWait makes the prefill score products wait for a cache
// tile's Dt K tiles with one cb_wait_front and pop them with one
// cb_pop_front, not one of each per tile: 2 CB calls per score tile
// instead of 2 Dt (16 at D = 256) => the same products, fewer CB calls
// (a variable for the test that compares the two).
var prefillKRowWait = true

// prefillQScaled enables qScaled (a variable for the test that compares
// the two).
var prefillQScaled = true

// itemQ waits for the item's Dt q tiles and returns the CB the score
// products read them from: q itself, or (qScaled) q_scaled, q times the
// scale by the SFPU, one tile at a time (q popped). The caller pops Dt
// pages of the returned CB after the item's chunks.
func (f *flashSDPA) itemQ(c *blocks.Compute) int {
	s, Dt := f.gatedSDPA, f.d.Dt
	qa := s.cbQ
	if f.qS < 0 {
		c.B.CBWaitFront(s.cbQ, kir.Ci(Dt))
	} else {
		c.B.Comment("q * scale (a power of two: exact), once per item rather than per score tile")
		c.For("d", kir.C(0), kir.Ci(Dt), func(kir.Var) {
			c.Unary(s.cbQ, f.qS, []blocks.SFPUStep{{Op: kir.SFPUMulScalar, Param: float32(s.scale)}})
		})
		c.B.CBWaitFront(f.qS, kir.Ci(Dt))
		qa = f.qS
	}
	if f.gateGo >= 0 {
		c.B.Comment("the item's q is in: the writer may read its gate tiles")
		c.B.CBReserveBack(f.gateGo, kir.C(1))
		c.B.CBPushBack(f.gateGo, kir.C(1))
	}
	return qa
}

// chunkScores emits the scores of cache tiles [t0, cend) into one block
// of the scores CB (its unused pages left as they are): DEST = mask (pos's
// tile only) + q K_t^T, times scale (qa: q's CB, or q_scaled, already
// times the scale). In prefill (prefillKRowWait) it waits for and pops a
// cache tile's Dt K tiles at once (the reader pushes whole rows of them,
// kBlk or kPair*Dt tiles, and the K CB holds a multiple of Dt).
func (f *flashSDPA) chunkScores(c *blocks.Compute, qa int, t0, cend, lptr kir.Var) {
	s := f.gatedSDPA
	c.B.Comment("chunk scores: (mask + q k^T) * scale")
	kRow := s.prefill && prefillKRowWait
	c.B.CBReserveBack(s.scores, kir.Ci(f.chunk))
	c.For("t", t0, cend, func(tt kir.Var) {
		c.Acquire()
		masked := kir.Expr(kir.Eq(tt, lptr))
		if s.prefill {
			masked = kir.Ge(tt, f.maskFrom)
		}
		maskCopy := func() {
			c.B.CBWaitFront(s.mask, kir.C(1))
			c.Copy(s.mask, kir.C(0), kir.C(0))
			c.B.CBPopFront(s.mask, kir.C(1))
		}
		if s.prefill && prefillMaskKeep {
			c.IfKeep(masked, maskCopy)
		} else {
			c.If(masked, maskCopy, nil)
		}
		if kRow {
			c.B.CBWaitFront(s.cbK, kir.Ci(f.d.Dt))
		}
		c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(dd kir.Var) {
			if kRow {
				c.Matmul(qa, s.cbK, dd, dd, kir.C(0), true)
				return
			}
			c.B.CBWaitFront(s.cbK, kir.C(1))
			c.Matmul(qa, s.cbK, dd, kir.C(0), kir.C(0), true)
			c.B.CBPopFront(s.cbK, kir.C(1))
		})
		if kRow {
			c.B.CBPopFront(s.cbK, kir.Ci(f.d.Dt))
		}
		if qa == s.cbQ {
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(s.scale)}, kir.C(0))
		}
		c.Commit()
		c.Wait()
		c.Pack(kir.C(0), s.scores)
		c.Release()
	})
	c.B.CBPushBack(s.scores, kir.Ci(f.chunk))
}

// prefillMaskKeep makes the prefill score loop re-establish the products'
// unpacker formats and matmul init at the end of the mask's copy (1 or 2
// of an item's cache tiles) rather than before every tile's products:
// reconfig_data_format and mm_init_short per score tile => per masked
// tile, the same products (a variable for the test that compares the
// two).
var prefillMaskKeep = true

// prefillExpGroup is the score tiles the prefill softmax's exp loop
// takes per DEST acquire (largest divisor of the chunk within DEST's fp32
// tiles; 1: one per acquire): every tile sees the same add and exp, and
// the pages land in the same order => the same exp block, fewer DEST
// hand-overs (a variable for the test that compares the two).
var prefillExpGroup = 4

// expGroup is the score tiles chunkSoftmax's exp loop takes per acquire.
func (f *flashSDPA) expGroup() int {
	if !f.prefill {
		return 1
	}
	return largestDivisor(f.chunk, min(prefillExpGroup, f.ctx.Target.DestTiles(false, true)))
}

// chunkSoftmax emits, for the chunk's n score tiles, the new shift nm' =
// -max(m, row max) (later chunks; the first chunk's row max alone) to nmN
// and behind the old one in nmS, P = exp(S + nm') into the exp CB and l =
// rowsum P, plus (later chunks) l * a, a = exp(m - m') the rescale factor
// on every column, left in its CB for chunkValues. It pops the scores,
// the old nm and l, and leaves the exp block for chunkValues.
func (f *flashSDPA) chunkSoftmax(c *blocks.Compute, n, later kir.Var) {
	s := f.gatedSDPA
	sfpu := func(op kir.SFPUOp, d int) { c.SFPU(blocks.SFPUStep{Op: op}, kir.Ci(d)) }
	c.B.Comment("new shift: -max(m, row max of the chunk), rounded to bf16")
	c.B.CBWaitFront(s.scores, kir.Ci(f.chunk))
	c.Acquire()
	c.For("j", kir.C(0), n, func(j kir.Var) {
		c.Reduce(kir.ReduceMax, kir.ReduceRow, s.scores, s.scaler, f.nmN, j, kir.C(0), kir.C(0))
	})
	if s.prefill && prefillMinShift {
		// DEST[0] = min(-c, nm) = -max(c, m), c the chunk's row max: a
		// row may see none of a chunk's columns (c = -inf past the
		// diagonal: -c = +inf), and nm, set by tile 0, which every row
		// sees, is finite
		sfpu(kir.SFPUNegative, 0)
		c.If(later, func() {
			c.B.CBWaitFront(f.nmS, kir.C(1))
			c.Copy(f.nmS, kir.C(0), kir.C(1))
			c.SFPUBinary(kir.SFPUMinBinary, kir.C(0), kir.C(1))
		}, nil)
	} else {
		f.shiftByRelu(c, later)
	}
	c.PackOutTo(f.nmN, f.nmS)
	c.B.CBWaitFront(f.nmN, kir.C(1))
	c.B.Comment("p = exp(s - m')")
	c.B.CBReserveBack(f.pexp, kir.Ci(f.chunk))
	if g := f.expGroup(); g > 1 {
		c.ForStep("j0", kir.C(0), n, kir.Ci(g), func(j0 kir.Var) {
			m := blocks.BlockLenOf(c.B, "m", n, j0, kir.Ci(g))
			c.Acquire()
			c.For("k", kir.C(0), m, func(k kir.Var) {
				c.Binary(kir.EltAdd, blocks.BcastCols, s.scores, f.nmN, kir.Add(j0, k), kir.C(0), k)
				c.SFPU(blocks.SFPUStep{Op: f.softmaxExp()}, k)
			})
			c.Commit()
			c.Wait()
			c.For("k", kir.C(0), m, func(k kir.Var) { c.Pack(k, f.pexp) })
			c.Release()
		})
	} else {
		c.For("j", kir.C(0), n, func(j kir.Var) {
			c.Acquire()
			c.Binary(kir.EltAdd, blocks.BcastCols, s.scores, f.nmN, j, kir.C(0), kir.C(0))
			sfpu(f.softmaxExp(), 0)
			c.Commit()
			c.Wait()
			c.Pack(kir.C(0), f.pexp)
			c.Release()
		})
	}
	c.B.CBPushBack(f.pexp, kir.Ci(f.chunk))
	c.B.CBPopFront(s.scores, kir.Ci(f.chunk))
	c.If(later, func() {
		c.B.Comment("rescale factor a = exp(m - m') on every column")
		c.Acquire()
		c.Binary(kir.EltSub, blocks.BcastCols, f.zeroT, f.nmS, kir.C(0), kir.C(0), kir.C(0))
		c.Binary(kir.EltAdd, blocks.BcastCols, f.zeroT, f.nmN, kir.C(0), kir.C(0), kir.C(1))
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
		sfpu(f.softmaxExp(), 0)
		c.PackOut(f.alpha, 1)
		c.B.CBPopFront(f.nmS, kir.C(1))
		c.B.CBWaitFront(f.alpha, kir.C(1))
	}, nil)
	c.B.CBPopFront(f.nmN, kir.C(1))
	c.B.Comment("l = l * a + row sum of p")
	c.B.CBWaitFront(f.pexp, kir.Ci(f.chunk))
	c.Acquire()
	c.For("j", kir.C(0), n, func(j kir.Var) {
		c.Matmul(f.pexp, f.onesT, j, kir.C(0), kir.C(0), false)
	})
	c.If(later, func() {
		c.B.CBWaitFront(f.lS, kir.C(1))
		c.Copy(f.lS, kir.C(0), kir.C(1))
		c.Copy(f.alpha, kir.C(0), kir.C(2))
		c.SFPUBinary(kir.SFPUMulBinary, kir.C(1), kir.C(2))
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
		c.B.CBPopFront(f.lS, kir.C(1))
	}, nil)
	c.PackOut(f.lS, 1)
}

// prefillMinShift makes the prefill softmax's new shift one SFPU min,
// nm' = min(-c, nm), in place of -(m + relu(c - m)) (add, relu,
// negative, add, negative): c and m = -nm are bf16 values (the row
// maximum keeps its upper 16 bits, the shift is packed to bf16), so m +
// relu(c - m) is max(c, m) within an fp32 ulp and its bf16 packing the
// same bits (but where c - m overflows). add, relu, add, negative =>
// min_binary (a variable for the test that compares the two).
var prefillMinShift = true

// shiftByRelu emits chunkSoftmax's new shift without min_binary (decode,
// or prefill with prefillMinShift off): DEST[0] holds the chunk's row
// max c; it leaves -max(m, c) there.
func (f *flashSDPA) shiftByRelu(c *blocks.Compute, later kir.Var) {
	s := f.gatedSDPA
	sfpu := func(op kir.SFPUOp, d int) { c.SFPU(blocks.SFPUStep{Op: op}, kir.Ci(d)) }
	c.If(later, func() {
		c.B.CBWaitFront(f.nmS, kir.C(1))
		c.Copy(f.nmS, kir.C(0), kir.C(1))
		if s.prefill {
			// DEST[0] = m + relu(c - m), c the chunk's row max: a row may
			// see none of a chunk's columns (c = -inf past the diagonal),
			// and m, set by tile 0, which every row sees, is finite
			c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
			sfpu(kir.SFPURelu, 0)
			sfpu(kir.SFPUNegative, 1)
			c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
			return
		}
		sfpu(kir.SFPUNegative, 1) // m
		// DEST[0] = max(DEST[0], DEST[1]) = a + relu(b - a)
		sfpu(kir.SFPUNegative, 0)
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(1), kir.C(0))
		sfpu(kir.SFPURelu, 1)
		sfpu(kir.SFPUNegative, 0)
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
	}, nil)
	sfpu(kir.SFPUNegative, 0)
}

// softmaxExp is the exp of the online softmax: in prefill the softmax's
// own (kir.SFPUExpSoftmax, ir/sfpu exp_softmax.go: its arguments s - m
// and m_old - m_new are at most the bf16 rounding of m above 0, -inf
// where masked, and its results are read as tf32), in decode exp.
// exp => exp_softmax (prefill: 21 cycles an iteration, not 50).
func (f *flashSDPA) softmaxExp() kir.SFPUOp {
	if f.prefill && prefillExpSoftmax {
		return kir.SFPUExpSoftmax
	}
	return kir.SFPUExp
}

// prefillExpSoftmax enables the softmax's exp in prefill (a variable for
// the test that compares the two).
var prefillExpSoftmax = true

// chunkValues emits O_d = sum_j P_j V_jd for every D tile (one V block
// each), plus (later chunks) O_d * a, and pops the exp block and a. In
// prefill (prefillOGroup) it takes the D tiles in groups sharing one
// DEST acquire (chunkValuesGrouped).
func (f *flashSDPA) chunkValues(c *blocks.Compute, n, later kir.Var) {
	s := f.gatedSDPA
	if s.prefill && prefillOGroup {
		f.chunkValuesGrouped(c, n, later)
		return
	}
	c.B.Comment("O = O * a + p v, per D tile")
	c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(kir.Var) {
		c.B.CBWaitFront(s.cbV, kir.Ci(f.chunk))
		c.Acquire()
		c.If(later, func() {
			c.B.CBWaitFront(f.oS, kir.C(1))
			c.Copy(f.oS, kir.C(0), kir.C(0))
			c.Copy(f.alpha, kir.C(0), kir.C(1))
			c.SFPUBinary(kir.SFPUMulBinary, kir.C(0), kir.C(1))
			c.B.CBPopFront(f.oS, kir.C(1))
		}, nil)
		c.For("j", kir.C(0), n, func(j kir.Var) {
			c.Matmul(f.pexp, s.cbV, j, j, kir.C(0), false)
		})
		c.B.CBPopFront(s.cbV, kir.Ci(f.chunk))
		c.PackOut(f.oS, 1)
	})
	c.B.CBPopFront(f.pexp, kir.Ci(f.chunk))
	c.If(later, func() { c.B.CBPopFront(f.alpha, kir.C(1)) }, nil)
}

// prefillOGroup makes the prefill chunkValues take O's D tiles in groups
// sharing one DEST acquire (chunkValuesGrouped): one copy of a and one
// switch between the copies and the products per group rather than per D
// tile => the same values in DEST, fewer unpacks and inits (a variable
// for the test that compares the two).
var prefillOGroup = true

// chunkValuesGrouped is chunkValues with O's Dt tiles in groups of g per
// acquire, g the largest divisor of the V block's vGroup D tiles up to
// DEST's fp32 tiles less one (2 on Blackhole at vGroup 4: a group never
// spans two V blocks, so each V block is freed as early as before):
// (later chunks) a copied once into DEST[g], each O_d of the group copied
// into DEST[k] and multiplied by it, then each D tile's products P_j V_jd
// accumulated into DEST[k] in chunkValues' order, and the group packed to
// O's CB a page at a time. Postcondition: O's tiles, and the CB traffic
// of the exp block, V and a, equal chunkValues' bit for bit (every DEST
// tile sees the same operations in the same order).
func (f *flashSDPA) chunkValuesGrouped(c *blocks.Compute, n, later kir.Var) {
	s, Dt := f.gatedSDPA, f.d.Dt
	g := largestDivisor(f.vGroup, max(s.ctx.Target.DestTiles(false, true)-1, 1))
	c.B.Comment("O = O * a + p v, per group of D tiles sharing DEST")
	for d0 := 0; d0 < Dt; d0 += g {
		m := min(g, Dt-d0) // g: vGroup divides Dt
		c.Acquire()
		c.If(later, func() {
			c.Copy(f.alpha, kir.C(0), kir.Ci(g))
			for k := 0; k < m; k++ {
				c.B.CBWaitFront(f.oS, kir.C(1))
				c.Copy(f.oS, kir.C(0), kir.Ci(k))
				c.B.CBPopFront(f.oS, kir.C(1))
			}
			for k := 0; k < m; k++ {
				c.SFPUBinary(kir.SFPUMulBinary, kir.Ci(k), kir.Ci(g))
			}
		}, nil)
		for k := 0; k < m; k++ {
			c.B.CBWaitFront(s.cbV, kir.Ci(f.chunk))
			c.For("j", kir.C(0), n, func(j kir.Var) {
				c.Matmul(f.pexp, s.cbV, j, j, kir.Ci(k), false)
			})
			c.B.CBPopFront(s.cbV, kir.Ci(f.chunk))
		}
		// a page at a time: O's CB (Dt + 1 pages) takes blocks of 1
		c.Commit()
		c.PackConfig(f.oS)
		c.Wait()
		for k := 0; k < m; k++ {
			c.B.CBReserveBack(f.oS, kir.C(1))
			c.Pack(kir.Ci(k), f.oS)
			c.B.CBPushBack(f.oS, kir.C(1))
		}
		c.Release()
	}
	c.B.CBPopFront(f.pexp, kir.Ci(f.chunk))
	c.If(later, func() { c.B.CBPopFront(f.alpha, kir.C(1)) }, nil)
}

// normalise emits (group 1) out_d = O_d * tf32(1/l) (an fp32 product on
// the SFPU with 1/l broadcast along the rows), then the gate, and pops
// the item's state.
func (f *flashSDPA) normalise(c *blocks.Compute) {
	s := f.gatedSDPA
	c.B.Comment("1/l on every column")
	c.B.CBWaitFront(f.lS, kir.C(1))
	c.Acquire()
	c.Copy(f.lS, kir.C(0), kir.C(0))
	c.SFPU(blocks.SFPUStep{Op: kir.SFPURecip}, kir.C(0))
	c.B.CBPopFront(f.lS, kir.C(1))
	c.PackOut(f.rcol, 1)
	c.B.CBWaitFront(f.rcol, kir.C(1))
	c.Acquire()
	c.Binary(kir.EltAdd, blocks.BcastCols, f.zeroT, f.rcol, kir.C(0), kir.C(0), kir.C(0))
	c.B.CBPopFront(f.rcol, kir.C(1))
	c.PackOut(f.rfull, 1)
	c.B.CBWaitFront(f.nmS, kir.C(1))
	c.B.CBPopFront(f.nmS, kir.C(1))
	c.B.CBWaitFront(f.rfull, kir.C(1))
	c.B.Comment("per D tile: O / l, times sigmoid(gate)")
	c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(kir.Var) {
		c.B.CBWaitFront(f.oS, kir.C(1))
		c.Acquire()
		c.Copy(f.oS, kir.C(0), kir.C(0))
		c.Copy(f.rfull, kir.C(0), kir.C(1))
		c.SFPUBinary(kir.SFPUMulBinary, kir.C(0), kir.C(1))
		c.B.CBPopFront(f.oS, kir.C(1))
		c.PackOut(s.attn, 1)
		c.Unary(s.cbGate, s.sig, []blocks.SFPUStep{{Op: kir.SFPUSigmoid}})
		c.BinaryTile(kir.EltMul, blocks.BcastNone, s.attn, s.sig, s.cbOut, false, nil)
	})
	c.B.CBPopFront(f.rfull, kir.C(1))
}

// partial emits (group > 1, a core with tiles) the core's partial for
// SplitCombine: O's Dt tiles, m = -nm, l, popping the state.
func (f *flashSDPA) partial(c *blocks.Compute) {
	c.B.Comment("this core's partial (O, m, l) to the writer, which sends it to its sub-leader")
	one := func(cb int, negate bool) {
		c.B.CBWaitFront(cb, kir.C(1))
		c.Acquire()
		c.Copy(cb, kir.C(0), kir.C(0))
		if negate {
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, kir.C(0))
		}
		c.B.CBPopFront(cb, kir.C(1))
		c.PackOut(f.sc.Partial, 1)
	}
	c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(kir.Var) { one(f.oS, false) })
	one(f.nmS, true)
	one(f.lS, false)
}
