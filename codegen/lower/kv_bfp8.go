package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// bfp8_b KV caches in the attention prologues (attn_prologue,
// attn_prologue_prefill). The new K and V rows are packed to bfp8_b by the
// compute kernel (the packer computes the shared exponent of each 16-value
// face row) into the CBs k_packed and v_packed; the writer then moves each
// row's bytes into its cache tile, which the program updates in place:
//
//   - a bfp8_b tile is 64 exponent bytes (face f row r at f*16 + r), then
//     1024 mantissa bytes (face f row r at 64 + f*256 + r*16); tile row r
//     is face row r%16 of faces 2*(r/16) and 2*(r/16)+1: two exponent bytes
//     and two 16-byte mantissa runs that no other row shares;
//   - the mantissa runs are written to DRAM as they are (16-byte aligned
//     writes of 16 bytes);
//   - the two exponent bytes share the 16-byte words of their faces' other
//     rows, and a DRAM write is at least 16 aligned bytes: the writer reads
//     the tile's 64 exponent bytes (a DRAM read is 64-byte aligned; they
//     are the page's first bytes), patches its rows' bytes in L1 and writes
//     back the aligned span holding them (decode: the 32 bytes of the row's
//     two faces; prefill: all 64, several rows at once).
//
// That read-modify-write is race-free because every cache tile has exactly
// one writer per program, which rewrites it under its own barriers: the
// work items own disjoint sets of tiles (decode: a k or v item is one user's
// tile row of kv heads and writes only the Dt tiles of row pos/32 of each
// of its heads, so no two items touch one tile; prefill: a k or v item owns
// every tile of one user's kv head and writes its token tile rows in
// order, each tile's exponents read only after the previous write to it
// completed, noc_async_write_barrier); the tile's exponent block is its
// page's first 64 bytes (pages are 1088 = 17*64 bytes, 64-byte aligned),
// so no aligned span of one tile holds another tile's bytes; and the
// programs of a step run one after another. Other cores writing other rows
// write other tiles (other heads or users) or run in another program.
//
// The bytes are exactly those a whole-tile pack would give the row: the
// exponents are per face row, so the other rows keep theirs bit for bit,
// and the row equals the reference's Store of the cache. The K rows are
// rounded to qg's dtype (bf16) first and then packed, as the composed
// path stores them (its RoPE result, then update_cache into the bfp8_b
// cache) and as sim/ref's prologue rounds them; the V rows are bf16
// already.
//
// Only in-place updates are lowered (the result is the cache's buffer, as
// a state update is); the compute kernel walks the items as the reader
// and writer do (runtime args start, count), since it packs the k items'
// results and converts the v items' rows besides normalising q.

// bfpKV is a prologue's bfp8_b cache state: its extra CBs and sizes.
type bfpKV struct {
	prefill bool
	// CBs: packed k rows (Dt pages), packed v rows (Dt pages), v rows in
	// (reader -> compute), a norm unit's result (Dt pages, qg's dtype),
	// the cache tiles' exponent blocks (slots pages of 64 bytes)
	kq, vq, vin, mid, exp int
	slots                 int
}

// newBFPKV checks a prologue whose caches are bfp8_b (in place) and
// returns its state; nil when the caches are not bfp8_b.
func newBFPKV(op *ir.Op, inPlaceK, inPlaceV, prefill bool) (*bfpKV, error) {
	if op.Operands[7].Type.DType != ir.BFP8B {
		return nil, nil
	}
	if !inPlaceK || !inPlaceV {
		return nil, fmt.Errorf("rule prologue-cache-inplace: %s writes rows into bfp8_b caches in place; its cache results must be the caches' buffers (state updates), not copies", op.Name())
	}
	return &bfpKV{prefill: prefill}, nil
}

