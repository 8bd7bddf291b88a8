package blocks

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// ReadPage emits, in a data-movement kernel: reserve one page of cb, read
// page `page` of a into it, wait for the read, push it. Produces one page
// of cb.
func ReadPage(b *kir.Builder, a *Access, cb int, page kir.Expr) {
	l1 := Reserve(b, cb, kir.C(1), "l1")
	ReadPageTo(b, a, page, l1)
	b.NoCAsyncReadBarrier()
	b.CBPushBack(cb, kir.C(1))
}

// Reserve emits cb_reserve_back(cb, n) and returns a variable called name
// holding the L1 address of the reserved pages (get_write_ptr).
func Reserve(b *kir.Builder, cb int, n kir.Expr, name string) kir.Var {
	b.CBReserveBack(cb, n)
	return b.Let(name, kir.GetWritePtr{CB: cb})
}

// WaitFront emits cb_wait_front(cb, n) and returns a variable called name
// holding the L1 address of the front page (get_read_ptr).
func WaitFront(b *kir.Builder, cb int, n kir.Expr, name string) kir.Var {
	b.CBWaitFront(cb, n)
	return b.Let(name, kir.GetReadPtr{CB: cb})
}

// ReadPageTo emits a read of page `page` of a to L1 address l1 of this
// core (no CB traffic, no barrier): one NoC read, or, for a page larger
// than a NoC packet (a long prompt's ids row), one read per packet-sized
// piece in order, each at most target.Target.MaxNoCPacket bytes.
func ReadPageTo(b *kir.Builder, a *Access, page, l1 kir.Expr) {
	size, packet := a.PageSize(), a.t.MaxNoCPacket
	if size <= packet {
		b.NoCAsyncRead(a.PageAddr(page), l1, kir.Ci(size))
		return
	}
	for off := 0; off < size; off += packet {
		b.NoCAsyncRead(a.PageAddrAt(page, off), kir.Add(l1, kir.Ci(off)), kir.Ci(min(packet, size-off)))
	}
}

// WritePage emits: wait for one page of cb, write it to page `page` of a,
// wait for the write, pop it. Consumes one page of cb.
func WritePage(b *kir.Builder, a *Access, cb int, page kir.Expr) {
	l1 := WaitFront(b, cb, kir.C(1), "l1")
	b.NoCAsyncWrite(l1, a.PageAddr(page), kir.Ci(a.PageSize()))
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(cb, kir.C(1))
}

// ReadPages emits a loop reading pages first, first+1, ..., first+count-1
// of a into cb, one page at a time. Produces count pages of cb.
func ReadPages(b *kir.Builder, a *Access, cb int, first, count kir.Expr) {
	b.For("i", kir.C(0), count, func(i kir.Var) { ReadPage(b, a, cb, kir.Add(first, i)) })
}

// ReadPagesBatch emits: reserve count pages of cb, read pages first, ...,
// first+count-1 of a into them with every read in flight, one barrier,
// push them. count must not exceed cb's pages. Produces count pages of cb.
func ReadPagesBatch(b *kir.Builder, a *Access, cb int, first, count kir.Expr) {
	l1 := Reserve(b, cb, count, "l1")
	b.For("i", kir.C(0), count, func(i kir.Var) {
		b.NoCAsyncRead(a.PageAddr(kir.Add(first, i)), kir.Add(l1, kir.Mul(i, kir.Ci(a.PageSize()))), kir.Ci(a.PageSize()))
	})
	b.NoCAsyncReadBarrier()
	b.CBPushBack(cb, count)
}

