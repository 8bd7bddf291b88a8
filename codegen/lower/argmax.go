package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Reduce family: argmax over the last dim of bf16 logits [..., rows <=
// 32, N] in tile layout (a tile row per leading index: B users at decode
// are B tile rows of one live row), giving uint32 indices [..., rows, 1]
// in row-major layout.
//
// A data-movement program over C cores, each with a contiguous range of
// tile columns (the 27B's 7,760 logits tiles would take one core ~3.6 ms
// of scalar scanning). On every core the reader streams its tiles in
// column order into a CB, argmaxBatch pages per barrier; the writer scans
// each tile with integer arithmetic on the bf16 bit patterns and keeps,
// per row, the best key and its index in an L1 scratch page (16 bytes per
// row: index, key). Then every core but the first (the leader) writes its
// rows' slots into its own slot of the leader's "gathered" page (same L1
// address on every core) and increments the leader's semaphore; the
// leader waits for all C-1, folds the slots in core order (ranges increase
// with the core, and a later range replaces the best only when strictly
// greater, so the first maximum still wins) and writes each row's index to
// its 4-byte output page. Only (index, key) pairs cross the NoC.
//
// The key of bf16 bits b with magnitude m = b & 0x7FFF is 0x8000 + m for a
// positive value and 0x8000 - m for a negative one, so keys order like the
// values and -0 and +0 share a key; a NaN (m > 0x7F80) gets 0x20000, above
// every number. A column replaces the row's best only when its key is
// strictly greater and columns are visited in increasing order, so the first
// maximum (or the first NaN) wins, as in the reference. A word (two
// columns) is first tested against the row's best: once the best is >= +0
// with key k, a half of magnitude below k - 0x7FFF is a smaller positive
// number, a zero or a negative number, never strictly greater, so a word
// whose two halves both are is skipped without computing keys (at decode
// almost every word once the row's first columns are seen).

// argmaxSlot is the bytes of scratch per row: index at +0 (16-byte aligned
// for the output write), best key at +4.
const argmaxSlot = 16

// argmaxBatch is the number of logits pages a reader moves per barrier.
const argmaxBatch = 8

// argmaxSemGathered is the leader's count of ranges whose slots arrived.
const argmaxSemGathered = 0

func lowerArgmax(op *ir.Op, ctx *Context) (*kir.Program, error) {
	return buildArgmax(op, ctx, nil)
}

// buildArgmax builds the argmax program of op (operand x, result out);
// with ex set, the leader runs ex's exchange with the other card on the
// folded slots before it writes the indices (argmax_sharded).
func buildArgmax(op *ir.Op, ctx *Context, ex *argmaxExchange) (*kir.Program, error) {
	x, out := op.Operands[0], op.Result()
	if x.Type.DType != ir.BF16 || x.Type.Layout != ir.TileLayout {
		return nil, fmt.Errorf("rule argmax-input: the argmax scan reads bf16 tile-layout logits, got %s %s", x.Type.DType, x.Type.Layout)
	}
	xs := x.Type.Shape
	n := xs.Cols2D()
	nt := tilesWide(xs)
	rows := blocks.ImageOf(xs).R // per leading index: one tile row each
	if rows > ir.TileSize {
		return nil, fmt.Errorf("rule argmax-rows: the argmax scan takes logits of at most %d rows per leading index; %s has %d", ir.TileSize, xs, rows)
	}
	allRows := xs.Rows2D()
	tileRows := allRows / rows
	if out.Type.DType != ir.UInt32 || out.Type.Layout != ir.RowMajorLayout || out.Type.Shape.Numel() != allRows || out.Type.Shape.Cols2D() != 1 {
		return nil, fmt.Errorf("rule argmax-output: result must be uint32 row-major, one index per row of the logits (%d rows), got %s", allRows, out.Type)
	}
	// A tile costs about 20 scalar statements per column pair per row;
	// each extra core adds its slots to the leader's fold.
	sp := startProgram(op, ctx, PlanSplit(nt, ctx.Target.NumWorkers(), allRows*16*2*20, allRows*40, 0))
	batch, multi := min(argmaxBatch, nt), sp.plan.Cores > 1
	cbLogits := sp.cbs.Input("logits", ir.BF16, 2*batch)
	cbState := sp.cbs.Pages(blocks.ScratchCB, "best", ir.UInt32, max(ir.TileSize, allRows)*argmaxSlot, 1)
	cbGather := -1
	if multi {
		cbGather = sp.cbs.Pages(blocks.ScratchCB, "gathered", ir.UInt32, sp.plan.Cores*allRows*argmaxSlot, 1)
		sp.p.AddSemaphore(kir.Semaphore{ID: argmaxSemGathered, Cores: sp.rs})
	}
	if ex != nil {
		ex.resources(sp, allRows)
	}
	sp.planned("argmax")

	// Reader: the core's tiles in column order, batch pages per barrier.
	rd := sp.reader()
	xAcc := sp.bind(rd, "x_addr", x)
	rStart, rCount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	b := rd.Builder()
	if tileRows == 1 {
		blocks.ReadPagesInBatches(b, xAcc, cbLogits, rStart, rCount, batch)
	} else {
		// One stream over the tile rows (full blocks until the last, so no
		// block straddles the ring): page i is tile row i/count's column
		// start + i%count.
		blocks.ReadPagesInBatchesOf(b, xAcc, cbLogits, kir.Mul(rCount, kir.Ci(tileRows)), batch, func(i kir.Expr) kir.Expr {
			return kir.Add(kir.Mul(kir.Div(i, rCount), kir.Ci(nt)), kir.Add(rStart, kir.Mod(i, rCount)))
		})
	}

	// Writer: scan, gather on the leader, write.
	wr, oAcc := sp.writerOf("out_addr", out)
	wN := wr.CompileArg("n", uint32(n))
	wRows := wr.CompileArg("rows", uint32(rows))
	wAll := kir.Expr(wRows)
	if tileRows > 1 {
		wAll = wr.CompileArg("all_rows", uint32(allRows))
	}
	wStart, wCount := wr.RuntimeArg("start_tile"), wr.RuntimeArg("num_tiles")
	wIndex := wr.RuntimeArg("core_index")
	var lx, ly kir.ArgRef
	if multi {
		lx, ly = wr.CommonArg("leader_x", kir.NoCX(sp.cores[0])), wr.CommonArg("leader_y", kir.NoCY(sp.cores[0]))
	}
	b = wr.Builder()
	st := blocks.Reserve(b, cbState, kir.C(1), "st")
	b.For("r", kir.C(0), wAll, func(r kir.Var) {
		b.L1Write32(kir.Add(st, kir.Mul(r, kir.Ci(argmaxSlot))), kir.C(0))
		b.L1Write32(kir.Add(st, kir.Add(kir.Mul(r, kir.Ci(argmaxSlot)), kir.C(4))), kir.C(0))
	})
	b.CBPushBack(cbState, kir.C(1))
	b.CBWaitFront(cbState, kir.C(1))
	rowLoop(b, tileRows, func(tr kir.Expr) {
		b.For("i", kir.C(0), wCount, func(i kir.Var) {
			c := b.Let("c", kir.Add(wStart, i))
			b.CBWaitFront(cbLogits, kir.C(1))
			argmaxScanTile(b, b.Let("base", kir.GetReadPtr{CB: cbLogits}), st, c, tr, wRows, wN, tileRows)
			b.CBPopFront(cbLogits, kir.C(1))
		})
	})
	if ex != nil {
		ex.declare(wr)
	}
	writeOut := func() {
		if ex != nil {
			ex.leader(b, st, wAll, wN)
		}
		b.For("r", kir.C(0), wAll, func(r kir.Var) {
			b.NoCAsyncWrite(kir.Add(st, kir.Mul(r, kir.Ci(argmaxSlot))), oAcc.PageAddr(r), kir.C(4))
		})
		b.NoCAsyncWriteBarrier()
	}
	if !multi {
		writeOut()
	} else {
		sem := b.Let("gathered_sem", kir.GetSemaphore{ID: kir.C(argmaxSemGathered)})
		g := blocks.Reserve(b, cbGather, kir.C(1), "gathered")
		argmaxFold(b, st, g, sem, wIndex, wAll, lx, ly, allRows, sp.plan.Cores, writeOut)
		b.CBPushBack(cbGather, kir.C(1))
		b.CBWaitFront(cbGather, kir.C(1))
		b.CBPopFront(cbGather, kir.C(1))
	}
	b.CBPopFront(cbState, kir.C(1))

	for i, core := range sp.cores {
		s, n := sp.plan.Range(i)
		rd.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)), kir.U32(uint32(i)))
	}
	return sp.done(sp.p)
}

