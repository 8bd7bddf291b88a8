package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
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
	// output tile; xSlot (2 pages, 3 with a state) and wSlot (1 page) are
	// scratch.
	cbX, cbW, xSlot, wSlot int
	// state, when not nil, is conv_depthwise_state_chain's state: the K-1
	// rows before x's first (convStateWholeTiles).
	state *blocks.Access
}

// convState returns conv_depthwise_state_chain's state operand (nil for
// the other convs), checked to have x's rank.
func convState(op *ir.Op) (*ir.Value, error) {
	if op.Kind != ir.OpConvDepthwiseStateChain {
		return nil, nil
	}
	if len(op.Operands) != 3 {
		return nil, fmt.Errorf("rule operands: %s takes state, x and taps, got %d operands", op.Name(), len(op.Operands))
	}
	st, x := op.Operands[0], op.Operands[1]
	if err := requireTile("state", st); err != nil {
		return nil, err
	}
	if st.Type.Shape.Rank() != x.Type.Shape.Rank() || st.Type.Shape.Rank() < 2 {
		return nil, fmt.Errorf("rule conv-state-shape: %s wants state [.., K-1, C] of x's rank, got state %s and x %s", op.Name(), st.Type.Shape, x.Type.Shape)
	}
	return st, nil
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
			copyTapRow(b, ws, wd, j, ct.tileBytes, ct.eb)
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(ct.cbX, kir.Ci(K))
		b.CBPushBack(ct.cbW, kir.Ci(K))
	})
	blocks.ReleaseScratchPages(b, ct.xSlot, 2)
	blocks.ReleaseScratchPages(b, ct.wSlot, 1)
}

// copyTapRow copies tap j's row of the taps tile at ws into row 0 of
// page j of the reserved weight pages at wd (pages of tileBytes, elements
// of eb bytes), face by face: the row the compute broadcasts.
func copyTapRow(b *kir.Builder, ws, wd kir.Expr, j, tileBytes, eb int) {
	wt := kir.Add(wd, kir.Ci(j*tileBytes))
	for c := 0; c < blocks.TileDim; c += blocks.FaceDim {
		blocks.LocalCopy(b, kir.Add(ws, kir.Ci(blocks.FaceOffsetConst(j, c, eb))), kir.Add(wt, kir.Ci(blocks.FaceOffsetConst(0, c, eb))), blocks.FaceDim*eb)
	}
}

