package blocks

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Whole-row moves inside tiles held in L1, for data-movement kernels.
//
// A tile row r is two runs of 16 elements, one in each face of its band
// (faces 0 and 1 for r < 16, faces 2 and 3 otherwise), at byte offset
// ((r/16)*2 + half)*256*eb + (r%16)*16*eb. Consecutive rows of one band
// and half are contiguous, so a block of rows moves as at most a few
// local NoC reads (16-byte aligned: a face row is 32 or 64 bytes) instead
// of element by element. Both blocks issue NoC reads and leave the read
// barrier to the caller.

// RowOffset is the byte offset of the first element of half `half` (0:
// columns 0..15, 1: columns 16..31) of row r in a tile of eb-byte
// elements.
func RowOffset(r, half, eb int) int {
	return ((r/FaceDim)*2+half)*256*eb + (r%FaceDim)*FaceDim*eb
}

// ReadRowsTo reads rows [0, rows) of tile page `page` of a (a tile-layout
// buffer of eb-byte elements, 2 or 4) into the tile at L1 address l1,
// which must be 64-byte aligned. Per band of the rows (faces 0-1, 2-3) it
// reads the face rows it needs rounded up to 64 bytes, so source and
// destination agree modulo 64 as DRAM reads on Blackhole need: when the
// band's rows fill less than a face, one read from the band's first face
// through its second face's rows (a bf16 row: 576 bytes, not two reads of
// 64: a request costs a DRAM bank more than the extra bytes, see
// sim/timing's dram_request and noc_issue), else one read per face. Rows
// past `rows` that a read brings are the page's own; the rest of the tile
// is left as it was (clear it with ClearRows). The caller issues the read
// barrier.
func ReadRowsTo(b *kir.Builder, a *Access, page, l1 kir.Expr, rows, eb int) {
	for _, r := range liveRowRuns(rows, eb) {
		b.NoCAsyncRead(a.PageAddrAt(page, r.off), kir.Add(l1, kir.Ci(r.off)), kir.Ci(r.size))
	}
}

// rowRun is one request of a live-rows move: size bytes at byte offset
// off of a tile.
type rowRun struct{ off, size int }

// liveRowRuns are the requests that move rows [0, rows) of a tile of
// eb-byte elements (ReadRowsTo, WriteRowsFrom): per band of the rows (faces
// 0-1, 2-3) the face rows it needs rounded up to 64 bytes; when they fill
// less than a face, one request from the band's first face through its
// second face's rows, else one per face.
func liveRowRuns(rows, eb int) []rowRun {
	rows = min(max(rows, 1), TileDim)
	face := 256 * eb
	var runs []rowRun
	for band := 0; band*FaceDim < rows; band++ {
		n := min(rows-band*FaceDim, FaceDim)
		size := min(face, (n*FaceDim*eb+63)/64*64)
		if size < face {
			runs = append(runs, rowRun{RowOffset(band*FaceDim, 0, eb), face + size})
			continue
		}
		for half := range 2 {
			runs = append(runs, rowRun{RowOffset(band*FaceDim, half, eb), size})
		}
	}
	return runs
}

// WriteRowsFrom writes rows [0, rows) of the tile at L1 address l1 (a
// tile of eb-byte elements, 2 or 4) to the same rows of tile page `page`
// of a: the writes ReadRowsTo would read, in the other direction (per band
// of the rows one write from the band's first face through its second
// face's rows, rounded up to 64 bytes, when they fill less than a face;
// else one write per face). Bytes of the page past those writes keep
// what they held; the rows the writes carry past `rows` are l1's own. The
// caller issues the write barrier.
func WriteRowsFrom(b *kir.Builder, a *Access, page, l1 kir.Expr, rows, eb int) {
	for _, r := range liveRowRuns(rows, eb) {
		b.NoCAsyncWrite(kir.Add(l1, kir.Ci(r.off)), a.PageAddrAt(page, r.off), kir.Ci(r.size))
	}
}

