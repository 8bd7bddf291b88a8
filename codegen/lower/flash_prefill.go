package lower

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// sdpa_prefill_gated as flash attention: the online softmax of flash
// decoding (flash_sdpa.go: chunkScores, chunkSoftmax, chunkValues,
// normalise) run by one core per work item, so a core's L1 does not
// depend on the cache length and the cost follows the position.
//
// A work item is (user b, q head h, token tile row st): up to 32 query
// tokens at positions row0 = pos + 32 st onwards; items are split over
// the cores, one per core while cores last (group 1 of flashBuild; with
// G > 1 in groups of the G heads sharing a kv head, whose K and V one
// core reads and multicasts: flash_prefill_share.go). The
// item's last visible position is last = row0 + rows - 1, rows = min(32,
// S - 32 st) (its last token); it sees cache tiles 0 .. last/32 and the
// reader and compute loop over exactly those, in chunks of prefillChunk
// tiles. Every tile from mfirst = row0/32 on (the one or two crossing the
// causal diagonal) gets a mask page (prefillItem: -inf where 32 t + c >
// row0 + r), added to its scores before q K^T; the tiles before it are
// visible to every row of the item and get none. K and V rows past last
// in its tile are cleared (stale cache rows may hold anything, NaN
// included, and 0 x NaN is NaN), so nothing past the visible position
// reaches the result.
//
// Unlike decode, a row may see none of a chunk's columns (c = -inf, a
// chunk past the row's diagonal), so the new shift is min(-c, nm) = -max(m,
// c) by one min_binary (chunkSoftmax, prefillMinShift), finite since tile
// 0, in the first chunk, is visible to every row.
//
// The reader hands compute, per item, a page of two words: last and
// mfirst (the compute kernel reads them with read_tile_value and derives
// its loop counts from them, as flash decoding does from pos). The
// writer reads the item's Dt gate tiles before it waits for the item's
// results (their CB holds them all; prefillWriter), so their reads
// overlap the chunks' products and hold up no K or V block.
//
// Numerics: the reference follows the chunked online softmax step by step
// (sim/ref attendFlashFPU: the item's chunks, masked rows included, the
// SFPU's rescales), so the result equals it bit for bit
// (TestFlashPrefillOnSim). Before it did, the reference computed the
// single pass over the whole row of flash decoding's reference
// (attendGatedFPU), which the program matched only within rounding (PCC
// 0.9999975 in the small config's prefill); that rounding, amplified
// through the GDN layers after the attention, put the recurrent state of
// a 700-token prompt's layer 4 at PCC 0.9977 against the same-formats
// reference after one step (issue 31).

// prefillWords is the item page the prefill reader hands compute: the
// item's last visible position, then the first masked cache tile.
const (
	prefillLastWord  = 0
	prefillMaskWord  = 1
	prefillItemWords = 2
)