// convStateWholeTiles is convWholeTiles for conv_depthwise_state_chain:
// the conv runs over the state's n0 = K-1 rows followed by x's, so output
// tile (tr, tc) is sum_j shift_j * w[j] with shift_j rows 32 tr + j - n0 ..
// + 31 of x: rows o..o+31, o = 32 + j - n0 (32 - n0 <= o <= 32), of x's
// tile rows tr-1 and tr. Per output page it reads x's tile (tr, tc) and
// the tile above it, or for tr = 0 the state's tile tc, whose n0 rows it
// copies (face-row runs) into rows 32-n0..31 of the slot of the tile
// above: the rows every shifted tile reads there. The joined rows are
// never written. Pushes what convWholeTiles pushes, K pages of cbX and of
// cbW per output page, and the same values on every valid output row.
func convStateWholeTiles(b *kir.Builder, ct convTiles, rstart, rcount kir.Expr) {
	xs := blocks.ScratchPages(b, ct.xSlot, 3, "xs")
	ws := blocks.ScratchPages(b, ct.wSlot, 1, "ws")
	curW := b.LetT("cur_w", kir.U32T, kir.C(0xFFFFFFFF))
	K, n0, tb := ct.K, ct.K-1, ct.tileBytes
	stateRuns := faceRowRuns(ct.eb, func(r int) (int, int) {
		if r < blocks.TileDim-n0 {
			return -1, 0
		}
		return 0, r - (blocks.TileDim - n0)
	})
	b.For("i", kir.C(0), rcount, func(i kir.Var) {
		pg := b.Let("page", kir.Add(rstart, i))
		tc := b.Let("tc", kir.Mod(pg, kir.Ci(ct.oi.Ct)))
		tr := b.Let("tr", kir.Div(pg, kir.Ci(ct.oi.Ct)))
		src := b.Let("src", kir.Add(kir.Mul(tr, kir.Ci(ct.xi.Ct)), tc))
		first := b.Let("first_row", kir.Eq(tr, kir.C(0)))
		b.Comment("x's tile, the tile above it (the state's tile in tile row 0), the taps' tile")
		blocks.ReadPageTo(b, ct.x, src, kir.Add(xs, kir.Ci(tb)))
		b.IfElse(first, func() {
			blocks.ReadPageTo(b, ct.state, tc, kir.Add(xs, kir.Ci(2*tb)))
		}, func() {
			blocks.ReadPageTo(b, ct.x, kir.Sub(src, kir.Ci(ct.xi.Ct)), xs)
		})
		b.If(kir.Ne(tc, curW), func() {
			blocks.ReadPageTo(b, ct.w, tc, ws)
			b.Assign(curW, tc)
		})
		b.NoCAsyncReadBarrier()
		b.If(first, func() {
			b.Comment(fmt.Sprintf("the state's %d rows into the last rows of the tile above", n0))
			for _, r := range stateRuns {
				blocks.LocalCopy(b, kir.Add(xs, kir.Ci(2*tb+r.src)), kir.Add(xs, kir.Ci(r.dst)), r.n)
			}
			b.NoCAsyncReadBarrier()
		})
		xd := blocks.Reserve(b, ct.cbX, kir.Ci(K), "xd")
		wd := blocks.Reserve(b, ct.cbW, kir.Ci(K), "wd")
		for j := 0; j < K; j++ {
			o := blocks.TileDim + j - n0
			b.Comment(fmt.Sprintf("tap %d: rows %d.. of the tile above and x's tile, tap row %d into row 0", j, o, j))
			xt := kir.Add(xd, kir.Ci(j*tb))
			for _, r := range shiftRuns(o%blocks.TileDim, ct.eb) {
				blocks.LocalCopy(b, kir.Add(xs, kir.Ci((r.tile+o/blocks.TileDim)*tb+r.src)), kir.Add(xt, kir.Ci(r.dst)), r.n)
			}
			copyTapRow(b, ws, wd, j, tb, ct.eb)
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(ct.cbX, kir.Ci(K))
		b.CBPushBack(ct.cbW, kir.Ci(K))
	})
	blocks.ReleaseScratchPages(b, ct.xSlot, 3)
	blocks.ReleaseScratchPages(b, ct.wSlot, 1)
}

// convCompute is the compute of a conv_depthwise program of K >= 2 taps
// whose reader pushes an output tile's K shifted x tiles and K tap-row
// tiles together: per output tile the K products x_j * w_j (w's row
// broadcast) go into DEST at once, dest of them a section, p_0 packed
// into acc's page and the others into K-1 pages of terms (fp32); the sum
// acc = (..(p_0 + p_1) + p_2 ..) + p_{K-1} then runs as the tap-by-tap
// compute did, each add reading its operands as the FPU does (tf32 from
// the fp32 pages), its running sum through one fp32 page of acc. The last
// sum goes straight into the first bf16 rounding point (the result, or
// the chain's first rounding) when direct: the FPU adds flush subnormal
// sums, and the packer's bf16 rounding (half away from zero on bit 15)
// ignores the 13 low bits copy_tile's tf32 source drops, so it is the
// value packed from acc after copy_tile, bit for bit.
// Postcondition: per output tile it consumes K pages of cbX and of cbW
// and produces one page of cbOut, as the tap-by-tap compute did.
type convCompute struct {
	cbX, cbW, cbOut, cbAcc, cbTerms, cbRound int
	K, dest                                  int
	direct                                   bool
	post                                     []blocks.SFPUStep
}

// tile emits the compute of one output tile.
func (cc convCompute) tile(c *blocks.Compute) {
	K := cc.K
	c.B.CBWaitFront(cc.cbX, kir.Ci(K))
	c.B.CBWaitFront(cc.cbW, kir.Ci(K))
	for g := 0; g < K; g += cc.dest {
		n := min(cc.dest, K-g)
		c.Acquire()
		for j := 0; j < n; j++ {
			c.Binary(kir.EltMul, blocks.BcastRows, cc.cbX, cc.cbW, kir.Ci(g+j), kir.Ci(g+j), kir.Ci(j))
		}
		c.Commit()
		terms := n
		if g == 0 {
			terms--
			c.B.CBReserveBack(cc.cbAcc, kir.C(1))
		}
		if terms > 0 {
			c.B.CBReserveBack(cc.cbTerms, kir.Ci(terms))
		}
		c.Wait()
		for j := 0; j < n; j++ {
			if g+j == 0 {
				c.Pack(kir.C(0), cc.cbAcc)
				continue
			}
			c.Pack(kir.Ci(j), cc.cbTerms)
		}
		c.Release()
		if g == 0 {
			c.B.CBPushBack(cc.cbAcc, kir.C(1))
		}
		if terms > 0 {
			c.B.CBPushBack(cc.cbTerms, kir.Ci(terms))
		}
	}
	c.B.CBPopFront(cc.cbX, kir.Ci(K))
	c.B.CBPopFront(cc.cbW, kir.Ci(K))
	c.B.CBWaitFront(cc.cbTerms, kir.Ci(K-1))
	// add j: DEST[0] = acc[0] + terms[j-1]; all but the last packed into
	// acc.
	add := func(j kir.Expr, last bool) {
		c.B.CBWaitFront(cc.cbAcc, kir.C(1))
		c.Acquire()
		c.Binary(kir.EltAdd, blocks.BcastNone, cc.cbAcc, cc.cbTerms, kir.C(0), kir.Sub(j, kir.C(1)), kir.C(0))
		c.B.CBPopFront(cc.cbAcc, kir.C(1))
		if !last {
			c.PackOut(cc.cbAcc, 1)
		}
	}
	if K > 2 {
		c.For("j", kir.C(1), kir.Ci(K-1), func(j kir.Var) { add(j, false) })
	}
	add(kir.Ci(K-1), true)
	c.B.CBPopFront(cc.cbTerms, kir.Ci(K-1))
	steps := cc.post
	switch {
	case cc.direct && len(steps) == 0:
		c.PackOut(cc.cbOut, 1)
		return
	case cc.direct:
		// the chain's first rounding point, packed from the sum itself
		c.PackOut(cc.cbRound, 1)
		c.B.CBWaitFront(cc.cbRound, kir.C(1))
		c.Acquire()
		c.Copy(cc.cbRound, kir.C(0), kir.C(0))
		c.B.CBPopFront(cc.cbRound, kir.C(1))
		c.SFPU(steps[0], kir.C(0))
		steps = steps[1:]
	case len(steps) == 0:
		c.PackOut(cc.cbAcc, 1)
		c.Unary(cc.cbAcc, cc.cbOut, nil)
		return
	default:
		c.PackOut(cc.cbAcc, 1)
		c.B.CBWaitFront(cc.cbAcc, kir.C(1))
		c.Acquire()
		c.Copy(cc.cbAcc, kir.C(0), kir.C(0))
		c.B.CBPopFront(cc.cbAcc, kir.C(1))
	}
	for _, st := range steps {
		if cc.cbRound >= 0 {
			c.RoundThrough(cc.cbRound)
		}
		c.SFPU(st, kir.C(0))
	}
	c.PackOut(cc.cbOut, 1)
}