// argmaxScanTile folds the logits tile at base (tile column c of tile row
// tr) into the (index, key) slots at st, row by row.
func argmaxScanTile(b *kir.Builder, base kir.Var, st, c, tr kir.Expr, wRows, wN kir.ArgRef, tileRows int) {
	b.For("r", kir.C(0), wRows, func(r kir.Var) {
		row := kir.Expr(r) // the row's slot: tile row tr's rows follow tile row tr-1's
		if tileRows > 1 {
			row = kir.Add(kir.Mul(tr, wRows), r)
		}
		slot := b.Let("slot", kir.Add(st, kir.Mul(row, kir.Ci(argmaxSlot))))
		bidx := b.LetT("bidx", kir.U32T, kir.L1Read32{Addr: slot})
		bkey := b.LetT("bkey", kir.U32T, kir.L1Read32{Addr: kir.Add(slot, kir.C(4))})
		// Row r of a tile: face (r/16)*2 (+1 for columns 16..31), face row r%16.
		rowOff := b.Let("row_off", kir.Add(kir.Mul(kir.Div(r, kir.C(16)), kir.C(1024)), kir.Mul(kir.Mod(r, kir.C(16)), kir.C(32))))
		// lim is one more than the largest magnitude that cannot beat the
		// best: bkey - 0x7FFF once the best is >= +0 (a half of magnitude
		// below it is a smaller positive number, a negative one or a
		// zero), else 0 (nothing is rejected).
		lim := b.LetT("lim", kir.U32T, kir.C(0))
		setLim := func() {
			b.IfElse(kir.Ge(bkey, kir.C(0x8000)), func() { b.Assign(lim, kir.Sub(bkey, kir.C(0x7FFF))) }, func() { b.Assign(lim, kir.C(0)) })
		}
		setLim()
		b.For("p", kir.C(0), kir.C(16), func(pp kir.Var) {
			// Columns 2p and 2p+1 share one word (2p in the low half).
			addr := kir.Add(base, kir.Add(rowOff, kir.Add(kir.Mul(kir.Div(pp, kir.C(8)), kir.C(512)), kir.Mul(kir.Mod(pp, kir.C(8)), kir.C(4)))))
			word := b.Let("word", kir.L1Read32{Addr: addr})
			// Quick reject: both halves' magnitudes below lim.
			b.If(kir.LOr(kir.Ge(kir.And(word, kir.C(0x7FFF)), lim), kir.Ge(kir.And(kir.Shr(word, kir.C(16)), kir.C(0x7FFF)), lim)), func() {
				argmaxWord(b, word, c, pp, bkey, bidx, wN, setLim)
			})
		})
		b.L1Write32(slot, bidx)
		b.L1Write32(kir.Add(slot, kir.C(4)), bkey)
	})
}