// prefillReader adds the prefill reader (see the comment above).
// Runtime args: start, count (items).
func (f *flashSDPA) prefillReader() error {
	s, d, Dt, C := f.gatedSDPA, f.d, f.d.Dt, f.chunk
	if err := s.readerSetup(); err != nil {
		return err
	}
	rd := s.rd
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	if f.share != nil {
		if err := f.startShare(); err != nil {
			return err
		}
	}
	b := rd.Builder()
	f.tileConsts(b)
	s.posv = readPos(b, s.pAcc, s.cbPos)
	b.Comment("constant tiles: zeros, -inf")
	fb := ir.FP32.TileBytes()
	consts := blocks.ScratchPages(b, s.consts, 2, "consts")
	s.zero = b.Let("zero", consts)
	s.ninf = b.Let("ninf", kir.Add(consts, kir.Ci(fb)))
	blocks.FillWords(b, s.zero, fb, 0)
	blocks.FillWords(b, s.ninf, fb, negInf)
	kpos := b.LetT("kpos", kir.U32T, kir.C(0)) // K cache tiles pushed
	f.eachItem(b, rstart, rcount, func(i kir.Var) {
		it := s.prefillItem(b, i)
		st := b.Let("item_row", kir.Mod(i, kir.Ci(d.St)))
		// the item's last token: min(32 st + 31, S - 1)
		lastTok := b.LetT("last_tok", kir.U32T, kir.Add(kir.Mul(st, kir.Ci(ir.TileSize)), kir.Ci(ir.TileSize-1)))
		b.If(kir.Gt(lastTok, kir.Ci(d.S-1)), func() { b.Assign(lastTok, kir.Ci(d.S-1)) })
		last := b.Let("last", kir.Add(s.posv, lastTok))
		s.lptr = b.Let("lptr", kir.Div(last, kir.Ci(ir.TileSize)))
		s.lrow = b.Let("lrow", kir.Mod(last, kir.Ci(ir.TileSize)))
		mfirst := b.Let("mask_from", kir.Div(kir.Add(s.posv, kir.Mul(st, kir.Ci(ir.TileSize))), kir.Ci(ir.TileSize)))
		b.Comment("the item's last visible position and first masked tile, for compute's loop counts")
		pp := blocks.Reserve(b, f.posC, kir.C(1), "item_page")
		b.L1Write32(kir.Add(pp, kir.Ci(4*prefillLastWord)), last)
		b.L1Write32(kir.Add(pp, kir.Ci(4*prefillMaskWord)), mfirst)
		b.CBPushBack(f.posC, kir.C(1))
		n := b.Let("n_tiles", kir.Add(s.lptr, kir.C(1)))
		b.ForStep("t0", kir.C(0), n, kir.Ci(C), func(t0 kir.Var) {
			cend := chunkEnd(b, t0, n, C)
			if prefillKBlocks && s.kBlk == Dt && f.kPair > 1 {
				f.prefillKBlocks(b, it, t0, cend, mfirst, kpos)
			} else {
				b.For("t", t0, cend, func(tt kir.Var) {
					f.prefillMask(b, it, tt, mfirst)
					b.ForStep("d0", kir.C(0), kir.Ci(Dt), kir.Ci(s.kBlk), func(d0 kir.Var) {
						f.sharedCacheTiles(b, s.kAcc, s.cbK, s.k.Type.DType, it.head, s.kBlk, func(j kir.Expr) (kir.Expr, kir.Expr) { return tt, kir.Add(d0, j) })
					})
				})
			}
			b.ForStep("d", kir.C(0), kir.Ci(Dt), kir.Ci(f.vGroup), func(dd kir.Var) { f.valueBlock(b, it.head, t0, cend, dd) })
		})
	})
	if s.err != nil {
		return s.err
	}
	f.finishShare(b)
	blocks.ReleaseScratchPages(b, s.consts, 2)
	blocks.ReleaseScratch(b, s.cbPos)
	return nil
}

