package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Resident weights: a prefill matmul (an activation of several tile rows,
// not per-user rows) whose every core's weight slice fits its L1 streams
// that slice once, not once per tile row.
//
// The reader moves the weights once (in row 0 of the per-row loop, or
// per sub-block when rowsInner), in the blocks of the per-row path (so
// the first products start as blocks arrive), each block
// reserving exactly its kc x sb tiles; the weight CBs hold the core's
// whole slice of each (slot, dtype) and compute never pops them until the
// last row is done: per row it indexes the resident tiles from a running
// position (matmul_block's weight tile index), which is back at the
// start of the slice (or, rowsInner, of the sub-block) for every row. The accumulation order of every output tile is the
// per-row path's (K in order into fp32 DEST, one packing), so the results
// are bit for bit the same.
//
// With more than one core and no norm prologue the activation rows come
// by multicast from the writer. When every row fits next to the weights
// they come in one round, K-major, and compute runs the rows inside each
// sub-block (rowsInner: the 27B's matmuls at 64 tokens but the
// down-projection, its out-projection at 128). Otherwise one round per tile row
// (multicore.Rounds) into a ring of two rows when they fit (the writer
// multicasts row r+1 before it writes row r's results, so compute never
// waits for the next row: the 27B's other matmuls at 256 tokens), else
// of one row (the writer multicasts row r, compute then waits for it at
// the start of each row: the 27B's down-projection, whose 272-tile row
// is 557 KB next to 592 KB of weights).
// Without the multicast every core would read the whole activation: at a
// 256-token 27B step, 110 cores x 256 x 5120 bf16 is 288 MB next to the
// 45 MB of weights.
//
// When the rows take the ring, the cores may split them in two row
// blocks as well as the columns (matmul_rowblocks.go: wider slices,
// half the rows per core, the pairs sharing the weight stream).
//
// When a slice does not fit (the CB plan exceeds the L1 budget), the
// program is planned again without row blocks, then with the rows in K
// chunks (matmul_kchunks.go), then as the per-row one with its own costs.

// residentOK reports whether f may keep its weights resident: several
// tile rows of one activation (not users' rows).
func (f *fusedMatmul) residentOK() bool { return f.rows > 1 && f.users == 0 }

// residentPages is, per weight CB (cbKey), the most tiles one core's
// slice of the weights of that slot and dtype holds under ranges.
func (f *fusedMatmul) residentPages(ranges [][2]int) map[cbKey]int {
	most := map[cbKey]int{}
	for _, r := range ranges {
		per, off := map[cbKey]int{}, 0
		for _, pt := range f.parts {
			_, n := partRange(r[0], r[1], off, pt.nt)
			off += pt.nt
			for slot, w := range pt.weights {
				per[cbKey{slot, w.Type.DType}] += n * f.kt
			}
		}
		for k, n := range per {
			most[k] = max(most[k], n)
		}
	}
	return most
}

// actRing is the activation rows the resident program's activation CB
// holds: all of them when they fit next to the weight slices (weightBytes
// per core) and a margin for the other CBs (rowsInner; not with row
// blocks), else 2 when two do (and the core has two), else 1.
func (m *mmProgram) actRing(weightBytes int) int {
	row := m.kt * m.act.Type.DType.TileBytes()
	ring := []int{m.rows, 2}
	if m.rowBlocks > 1 {
		ring = ring[1:] // row blocks are planned for the ring (planGrid)
	}
	for _, n := range ring {
		if n <= m.coreRows() && weightBytes+n*row+residentMargin <= m.ctx.Target.L1Budget() {
			return n
		}
	}
	return 1
}

// rowsInner reports whether the resident program runs the tile rows
// inside each sub-block: the activation CB holds every row (by
// multicast). Then compute multiplies the rows against the sub-block's
// weights as they arrive, so the weight stream overlaps the products of
// all rows, not only row 0's (at two tile rows, the 64-token prefill
// step, the stream is about as long as the products), and with at most
// dest rows it multiplies them all at once (rowGroup): one matmul_block
// of rt rows x ct columns unpacks each weight tile once for all rows.
// The reader reads each sub-block's weights once, then its epilogue
// inputs; the writer multicasts every row first. Tiles flow per
// sub-block, per column group, per row (rowGroup).
func (m *mmProgram) rowsInner() bool { return m.resident && m.mcast && m.actRows == m.rows }

// rowGroup is how compute splits a sub-block when rowsInner: rt rows at
// once (all rows when they are at most dest, else 1) in column groups
// of w = dest/rt columns, so an rt x w block fills at most DEST.
func (m *mmProgram) rowGroup() (rt, w int) {
	if m.rows <= m.dest {
		return m.rows, m.dest / m.rows
	}
	return 1, m.dest
}

// colGroups emits body once per column group of rowGroup's width in a
// sub-block of sb columns: j0 its first column, cw its width.
func (m *mmProgram) colGroups(b *kir.Builder, sb kir.Var, body func(j0, cw kir.Var)) {
	_, w := m.rowGroup()
	b.ForStep("j0", kir.C(0), sb, kir.Ci(w), func(j0 kir.Var) {
		body(j0, blocks.BlockLen(b, "cw", sb, j0, w))
	})
}

// readRowsInner is the reader when rowsInner: per part, per sub-block,
// the weights' blocks, then per column group, per row the epilogue's
// input tiles.
func (m *mmProgram) readRowsInner(b *kir.Builder, pas []mmPartArgs, inAcc []*blocks.Access, kt kir.Expr) {
	for pi, pt := range m.parts {
		pa := pas[pi]
		b.ForStep("nb", kir.C(0), pa.count, kir.Ci(m.dest), func(nb kir.Var) {
			sb := blocks.BlockLen(b, "sb", pa.count, nb, m.dest)
			col := b.Let("col", kir.Add(pa.start, nb))
			m.readSubBlockWeights(b, pt, pa, kt, col, sb)
			if len(inAcc) == 0 {
				return
			}
			m.colGroups(b, sb, func(j0, cw kir.Var) {
				b.For("r", kir.C(0), kir.Ci(m.rows), func(r kir.Var) {
					for i, acc := range inAcc {
						blocks.ReadPages(b, acc, m.inCB[i], m.rowPage(m.permRow(r), pa.nt, kir.Add(col, j0)), cw)
					}
				})
			})
		})
	}
}

// computeRowsInner is compute's body when rowsInner: per part, per
// sub-block, per column group, per group of rt rows (rowGroup) the
// products of each weight (productRows, each weight CB's position back at
// the sub-block's first block for every pass) and the epilogue on the rt
// x cw tiles; then every row of the activation popped. Each output tile
// still accumulates K in order in fp32 DEST and is packed once.
func (m *mmProgram) computeRowsInner(c *blocks.Compute, kt kir.Expr, counts []kir.ArgRef, wPos map[int]kir.Var) {
	rt, _ := m.rowGroup()
	for pi, pt := range m.parts {
		out := m.outCB[pt.out.Type.DType]
		c.PackConfig(m.epi.dst(0, out))
		c.ForStep("nb", kir.C(0), counts[pi], kir.Ci(m.dest), func(nb kir.Var) {
			sb := blocks.BlockLen(c.B, "sb", counts[pi], nb, m.dest)
			first := map[int]kir.Var{}
			for slot, w := range pt.weights {
				wcb := m.wCB[cbKey{slot, w.Type.DType}]
				first[wcb] = c.B.Let("w_first", wPos[wcb])
			}
			m.colGroups(c.B, sb, func(j0, cw kir.Var) {
				tiles := c.B.Let("tiles", kir.Mul(cw, kir.Ci(rt)))
				pass := func(r0 kir.Expr) {
					for slot, w := range pt.weights {
						wcb := m.wCB[cbKey{slot, w.Type.DType}]
						c.B.Assign(wPos[wcb], first[wcb])
						m.productRows(c, onSrcB(w), wcb, wPos[wcb], m.epi.dst(slot, out), kt, sb, j0, cw, r0, rt, tiles)
						m.epi.packed(c, slot, tiles)
					}
					m.epi.compute(c, tiles, m.inCB, out)
				}
				if rt == m.rows {
					pass(kir.C(0))
				} else {
					c.For("r", kir.C(0), kir.Ci(m.rows), func(r kir.Var) { pass(r) })
				}
			})
		})
	}
	all := kir.Ci(m.rows * m.kt)
	c.B.CBWaitFront(m.cbAct, all)
	c.B.CBPopFront(m.cbAct, all)
}

// productRows is product for rowsInner: the rt x cw tiles of activation
// rows [r0, r0+rt) and the sub-block's columns [j0, j0+cw) (of its sb),
// over the weight blocks of wcb from wpos (which advances past the
// sub-block's blocks), packed to dst row by row (tiles = rt*cw pages;
// wT: the weight on SrcB, matmul_srcb.go).
func (m *mmProgram) productRows(c *blocks.Compute, wT bool, wcb int, wpos kir.Var, dst int, kt kir.Expr, sb, j0, cw kir.Var, r0 kir.Expr, rt int, tiles kir.Var) {
	cb := c.B
	rows := kir.Ci(m.rows)
	// cbAct is K-major: row r's tile k is page k*rows + r, so the in0 row
	// stride (matmul_block's kt_dim) is 1
	if wT {
		// on SrcB: one call per row r, DEST[r*cw+c] += W^T tile c x row r's tile^T
		c.MatmulBlockConfigTransposed(wcb, m.cbAct, kir.C(1), cw, kir.C(1))
	} else {
		c.MatmulBlockConfigRows(m.cbAct, wcb, cw, kir.Ci(rt), kir.C(1))
	}
	c.Acquire()
	kr := kbRows(cb, sb, m.kb, min(m.dest, m.plan.PerCore))
	c.ForStep("k0", kir.C(0), kt, kr, func(k0 kir.Var) {
		kc := blocks.BlockLenOf(cb, "kc", kt, k0, kr)
		// every row's tiles of the block's K rows
		cb.CBWaitFront(m.cbAct, kir.Mul(kir.Add(k0, kc), rows))
		end := kir.Add(wpos, m.blockPages(kc, sb))
		cb.CBWaitFront(wcb, end)
		c.For("k", kir.C(0), kc, func(kk kir.Var) {
			a := kir.Add(kir.Mul(kir.Add(k0, kk), rows), r0) // row r0's tile k0+kk
			w := kir.Add(wpos, kir.Add(kir.Mul(kk, sb), j0))
			if wT {
				c.For("rr", kir.C(0), kir.Ci(rt), func(r kir.Var) {
					c.MatmulBlockTransposed(wcb, m.cbAct, w, kir.Add(a, r), kir.Mul(r, cw), kir.C(1), cw, kir.C(1))
				})
				return
			}
			c.MatmulBlockRows(m.cbAct, wcb, a, w, kir.C(0), cw, kir.Ci(rt), kir.C(1))
		})
		cb.Assign(wpos, end)
	})
	m.productDone(c, wT, dst, tiles)
}

// writeRowsInner is the writer's body when rowsInner: every activation
// row multicast in one round, K-major (actMulticastRows: the CB holds
// them all, and the first K tiles of every row arrive first),
// then per part, per sub-block, per column group, per row its tiles.
func (m *mmProgram) writeRowsInner(wb *kir.Builder, rounds *multicore.Rounds, oAccs []*blocks.Access, starts, counts []kir.ArgRef, ringPos map[int]kir.Var) {
	rounds.Round(wb, nil)
	rounds.Finish(wb)
	for pi, pt := range m.parts {
		ocb := m.outCB[pt.out.Type.DType]
		wb.ForStep("nb", kir.C(0), counts[pi], kir.Ci(m.dest), func(nb kir.Var) {
			sb := blocks.BlockLen(wb, "sb", counts[pi], nb, m.dest)
			m.colGroups(wb, sb, func(j0, cw kir.Var) {
				wb.For("r", kir.C(0), kir.Ci(m.rows), func(r kir.Var) {
					first := m.rowPage(m.permRow(r), kir.Ci(pt.nt), kir.Add(kir.Add(starts[pi], nb), j0))
					blocks.WriteTilesLive(wb, oAccs[pi], ocb, first, cw, ir.TileSize, blocks.ElemBytes(pt.out.Type.DType), m.dest, ringPos[ocb])
				})
			})
		})
	}
}

// residentMargin is the L1 actRing leaves for the CBs besides the
// weights and the activation (results, epilogue inputs and scratch: a
// few DEST sub-blocks).
const residentMargin = 64 << 10

// weightSliceBytes is the L1 of the weight CBs of pages (residentPages).
func weightSliceBytes(t *target.Target, pages map[cbKey]int) int {
	n := 0
	for k, p := range pages {
		n += target.AlignUp(p*k.dt.TileBytes(), t.L1Align)
	}
	return n
}

// residentCosts are f's cost-model inputs for the resident program (f
// checked, rows > 1): per column each weight's tiles cross the NoC once
// while compute multiplies them once per row, so a column costs, per K
// tile and weight, the longer of the two; the epilogue runs per row; each
// core receives every activation row; DRAM reads every weight tile once
// and the activation once per column group (about two).
func (f *fusedMatmul) residentCosts(fid ir.MathFidelity) mmCosts {
	return f.residentCostsOf(fid, 1)
}

// residentCostsOf is residentCosts when the cores split the rows into
// blocks row blocks as well (rowBlocks): a core multiplies rows/blocks
// rows and receives those rows; DRAM reads the weights once per pair of
// blocks (the pairs share them: weightShare).
func (f *fusedMatmul) residentCostsOf(fid ir.MathFidelity, blocks int) mmCosts {
	var c mmCosts
	bytes, rows := 0, f.rows/blocks
	for _, p := range f.parts {
		col := 0
		for _, w := range p.weights {
			col += f.kt * max(rows*(MatmulTileCycles(fid)+2*UnpackTileCycles), w.Type.DType.TileBytes()/NoCBytesPerCycle)
			bytes += p.nt * f.kt * w.Type.DType.TileBytes()
		}
		c.colCycles = max(c.colCycles, col)
		c.items += p.nt
	}
	c.colCycles += rows * f.epi.tileOps() * EltwiseTileCycles
	for _, in := range f.epi.inputs() {
		c.colCycles += rows * in.v.Type.DType.TileBytes() / NoCBytesPerCycle
	}
	actRow := f.kt * f.act.Type.DType.TileBytes()
	c.coreCycles = rows * actRow / NoCBytesPerCycle
	if f.norm != nil {
		c.coreCycles += rows * (f.kt*f.norm.w.Type.DType.TileBytes()/NoCBytesPerCycle + 4*f.kt*EltwiseTileCycles)
	}
	c.floorCycles = (max(1, blocks/2)*bytes + 2*f.rows*actRow) / DRAMBytesPerCycle
	return c
}

// residentWaits declares, in compute, the flag m.wHeld (0 in the core's
// first row, set to 1 after each row) when m's per-row loop may drop
// waits after the first row: the weights are resident (the first row
// waited for every tile of the slice, none is popped before the last
// row) and the activation rows come by multicast. Then the products wait
// for their weight tiles only in the first row (weightWait), and with a
// ring of two rows or more product waits once per sub-block for the
// whole row (one K block of kt: the writer pushes row r without waiting
// for compute to pop any of it, so the wait only comes earlier). The
// products, their order and the packing are unchanged, so the results
// are bit for bit the same. Otherwise nil.
func (m *mmProgram) residentWaits(b *kir.Builder) *kir.Var {
	if !m.resident || !m.mcast || m.norm != nil || m.coreRows() < 2 || m.rowsInner() {
		return nil
	}
	v := b.LetT("w_held", kir.U32T, kir.C(0))
	return &v
}

// weightWait emits compute's wait for the resident weight CB wcb's first
// end pages: only in the core's first row when m.wHeld is set (the tiles
// stay until the last row), always otherwise.
// a weight wait per K block => after the first row none
func (m *mmProgram) weightWait(b *kir.Builder, wcb int, end kir.Expr) {
	if m.wHeld == nil {
		b.CBWaitFront(wcb, end)
		return
	}
	b.If(kir.Eq(*m.wHeld, kir.C(0)), func() { b.CBWaitFront(wcb, end) })
}

// weightCBs is m's weight CBs in the order of their first weight.
func (m *mmProgram) weightCBs() []int {
	var cbs []int
	seen := map[int]bool{}
	for _, pt := range m.parts {
		for slot, w := range pt.weights {
			if cb := m.wCB[cbKey{slot, w.Type.DType}]; !seen[cb] {
				seen[cb] = true
				cbs = append(cbs, cb)
			}
		}
	}
	return cbs
}

// residentWeightPos declares, in compute, the running position of every
// weight CB in its resident tiles (0).
func (m *mmProgram) residentWeightPos(b *kir.Builder) map[int]kir.Var {
	pos := map[int]kir.Var{}
	for _, cb := range m.weightCBs() {
		pos[cb] = b.LetT("w_pos", kir.U32T, kir.C(0))
	}
	return pos
}

// popEarly reports whether the resident program frees each activation
// row as soon as its last product is done, before the epilogue: the
// activation CB holds one row (a ring of two does not fit), the rows come
// by multicast, and the program has one part whose every core's columns
// are one non-empty sub-block (so its row's results and the epilogue's
// pages fit their CBs, at most dest each, while the row is still held).
// Then compute pops the row before its epilogue (computeRowPopEarly) and
// the writer multicasts row r+1 before it writes row r's results, as with
// a ring of two rows: the next row's read and multicast overlap the
// epilogue's SFPU work (matmul_swiglu's silu, 2,571 cycles a tile) instead
// of following it. Every output tile is computed as before, bit for bit.
// A program that pops its row in chunks (rowChunks: one part of one
// weight) does not pop early.
func (m *mmProgram) popEarly() bool {
	if !m.resident || !m.mcast || m.rows < 2 || m.actRows != 1 || m.rowsInner() || len(m.parts) != 1 || m.kChunked ||
		m.norm != nil || m.users > 0 || len(m.epi.gathers()) > 0 || m.plan.PerCore > m.dest || m.rowChunks() > 0 {
		return false
	}
	for _, r := range m.ranges {
		if r[1] < 1 {
			return false
		}
	}
	return true
}

// computeRowPopEarly is one activation row's compute when popEarly: the
// products of each weight slot over the core's one sub-block of count
// columns, the row popped, then the epilogue's per-slot work (packed:
// matmul_swiglu's silu of the gate tiles) and its compute. The epilogue
// sees the same packed products as in the per-row path, so its results
// are bit for bit the same; only the order of the SFPU work and the up
// products changes.
func (m *mmProgram) computeRowPopEarly(c *blocks.Compute, kt kir.Expr, count kir.ArgRef, wPos map[int]kir.Var) {
	pt := m.parts[0]
	out := m.outCB[pt.out.Type.DType]
	c.PackConfig(m.epi.dst(0, out))
	sb := c.B.Let("sb", count) // one sub-block: count <= dest
	for slot, w := range pt.weights {
		wcb := m.wCB[cbKey{slot, w.Type.DType}]
		m.product(c, onSrcB(w), wcb, wPos[wcb], m.epi.dst(slot, out), kt, sb, nil)
	}
	c.B.Comment("the row's last product: free it for the next row's multicast during the epilogue")
	c.B.CBWaitFront(m.cbAct, kt)
	c.B.CBPopFront(m.cbAct, kt)
	for slot := range pt.weights {
		m.epi.packed(c, slot, sb)
	}
	m.epi.compute(c, sb, m.inCB, out)
}