// plan plans the bfp8_b CBs (the caller's planOut, instead of the cache
// tile slots).
func (kv *bfpKV) plan(pl *prologue) {
	d, cbs := pl.d, pl.cbs
	kv.kq = cbs.Output("k_packed", ir.BFP8B, d.Dt)
	kv.vq = cbs.Output("v_packed", ir.BFP8B, d.Dt)
	kv.vin = cbs.Input("v_rows", pl.dtype(), 2)
	kv.mid = cbs.Scratch("normed_rows", pl.dtype(), d.Dt)
	kv.slots = 1
	if !kv.prefill {
		kv.slots = min(d.Hkv, ir.TileSize) * d.Dt
	}
	kv.exp = cbs.Pages(blocks.ScratchCB, "cache_exponents", ir.UInt32, blocks.BFPExpBytes, kv.slots)
}

// vCB is the CB the reader pushes v rows to: the compute kernel's v_rows
// with bfp8_b caches, else the writer's moved.
func (pl *prologue) vCB() int {
	if pl.bfp != nil {
		return pl.bfp.vin
	}
	return pl.moved
}

// bfpCompute adds the compute kernel of a prologue with bfp8_b caches:
// per item (runtime args start, count; the reader's order) its norm units
// (q and k: 1), each into normed_rows in qg's dtype and copied from there
// into out (q) or packed into k_packed (k); a v item's tiles packed into
// v_packed. One norm body serves q and k (the kernel's code stays within
// the kernel config ring).
func (pl *prologue) bfpCompute(rotate func(c *blocks.Compute, out int)) *kir.Kernel {
	kv, d, it := pl.bfp, pl.d, pl.items
	cp, c := pl.splitProgram.compute()
	start, count := cp.RuntimeArg("start"), cp.RuntimeArg("count")
	c.Startup(pl.x, pl.scaler, pl.out)
	c.B.CBWaitFront(pl.scaler, kir.C(1))
	if pl.resident >= 0 {
		c.B.CBWaitFront(pl.resident, kir.Ci(pl.resN))
	}
	n := pl.norm
	n.out = kv.mid
	in := func(s itemSeg, r kir.Expr) kir.Expr {
		cond := kir.Lt(r, kir.Ci(s.lo+s.n))
		if s.lo > 0 {
			cond = kir.LAnd(kir.Ge(r, kir.Ci(s.lo)), cond)
		}
		return cond
	}
	copyTo := func(cb int) func() {
		return func() { c.For("j", kir.C(0), kir.Ci(d.Dt), func(kir.Var) { c.Unary(kv.mid, cb, nil) }) }
	}
	c.For("i", start, kir.Add(start, count), func(i kir.Var) {
		r := c.B.Let("r", kir.Mod(i, kir.Ci(it.perUser)))
		isK := c.B.Let("is_k", in(it.k, r))
		units := c.B.LetT("units", kir.U32T, kir.C(0))
		c.B.If(in(it.q, r), func() { c.B.Assign(units, kir.C(1)) })
		c.B.If(isK, func() { c.B.Assign(units, kir.C(1)) })
		c.For("s", kir.C(0), units, func(kir.Var) {
			n.emit(c, rotate)
			c.If(isK, copyTo(kv.kq), copyTo(pl.out))
		})
		c.If(in(it.v, r), func() {
			idx := kir.Sub(r, kir.Ci(it.v.lo))
			c.B.Comment("v rows packed to bfp8_b")
			nt := kir.Expr(kir.Ci(d.Dt)) // prefill: one cache tile row
			if !kv.prefill {             // the kv heads of tile row idx, Dt tiles each
				nh := c.B.LetT("nh", kir.U32T, kir.Sub(kir.Ci(d.Hkv), kir.Mul(idx, kir.Ci(ir.TileSize))))
				c.B.If(kir.Gt(nh, kir.Ci(ir.TileSize)), func() { c.B.Assign(nh, kir.Ci(ir.TileSize)) })
				nt = kir.Mul(nh, kir.Ci(d.Dt))
			}
			c.For("t", kir.C(0), nt, func(kir.Var) { c.Unary(kv.vin, kv.vq, nil) })
		}, nil)
	})
	if pl.resident >= 0 {
		c.B.CBPopFront(pl.resident, kir.Ci(pl.resN))
	}
	c.B.CBPopFront(pl.scaler, kir.C(1))
	return cp
}

