package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Row blocks: a resident prefill matmul whose output columns leave cores
// idle or give each core a ragged share (the 27B's matmul4 at 256 tokens:
// 258 tile columns, 3 per core on 88 of the 110 cores; its MLP
// down-projection: 160, 2 per core on 80) may split the activation's tile
// rows as well: the cores run in rowBlocks runs of equal length, run b
// multiplying rows [b*rows/rowBlocks, (b+1)*rows/rowBlocks) against the
// columns that the split of the columns over one run's cores gives each
// of its cores. A core then multiplies fewer rows against more columns:
// at 256 tokens the matmul4's cores multiply 4 rows x 5 columns (20 tile
// products per K step) instead of 8 x 3 (24), on 108 cores.
//
// Every run reads its cores' weight slices (pairs of runs share the
// stream: weightShare, so DRAM reads the weights once per pair), and
// receives only its own rows: each run multicasts its
// rows within its own column groups (multicore.Multicast.Blocks), the
// sender reading from its run's first row (the writer's runtime arg
// row0; the reader's row0 places the epilogue's inputs, the writer's the
// results). Everything else is the resident ring program of one core's
// rows: the products of each output tile still accumulate K in order in
// fp32 DEST and are packed once, so the results are bit for bit those of
// one run.
//
// A row-block program runs its compute kernel with a full-sync fp32 DEST
// (dst_full_sync_en: 8 tiles, tt-metal's matmul configs allow sub-blocks
// of (dst_full_sync_en ? 16 : 8) / (fp32_dest_acc_en ? 2 : 1) tiles),
// so a core's 5 columns are one sub-block: the unpacker then moves
// 1 + 1/5 tiles per product instead of 1 + 1/4 for 4 of them and 2 for
// the fifth (sim/timing's matmulBlockCycles). Packing then no longer
// overlaps the next sub-block's products, which at 160 K steps per
// packing is small.
//
// planGrid chooses the runs by the resident cost model
// (residentCostsOf), only where the program would take the ring anyway
// (not every row fits next to the weights): compute time per core, the
// dispatch of every core and DRAM reading the weights once per run.

// maxRowBlocks is the most row blocks planGrid tries: four. It tries
// even counts only: blocks 2i and 2i+1 pair up and share the weight
// stream (weightShare), so DRAM reads the weights rowBlocks/2 times.
// Four blocks give a core twice the columns of two for half the rows:
// the 27B's GDN out-projection at 4,096 tokens (160 columns, K 96)
// multiplies 6 columns on each of 4 x 27 cores, a one-row sub-block of 6
// bound by its products (7 unpacks per 6, sim/timing's
// matmulBlockCycles), instead of 3 on each of 2 x 54 (4 unpacks per 3).
const maxRowBlocks = 4

// rowBlockMargin is the L1 planGrid leaves for a row block's CBs besides
// the weights and one activation row: its result CB of a DEST sub-block
// (16 KiB of bf16), little more for a plain matmul. The CB plan decides
// (build): an epilogue's CBs that do not fit send lower back to one row
// block.
const rowBlockMargin = 16 << 10

// coreRows is the activation tile rows each core multiplies.
func (m *mmProgram) coreRows() int { return m.rows / max(1, m.rowBlocks) }

// blockRow is tile row r of a core's row block whose first row is row0
// (nil: r itself).
func blockRow(row0, r kir.Expr) kir.Expr {
	if row0 == nil {
		return r
	}
	return kir.Add(row0, r)
}