// WriteTilesLive writes count pages of cb to pages first, ... of a, each
// as its page arrives: rows [0, rows) of each page (WriteRowsFrom) when
// rows < 32 and the elements are eb = 2 or 4 bytes, else the whole page.
// The writes of the pages up to the end of cb's ring of `ring` pages are
// in flight together (cumulative cb_wait_front: a run of pages never
// straddles the ring's end) under one write barrier, then popped, and at
// the last page. pos is the writer's position in cb's ring (pages popped
// mod ring), shared by every call on cb; it is advanced. Consumes count
// pages of cb. For results whose rows past `rows` are padding that no
// reader reads (ReadTilesLive).
func WriteTilesLive(b *kir.Builder, a *Access, cb int, first, count kir.Expr, rows, eb, ring int, pos kir.Var) {
	pending := b.LetT("pending", kir.U32T, kir.C(0))
	b.For("i", kir.C(0), count, func(i kir.Var) {
		b.CBWaitFront(cb, kir.Add(pending, kir.C(1)))
		l1 := b.Let("l1", kir.Add(kir.GetReadPtr{CB: cb}, kir.Mul(pending, kir.Ci(a.PageSize()))))
		if rows < TileDim && (eb == 2 || eb == 4) {
			WriteRowsFrom(b, a, kir.Add(first, i), l1, rows, eb)
		} else {
			b.NoCAsyncWrite(l1, a.PageAddr(kir.Add(first, i)), kir.Ci(a.PageSize()))
		}
		b.Assign(pending, kir.Add(pending, kir.C(1)))
		b.Assign(pos, kir.Add(pos, kir.C(1)))
		b.If(kir.Or(kir.Eq(pos, kir.Ci(ring)), kir.Eq(kir.Add(i, kir.C(1)), count)), func() {
			b.NoCAsyncWriteBarrier()
			b.CBPopFront(cb, pending)
			b.Assign(pending, kir.C(0))
			b.If(kir.Eq(pos, kir.Ci(ring)), func() { b.Assign(pos, kir.C(0)) })
		})
	})
}

// ReadTilesLive issues the reads of count tile pages first, ... of a into
// consecutive page slots at L1 address l1 (64-byte aligned): rows [0,
// rows) of each (ReadRowsTo) when rows < 32 and a's elements are eb = 2 or
// 4 bytes, else whole pages. The rows past `rows` are left as they were:
// callers whose results' rows depend only on the same rows (row-wise
// programs) read no more than the live rows. No barrier.
func ReadTilesLive(b *kir.Builder, a *Access, l1, first, count kir.Expr, rows, eb int) {
	b.For("i", kir.C(0), count, func(i kir.Var) {
		ReadTileLive(b, a, kir.Add(first, i), kir.Add(l1, kir.Mul(i, kir.Ci(a.PageSize()))), rows, eb)
	})
}

// ReadTileLive is ReadTilesLive of one page: rows [0, rows) of tile page
// `page` of a into the tile at l1, or the whole page when rows >= 32 or
// the elements are not 2 or 4 bytes. No barrier.
func ReadTileLive(b *kir.Builder, a *Access, page, l1 kir.Expr, rows, eb int) {
	if rows < TileDim && (eb == 2 || eb == 4) {
		ReadRowsTo(b, a, page, l1, rows, eb)
		return
	}
	ReadPageTo(b, a, page, l1)
}

// GatherRowSlot is the staging bytes GatherRows needs per row.
const GatherRowSlot = 128

// GatherRows assembles rows 0..rows-1 of the tile at L1 address dst from
// row 0 of tile pages page(0), ..., page(rows-1) of a (elements of eb = 2
// or 4 bytes): per row two 64-byte reads (the first 64 bytes of faces 0
// and 1, so source and destination agree modulo 64) into its
// GatherRowSlot-byte slot of stage (64-byte aligned), one barrier, then
// two local copies of the face-row runs into the row. The other rows of
// dst are untouched. The caller issues the final read barrier.
func GatherRows(b *kir.Builder, a *Access, stage, dst kir.Expr, rows, eb int, page func(r int) kir.Expr) {
	for r := range rows {
		for half := range 2 {
			b.NoCAsyncRead(a.PageAddrAt(page(r), RowOffset(0, half, eb)), kir.Add(stage, kir.Ci(r*GatherRowSlot+64*half)), kir.C(64))
		}
	}
	b.NoCAsyncReadBarrier()
	for r := range rows {
		for half := range 2 {
			LocalCopy(b, kir.Add(stage, kir.Ci(r*GatherRowSlot+64*half)), kir.Add(dst, kir.Ci(RowOffset(r, half, eb))), FaceDim*eb)
		}
	}
}

// GatherRowsTiles is GatherRows for n tiles at once: tile t, at L1
// address dst + t*tileBytes, gets rows 0..rows-1 from row 0 of tile pages
// page(t, 0), ..., page(t, rows-1) of a. stage holds n*rows slots of
// GatherRowSlot bytes. All 2*n*rows DRAM reads are in flight under one
// barrier, then the local copies are issued; the caller issues the final
// read barrier. The reads and the copies are run-time loops over tiles and
// rows (page receives the loop variables), so the kernel's code does not
// grow with n*rows (kir rule code-size).
func GatherRowsTiles(b *kir.Builder, a *Access, stage, dst kir.Expr, n, tileBytes, rows, eb int, page func(t, r kir.Expr) kir.Expr) {
	GatherRowsTilesAt(b, a, stage, dst, nil, n, tileBytes, rows, eb, page)
}