// argmaxWord folds the two columns of word (2p in the low half, 2p+1 in
// the high one, of tile column c) into the row's best (bkey, bidx),
// calling setLim after each replacement.
func argmaxWord(b *kir.Builder, word kir.Var, c kir.Expr, pp kir.Var, bkey, bidx kir.Var, wN kir.ArgRef, setLim func()) {
	for half := 0; half < 2; half++ {
		col := b.Let("col", kir.Add(kir.Mul(c, kir.C(32)), kir.Add(kir.Mul(pp, kir.C(2)), kir.Ci(half))))
		b.If(kir.Lt(col, wN), func() {
			bits := b.Let("bits", kir.And(kir.Shr(word, kir.Ci(16*half)), kir.C(0xFFFF)))
			mag := b.Let("mag", kir.And(bits, kir.C(0x7FFF)))
			neg := b.Let("neg", kir.Shr(bits, kir.C(15)))
			key := b.LetT("key", kir.U32T, kir.Sub(kir.Add(kir.C(0x8000), mag), kir.Mul(kir.Mul(kir.C(2), mag), neg)))
			b.If(kir.Gt(mag, kir.C(0x7F80)), func() { b.Assign(key, kir.C(0x20000)) })
			b.If(kir.Gt(key, bkey), func() {
				b.Assign(bkey, key)
				b.Assign(bidx, col)
				setLim()
			})
		})
	}
}

// argmaxFold gathers every core's (index, key) slots on the leader (core
// index 0), which folds them in core order and writes the result (writeOut).
func argmaxFold(b *kir.Builder, st, g, sem kir.Var, wIndex kir.ArgRef, wAll kir.Expr, lx, ly kir.ArgRef, allRows, cores int, writeOut func()) {
	slots := allRows * argmaxSlot
	b.IfElse(kir.Ne(wIndex, kir.C(0)), func() {
		b.Comment("send this range's (index, key) per row to the leader")
		b.NoCAsyncWrite(st, kir.NoCAddr{X: lx, Y: ly, Addr: kir.Add(g, kir.Mul(wIndex, kir.Ci(slots)))}, kir.Ci(slots))
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreInc(kir.NoCAddr{X: lx, Y: ly, Addr: sem}, kir.C(1))
		b.NoCAsyncAtomicBarrier()
	}, func() {
		b.Comment("fold the other ranges in core order: a later range wins only when strictly greater")
		b.NoCSemaphoreWait(sem, kir.Ci(cores-1))
		b.For("k", kir.C(1), kir.Ci(cores), func(k kir.Var) {
			b.For("r", kir.C(0), wAll, func(r kir.Var) {
				slot := b.Let("slot", kir.Add(st, kir.Mul(r, kir.Ci(argmaxSlot))))
				other := b.Let("other", kir.Add(g, kir.Add(kir.Mul(k, kir.Ci(slots)), kir.Mul(r, kir.Ci(argmaxSlot)))))
				okey := b.LetT("okey", kir.U32T, kir.L1Read32{Addr: kir.Add(other, kir.C(4))})
				b.If(kir.Gt(okey, kir.L1Read32{Addr: kir.Add(slot, kir.C(4))}), func() {
					b.L1Write32(slot, kir.L1Read32{Addr: other})
					b.L1Write32(kir.Add(slot, kir.C(4)), okey)
				})
			})
		})
		writeOut()
	})
}
