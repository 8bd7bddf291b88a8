package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
)

// maxWholeTileTaps bounds the taps of a conv_depthwise whose reader builds
// the shifted tiles from whole tiles (convWholeTiles): its x and tap-row
// CBs hold two output tiles' worth (2K pages each).
const maxWholeTileTaps = 8

// convTiles is what convWholeTiles needs of a conv_depthwise program: the
// operands' page access and tile views, the tap count, the element size
// and tile bytes of x and w (one dtype), and the CBs.
type convTiles struct {
	x, w      *blocks.Access
	xi, oi    blocks.Image
	K, eb     int
	tileBytes int
	// cbX and cbW take the K shifted x tiles and tap-row tiles of each
	// output tile; xSlot (2 pages) and wSlot (1 page) are scratch.
	cbX, cbW, xSlot, wSlot int
}

// copyRun is one contiguous L1 copy of a shifted tile: n bytes from offset
// src of source tile tile (0: the output's tile row, 1: the next) to
// offset dst of the shifted tile.
type copyRun struct{ tile, src, dst, n int }

// appendRun appends cr to runs, or extends the last run by cr.n when cr
// continues it (same tile, contiguous in both source and destination).
func appendRun(runs []copyRun, cr copyRun) []copyRun {
	if n := len(runs); n > 0 {
		last := &runs[n-1]
		if last.tile == cr.tile && last.src+last.n == cr.src && last.dst+last.n == cr.dst {
			last.n += cr.n
			return runs
		}
	}
	return append(runs, cr)
}

// shiftRuns lists the copies that build the tile of rows o..o+31 of two
// vertically adjacent tiles (rows 0..31 of the first, 32..63 of the
// second; 0 <= o < 32) with eb-byte elements: for every face row of the
// result, in L1 order, the face row it comes from, merged into maximal
// runs contiguous in both. o = 0 is one whole-tile copy; otherwise 8 runs,
// a face's rows o..15 and the first o rows of the face below it.
func shiftRuns(o, eb int) []copyRun {
	row := blocks.FaceDim * eb
	var runs []copyRun
	for f := 0; f < 4; f++ {
		for fr := 0; fr < blocks.FaceDim; fr++ {
			r, c := (f/2)*blocks.FaceDim+fr, (f%2)*blocks.FaceDim
			s := r + o
			cr := copyRun{tile: s / blocks.TileDim, src: blocks.FaceOffsetConst(s%blocks.TileDim, c, eb), dst: blocks.FaceOffsetConst(r, c, eb), n: row}
			runs = appendRun(runs, cr)
		}
	}
	return runs
}

// convWholeTiles emits the reader of a one-batch conv_depthwise with at
// most maxWholeTileTaps taps: output tile (tr, tc) is sum_j shift_j(x) *
// w[j], and shift_j of tile row tr is rows j..j+31 of x's tile rows tr and
// tr+1. Per output page it reads those two x tiles (the second only when
// x has it) and, when the column changes, the w tile, in flight at once,
// then builds the K shifted tiles and K tap-row tiles (tap j's row in row
// 0) with local L1 copies of whole face-row runs (shiftRuns), one barrier,
// and pushes K pages of cbX and of cbW. Rows past the output's valid rows
// hold whatever the copies bring (padding).
func convWholeTiles(b *kir.Builder, ct convTiles, rstart, rcount kir.Expr) {
	xs := blocks.ScratchPages(b, ct.xSlot, 2, "xs")
	ws := blocks.ScratchPages(b, ct.wSlot, 1, "ws")
	curW := b.LetT("cur_w", kir.U32T, kir.C(0xFFFFFFFF))
	K := ct.K
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		pg := b.Let("page", kir.Add(rstart, i))
		tc := b.Let("tc", kir.Mod(pg, kir.Ci(ct.oi.Ct)))
		tr := b.Let("tr", kir.Div(pg, kir.Ci(ct.oi.Ct)))
		src := b.Let("src", kir.Add(kir.Mul(tr, kir.Ci(ct.xi.Ct)), tc))
		next := b.Let("has_next", kir.Lt(kir.Add(tr, kir.C(1)), kir.Ci(ct.xi.Rt)))
		b.Comment("the two x tiles the shifted windows span, the taps' tile")
		blocks.ReadPageTo(b, ct.x, src, xs)
		b.If(next, func() {
			blocks.ReadPageTo(b, ct.x, kir.Add(src, kir.Ci(ct.xi.Ct)), kir.Add(xs, kir.Ci(ct.tileBytes)))
		})
		b.If(kir.Ne(tc, curW), func() {
			blocks.ReadPageTo(b, ct.w, tc, ws)
			b.Assign(curW, tc)
		})
		b.NoCAsyncReadBarrier()
		xd := blocks.Reserve(b, ct.cbX, kir.Ci(K), "xd")
		wd := blocks.Reserve(b, ct.cbW, kir.Ci(K), "wd")
		for j := 0; j < K; j++ {
			b.Comment(fmt.Sprintf("tap %d: x rows shifted up by %d, tap row %d into row 0", j, j, j))
			xt := kir.Add(xd, kir.Ci(j*ct.tileBytes))
			var fromNext []copyRun
			for _, r := range shiftRuns(j, ct.eb) {
				if r.tile == 1 {
					fromNext = append(fromNext, r)
					continue
				}
				blocks.LocalCopy(b, kir.Add(xs, kir.Ci(r.src)), kir.Add(xt, kir.Ci(r.dst)), r.n)
			}
			if len(fromNext) > 0 {
				b.If(next, func() {
					for _, r := range fromNext {
						blocks.LocalCopy(b, kir.Add(xs, kir.Ci(ct.tileBytes+r.src)), kir.Add(xt, kir.Ci(r.dst)), r.n)
					}
				})
			}
			wt := kir.Add(wd, kir.Ci(j*ct.tileBytes))
			for c := 0; c < blocks.TileDim; c += blocks.FaceDim {
				blocks.LocalCopy(b, kir.Add(ws, kir.Ci(blocks.FaceOffsetConst(j, c, ct.eb))), kir.Add(wt, kir.Ci(blocks.FaceOffsetConst(0, c, ct.eb))), blocks.FaceDim*ct.eb)
			}
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(ct.cbX, kir.Ci(K))
		b.CBPushBack(ct.cbW, kir.Ci(K))
	})
	blocks.ReleaseScratchPages(b, ct.xSlot, 2)
	blocks.ReleaseScratchPages(b, ct.wSlot, 1)
}