// GatherRowsTilesAt is GatherRowsTiles into rows row0..row0+rows-1 of each
// tile (row0 a run-time row, nil for 0; row0+rows <= 32): row r of page
// (t, r) lands in row row0+r, so tiles gathered on several cores line up
// row for row with their common result tile (WriteRows).
func GatherRowsTilesAt(b *kir.Builder, a *Access, stage, dst, row0 kir.Expr, n, tileBytes, rows, eb int, page func(t, r kir.Expr) kir.Expr) {
	at := func(r kir.Expr) kir.Expr {
		if row0 == nil {
			return r
		}
		return kir.Add(row0, r)
	}
	slot := func(t, r kir.Expr, half int) kir.Expr {
		return kir.Add(stage, kir.Add(kir.Mul(kir.Add(kir.Mul(t, kir.Ci(rows)), r), kir.Ci(GatherRowSlot)), kir.Ci(64*half)))
	}
	loop2 := func(tn, rn string, body func(t, r kir.Expr)) {
		loop(b, tn, n, func(t kir.Expr) { loop(b, rn, rows, func(r kir.Expr) { body(t, r) }) })
	}
	loop2("gt", "gr", func(t, r kir.Expr) {
		for half := range 2 {
			b.NoCAsyncRead(a.PageAddrAt(page(t, r), RowOffset(0, half, eb)), slot(t, r, half), kir.C(64))
		}
	})
	b.NoCAsyncReadBarrier()
	loop2("ct", "cr", func(t, r kir.Expr) {
		for half := range 2 {
			LocalCopy(b, slot(t, r, half), kir.Add(dst, kir.Add(kir.Mul(t, kir.Ci(tileBytes)), rowOffsetExpr(at(r), half, eb))), FaceDim*eb)
		}
	})
}

// WriteRows writes rows [lo, hi) of the tile at L1 address l1 (elements
// of eb bytes, 2 or 4; 0 <= lo < hi <= 32) to the same rows of tile page
// `page` of a, leaving the page's other rows as they are: per band of
// faces (rows 0-15, 16-31) one write of both faces when the band's rows
// are all in [lo, hi), else one write per face of the band's rows in
// range (contiguous in a face; a bf16 face row is 32 aligned bytes). The
// caller issues the write barrier.
func WriteRows(b *kir.Builder, a *Access, page, l1 kir.Expr, lo, hi, eb int) {
	for band := 0; band < TileDim; band += FaceDim {
		r0, r1 := max(lo, band), min(hi, band+FaceDim)
		if r0 >= r1 {
			continue
		}
		if r0 == band && r1 == band+FaceDim {
			off := RowOffset(band, 0, eb)
			b.NoCAsyncWrite(kir.Add(l1, kir.Ci(off)), a.PageAddrAt(page, off), kir.Ci(2*256*eb))
			continue
		}
		for half := range 2 {
			off := RowOffset(r0, half, eb)
			b.NoCAsyncWrite(kir.Add(l1, kir.Ci(off)), a.PageAddrAt(page, off), kir.Ci((r1-r0)*FaceDim*eb))
		}
	}
}

// loop emits body once for each i in [0, n): as a run-time loop when
// n > 1, inline with i = 0 when n == 1, not at all when n <= 0.
func loop(b *kir.Builder, name string, n int, body func(i kir.Expr)) {
	switch {
	case n == 1:
		body(kir.C(0))
	case n > 1:
		b.For(name, kir.C(0), kir.Ci(n), func(i kir.Var) { body(i) })
	}
}

// rowOffsetExpr is RowOffset for a row computed at run time.
func rowOffsetExpr(r kir.Expr, half, eb int) kir.Expr {
	band := kir.Mul(kir.Div(r, kir.Ci(FaceDim)), kir.Ci(2*256*eb))
	inFace := kir.Mul(kir.Mod(r, kir.Ci(FaceDim)), kir.Ci(FaceDim*eb))
	return kir.Add(kir.Add(band, inFace), kir.Ci(half*256*eb))
}

// LiveRows is the number of rows of a tile-layout value of shape s that
// row-wise programs must read: its rows when it is one tile row (the
// second-to-last dim, 1 for a vector), else 32.
func LiveRows(s ir.Shape) int {
	im := ImageOf(s)
	if im.B*im.Rt != 1 {
		return TileDim
	}
	return im.R
}

