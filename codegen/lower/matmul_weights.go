package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// The matmul engine's weight stream: weights placed in blocks
// (kir.BlockLayout) that a reader whose columns are group-aligned moves as
// contiguous runs of up to MaxNoCPacket bytes from one bank, instead of
// one request per tile (576 B for bfp4_b, which a DRAM bank accepts too
// slowly to stream at its data rate from one NoC).

// WeightBlocks is the block layout of model weight w (kir.BlockLayout)
// when uses is one matmul engine op reading it as a weight, or nil: runs
// of the columns one core of that op's decode plan streams (one tile row,
// the op's fidelity for default fid: ir.OpFidelity), groups of the DEST
// sub-block's columns, as many K rows per block as the engine's reader
// moves per barrier (kBlock). A reader whose cores follow that plan moves
// each block as one contiguous read; any other reads each tile at its
// place. The layout depends only on the op's
// weights and t, so a prefill build of the same op agrees with the decode
// build.
func WeightBlocks(t *target.Target, w *ir.Value, uses []*ir.Op, fid ir.MathFidelity) *kir.BlockLayout {
	if w.Kind != ir.KindWeight || w.Type.Mem.Kind != ir.DRAMInterleaved || w.Type.Layout != ir.TileLayout || w.Type.Shape.Rank() != 2 || len(uses) != 1 {
		return nil
	}
	if _, err := target.DataFormatOf(w.Type.DType); err != nil {
		return nil
	}
	f, err := newFusedMatmul(uses[0])
	if err != nil || f.act == w || f.check() != nil {
		return nil
	}
	kt, nt := 0, 0
	for _, pt := range f.parts {
		for _, pw := range pt.weights {
			if pw == w {
				kt, nt = f.kt, pt.nt
			}
		}
	}
	if nt == 0 {
		return nil // w is not a weight of the engine (a norm weight, a residual)
	}
	f.rows = 1
	if fid, err = ir.OpFidelity(uses[0], fid); err != nil {
		return nil
	}
	dest := t.DestTiles(false, true)
	return &kir.BlockLayout{Kt: kt, Nt: nt, Period: f.planSplit(t.NumWorkers(), fid).PerCore, Dest: dest, KB: f.kBlock(dest)}
}

// blocksMatch reports whether every weight of m is placed in blocks
// whose runs and groups are the columns of m's cores and sub-blocks (m's
// plan is the layout's decode plan, every part's runs start on a core of
// their own): the reader then moves blocks.
func (m *mmProgram) blocksMatch() bool {
	for _, pt := range m.parts {
		for _, w := range pt.weights {
			l := m.ctx.Blocks[w]
			if l == nil || l.Period != m.plan.PerCore || l.Dest != m.dest || l.KB != m.kb {
				return false
			}
		}
	}
	for _, r := range m.ranges {
		off := 0
		for _, pt := range m.parts {
			s, n := partRange(r[0], r[1], off, pt.nt)
			off += pt.nt
			if n > 0 && (s%m.plan.PerCore != 0 || (n != m.plan.PerCore && s+n != pt.nt)) {
				return false
			}
		}
	}
	return true
}

// readWeightBlocks is readWeights for a weight placed in blocks (layout
// l) when the sub-block is the group starting at column col: its blocks
// of kr K rows (l.Rows of its width: the reader's kbRows) each arrive as
// one contiguous run in the CB's order, in reads of as many whole tiles as
// fit MaxNoCPacket bytes, one barrier per block.
func (m *mmProgram) readWeightBlocks(b *kir.Builder, cb int, acc *blocks.Access, l *kir.BlockLayout, tb int, kt kir.Expr, col, sb kir.Var) {
	t := m.ctx.Target
	kr := kbRows(b, sb, m.kb, min(m.dest, m.plan.PerCore))
	packet := t.MaxNoCPacket / tb * tb // whole tiles per request
	b.ForStep("k0", kir.C(0), kt, kr, func(k0 kir.Var) {
		kc := blocks.BlockLenOf(b, "kc", kt, k0, kr)
		m.weightBlock(b, cb, m.blockPages(kc, sb), func(l1 kir.Var) (kir.Expr, func()) {
			j := b.Let("block", l.BlockExpr(col, kir.Div(k0, kr)))
			at := l.BlockAddr(acc.Base(), j, nil, t.DRAMPageSize(tb), t.DRAMBanks)
			addr := b.Let("block_addr", at.Offset)
			bytes := b.Let("bytes", kir.Mul(kir.Mul(kc, sb), kir.Ci(tb)))
			return bytes, func() {
				b.ForStep("off", kir.C(0), bytes, kir.Ci(packet), func(off kir.Var) {
					n := blocks.BlockLenOf(b, "n", bytes, off, kir.Ci(packet))
					b.NoCAsyncRead(kir.DRAMBankAddr{Bank: at.Bank, Offset: kir.Add(addr, off)}, kir.Add(l1, off), n)
				})
			}
		})
	})
	m.drainWeightShare(b, cb)
}

// weightCBBytes is the L1 a core gives its weight CBs: room to stream on
// while compute waits for the activation row at the start.
const weightCBBytes = 256 << 10

// weightDepth is the blocks each weight CB holds: 2 (double buffering), or
// as many as weightCBBytes fits, up to 8, when the reader moves blocks.
func (m *mmProgram) weightDepth() int {
	if !m.readBlocks {
		return 2
	}
	per := 0
	seen := map[cbKey]bool{}
	for _, pt := range m.parts {
		for slot, w := range pt.weights {
			if k := (cbKey{slot, w.Type.DType}); !seen[k] {
				seen[k] = true
				per += m.kb * m.dest * w.Type.DType.TileBytes()
			}
		}
	}
	return min(8, max(2, weightCBBytes/per))
}
