package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// K chunks: a resident prefill matmul whose weight slice fits a core's L1
// but not next to one whole activation row (the 27B's down projection at
// 1x1: 544 K tiles, a 1.11 MB row next to 1.18 MB of weights) kept no
// resident plan and streamed its weights again for every tile row (~20 GB
// a 4,096-token program). Now its cores hold their weight slices for all
// rows and receive each row in kChunk() pages at a time (multicast
// sub-rounds, as rowChunks) into a ring of two chunks. Per chunk compute
// runs every sub-block of the core: it reloads the sub-block's fp32
// partial sums into DEST (copy_tile, unpacked to DEST exactly: the CB is
// fp32 and only copied), adds the chunk's K tiles in order, and packs the
// sums again to the fp32 partials CB, or after the last chunk to the
// result and the epilogue. This is tt-metal's mm_partials reload
// (bmm_large_block_zm_fused_bias_activation.cpp), not the packer's L1
// accumulation, which would add in another order: every output tile sums
// K in the one-K-loop order in fp32 and is rounded once, so the results
// are bit for bit those of the whole-row program. When the core's
// columns are one sub-block of one weight (kChunkHeld) the sums simply
// stay in DEST over the chunks (no partials CB).
//
// The writer multicasts row r's chunks after the first, then row r+1's
// first chunk, and only then writes row r's results
// (writeRowChunksAhead); the reader moves the
// whole weight slice in row 0 before any epilogue input (compute needs
// every sub-block's weights for the first chunk).

// kChunkMargin is the L1 kChunk leaves beside the weights, the chunk ring
// and the partials (results, epilogue inputs and scratch).
const kChunkMargin = 32 << 10

// kChunkOK reports whether f may take the K-chunk plan: resident rows of
// one activation, no norm prologue, users or gathered rows.
func (f *fusedMatmul) kChunkOK() bool {
	return f.residentOK() && f.norm == nil && f.users == 0
}

// kChunk is the activation pages per chunk when m is planned in K chunks
// (f.kChunked), else 0: the largest divisor P < kt of whole NoC packets
// (else of any size) whose ring of two chunks fits next to the weight
// slices and the partials; 0 when none does.
func (m *mmProgram) kChunk() int {
	if !m.kChunked || !m.resident || !m.mcast || m.rows < 2 {
		return 0
	}
	t := m.ctx.Target
	tb := m.act.Type.DType.TileBytes()
	fixed := weightSliceBytes(t, m.residentPages(m.ranges)) + m.partialPages()*ir.FP32.TileBytes() + kChunkMargin
	packet := max(1, t.MaxNoCPacket/tb)
	best := 0
	for p := m.kt - 1; p >= 1; p-- {
		if m.kt%p != 0 || fixed+2*p*tb > t.L1Budget() {
			continue
		}
		if p%packet == 0 {
			return p
		}
		if best == 0 {
			best = p
		}
	}
	return best
}

// partialPages is the fp32 partial tiles a core holds between chunks: its
// most columns times the most weights of a part; none when the sums stay
// in DEST (kChunkHeld).
func (m *mmProgram) partialPages() int {
	if m.kChunkHeld() {
		return 0
	}
	w := 0
	for _, pt := range m.parts {
		w = max(w, len(pt.weights))
	}
	most := 0
	for _, r := range m.ranges {
		most = max(most, r[1])
	}
	return most * w
}

// kChunkHeld reports whether a K-chunk program keeps each row's sums in
// DEST across the row's chunks instead of reloading them: one part of one
// weight whose every core has 1 to dest columns (one sub-block, one
// product a row: the 27B's down projection at 1x1, two columns a core).
// Compute then runs rowChunks' productPopping over the chunks (one
// acquire, the chunks' K tiles in order, each chunk popped once passed,
// one packing), so the results are the same bit for bit, without the
// partials' packs, copies and reconfigurations (about 12% of that
// program's compute).
// reload the partials per chunk => keep them in DEST when one sub-block holds the row
func (m *mmProgram) kChunkHeld() bool {
	if !m.kChunked || len(m.parts) != 1 || len(m.parts[0].weights) != 1 || m.plan.PerCore > m.dest {
		return false
	}
	for _, r := range m.ranges {
		if r[1] < 1 {
			return false // a core without columns would never pop its chunks
		}
	}
	return true
}

// readWeightsFirst emits the reader's row r when m takes K chunks: in
// row 0 every part's weight slice, then per part, per sub-block the
// epilogue's input tiles of row r.
func (m *mmProgram) readWeightsFirst(b *kir.Builder, r kir.Expr, pas []mmPartArgs, inAcc []*blocks.Access, kt kir.Expr) {
	b.If(kir.Eq(r, kir.C(0)), func() {
		for pi, pt := range m.parts {
			pa := pas[pi]
			b.ForStep("nb", kir.C(0), pa.count, kir.Ci(m.dest), func(nb kir.Var) {
				sb := blocks.BlockLen(b, "sb", pa.count, nb, m.dest)
				m.readSubBlockWeights(b, pt, pa, kt, b.Let("col", kir.Add(pa.start, nb)), sb)
			})
		}
	})
	if len(inAcc) == 0 {
		return
	}
	for pi := range m.parts {
		pa := pas[pi]
		b.ForStep("nb", kir.C(0), pa.count, kir.Ci(m.dest), func(nb kir.Var) {
			sb := blocks.BlockLen(b, "sb", pa.count, nb, m.dest)
			for i, acc := range inAcc {
				blocks.ReadPages(b, acc, m.inCB[i], m.rowPage(m.permRow(r), pa.nt, kir.Add(pa.start, nb)), sb)
			}
		})
	}
}