// ReadPagesTwiceBatchOf reads pages page(0), ..., page(count-1) of a into
// cb and, for each page, a copy of it into cb2 (a local NoC copy: the page is read from DRAM
// once). It serves a compute kernel that unpacks the same tile two ways:
// cb2 through the FPU source registers and cb straight into DEST (an fp32
// CB in unpack-to-dest mode cannot be an FPU operand). Per block of at
// most batch pages: the DRAM reads all in flight, one barrier, the local
// copies all in flight, one barrier. cb and cb2 need room for a block
// (batch pages; 2*batch lets the next block in while compute works on this
// one). Produces count pages of each.
func ReadPagesTwiceBatchOf(b *kir.Builder, a *Access, cb, cb2 int, count kir.Expr, batch int, page func(i kir.Expr) kir.Expr) {
	ps := a.PageSize()
	b.ForStep("p0", kir.C(0), count, kir.Ci(batch), func(p0 kir.Var) {
		n := BlockLen(b, "n", count, p0, batch)
		b.CBReserveBack(cb, n)
		b.CBReserveBack(cb2, n)
		l1 := b.Let("l1", kir.GetWritePtr{CB: cb})
		l2 := b.Let("l2", kir.GetWritePtr{CB: cb2})
		b.For("i", kir.C(0), n, func(i kir.Var) {
			b.NoCAsyncRead(a.PageAddr(page(kir.Add(p0, i))), kir.Add(l1, kir.Mul(i, kir.Ci(ps))), kir.Ci(ps))
		})
		b.NoCAsyncReadBarrier()
		b.For("i", kir.C(0), n, func(i kir.Var) {
			LocalCopy(b, kir.Add(l1, kir.Mul(i, kir.Ci(ps))), kir.Add(l2, kir.Mul(i, kir.Ci(ps))), ps)
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cb, n)
		b.CBPushBack(cb2, n)
	})
}

// ReadPagesInBatches is ReadPagesBatch over count pages in blocks of at
// most batch pages, one barrier per block. cb needs room for a block.
func ReadPagesInBatches(b *kir.Builder, a *Access, cb int, first, count kir.Expr, batch int) {
	ReadPagesInBatchesOf(b, a, cb, count, batch, func(i kir.Expr) kir.Expr { return kir.Add(first, i) })
}

// ReadPagesInBatchesOf is ReadPagesInBatches of pages page(0), ...,
// page(count-1).
func ReadPagesInBatchesOf(b *kir.Builder, a *Access, cb int, count kir.Expr, batch int, page func(i kir.Expr) kir.Expr) {
	b.ForStep("p0", kir.C(0), count, kir.Ci(batch), func(p0 kir.Var) {
		n := BlockLen(b, "n", count, p0, batch)
		l1 := Reserve(b, cb, n, "l1")
		b.For("i", kir.C(0), n, func(i kir.Var) {
			b.NoCAsyncRead(a.PageAddr(page(kir.Add(p0, i))), kir.Add(l1, kir.Mul(i, kir.Ci(a.PageSize()))), kir.Ci(a.PageSize()))
		})
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cb, n)
	})
}

// WritePages emits a loop writing count pages of cb to pages first, ... of
// a. Consumes count pages of cb.
func WritePages(b *kir.Builder, a *Access, cb int, first, count kir.Expr) {
	b.For("i", kir.C(0), count, func(i kir.Var) { WritePage(b, a, cb, kir.Add(first, i)) })
}

// WritePagesBatch writes count pages of cb to pages page(0), ...,
// page(count-1) of a: it issues each write as its page arrives
// (cumulative cb_wait_front), then waits once for them all and pops them.
// cb must hold count pages and count must be positive. Consumes count
// pages of cb.
func WritePagesBatch(b *kir.Builder, a *Access, cb int, count kir.Expr, page func(i kir.Expr) kir.Expr) {
	l1 := WaitFront(b, cb, kir.C(1), "l1")
	b.For("i", kir.C(0), count, func(i kir.Var) {
		b.CBWaitFront(cb, kir.Add(i, kir.C(1)))
		b.NoCAsyncWrite(kir.Add(l1, kir.Mul(i, kir.Ci(a.PageSize()))), a.PageAddr(page(i)), kir.Ci(a.PageSize()))
	})
	b.NoCAsyncWriteBarrier()
	b.CBPopFront(cb, count)
}