// planGrid is f's split (f checked) over t's worker grid: the split of
// the output columns over one row block's cores, each core's columns
// (coreRanges, repeated once per row block, block by block) and the row
// blocks. One row block unless f is resident, without a norm prologue,
// its rows do not all fit next to its weight slices, and splitting the
// rows in an even number (2 to maxRowBlocks) of equal blocks costs less
// (the type's doc),
// with a row next to each core's wider slice in L1.
func (f *fusedMatmul) planGrid(t *target.Target, fid ir.MathFidelity) (Split, [][2]int, int) {
	maxCores := t.NumWorkers()
	plan := f.planSplit(maxCores, fid)
	ranges := f.coreRanges(plan, maxCores)
	if !f.resident || f.oneRowBlock || f.norm != nil || f.users > 0 || f.rows < 2 {
		return plan, ranges, 1
	}
	row := f.kt * f.act.Type.DType.TileBytes()
	if weightSliceBytes(t, f.residentPages(ranges))+f.rows*row+residentMargin <= t.L1Budget() {
		return plan, ranges, 1 // every row fits: rowsInner
	}
	cost := func(blocks int, sp Split, rg [][2]int) int {
		c := f.residentCostsOf(fid, blocks)
		return blocks*len(rg)*DispatchCycles + max(sp.PerCore*c.colCycles+c.coreCycles, c.floorCycles)
	}
	bestCost, blocks := cost(1, plan, ranges), 1
	for b := 2; b <= min(maxRowBlocks, f.rows, maxCores); b += 2 {
		if f.rows%b != 0 {
			continue
		}
		c := f.residentCostsOf(fid, b)
		sp := PlanSplit(c.items, maxCores/b, c.colCycles, c.coreCycles, c.floorCycles)
		rg := f.coreRanges(sp, maxCores/b)
		if weightSliceBytes(t, f.residentPages(rg))+row+rowBlockMargin > t.L1Budget() {
			continue // not even a ring of one row fits next to the wider slices
		}
		cores, _ := firstCores(t, b*len(rg))
		if _, err := multicore.BlockColumnGroups(t, cores, b); err != nil {
			continue // the runs' multicasts do not fit their rectangles
		}
		if cc := cost(b, sp, rg); cc < bestCost {
			bestCost, plan, ranges, blocks = cc, sp, rg, b
		}
	}
	all := make([][2]int, 0, blocks*len(ranges))
	for range blocks {
		all = append(all, ranges...)
	}
	return plan, all, blocks
}

// weightShare is the reader's state when pairs of row blocks share the
// weight stream (rowBlocks even: blocks 2i and 2i+1 pair up): the cores of
// a pair (core j of each block of the pair) hold the same weight slice, so
// each reads every other weight block of it from DRAM (block q is read by
// the core whose row block is q mod 2, modulo 2) and writes it
// into its partner's weight CB too, at the same L1 address (both cores
// reserve and push the same blocks of the same CBs in the same order, and
// a resident CB is never popped before the last row), then increments the
// partner's semaphore after a write barrier (the block has landed). A
// partner's block is not waited for where it falls in the order: the core
// reserves past it (pend pages, pendBytes bytes) and goes on to read its
// own next block, then waits until its semaphore counts the partner's
// blocks so far (got) and pushes them with its own; at the end of each run
// of blocks of one CB (drainWeightShare) it waits for and pushes what is
// still pending. So the two cores read their blocks at the same time,
// instead of each waiting for the partner's read, write and semaphore
// before reading its own next block. Deadlock-free: a core waits only for
// its partner's blocks, which the partner sends without waiting for
// anything (its own waits come after its sends, and the resident CBs
// never fill). DRAM then reads the weights once per pair of row blocks,
// not once per row block.
type weightShare struct {
	q, got, sem     kir.Var  // the block count, the blocks received, the semaphore
	pend, pendBytes kir.Var  // the partner's blocks reserved past, not yet pushed
	px, py, blk     kir.Expr // the partner's NoC coordinates, the row block mod 2
}

// shareBlockScale is how many times kBlock's K rows a shared weight
// block has: every block costs a read, a write and a semaphore round trip,
// so fewer, larger blocks.
const shareBlockScale = 4

// weightShareSem is the semaphore id of the weight sharing (the
// multicast of the activation rows takes 0 and 1).
const weightShareSem = 2

// startWeightShare declares, in the reader (its row0 declared), the
// sharing's arguments and state and adds its semaphore, when m has two
// row blocks (an even number).
func (m *mmProgram) startWeightShare(b *kir.Builder) {
	if !m.sharesWeights() {
		return
	}
	m.p.AddSemaphore(kir.Semaphore{ID: weightShareSem, Cores: m.rs})
	px, py := m.rd.RuntimeArg("partner_x"), m.rd.RuntimeArg("partner_y")
	m.share = &weightShare{
		q:         b.LetT("w_block", kir.U32T, kir.C(0)),
		got:       b.LetT("w_got", kir.U32T, kir.C(0)),
		sem:       b.Let("w_sem", kir.GetSemaphore{ID: kir.Ci(weightShareSem)}),
		pend:      b.LetT("w_pend", kir.U32T, kir.C(0)),
		pendBytes: b.LetT("w_pend_bytes", kir.U32T, kir.C(0)),
		px:        px, py: py, blk: kir.Mod(kir.Div(m.rdRow0, kir.Ci(m.coreRows())), kir.C(2)),
	}
}

