package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
)

// Row chunks: a resident prefill matmul whose cores hold one activation
// row at a time (a ring of two does not fit next to the weights: the
// 27B's matmul4, matmul3 and plain matmuls at 4,096 tokens) used the
// whole row until its last product and popped it after; only then could
// the writer reserve the next row, its sender read it from DRAM and
// multicast it, while compute waited (~360 us of matmul4's 2,945).
// popEarly hides that wait only under a long epilogue (matmul_swiglu's
// silu, which keeps it: one part of two weights); a plain or multi-part
// program's next row still followed its last product.
//
// Now the row moves in rowChunks() sub-rounds of P pages (P divides kt,
// whole NoC packets): the writer multicasts row r+1's chunk j as soon as
// every core of its group has freed chunk j of row r, and the core's last
// product of the row (the last weight of the last part with columns on
// the core: which part that is depends on the core's counts, so compute
// decides it at run time) pops the row P pages at a time as its K loop
// passes them. The next row's read and multicast then run under the last
// product, and the next row's first product waits at most for the last
// chunk. Every product still accumulates K in order into fp32 DEST and is
// packed once from the same tiles, so the results are bit for bit those
// of the whole-row program.
//
// The writer multicasts row r+1 before it writes row r's results (as with
// a ring of two), so compute must be able to pack all of a row's results
// while the writer waits for the last chunk: the core's columns are one
// sub-block (at most dest, the result CB's pages). Deadlock-free: the
// writer's reserve of row r+1's chunk j waits only for compute's pops of
// row r, which wait for nothing of the writer (the results fit their CBs).

// rowChunkTarget is the sub-rounds per row rowChunks aims at: fewer
// leave a longer last chunk uncovered, more cost a semaphore round trip
// each.
const rowChunkTarget = 10

// rowChunks is the pages per multicast sub-round of the activation row
// when the program pops its row in chunks (the file's doc), else 0: m is
// resident with multicast rows, holds one row (not rowsInner), has
// several parts or one part of one weight (popEarly keeps the others), no
// norm, users or gathered rows, every core at least one
// column and at most dest; P is the smallest divisor of kt of at least
// kt/rowChunkTarget pages that is whole NoC packets, and less than kt.
func (m *mmProgram) rowChunks() int {
	if !m.resident || !m.mcast || m.rows < 2 || m.actRows != 1 || m.rowsInner() || m.kChunked || (len(m.parts) == 1 && len(m.parts[0].weights) > 1) ||
		m.norm != nil || m.users > 0 || len(m.epi.gathers()) > 0 || m.plan.PerCore > m.dest {
		return 0
	}
	for _, r := range m.ranges {
		if r[1] < 1 {
			return 0
		}
	}
	packet := max(1, m.ctx.Target.MaxNoCPacket/m.act.Type.DType.TileBytes())
	for p := max(packet, (m.kt+rowChunkTarget-1)/rowChunkTarget); p < m.kt; p++ {
		if m.kt%p == 0 && p%packet == 0 {
			return p
		}
	}
	return 0
}

// rowSubRounds is the multicast sub-rounds of one activation row: kt /
// rowChunks() (or kChunk()), 1 without row chunks.
func (m *mmProgram) rowSubRounds() int {
	if p := m.kChunk(); p > 0 {
		return m.kt / p
	}
	if p := m.rowChunks(); p > 0 {
		return m.kt / p
	}
	return 1
}

// computeRowChunks is one activation row's compute when rowChunks() is
// p > 0: per part its one sub-block (count <= dest), the products of
// each weight and the epilogue, the last weight's product popping the
// row p pages at a time when no later part has columns on the core
// (productPopping). The row is then gone: no pop after the parts.
func (m *mmProgram) computeRowChunks(c *blocks.Compute, kt kir.Expr, counts []kir.ArgRef, wPos map[int]kir.Var, p int) {
	for pi, pt := range m.parts {
		out := m.outCB[pt.out.Type.DType]
		c.PackConfig(m.epi.dst(0, out))
		// the core's last part: no later part has columns here
		var later kir.Expr = kir.C(0)
		for _, n := range counts[pi+1:] {
			later = kir.Add(later, n)
		}
		c.ForStep("nb", kir.C(0), counts[pi], kir.Ci(m.dest), func(nb kir.Var) {
			sb := blocks.BlockLen(c.B, "sb", counts[pi], nb, m.dest)
			for slot, w := range pt.weights {
				wcb := m.wCB[cbKey{slot, w.Type.DType}]
				var pop kir.Expr
				if slot == len(pt.weights)-1 {
					pop = kir.Eq(later, kir.C(0))
				}
				m.productPopping(c, onSrcB(w), wcb, wPos[wcb], m.epi.dst(slot, out), kt, sb, pop, p)
				m.epi.packed(c, slot, sb)
			}
			m.epi.compute(c, sb, m.inCB, out)
		})
	}
}

// productPopping is product for a resident one-row activation in K
// blocks of p (p divides kt): when pop (nil: never) holds at run time,
// each block's p activation pages are popped once its products are
// issued, and the blocks after index the CB from its new front. The
// products, their order and the packing are product's (wT: on SrcB).
func (m *mmProgram) productPopping(c *blocks.Compute, wT bool, wcb int, wpos kir.Var, dst int, kt kir.Expr, sb kir.Var, pop kir.Expr, p int) {
	cb := c.B
	m.blockConfig(c, wT, wcb, sb, kt)
	c.Acquire()
	var popped kir.Var
	if pop != nil {
		popped = cb.LetT("a_popped", kir.U32T, kir.C(0))
	}
	c.ForStep("k0", kir.C(0), kt, kir.Ci(p), func(k0 kir.Var) {
		a0 := kir.Expr(k0) // the block's first activation tile, from the CB's front
		if pop != nil {
			a0 = kir.Sub(k0, popped)
		}
		cb.CBWaitFront(m.cbAct, kir.Add(a0, kir.Ci(p)))
		end := kir.Add(wpos, kir.Mul(kir.Ci(p), sb))
		m.weightWait(cb, wcb, end)
		c.For("k", kir.C(0), kir.Ci(p), func(kk kir.Var) {
			m.blockStep(c, wT, wcb, kir.Add(a0, kk), kir.Add(wpos, kir.Mul(kk, sb)), sb, kt)
		})
		cb.Assign(wpos, end)
		if pop != nil {
			cb.If(pop, func() {
				cb.Comment("the row's last product: free its chunk for the next row's multicast")
				cb.CBPopFront(m.cbAct, kir.Ci(p))
				cb.Assign(popped, kir.Add(popped, kir.Ci(p)))
			})
		}
	})
	m.productDone(c, wT, dst, sb)
}