// Scratch emits the acquisition of one page of cb as private L1 of the
// kernel (reserve, push, wait: the kernel is the CB's producer and
// consumer) and returns the variable holding its L1 address. Release with
// ReleaseScratch at the end of the kernel.
func Scratch(b *kir.Builder, cb int, name string) kir.Var { return ScratchPages(b, cb, 1, name) }

// ReleaseScratch pops the page Scratch took.
func ReleaseScratch(b *kir.Builder, cb int) { ReleaseScratchPages(b, cb, 1) }

// ScratchPages is Scratch for n pages: the kernel reserves, pushes and
// waits for n pages of cb and keeps them as private L1; it returns the
// variable holding the address of the first. Release with
// ReleaseScratchPages(b, cb, n).
func ScratchPages(b *kir.Builder, cb, n int, name string) kir.Var {
	b.CBReserveBack(cb, kir.Ci(n))
	b.CBPushBack(cb, kir.Ci(n))
	b.CBWaitFront(cb, kir.Ci(n))
	return b.Let(name, kir.GetReadPtr{CB: cb})
}

// ReleaseScratchPages pops the n pages ScratchPages took.
func ReleaseScratchPages(b *kir.Builder, cb, n int) { b.CBPopFront(cb, kir.Ci(n)) }

// fillSeedBytes is what FillWords stores word by word before it copies.
const fillSeedBytes = 512

// maxCopyBytes bounds one local copy: the NoC packet limit of the targets
// (target.Target.MaxNoCPacket; TestMaxCopyBytes).
const maxCopyBytes = 16384

// FillSteps is what FillWords(bytes) does: its word stores and its local
// copies, each of which waits for the one before (a round trip each).
func FillSteps(bytes int) (stores, copies int) {
	seed := bytes
	if bytes > fillSeedBytes && bytes%16 == 0 {
		seed = fillSeedBytes
	}
	for done := seed; done < bytes; done += min(done, bytes-done, maxCopyBytes) {
		copies++
	}
	return seed / 4, copies
}

// FillWords stores word at every 4-byte word of [addr, addr+bytes) (addr
// 16-byte aligned); the bytes hold it when FillWords returns. Up to
// fillSeedBytes it is a loop of stores; beyond that only the first
// fillSeedBytes are stored and the filled prefix is then doubled with
// local NoC copies of at most maxCopyBytes (a read barrier whenever a copy
// reads what the previous one wrote, and one at the end, so reads the
// kernel has in flight complete too): a 40 KB fill is 128 stores and 7
// copies instead of 10,240 stores.
func FillWords(b *kir.Builder, addr kir.Expr, bytes int, word uint32) {
	seed := bytes
	if bytes > fillSeedBytes && bytes%16 == 0 {
		seed = fillSeedBytes
	}
	b.For("w", kir.C(0), kir.Ci(seed/4), func(w kir.Var) {
		b.L1Write32(kir.Add(addr, kir.Mul(w, kir.C(4))), kir.C(word))
	})
	for done := seed; done < bytes; {
		n := min(done, bytes-done, maxCopyBytes)
		LocalCopy(b, addr, kir.Add(addr, kir.Ci(done)), n)
		// The next copy reads [0, min(done+n, ...)): wait for this one
		// unless that range was already filled before it.
		if next := min(done+n, bytes-done-n, maxCopyBytes); next > done {
			b.NoCAsyncReadBarrier()
		}
		done += n
	}
	if bytes > seed {
		b.NoCAsyncReadBarrier()
	}
}

// LocalCopy copies size bytes inside this core's L1 with a NoC read from
// itself (src and dst 16-byte aligned). The caller issues the read barrier.
func LocalCopy(b *kir.Builder, src, dst kir.Expr, size int) {
	b.NoCAsyncRead(LocalAddr(src), dst, kir.Ci(size))
}