// setRangeArgs gives core i of cores its item range (start, count) of
// plan as the runtime args of every kernel ks.
func setRangeArgs(cores []kir.Core, plan Split, ks ...*kir.Kernel) {
	for i, core := range cores {
		s, n := plan.Range(i)
		for _, k := range ks {
			k.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
		}
	}
}

// bfpRow is one row's move into a bfp8_b cache tile: the source tile's row
// srcRow (L1) into row dstRow of the cache tile whose exponent block is
// staged at exp (L1).
type bfpRow struct{ src, srcRow, dstRow kir.Expr }

// patchExp copies the row's two exponent bytes into the staged block.
func (r bfpRow) patchExp(b *kir.Builder, exp kir.Expr) {
	for half := range 2 {
		blocks.CopyByte(b, kir.Add(r.src, blocks.BFPExpOffset(r.srcRow, half)), kir.Add(exp, blocks.BFPExpOffset(r.dstRow, half)))
	}
}

// writeMant writes the row's two 16-byte mantissa runs to cache page pg.
func (r bfpRow) writeMant(b *kir.Builder, a *blocks.Access, pg kir.Expr) {
	for half := range 2 {
		b.NoCAsyncWrite(kir.Add(r.src, blocks.BFPMantOffset(r.srcRow, half)), a.PageAddrAtExpr(pg, blocks.BFPMantOffset(r.dstRow, half)), kir.Ci(16))
	}
}

// readExp emits the read of cache page pg's exponent block into exp (the
// page's first 64 bytes; no barrier).
func readExp(b *kir.Builder, a *blocks.Access, pg, exp kir.Expr) {
	b.NoCAsyncRead(a.PageAddr(pg), exp, kir.Ci(blocks.BFPExpBytes))
}

// bfpWriteKV emits k (or v) item hr with bfp8_b caches: the exponent
// blocks of the item's cache tiles (each kv head's Dt tiles of tile row
// pos/32) read under one barrier, then each head's row written into row
// pos%32 of its tiles: from row h%32 of k_packed's Dt tiles (one k unit),
// or row 0 of the head's Dt v_packed tiles; writes complete before the
// packed tiles are popped.
func (dp *decodePrologue) bfpWriteKV(b *kir.Builder, u kir.Var, hr kir.Expr, k bool) {
	d, kv, tb := dp.d, dp.bfp, ir.BFP8B.TileBytes()
	a, cb := dp.wa.vcOut, kv.vq
	if k {
		a, cb = dp.wa.kcOut, kv.kq
		b.Comment("k: each kv head's row into row pos%32 of its bfp8_b cache tiles")
	} else {
		b.Comment("v: row 0 of each packed tile into row pos%32 of the bfp8_b cache tile")
	}
	exp := func(h, dd kir.Expr) kir.Expr {
		return kir.Add(dp.slotL1, kir.Mul(kir.Add(kir.Mul(kir.Mod(h, kir.Ci(ir.TileSize)), kir.Ci(d.Dt)), dd), kir.Ci(blocks.BFPExpBytes)))
	}
	page := func(h, dd kir.Expr) kir.Expr { return d.cachePage(u, h, dp.wptr, dd) }
	dp.heads(b, hr, func(h kir.Var) {
		b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) { readExp(b, a, page(h, dd), exp(h, dd)) })
	})
	b.NoCAsyncReadBarrier()
	// write emits row (src, srcRow) into head h's tile dd.
	write := func(h, dd kir.Var, src, srcRow kir.Expr) {
		r := bfpRow{src: src, srcRow: srcRow, dstRow: dp.prow}
		pg := b.Let("pg", page(h, dd))
		e := b.Let("e", exp(h, dd))
		r.patchExp(b, e)
		half := b.Let("ehalf", kir.Mul(kir.Div(dp.prow, kir.Ci(blocks.FaceDim)), kir.Ci(2*blocks.FaceDim)))
		b.NoCAsyncWrite(kir.Add(e, half), a.PageAddrAtExpr(pg, half), kir.Ci(2*blocks.FaceDim))
		r.writeMant(b, a, pg)
	}
	if k {
		src := blocks.WaitFront(b, cb, kir.Ci(d.Dt), "src")
		dp.heads(b, hr, func(h kir.Var) {
			b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) {
				write(h, dd, kir.Add(src, kir.Mul(dd, kir.Ci(tb))), kir.Mod(h, kir.Ci(ir.TileSize)))
			})
		})
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(cb, kir.Ci(d.Dt))
		return
	}
	dp.heads(b, hr, func(h kir.Var) {
		src := blocks.WaitFront(b, cb, kir.Ci(d.Dt), "src")
		b.For("d", kir.C(0), kir.Ci(d.Dt), func(dd kir.Var) {
			write(h, dd, kir.Add(src, kir.Mul(dd, kir.Ci(tb))), kir.C(0))
		})
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(cb, kir.Ci(d.Dt))
	})
}

