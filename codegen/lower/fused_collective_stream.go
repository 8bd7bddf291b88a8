package lower

import (
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Row-streamed norm tail of a streaming two-card all_reduce_add_rmsnorm.
//
// A prefill activation of many tile rows ([1, 4096, 5120] bf16: 128 rows
// of 160 tiles, 10,240 tiles a link) takes the ring about a millisecond,
// and a norm tail that waits for the whole ring (cclOp.notify) then adds
// the norm of its rows in series: about 60% more at 4,096 tokens. With
// the row stream the adders tell the tail, row by row, that a row of h is
// in DRAM, and a tail core norms each of its rows as soon as it is there:
// the tail's work hides under the ring and the program ends about one
// row's norm after the ring's last packet.
//
// # Protocol
//
// The link's tiles are whole rows (LinkTiles a multiple of the row's wt
// tiles, the chunk Links whole link shares). The tail cores form one group
// of T per link; core c of link l's group owns the link-local rows c, c+T,
// c+2T, ... and handles them in that order. After its writes of a packet
// (each under its own barrier, lastPerTile), every adder of link l
// increments the semaphore cclSemTail of the owner of each row whose last
// tile is in that packet, so a row gets exactly M increments (M adders per
// link; lanes without a tile in the packet count too). An owner waits for
// M*(k+1) before its k-th row.
//
// The count cannot reach M*(k+1) early: that needs one adder's increment
// for the owner's next row (T rows = T*wt tiles later) before another
// adder's for row k. An adder that wrote packet P read it, so P arrived,
// so the receiver had released packet P-1 (P-N with N packets in flight,
// streamInFlight), so every adder had read its tiles of packet P-Slots
// (the packet whose slot P fills); an adder's reader runs at most lagTiles of its
// tiles ahead of its writer (the CB pages between them: local, received,
// residual and sum of two pages each, the reduced scratch's two, one in
// DEST), so every writer had passed the end of packet P-Slots-lagPackets and
// sent its increments for the rows ending there. streamRows requires the
// T rows between an owner's rows to span more packets than that.
type rowSignal struct {
	// wt is the tiles of a row; m the adders per link; g the tail cores
	// that share each of a link's last k rows (g = 1, k = 0: every row
	// has its owner alone).
	wt, m, g, k int
	// owners lists, per link, the tail cores: the T owners in row order,
	// then the last k rows' groups of g cores each.
	owners [][]kir.Core
	// kept, when > 0, makes the adders also write each tile of h into
	// its row's slot of the owners' h CB when the row is one of the
	// owner's first kept (the CB's row slots, keptRows), so the tail does
	// not read those rows back from DRAM (later rows it reads into the
	// slots the compute has freed); the tail's first core publishes the
	// CB's address (cclSemPushAddr) to the adders, the cores of adders
	// (multicore.Push's protocol).
	kept   int
	adders []kir.Core
}

// keepRowsInL1 enables rowSignal.kept (tests turn it off to compare);
// keptRowsMax, when > 0, caps it (tests: rows past the kept slots).
var (
	keepRowsInL1 = true
	keptRowsMax  = 0
)

// maxRows is the most rows a tail core owns (rows of a link's share of
// linkTiles tiles): owner 0's, at least one (a last row's group).
func (rs *rowSignal) maxRows(linkTiles int) int {
	_, n, _ := rs.tailRange(0, linkTiles)
	return max(n, 1)
}

// writeKept emits, with kept rows, the write of the sum tile at L1
// address src (link-local tile i of a link of rows rows) into its row's
// slot of the owners' h CB at base: owner j % T's slot j / T for row j =
// i / wt when that is below kept (else none: the owner reads the row from
// DRAM), or slot 0 of every core of a last row's group; page i % wt of
// the slot.
// The caller's write barrier covers it, and the row's count (emit) comes
// after that barrier.
func (rs *rowSignal) writeKept(b *kir.Builder, a rowArgs, i, src, base kir.Expr, tb, rows int) {
	wt, per := kir.Ci(rs.wt), rs.perLink()
	b.Comment("The sum tile also into its row's slot of the owning tail core's h CB (kept rows: no DRAM read back).")
	j := b.Let("kept_row", kir.Div(i, wt))
	col := b.Let("kept_col", kir.Mod(i, wt))
	write := func(q int, slot kir.Expr) {
		at := kir.Add(base, kir.Mul(kir.Add(kir.Mul(slot, wt), col), kir.Ci(tb)))
		b.NoCAsyncWrite(src, kir.NoCAddr{X: a.x[q], Y: a.y[q], Addr: at}, kir.Ci(tb))
	}
	owners := func() {
		o := b.Let("kept_owner", kir.Mod(j, kir.Ci(per)))
		slot := b.Let("kept_slot", kir.Div(j, kir.Ci(per)))
		b.If(kir.Lt(slot, kir.Ci(rs.kept)), func() {
			for c := range per {
				b.If(kir.Eq(o, kir.Ci(c)), func() { write(c, slot) })
			}
		})
	}
	if rs.k == 0 {
		owners()
		return
	}
	b.IfElse(kir.Lt(j, kir.Ci(rows-rs.k)), owners, func() {
		grp := b.Let("kept_group", kir.Sub(j, kir.Ci(rows-rs.k)))
		for e := range rs.k {
			b.If(kir.Eq(grp, kir.Ci(e)), func() {
				for q := range rs.g {
					write(per+e*rs.g+q, kir.C(0))
				}
			})
		}
	})
}

// The last rows' groups: with g > 1 (cached-weight tails, cachedWeight,
// groupedRows) each of a link's last k rows, which land with the ring's
// last packets, has g tail cores and the other rows T = (cores per link)
// - k*g owners. Each core of a group reads the whole row and sums its
// squares the same way (the same bits, the same rsqrt), then scales and
// writes only its own wt/g tiles: what is left after the ring's last
// packets drops from a row's norm to its sum of squares and a g-th of its
// scaling. Only those rows are read g times (every row g times would load
// the NoC under the ring).

// rowLagTiles bounds how many of its tiles an adder's reader is ahead of
// its writer: the pages of the CBs between them (cbIn0-2 and cbIm0 of two
// pages feed the compute one at a time, cbOut two) plus the tile in DEST.
const rowLagTiles = 2 + 2 + 2 + 1

// streamRows returns the row stream of ring's adders into a norm tail of
// rows of wt tiles on the worker cores after the first used, or nil when
// it does not apply: a streaming two-card ring with per-tile adders whose
// link shares are whole rows, and enough tail cores per link that an
// owner's rows are further apart than the adders can drift (see the
// Protocol section).
//
// With g > 1 and k > 0 the link's last k rows have groups of g cores
// (wt must be a multiple of g).
func streamRows(t *target.Target, ring *cclOp, wt, used, g, k int) *rowSignal {
	pl := ring.plan
	if !pl.Streaming() || pl.ReduceSteps != 1 || pl.GatherSteps != 0 || ring.chunks.Count != 1 || wt < 1 {
		return nil
	}
	if pl.LinkTiles%wt != 0 || pl.ChunkTiles != pl.Links*pl.LinkTiles || g < 1 || wt%g != 0 {
		return nil
	}
	rows := pl.LinkTiles / wt
	per := min((t.NumWorkers()-used)/pl.Links, rows)
	if g == 1 {
		k = 0
	}
	if k > 0 {
		// T owners for the rows before the last k, the groups for those.
		per = min((t.NumWorkers()-used)/pl.Links-k*g, rows-k)
	}
	if per < 1 {
		return nil
	}
	// An adder handles at least minLane tiles of every full packet.
	minLane := max(pl.PacketTiles/pl.WorkersPerLink, 1)
	// Packet P's arrival proves the adders read packet P-Slots, the one
	// whose receiving slot P fills: its release waited for that (P-2 on a
	// one-in-flight ring of two slots; Bidirectional: P needs packet P-N's
	// release of N in flight, which needs packet P-Slots read).
	released := pl.Slots
	lagPackets := released + (rowLagTiles+minLane-1)/minLane
	if per*wt <= (lagPackets+1)*pl.PacketTiles {
		return nil
	}
	n := per + k*g
	cores, _ := blocks.CoresFrom(t, used, n*pl.Links)
	rs := &rowSignal{wt: wt, m: pl.WorkersPerLink, g: g, k: k}
	for l := range pl.Links {
		rs.owners = append(rs.owners, cores[l*n:(l+1)*n])
	}
	return rs
}

// rowGroupRows and rowGroupMax are the most rows per link with a group
// and the most cores per group. Picked on the predictions of the 4,096-token
// prefill's all_reduce_add_rmsnorm (690.6 us without groups): g = 2 with
// k = 1..6 rows 680.5, 666.1, 658.6, 659.5, 707.7 and 798.5 us (more
// groups leave the owners too few to keep up with the ring); g = 4, k = 1
// and 2: 680.1 and 667.3 us; g = 8, k = 1: 683.8 us.
var rowGroupRows, rowGroupMax = 3, 2

// groupedRows is the row stream of streamRows with the last rows of
// every link in groups: the most rows (up to rowGroupRows) with the
// largest group (a divisor of wt up to rowGroupMax) the grid leaves room
// for, or nil when not even one row's group of two fits.
func groupedRows(t *target.Target, ring *cclOp, wt, used int) *rowSignal {
	for k := rowGroupRows; k >= 1; k-- {
		for g := largestDivisor(wt, rowGroupMax); g > 1; g = largestDivisor(wt, g-1) {
			if rs := streamRows(t, ring, wt, used, g, k); rs != nil {
				return rs
			}
		}
	}
	return nil
}

// perLink is T, the row owners of each link (the last rows' groups not
// counted).
func (rs *rowSignal) perLink() int { return len(rs.owners[0]) - rs.k*rs.g }

// coresPerLink is the tail cores of each link.
func (rs *rowSignal) coresPerLink() int { return len(rs.owners[0]) }

// rowsPerLink is the rows of a link's share of linkTiles tiles.
func (rs *rowSignal) rowsPerLink(linkTiles int) int { return linkTiles / rs.wt }

// tailRange is tail core i's rows: the first (global row), the count and
// the stride between them.
func (rs *rowSignal) tailRange(i, linkTiles int) (start, count, stride int) {
	per, rows := rs.perLink(), rs.rowsPerLink(linkTiles)
	l, c := i/rs.coresPerLink(), i%rs.coresPerLink()
	owned := rows - rs.k // the owners' rows of the link
	if c >= per {
		return l*rows + owned + (c-per)/rs.g, 1, per // a last row's group
	}
	return l*rows + c, (owned - c + per - 1) / per, per
}

// colRange is tail core i's tiles of each of its rows, which it scales
// and writes: the first and the count (the whole row but in the last
// rows' groups).
func (rs *rowSignal) colRange(i int) (first, count int) {
	c := i%rs.coresPerLink() - rs.perLink()
	if c < 0 {
		return 0, rs.wt
	}
	n := rs.wt / rs.g
	return c % rs.g * n, n
}

// rowArgs are an adder writer's runtime args naming its link's owners.
type rowArgs struct{ x, y []kir.ArgRef }

// declare declares the owners' NoC coordinates (row_owner<c>_x, _y; the
// last rows' groups row_last<e>_<q>_x, _y for core q of the group of
// the e-th of them) as runtime args of the adders'
// writer wr.
func (rs *rowSignal) declare(wr *kir.Kernel) rowArgs {
	var a rowArgs
	for i := range rs.coresPerLink() {
		s := "row_owner" + strconv.Itoa(i)
		if c := i - rs.perLink(); c >= 0 {
			s = "row_last" + strconv.Itoa(c/rs.g) + "_" + strconv.Itoa(c%rs.g)
		}
		a.x = append(a.x, wr.RuntimeArg(s+"_x"))
		a.y = append(a.y, wr.RuntimeArg(s+"_y"))
	}
	return a
}

// values are the values of declare's args for the adders of link l.
func (rs *rowSignal) values(l int) []kir.ArgValue {
	var vals []kir.ArgValue
	for _, c := range rs.owners[l] {
		vals = append(vals, kir.NoCX(c), kir.NoCY(c))
	}
	return vals
}

// emit emits, after an adder's writes of the packet of cnt tiles at
// link-local tile base have completed, one increment of cclSemTail on the
// owner of every row whose last tile is in the packet (link-local rows
// base/wt .. (base+cnt)/wt - 1), or for one of the link's last k rows
// (of rows) on every core of its group.
func (rs *rowSignal) emit(b *kir.Builder, a rowArgs, base, cnt kir.Expr, rows int) {
	wt, per := kir.Ci(rs.wt), rs.perLink()
	b.Comment("Rows of h complete with this packet: one count on each row's tail core.")
	lo := b.Let("row_lo", kir.Div(base, wt))
	hi := b.Let("row_hi", kir.Div(kir.Add(base, cnt), wt))
	inc := func(q int) {
		b.NoCSemaphoreInc(kir.NoCAddr{X: a.x[q], Y: a.y[q], Addr: kir.GetSemaphore{ID: kir.Ci(cclSemTail)}}, kir.C(1))
	}
	owners := func(j kir.Var) {
		o := b.Let("owner", kir.Mod(j, kir.Ci(per)))
		for c := range per {
			b.If(kir.Eq(o, kir.Ci(c)), func() { inc(c) })
		}
	}
	b.For("row", lo, hi, func(j kir.Var) {
		if rs.k == 0 {
			owners(j)
			return
		}
		b.IfElse(kir.Lt(j, kir.Ci(rows-rs.k)), func() { owners(j) }, func() {
			grp := b.Let("group", kir.Sub(j, kir.Ci(rows-rs.k)))
			for e := range rs.k {
				b.If(kir.Eq(grp, kir.Ci(e)), func() {
					for q := range rs.g {
						inc(per + e*rs.g + q)
					}
				})
			}
		})
	})
}