// LoadElem is the value of the eb-byte element (2 or 4) at L1 address addr,
// zero-extended to 32 bits.
func LoadElem(addr kir.Expr, eb int) kir.Expr {
	if eb == 4 {
		return kir.L1Read32{Addr: addr}
	}
	word := kir.L1Read32{Addr: kir.And(addr, kir.C(^uint32(3)))}
	return kir.And(kir.Shr(word, kir.Mul(kir.And(addr, kir.C(2)), kir.C(8))), kir.C(0xFFFF))
}

// StoreElem stores the low eb bytes (2 or 4) of v at L1 address addr; a
// 2-byte store is a read-modify-write of its 32-bit word.
func StoreElem(b *kir.Builder, addr, v kir.Expr, eb int) {
	if eb == 4 {
		b.L1Write32(addr, v)
		return
	}
	wa := b.Let("wa", kir.And(addr, kir.C(^uint32(3))))
	sh := b.Let("sh", kir.Mul(kir.And(addr, kir.C(2)), kir.C(8)))
	keep := kir.And(kir.L1Read32{Addr: wa}, kir.Bin{Op: kir.OpXor, X: kir.Shl(kir.C(0xFFFF), sh), Y: kir.C(0xFFFFFFFF)})
	b.L1Write32(wa, kir.Or(keep, kir.Shl(kir.And(v, kir.C(0xFFFF)), sh)))
}

// CopyRun copies n elements of eb bytes from L1 address src to dst, where
// both start at a multiple of align bytes (align a power of two): a local
// NoC read when the run is whole 16-byte units at 16-byte alignment, 32-bit
// words when it is whole words at word alignment, elements otherwise. The
// caller issues the read barrier.
func CopyRun(b *kir.Builder, src, dst kir.Expr, n, eb, align int) {
	size := n * eb
	switch {
	case size%16 == 0 && align%16 == 0:
		LocalCopy(b, src, dst, size)
	case size%4 == 0 && align%4 == 0:
		for w := 0; w < size/4; w++ {
			b.L1Write32(kir.Add(dst, kir.Ci(4*w)), kir.L1Read32{Addr: kir.Add(src, kir.Ci(4*w))})
		}
	default:
		for e := 0; e < n; e++ {
			StoreElem(b, kir.Add(dst, kir.Ci(e*eb)), LoadElem(kir.Add(src, kir.Ci(e*eb)), eb), eb)
		}
	}
}

// ZeroPadding zeroes the elements of the tile at L1 address tile that lie
// outside rows [0, rows) x cols [0, cols) (0 < rows, cols <= 32), for
// elements of eb bytes (2 or 4). Whole face rows are cleared word by word;
// a partial word at the column boundary is read-modified-written.
// Reductions and matmuls over a padded dimension call it on their inputs,
// since device programs may leave any value in tile padding.
func ZeroPadding(b *kir.Builder, tile kir.Expr, eb, rows, cols int) {
	if rows >= TileDim && cols >= TileDim {
		return
	}
	perWord := 4 / eb
	for r := 0; r < TileDim; r++ {
		for half := 0; half < 2; half++ {
			lo := 0 // first column of this face row to clear
			if r < rows {
				lo = cols - half*FaceDim
				if lo >= FaceDim {
					continue
				}
				lo = max(lo, 0)
			}
			start := FaceOffsetConst(r, half*FaceDim, eb)
			first := (lo + perWord - 1) / perWord // first whole word
			if lo%perWord != 0 {                  // bf16: the element after lo-1 shares a word
				StoreElem(b, kir.Add(tile, kir.Ci(start+lo*eb)), kir.C(0), eb)
			}
			words := FaceDim / perWord
			if words-first > 2 {
				b.For("z", kir.Ci(first), kir.Ci(words), func(z kir.Var) {
					b.L1Write32(kir.Add(tile, kir.Add(kir.Ci(start), kir.Mul(z, kir.C(4)))), kir.C(0))
				})
			} else {
				for w := first; w < words; w++ {
					b.L1Write32(kir.Add(tile, kir.Ci(start+4*w)), kir.C(0))
				}
			}
		}
	}
}