// prefillWriter adds the prefill writer (runtime args start, count:
// items, visited in the reader's order, eachItem): per item its Dt gate
// tiles (gateRows; the gate CB holds them all, and compute needs them only
// when it normalises the item, after all its chunks), then its Dt result
// tiles, output tiles (tile row st, column h*Dt + d of user b). The
// writer idles while compute works through an item's chunks, so the
// gate's small reads (two 64-byte spans per row and D tile, 512 an item at
// D = 256) cost the item nothing there; in the reader they held up the
// group's K and V multicast (every core of a group takes each block
// together): the 27B's 4,096-token program took 4,821.5 us with them in
// the reader, 3,929.1 us here (predicted, chunks of 8; 487.5 against
// 655.1 us at 1,024 tokens: TestFlashPrefillGateOnWriter).
func (f *flashSDPA) prefillWriter() error {
	s, d, Dt := f.gatedSDPA, f.d, f.d.Dt
	wr := newWriter(s.p, s.rs)
	oAcc := s.bind(wr, "out_addr", s.out)
	s.gAcc = s.bind(wr, "gate_addr", s.gate)
	if s.err != nil {
		return s.err
	}
	s.wr = wr
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	b := wr.Builder()
	gr := f.beginGateRows(b)
	f.eachItem(b, wstart, wcount, func(i kir.Var) {
		gr.item(b, i)
		st := b.Let("st", kir.Mod(i, kir.Ci(d.St)))
		if f.gateGo >= 0 {
			b.Comment("after the item's q is in (compute's signal), so the gate's many small reads do not hold up q's")
			b.CBWaitFront(f.gateGo, kir.C(1))
			b.CBPopFront(f.gateGo, kir.C(1))
		}
		b.Comment("the item's gate tiles (its CB holds them all), while compute works on its chunks")
		b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) { gr.tile(b, st, dd) })
		bh := b.Let("bh", kir.Div(i, kir.Ci(d.St)))
		u, h := kir.Div(bh, kir.Ci(d.H)), kir.Mod(bh, kir.Ci(d.H))
		first := b.Let("first", kir.Add(kir.Mul(kir.Add(kir.Mul(u, kir.Ci(d.St)), st), kir.Ci(d.H*Dt)), kir.Mul(h, kir.Ci(Dt))))
		blocks.WritePages(b, oAcc, s.cbOut, first, kir.Ci(Dt))
	})
	gr.end(b)
	return nil
}

// Gate rows. The gate is [B, S, H, D] in tiles of its [H, D] matrices: a
// result tile's (token tile row st, D tile dd) rows are token st*32 + r's
// row h of that token's page (h's tile row, D tile dd): one face row of
// 16 elements in each of two faces. The writer reads, per row, the one
// span from the aligned start of its face-0 row through its face-1 row
// (gateRowSpan: 576 bytes of bf16; DRAM reads start at a multiple of
// DRAMReadAlign, their L1 destination agreeing with it modulo 64) into a
// staging slot, and copies the two face rows into the result tile; rows
// past the prompt (the last tile row of S % 32 != 0) are zeros. Two
// reads of the 64 bytes holding each face row moved fewer bytes but made
// twice the DRAM requests, which the banks serve at a request rate
// (Params.DRAMRequestCycles) rather than their data rate: with them the
// 27B's 4,096-token program took 4,876.8 us (DRAM read 646.6 MB), with
// one span 3,929.1 us (822.8 MB). Before either, every token's whole 2 KB
// page was read for its 32 or 64 bytes: 32 pages per gate tile, 512 KB
// an item, 805 MB of the 4,096-token program's 1,401 MB of DRAM reads
// (predicted; TestFlashPrefillGateRowReads).
type gateRows struct {
	f               *flashSDPA
	stage           kir.Var // 64-byte aligned staging: one gateRowSpan per row
	u, hr, pageBase kir.Var // the item's user, head row in its tile, and page offset of its head's tile row
}

// gateSpan is the DRAM read alignment, which a face row's start in a span
// may be past.
const gateSpan = 64

// beginGateRows takes the staging slot (the gate gather's scratch pages).
func (f *flashSDPA) beginGateRows(b *kir.Builder) *gateRows {
	s := f.gatedSDPA
	raw := blocks.ScratchPages(b, s.slotG, prefillGatePages(s.d), "gate_slot")
	g := &gateRows{f: f}
	g.stage = b.Let("gate_stage", kir.Mul(kir.Div(kir.Add(raw, kir.Ci(gateSpan-1)), kir.Ci(gateSpan)), kir.Ci(gateSpan)))
	return g
}

// item sets the item's user and head (item i = (u*H + h)*St + st).
func (g *gateRows) item(b *kir.Builder, i kir.Var) {
	d := g.f.d
	bh := kir.Div(i, kir.Ci(d.St))
	h := b.Let("gate_h", kir.Mod(bh, kir.Ci(d.H)))
	g.u = b.Let("gate_u", kir.Div(bh, kir.Ci(d.H)))
	g.hr = b.Let("gate_hr", kir.Mod(h, kir.Ci(ir.TileSize)))
	g.pageBase = b.Let("gate_ht", kir.Mul(kir.Div(h, kir.Ci(ir.TileSize)), kir.Ci(d.Dt)))
}