// weightBlock emits the arrival of one weight block of pages CB pages in
// weight CB cb: the reserve, then body(l1) (l1 the block's L1 address;
// body emits what it needs and returns the block's bytes and read, which
// issues the block's reads into l1), read, the read barrier and the push. With a partner
// (weightShare) it reads, writes to the partner and pushes (with the
// partner's pending blocks, once they are in) every other block, and
// reserves past the others, which stay pending; the caller then ends the
// run of cb's blocks with drainWeightShare. Postcondition without a
// partner: the block is pushed; with one, every block before the core's
// last own block of the run is pushed.
func (m *mmProgram) weightBlock(b *kir.Builder, cb int, pages kir.Expr, body func(l1 kir.Var) (bytes kir.Expr, read func())) {
	sh := m.share
	if sh == nil {
		b.CBReserveBack(cb, pages)
		l1 := b.Let("l1", kir.GetWritePtr{CB: cb})
		_, read := body(l1)
		read()
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cb, pages)
		return
	}
	packet := kir.Ci(m.ctx.Target.MaxNoCPacket)
	b.CBReserveBack(cb, kir.Add(sh.pend, pages))
	l1 := b.Let("l1", kir.Add(kir.GetWritePtr{CB: cb}, sh.pendBytes))
	bytes, read := body(l1)
	b.IfElse(kir.Eq(kir.Mod(sh.q, kir.C(2)), sh.blk), func() {
		read()
		b.NoCAsyncReadBarrier()
		b.ForStep("off", kir.C(0), bytes, packet, func(off kir.Var) {
			n := blocks.BlockLenOf(b, "n", bytes, off, packet)
			at := kir.Add(l1, off)
			b.NoCAsyncWrite(at, kir.NoCAddr{X: sh.px, Y: sh.py, Addr: at}, n)
		})
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreInc(kir.NoCAddr{X: sh.px, Y: sh.py, Addr: sh.sem}, kir.C(1))
		// the partner's blocks reserved past, then this one
		b.NoCSemaphoreWaitMin(sh.sem, sh.got)
		b.CBPushBack(cb, kir.Add(sh.pend, pages))
		b.Assign(sh.pend, kir.C(0))
		b.Assign(sh.pendBytes, kir.C(0))
	}, func() {
		b.Assign(sh.got, kir.Add(sh.got, kir.C(1)))
		b.Assign(sh.pend, kir.Add(sh.pend, pages))
		b.Assign(sh.pendBytes, kir.Add(sh.pendBytes, bytes))
	})
	b.Assign(sh.q, kir.Add(sh.q, kir.C(1)))
}

// drainWeightShare ends a run of weightBlock calls on weight CB cb: with a
// partner, it waits for the partner's pending blocks and pushes them.
// Postcondition: every block of the run is pushed.
func (m *mmProgram) drainWeightShare(b *kir.Builder, cb int) {
	sh := m.share
	if sh == nil {
		return
	}
	b.If(kir.Ne(sh.pend, kir.C(0)), func() {
		b.NoCSemaphoreWaitMin(sh.sem, sh.got)
		b.CBPushBack(cb, sh.pend)
		b.Assign(sh.pend, kir.C(0))
		b.Assign(sh.pendBytes, kir.C(0))
	})
}

// sharesWeights reports whether m's row blocks pair up to share the
// weight stream (weightShare): an even number of them.
func (m *mmProgram) sharesWeights() bool { return m.rowBlocks > 1 && m.rowBlocks%2 == 0 }

// partnerArgs are core i's reader arguments of the weight sharing (its
// partner's NoC coordinates: core j of row block b pairs with core j of
// block b xor 1), none without it.
func (m *mmProgram) partnerArgs(i int) []kir.ArgValue {
	if m.share == nil {
		return nil
	}
	n := len(m.cores) / m.rowBlocks
	c := m.cores[(i/n^1)*n+i%n]
	return []kir.ArgValue{kir.NoCX(c), kir.NoCY(c)}
}