// ScalerTile produces one page of bf16 CB cb holding the reduce scaler:
// value in row 0 of every face, zero elsewhere (reduce_tile multiplies by
// the scaler's first element). Produces one page of cb.
func ScalerTile(b *kir.Builder, cb int, value float32) {
	b.Comment("reduce scaler tile: the value in row 0 of every face")
	sp := Reserve(b, cb, kir.C(1), "scaler")
	FillWords(b, sp, ir.BF16.TileBytes(), 0)
	ScalerRows(b, sp, value)
	b.CBPushBack(cb, kir.C(1))
}

// OnesColumnTile produces one page of bf16 CB cb holding 1.0 in column 0
// (every row of faces 0 and 2) and zero elsewhere: in1 of a matmul_tiles
// that sums each row of in0 into column 0 of DEST (the norms' sum of
// squares), the tile a row reduction's scaler would be for reduce_tile.
// Produces one page of cb.
func OnesColumnTile(b *kir.Builder, cb int) {
	b.Comment("ones column tile: 1.0 in column 0, zero elsewhere (a matmul by it sums rows)")
	sp := Reserve(b, cb, kir.C(1), "ones")
	FillWords(b, sp, ir.BF16.TileBytes(), 0)
	one := Bits(ir.BF16, 1) // the low half-word of a row's first word is column 0
	for _, f := range []int{0, 2} {
		b.For("r", kir.C(0), kir.Ci(FaceDim), func(r kir.Var) {
			b.L1Write32(kir.Add(sp, kir.Add(kir.Ci(f*FaceDim*FaceDim*2), kir.Mul(r, kir.Ci(FaceDim*2)))), kir.C(one))
		})
	}
	b.CBPushBack(cb, kir.C(1))
}

// ScalerRows writes value into row 0 of every face of the bf16 tile at
// sp (the rest of a reduce scaler tile must already be zero).
func ScalerRows(b *kir.Builder, sp kir.Expr, value float32) {
	w := FillWord(ir.BF16, value)
	b.For("f", kir.C(0), kir.C(4), func(f kir.Var) {
		b.For("i", kir.C(0), kir.C(8), func(i kir.Var) {
			b.L1Write32(kir.Add(sp, kir.Add(kir.Mul(f, kir.C(512)), kir.Mul(i, kir.C(4)))), kir.C(w))
		})
	})
}

// ConstTile produces one page of CB cb (bf16 or fp32 tiles) with every
// element equal to value.
func ConstTile(b *kir.Builder, cb int, dt ir.DType, value float32) {
	p := Reserve(b, cb, kir.C(1), "cval")
	FillWords(b, p, dt.TileBytes(), FillWord(dt, value))
	b.CBPushBack(cb, kir.C(1))
}

// ZeroImagePadding zeroes the tile padding of tile (tr, tc) of a tensor
// with tile view im, held at L1 address tile (elements of eb bytes): rows
// past im.R in the last tile row and columns past im.C in the last tile
// column. Interior tiles are left alone. tr and tc are expressions.
func ZeroImagePadding(b *kir.Builder, tile kir.Expr, im Image, eb int, tr, tc kir.Expr) {
	lastR, lastC := im.R-(im.Rt-1)*TileDim, im.C-(im.Ct-1)*TileDim
	if lastR == TileDim && lastC == TileDim {
		return
	}
	isLastR := kir.Eq(tr, kir.Ci(im.Rt-1))
	isLastC := kir.Eq(tc, kir.Ci(im.Ct-1))
	switch {
	case lastR < TileDim && lastC < TileDim:
		b.IfElse(kir.LAnd(isLastR, isLastC), func() { ZeroPadding(b, tile, eb, lastR, lastC) }, func() {
			b.IfElse(isLastR, func() { ZeroPadding(b, tile, eb, lastR, TileDim) }, func() {
				b.If(isLastC, func() { ZeroPadding(b, tile, eb, TileDim, lastC) })
			})
		})
	case lastR < TileDim:
		b.If(isLastR, func() { ZeroPadding(b, tile, eb, lastR, TileDim) })
	default:
		b.If(isLastC, func() { ZeroPadding(b, tile, eb, TileDim, lastC) })
	}
}

