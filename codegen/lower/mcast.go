package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// actMulticast emits into writer wr (idle until the first result tile,
// so the reader streams weights from the start) the multicore.Multicast,
// on semaphores 0 and 1, of a decode matmul's activation row (kt pages of
// acc, only their first rows rows when the rest is padding) into CB cb of
// cores (rs their ranges): at B=1 the 27B MLP down-projection's 80 cores
// would otherwise read 44.6 MB of activations next to 47.4 MB of weights.
// It returns the runtime-arg values per core the writer must get first.
func actMulticast(p *kir.Program, t *target.Target, wr *kir.Kernel, cb int, acc *blocks.Access, kt, rows int, cores []kir.Core, rs []ir.CoreRange) (map[kir.Core][]kir.ArgValue, error) {
	m := multicore.Multicast{CB: cb, Pages: kt, PageSize: acc.PageSize(), SemReady: 0, SemValid: 1, Name: "act", What: "the activation row",
		Read: func(b *kir.Builder, pg, l1 kir.Expr) {
			blocks.ReadTileLive(b, acc, pg, l1, rows, blocks.ElemBytes(acc.Buf.DType))
		}}
	return m.Emit(p, t, wr, cores, rs)
}

// actMulticastRows is actMulticast for a prefill matmul with resident
// weights: the activation's tile rows (kt pages each, whole tiles) into
// cb. With interleave 0 it multicasts one round per row
// (multicore.Rounds: the writer emits Round with the row, then Finish),
// or sub rounds per row of kt/sub pages each (sub divides kt; round
// r*sub+j is row r's pages [j*kt/sub, (j+1)*kt/sub): rowChunks);
// with interleave = rows, one round of all rows*kt pages K-major: page
// k*rows+r of cb is tile k of row r (the writer emits Round(nil) and
// Finish). It returns the rounds and the runtime-arg values per core the
// writer must get first. rowBlocks > 1 (with interleave 0) splits cores
// into that many runs, each multicasting its own rows (multicore.Multicast.Blocks):
// row0 then gives, when the rounds are emitted, the writer's expression of
// its run's first row, which the sender adds to the round's row.
// With loopback, every rectangle of a column group has its own sender
// multicasting to itself too (multicore.Multicast.Loopback: actLoopback).
func actMulticastRows(p *kir.Program, t *target.Target, wr *kir.Kernel, cb int, acc *blocks.Access, kt, interleave, sub, rowBlocks int, loopback bool, row0 func() kir.Expr, perm func(kir.Expr) kir.Expr, cores []kir.Core, rs []ir.CoreRange) (*multicore.Rounds, map[kir.Core][]kir.ArgValue, error) {
	m := multicore.Multicast{CB: cb, Pages: kt, PageSize: acc.PageSize(), SemReady: 0, SemValid: 1, Name: "act", What: "the activation's tile row",
		Read: func(b *kir.Builder, pg, l1 kir.Expr) { blocks.ReadPageTo(b, acc, pg, l1) }, Loopback: loopback}
	if sub > 1 {
		// round g reads pages g*kt/sub.. of the row-major activation: row
		// g/sub's chunk g%sub
		m.Pages, m.What = kt/sub, "a chunk of the activation's tile row"
	}
	if rowBlocks > 1 {
		m.Blocks, m.What = rowBlocks, "the activation's tile row of this core's rows"
		m.Read = func(b *kir.Builder, pg, l1 kir.Expr) {
			blocks.ReadPageTo(b, acc, kir.Add(kir.Mul(row0(), kir.Ci(kt)), pg), l1)
		}
	}
	if interleave > 0 {
		m.Pages, m.What = interleave*kt, "the activation's tile rows, K-major"
		m.Read = func(b *kir.Builder, pg, l1 kir.Expr) {
			row := kir.Expr(kir.Mod(pg, kir.Ci(interleave)))
			if perm != nil {
				row = perm(row)
			}
			page := kir.Add(kir.Mul(row, kir.Ci(kt)), kir.Div(pg, kir.Ci(interleave)))
			blocks.ReadPageTo(b, acc, page, l1)
		}
	} else if perm != nil {
		// the rows in perm's order: flat page pg of the core's rows is
		// tile pg%kt of its row perm(pg/kt)
		read := m.Read
		m.Read = func(b *kir.Builder, pg, l1 kir.Expr) {
			read(b, kir.Add(kir.Mul(perm(kir.Div(pg, kir.Ci(kt))), kir.Ci(kt)), kir.Mod(pg, kir.Ci(kt))), l1)
		}
	}
	return m.Start(p, t, wr, cores, rs)
}

// actLoopback reports whether m's activation rows (resident weights,
// multicast) go by one sender per rectangle (multicore.Multicast.Loopback):
// when a column group's sender, which reads each row and multicasts it
// once per rectangle of its group (a NoC port time of the row's bytes
// each), spends more per row than a core's tile products of the row take
// at fid (its columns times its weights per column times kt, at
// MatmulTileCycles: matmul_block's unpacks overlap its math): those
// senders would bind the program (the 27B's plain matmuls with weights on
// SrcB, HiFi2). Otherwise one sender per column group reads the rows
// from DRAM fewer times (each rectangle's sender reads them all), which
// leaves DRAM to the weights.
// before: a sender per column group => after: a sender per rectangle, each chunk multicast once
func (m *mmProgram) actLoopback(t *target.Target, fid ir.MathFidelity) bool {
	groups, err := multicore.BlockColumnGroups(t, m.cores, m.rowBlocks)
	if err != nil {
		return false // Start reports it
	}
	sends := 0
	for _, g := range groups {
		sends = max(sends, len(g.Rects))
	}
	weights := 0
	for _, p := range m.parts {
		weights = max(weights, len(p.weights))
	}
	sender := (1 + sends) * m.kt * m.act.Type.DType.TileBytes() / NoCBytesPerCycle
	products := m.plan.PerCore * weights * m.kt * MatmulTileCycles(fid)
	return sender > products
}