// bfpWriter is the prefill writer with bfp8_b caches: q and gate tiles as
// writer does, k and v rows by bfpPatchRows per packed tile.
func (pp *prefillPrologue) bfpWriter() {
	b, wpos, start, count := pp.writerStart()
	kv := pp.bfp
	pp.wpos = wpos.shared
	pp.slotL1 = blocks.Scratch(b, kv.exp, "cache_exp")
	pp.eachItem(b, start, count, func(u, r kir.Var) {
		pp.writeQ(b, u, r)
		rows := func(cb int, a *blocks.Access) func(idx kir.Expr) {
			return func(idx kir.Expr) {
				j, ct, r0, r1, has := pp.cacheRow(b, idx)
				b.For("d", kir.C(0), kir.Ci(pp.d.Dt), func(dd kir.Var) {
					src := blocks.WaitFront(b, cb, kir.C(1), "src")
					b.If(has, func() { pp.bfpPatchRows(b, a, pp.d.cachePage(u, j, ct, dd), r0, r1, src) })
					b.CBPopFront(cb, kir.C(1))
				})
			}
		}
		pp.items.k.on(b, r, rows(kv.kq, pp.wa.kcOut))
		pp.writeTiles(b, pp.items.gate, u, r, pp.wa.gate, pp.moved)
		pp.items.v.on(b, r, rows(kv.vq, pp.wa.vcOut))
	})
	blocks.ReleaseScratch(b, kv.exp)
	blocks.ReleaseScratch(b, pp.posW)
}

// bfpPatchRows is patchRows for a bfp8_b cache: rows r0..r1-1 of packed
// tile src into the same rows of cache page pg: its exponent block read,
// the rows' exponent bytes patched, the block and the rows' mantissa runs
// written. No other item writes the page (cache-aligned items).
func (pp *prefillPrologue) bfpPatchRows(b *kir.Builder, a *blocks.Access, pg, r0, r1, src kir.Expr) {
	exp := pp.slotL1
	pgv := b.Let("pg", pg)
	readExp(b, a, pgv, exp)
	b.NoCAsyncReadBarrier()
	each := func(body func(r bfpRow)) {
		b.For("rr", r0, r1, func(rr kir.Var) { body(bfpRow{src: src, srcRow: rr, dstRow: rr}) })
	}
	each(func(r bfpRow) { r.patchExp(b, exp) })
	b.NoCAsyncWrite(exp, a.PageAddr(pgv), kir.Ci(blocks.BFPExpBytes))
	each(func(r bfpRow) { r.writeMant(b, a, pgv) })
	b.NoCAsyncWriteBarrier()
}

// checkCacheRows refuses an unfused cache write (update_cache,
// fill_cache) into a block-float cache: its rows would have to be packed
// (a shared exponent per 16 values), which only the fused prologues'
// compute kernels do.
func checkCacheRows(op *ir.Op) error {
	if c := op.Operands[0]; c.Type.DType.IsBlockFloat() {
		return fmt.Errorf("rule cache-dtype: %s writes %s rows into a %s cache, which needs them packed to its shared exponents: only the fused attention prologues do that (build the fused stage, or use a bf16 cache: --kv-dtype bf16)", op.Name(), op.Operands[1].Type.DType, c.Type.DType)
	}
	return nil
}