// ZeroRows zeroes rows [from, 32) of the tile at L1 address tile (elements
// of eb bytes); from is an expression (a row count known only at run time).
func ZeroRows(b *kir.Builder, tile, from kir.Expr, eb int) {
	words := FaceDim * eb / 4
	b.For("zr", from, kir.Ci(TileDim), func(r kir.Var) {
		for half := 0; half < 2; half++ {
			base := b.Let("zb", kir.Add(tile, FaceOffset(r, kir.Ci(half*FaceDim), eb)))
			b.For("zw", kir.C(0), kir.Ci(words), func(w kir.Var) {
				b.L1Write32(kir.Add(base, kir.Mul(w, kir.C(4))), kir.C(0))
			})
		}
	})
}

// FillRowsFromRow0 copies row 0 of the tile at L1 address tile (elements
// of eb bytes) into its other 31 rows with local NoC copies that double the
// filled rows of faces 0 and 1, then copy them to faces 2 and 3 (9 copies,
// 5 read barriers; a column pattern such as a decode mask costs 32 stores
// instead of 1,024). The rows hold row 0 when it returns (reads the kernel
// has in flight complete too).
func FillRowsFromRow0(b *kir.Builder, tile kir.Expr, eb int) {
	FillRowsFromRow0Tiles(b, eb, tile)
}

// FillRowsFromRow0Tiles is FillRowsFromRow0 on several tiles at once:
// each round of copies covers every tile under one barrier, so n tiles
// take the barriers of one.
func FillRowsFromRow0Tiles(b *kir.Builder, eb int, tiles ...kir.Expr) {
	row := FaceDim * eb
	face := FaceDim * row
	for done := 1; done < FaceDim; done *= 2 {
		for _, tile := range tiles {
			for f := 0; f < 2; f++ {
				base := kir.Add(tile, kir.Ci(f*face))
				LocalCopy(b, base, kir.Add(base, kir.Ci(done*row)), done*row)
			}
		}
		b.NoCAsyncReadBarrier()
	}
	for _, tile := range tiles {
		LocalCopy(b, tile, kir.Add(tile, kir.Ci(2*face)), 2*face)
	}
	b.NoCAsyncReadBarrier()
}

// NegateCols flips the sign of columns [c0, c1) (constants, 0 <= c0 < c1
// <= 32) in all 32 rows of the tile at L1 address tile (bf16 or fp32
// elements of eb bytes).
func NegateCols(b *kir.Builder, tile kir.Expr, eb, c0, c1 int) {
	sign := uint32(0x8000)
	if eb == 4 {
		sign = 0x80000000
	}
	b.For("nr", kir.C(0), kir.Ci(TileDim), func(r kir.Var) {
		b.For("nc", kir.Ci(c0), kir.Ci(c1), func(c kir.Var) {
			a := b.Let("na", kir.Add(tile, FaceOffset(r, c, eb)))
			StoreElem(b, a, kir.Bin{Op: kir.OpXor, X: LoadElem(a, eb), Y: kir.C(sign)}, eb)
		})
	})
}

// BlockLen declares name = min(limit, total - start): the length of the
// block of at most limit items that starts at item start of total.
func BlockLen(b *kir.Builder, name string, total, start kir.Expr, limit int) kir.Var {
	return BlockLenOf(b, name, total, start, kir.Ci(limit))
}

// BlockLenOf is BlockLen for a run-time limit.
func BlockLenOf(b *kir.Builder, name string, total, start, limit kir.Expr) kir.Var {
	n := b.LetT(name, kir.U32T, kir.Sub(total, start))
	b.If(kir.Gt(n, limit), func() { b.Assign(n, limit) })
	return n
}