// tile pushes the gate tile (st, dd) of the current item into the gate CB.
func (g *gateRows) tile(b *kir.Builder, st, dd kir.Var) {
	s, d := g.f.gatedSDPA, g.f.d
	dt := s.gate.Type.DType
	eb := blocks.ElemBytes(dt)
	row := blocks.FaceDim * eb // one face row's bytes
	im := blocks.ImageOf(s.gate.Type.Shape)
	perTok := im.TilesPerMat
	out := blocks.Reserve(b, s.cbGate, kir.C(1), "gate_tile")
	rows := b.LetT("gate_rows", kir.U32T, kir.Ci(ir.TileSize))
	if d.S%ir.TileSize != 0 {
		b.If(kir.Gt(kir.Mul(kir.Add(st, kir.C(1)), kir.Ci(ir.TileSize)), kir.Ci(d.S)), func() {
			b.Assign(rows, kir.Sub(kir.Ci(d.S), kir.Mul(st, kir.Ci(ir.TileSize))))
		})
	}
	// the row's offset in face 0 of a source page (head row hr), and the
	// one aligned span from it through its row in face 1 (FaceBytes on)
	off := b.Let("gate_off", blocks.FaceOffset(g.hr, kir.C(0), eb))
	lead := b.Let("gate_lead", kir.Mod(off, kir.Ci(gateSpan)))
	span := gateRowSpan(eb)
	b.For("r", kir.C(0), rows, func(r kir.Var) {
		page := b.Let("gate_page", kir.Add(kir.Add(kir.Mul(kir.Add(kir.Mul(g.u, kir.Ci(d.S)), kir.Add(kir.Mul(st, kir.Ci(ir.TileSize)), r)), kir.Ci(perTok)), g.pageBase), dd))
		b.NoCAsyncRead(s.gAcc.PageAddrAtExpr(page, kir.Sub(off, lead)), kir.Add(g.stage, kir.Mul(r, kir.Ci(span))), kir.Ci(span))
	})
	b.NoCAsyncReadBarrier()
	b.For("r", kir.C(0), kir.Ci(ir.TileSize), func(r kir.Var) {
		b.IfElse(kir.Lt(r, rows), func() {
			for half := range 2 {
				at := kir.Add(g.stage, kir.Add(kir.Mul(r, kir.Ci(span)), kir.Add(lead, kir.Ci(half*faceBytes(eb)))))
				blocks.LocalCopy(b, at, kir.Add(out, blocks.FaceOffset(r, kir.Ci(half*blocks.FaceDim), eb)), row)
			}
		}, func() {
			for half := range 2 {
				dst := b.Let("gate_zero", kir.Add(out, blocks.FaceOffset(r, kir.Ci(half*blocks.FaceDim), eb)))
				b.For("w", kir.C(0), kir.Ci(row/4), func(w kir.Var) { b.L1Write32(kir.Add(dst, kir.Mul(w, kir.C(4))), kir.C(0)) })
			}
		})
	})
	b.NoCAsyncReadBarrier()
	b.CBPushBack(s.cbGate, kir.C(1))
}

// faceBytes is the bytes of one 16x16 face of elements of eb bytes.
func faceBytes(eb int) int { return blocks.FaceDim * blocks.FaceDim * eb }

// gateRowSpan is the bytes read per gate row: from the aligned start of
// its face-0 row through its face-1 row, one face later (a face row of
// 16 elements, at most gateSpan bytes from the aligned start).
func gateRowSpan(eb int) int { return faceBytes(eb) + gateSpan }

// end releases the staging slot.
func (g *gateRows) end(b *kir.Builder) {
	blocks.ReleaseScratchPages(b, g.f.slotG, prefillGatePages(g.f.d))
}