// computeRowKChunks is one activation row's compute when kChunk() is p >
// 0: per chunk of p K tiles (the ring's front), per part, per sub-block,
// each weight's partial sums carried over the chunks (productChunk), the
// epilogue after the last chunk; each chunk popped once every sub-block
// used it. Postcondition: wPos is at the end of every weight slice, the
// row popped.
func (m *mmProgram) computeRowKChunks(c *blocks.Compute, kt kir.Expr, counts []kir.ArgRef, wPos map[int]kir.Var, p int) {
	chunks := m.kt / p
	c.For("kc", kir.C(0), kir.Ci(chunks), func(j kir.Var) {
		for _, cb := range m.weightCBs() {
			c.B.Assign(wPos[cb], kir.C(0))
		}
		last := kir.Eq(j, kir.Ci(chunks-1))
		c.B.CBWaitFront(m.cbAct, kir.Ci(p))
		for pi, pt := range m.parts {
			out := m.outCB[pt.out.Type.DType]
			c.ForStep("nb", kir.C(0), counts[pi], kir.Ci(m.dest), func(nb kir.Var) {
				sb := blocks.BlockLen(c.B, "sb", counts[pi], nb, m.dest)
				for slot, w := range pt.weights {
					wcb := m.wCB[cbKey{slot, w.Type.DType}]
					m.productChunk(c, onSrcB(w), wcb, wPos[wcb], m.epi.dst(slot, out), kt, sb, j, p, last)
					c.If(last, func() { m.epi.packed(c, slot, sb) }, nil)
				}
				c.If(last, func() { m.epi.compute(c, sb, m.inCB, out) }, nil)
			})
		}
		c.B.CBPopFront(m.cbAct, kir.Ci(p))
	})
}

// productChunk is chunk j's part of one weight's products over a
// sub-block of sb columns whose resident tiles start at wpos (K-major, sb
// a K row; wpos advances past the sub-block's kt rows): the partial sums
// of the chunks before reloaded into DEST from m.cbPart (j > 0), the
// chunk's p K tiles added in order, then the sums packed to dst when last
// (transposed first when wT, unless m.epiT) or to m.cbPart.
// one K loop => K chunks whose fp32 partials are reloaded into DEST
func (m *mmProgram) productChunk(c *blocks.Compute, wT bool, wcb int, wpos kir.Var, dst int, kt kir.Expr, sb, j kir.Var, p int, last kir.Expr) {
	cb := c.B
	c.Acquire()
	c.If(kir.Ne(j, kir.C(0)), func() {
		cb.CBWaitFront(m.cbPart, sb)
		c.For("t", kir.C(0), sb, func(t kir.Var) { c.Copy(m.cbPart, t, t) })
		cb.CBPopFront(m.cbPart, sb)
	}, nil)
	m.blockConfig(c, wT, wcb, sb, kt)
	k0 := cb.Let("k0", kir.Mul(j, kir.Ci(p)))
	m.weightWait(cb, wcb, kir.Add(wpos, kir.Mul(kir.Add(k0, kir.Ci(p)), sb)))
	c.For("k", kir.C(0), kir.Ci(p), func(kk kir.Var) {
		m.blockStep(c, wT, wcb, kk, kir.Add(wpos, kir.Mul(kir.Add(k0, kk), sb)), sb, kt)
	})
	cb.Assign(wpos, kir.Add(wpos, kir.Mul(kt, sb)))
	if wT && !m.epiT {
		is32 := m.cp.Compute.FP32DestAccEn
		c.If(last, func() {
			c.For("t", kir.C(0), sb, func(t kir.Var) { c.TransposeDest(t, is32) })
		}, nil)
	}
	c.Commit()
	c.Wait()
	packTo := func(to int) func() {
		return func() {
			c.PackConfig(to)
			c.For("t", kir.C(0), sb, func(t kir.Var) {
				cb.CBReserveBack(to, kir.C(1))
				c.Pack(t, to)
				cb.CBPushBack(to, kir.C(1))
			})
		}
	}
	c.If(last, packTo(dst), packTo(m.cbPart))
	c.Release()
}

// writeRowChunksAhead is the writer's multicast of row r's chunks when
// m takes K chunks (sub of them a row, sub > 1; chunk 0 of row r was sent
// before): chunks 1..sub-1 of row r, then chunk 0 of row r+1 (unless r is
// the core's last row); the caller then writes row r's results. Compute's
// first chunk of a row then no longer waits for the row before's results
// to be written and the next row's first chunk to be read and multicast
// (the 27B's down projection at 1x1: 312 us of its 5,600 predicted).
// Deadlock-free: row r+1's chunk 0 takes the ring slot compute frees when
// it pops row r's chunk sub-2, which waits for nothing of the writer
// (only the last chunk pushes results, and row r-1's were written before
// row r's chunk 1 was sent).
// row r's chunks, then row r's results => row r+1's first chunk before row r's results
func (m *mmProgram) writeRowChunksAhead(wb *kir.Builder, rounds *multicore.Rounds, r kir.Expr, sub int) {
	wb.For("sub", kir.C(1), kir.Ci(sub), func(j kir.Var) { rounds.Round(wb, kir.Add(kir.Mul(r, kir.Ci(sub)), j)) })
	next := kir.Add(r, kir.C(1))
	wb.If(kir.Lt(next, kir.Ci(m.coreRows())), func() { rounds.Round(wb, kir.Mul(next, kir.Ci(sub))) })
}