// ClearRows zeroes rows [from, 32) of the tile at L1 address tile
// (elements of eb bytes, 2 or 4) with at most three local NoC reads from
// zeros, the L1 address of at least one tile (1024*eb bytes) of zero
// bytes on this core. from is a constant; from >= 32 emits nothing, from
// <= 0 clears the whole tile. The caller issues the read barrier.
func ClearRows(b *kir.Builder, tile, zeros kir.Expr, from, eb int) {
	from = max(from, 0)
	if from >= TileDim {
		return
	}
	face := 256 * eb
	if from == 0 {
		LocalCopy(b, zeros, tile, 4*face)
		return
	}
	if from < FaceDim {
		n := (FaceDim - from) * FaceDim * eb
		for half := range 2 {
			LocalCopy(b, zeros, kir.Add(tile, kir.Ci(RowOffset(from, half, eb))), n)
		}
		LocalCopy(b, zeros, kir.Add(tile, kir.Ci(2*face)), 2*face)
		return
	}
	n := (TileDim - from) * FaceDim * eb
	for half := range 2 {
		LocalCopy(b, zeros, kir.Add(tile, kir.Ci(RowOffset(from, half, eb))), n)
	}
}

// ZeroRowsFrom is ClearRows for a run-time first row: it zeroes rows
// [from, 32) of the tile at L1 address tile (elements of eb bytes, 2 or 4;
// from <= 32) with at most
// three local NoC copies from zero, the L1 address of at least a tile of
// zeros (rows of a face are contiguous: the rows from `from` of faces 0
// and 1, then faces 2 and 3 whole; or, from row 16 on, the rows of faces
// 2 and 3). The caller issues the read barrier.
func ZeroRowsFrom(b *kir.Builder, tile, zero, from kir.Expr, eb int) {
	row := FaceDim * eb   // bytes of one face row
	face := FaceDim * row // bytes of one face
	// The first row to clear within the faces is from % 16 on both paths
	// (a form whose sizes stay within a face even where a branch is dead).
	clear := func(faceA, faceB int) {
		first := b.Let("zfirst", kir.Mod(from, kir.Ci(FaceDim)))
		n := b.Let("zrows", kir.Sub(kir.Ci(FaceDim), first))
		off := kir.Mul(first, kir.Ci(row))
		size := kir.Mul(n, kir.Ci(row))
		b.NoCAsyncRead(LocalAddr(zero), kir.Add(kir.Add(tile, kir.Ci(faceA*face)), off), size)
		b.NoCAsyncRead(LocalAddr(zero), kir.Add(kir.Add(tile, kir.Ci(faceB*face)), off), size)
	}
	b.IfElse(kir.Lt(from, kir.Ci(FaceDim)), func() {
		clear(0, 1)
		b.NoCAsyncRead(LocalAddr(zero), kir.Add(tile, kir.Ci(2*face)), kir.Ci(2*face))
	}, func() {
		b.If(kir.Lt(from, kir.Ci(TileDim)), func() { clear(2, 3) })
	})
}

// CopyRows copies n whole rows (32 elements of eb bytes each) from rows
// srcRow.. of the tile at L1 address src to rows dstRow.. of the tile at
// L1 address dst, as local NoC reads of runs that stay inside one face
// band of both tiles (at most 2*(n/16 + 2) reads). Rows are constants
// with 0 <= srcRow, dstRow and srcRow+n, dstRow+n <= 32; the two ranges
// must not overlap in one tile. The caller issues the read barrier.
func CopyRows(b *kir.Builder, src, dst kir.Expr, srcRow, dstRow, n, eb int) error {
	if srcRow < 0 || dstRow < 0 || n < 0 || srcRow+n > TileDim || dstRow+n > TileDim {
		return fmt.Errorf("rule tile-rows: copying %d rows from row %d to row %d leaves the %d rows of a tile", n, srcRow, dstRow, TileDim)
	}
	for n > 0 {
		m := min(n, FaceDim-srcRow%FaceDim, FaceDim-dstRow%FaceDim)
		for half := range 2 {
			LocalCopy(b, kir.Add(src, kir.Ci(RowOffset(srcRow, half, eb))), kir.Add(dst, kir.Ci(RowOffset(dstRow, half, eb))), m*FaceDim*eb)
		}
		srcRow, dstRow, n = srcRow+m, dstRow+m, n-m
	}
	return nil
}

// MoveElem copies the eb-byte element (r, c) of the tile at L1 address
// src to element (dr, dc) of the tile at L1 address dst (all four
// coordinates expressions; 2-byte elements are read-modify-written).
func MoveElem(b *kir.Builder, src kir.Expr, r, c kir.Expr, dst kir.Expr, dr, dc kir.Expr, eb int) {
	from := b.Let("me_src", kir.Add(src, FaceOffset(r, c, eb)))
	to := b.Let("me_dst", kir.Add(dst, FaceOffset(dr, dc, eb)))
	StoreElem(b, to, LoadElem(from, eb), eb)
}