// prefillGateAfterQ makes the writer read an item's gate tiles only once
// compute has the item's q (a page of gate_go, compute to writer, per
// item): every core's writer reading its first item's 256 gate spans at
// the program's start held up the q reads (and the first K and V) of
// every core, and compute waited 83.8 us for its first item at 4,096
// tokens, 22.5 at 64. With the out CB of an item (prefillOutPages):
// 1,024 tokens 397.1 against 421.7 us, 64 tokens 57.0 against 61.6; both
// together take 4,096 tokens from 3,749.2 to 3,711.4 us (predicted;
// TestFlashPrefillGateAfterQ). A variable for that test.
var prefillGateAfterQ = true

// prefillKBlocks enables prefillKBlocks's blocks of kPair cache tiles
// (a variable for the test that compares the two).
var prefillKBlocks = true

// prefillMask pushes cache tile tt's mask page when it crosses the
// causal diagonal (tt >= mfirst).
func (f *flashSDPA) prefillMask(b *kir.Builder, it sdpaItem, tt kir.Expr, mfirst kir.Var) {
	s := f.gatedSDPA
	b.If(kir.Ge(tt, mfirst), func() {
		b.CBReserveBack(s.mask, kir.C(1))
		it.mask(b.Let("mt", tt))
		b.CBPushBack(s.mask, kir.C(1))
	})
}

// prefillKBlocks emits the K blocks of the chunk's cache tiles [t0, cend)
// when a cache tile's K row is one block (kBlk == Dt): kPair cache tiles
// per block (one read barrier, one multicast and handshake for all of
// them) where the K CB's ring has room for them before its end (kpos,
// the K cache tiles pushed so far, a multiple of kPair) and the chunk has
// them, else one. The masks of a block's tiles go before it (at most two
// per item, the mask CB's pages). Before, every cache tile was its own
// block: at 4,096 tokens of the 27B the senders waited on a read barrier
// (or the group's handshake) per 16 KB, and compute waited 1.3 ms of its
// 5.1 for K (predicted; TestFlashPrefillKBlocksBalanced).
func (f *flashSDPA) prefillKBlocks(b *kir.Builder, it sdpaItem, t0, cend, mfirst, kpos kir.Var) {
	s, Dt, P := f.gatedSDPA, f.d.Dt, f.kPair
	tt := b.LetT("t", kir.U32T, t0)
	// (kir has no while: a loop over the chunk's tiles that acts at the
	// next tile not yet read)
	b.For("tk", t0, cend, func(tk kir.Var) {
		b.If(kir.Eq(tk, tt), func() {
			whole := kir.LAnd(kir.Le(kir.Add(tt, kir.Ci(P)), cend), kir.Eq(kir.Mod(kpos, kir.Ci(P)), kir.C(0)))
			b.IfElse(whole, func() {
				b.For("tm", tt, kir.Add(tt, kir.Ci(P)), func(tm kir.Var) { f.prefillMask(b, it, tm, mfirst) })
				f.sharedCacheTiles(b, s.kAcc, s.cbK, s.k.Type.DType, it.head, P*Dt, func(j kir.Expr) (kir.Expr, kir.Expr) {
					return kir.Add(tt, kir.Div(j, kir.Ci(Dt))), kir.Mod(j, kir.Ci(Dt))
				})
				b.Assign(kpos, kir.Add(kpos, kir.Ci(P)))
				b.Assign(tt, kir.Add(tt, kir.Ci(P)))
			}, func() {
				f.prefillMask(b, it, tt, mfirst)
				f.sharedCacheTiles(b, s.kAcc, s.cbK, s.k.Type.DType, it.head, Dt, func(j kir.Expr) (kir.Expr, kir.Expr) { return tt, j })
				b.Assign(kpos, kir.Add(kpos, kir.C(1)))
				b.Assign(tt, kir.Add(tt, kir.C(1)))
			})
		})
	})
}
