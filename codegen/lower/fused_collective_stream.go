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
// so the receiver had released packet P-1 (P-2 with two packets in flight,
// streamTwoInFlight), so every adder had read its tiles of packet P-2
// (P-3); an adder's reader runs at most lagTiles of its
// tiles ahead of its writer (the CB pages between them: local, received,
// residual and sum of two pages each, the reduced scratch's two, one in
// DEST), so every writer had passed the end of packet P-2-lagPackets and
// sent its increments for the rows ending there. streamRows requires the
// T rows between an owner's rows to span more packets than that.
type rowSignal struct {
	// wt is the tiles of a row; m the adders per link; g the tail cores
	// that share each link's last row (1: its owner alone).
	wt, m, g int
	// owners lists, per link, the tail cores: the T owners in row order,
	// then with g > 1 the last row's group of g cores.
	owners [][]kir.Core
}

// The last row's group: with g > 1 (cached-weight tails, cachedWeight)
// each link's last row, which lands with the ring's last packet, has g
// tail cores and the other rows T = (cores per link) - g owners. Each core
// of the group reads the whole row and sums its squares the same way (the
// same bits, the same rsqrt), then scales and writes only its own wt/g
// tiles: the work after the ring's last packet drops from a row's norm to
// its sum of squares and a g-th of its scaling. Only that row is read g
// times (each row g times would load the NoC under the ring).

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
// With g > 1 every owner is a group of g cores (wt must be a multiple of
// g).
func streamRows(t *target.Target, ring *cclOp, wt, used, g int) *rowSignal {
	pl := ring.plan
	if !pl.Streaming() || pl.ReduceSteps != 1 || pl.GatherSteps != 0 || ring.chunks.Count != 1 || wt < 1 {
		return nil
	}
	if pl.LinkTiles%wt != 0 || pl.ChunkTiles != pl.Links*pl.LinkTiles || g < 1 || wt%g != 0 {
		return nil
	}
	rows := pl.LinkTiles / wt
	per := min((t.NumWorkers()-used)/pl.Links, rows)
	if g > 1 {
		// T owners for the rows before the last, the group for it.
		per = min((t.NumWorkers()-used)/pl.Links-g, rows-1)
	}
	if per < 1 {
		return nil
	}
	// An adder handles at least minLane tiles of every full packet.
	minLane := max(pl.PacketTiles/pl.WorkersPerLink, 1)
	// Packet P's arrival proves the adders read packet P-released: P-2 on
	// a one-in-flight ring, P-3 with two packets in flight (Bidirectional:
	// P needs only packet P-2's release, which needs packet P-3 read).
	released := 2
	if pl.Bidirectional {
		released = 3
	}
	lagPackets := released + (rowLagTiles+minLane-1)/minLane
	if per*wt <= (lagPackets+1)*pl.PacketTiles {
		return nil
	}
	n := per
	if g > 1 {
		n += g
	}
	cores, _ := blocks.CoresFrom(t, used, n*pl.Links)
	rs := &rowSignal{wt: wt, m: pl.WorkersPerLink, g: g}
	for l := range pl.Links {
		rs.owners = append(rs.owners, cores[l*n:(l+1)*n])
	}
	return rs
}

// rowGroupMax bounds the tail cores that share a link's last row
// (rowGroup).
const rowGroupMax = 4

// rowGroup is the largest g of a cached-weight tail's row stream: the
// largest divisor of wt up to rowGroupMax (smaller ones are tried when
// the grid has too few cores for it).
func rowGroup(wt int) int { return largestDivisor(wt, rowGroupMax) }

// perLink is T, the row owners of each link (the last row's group not
// counted).
func (rs *rowSignal) perLink() int {
	if rs.g > 1 {
		return len(rs.owners[0]) - rs.g
	}
	return len(rs.owners[0])
}

// coresPerLink is the tail cores of each link.
func (rs *rowSignal) coresPerLink() int { return len(rs.owners[0]) }

// rowsPerLink is the rows of a link's share of linkTiles tiles.
func (rs *rowSignal) rowsPerLink(linkTiles int) int { return linkTiles / rs.wt }

// tailRange is tail core i's rows: the first (global row), the count and
// the stride between them.
func (rs *rowSignal) tailRange(i, linkTiles int) (start, count, stride int) {
	per, rows := rs.perLink(), rs.rowsPerLink(linkTiles)
	l, c := i/rs.coresPerLink(), i%rs.coresPerLink()
	owned := rows // the owners' rows of the link
	if rs.g > 1 {
		if c >= per {
			return l*rows + rows - 1, 1, per // the last row's group
		}
		owned--
	}
	return l*rows + c, (owned - c + per - 1) / per, per
}

// colRange is tail core i's tiles of each of its rows, which it scales
// and writes: the first and the count (the whole row but in the last
// row's group).
func (rs *rowSignal) colRange(i int) (first, count int) {
	c := i%rs.coresPerLink() - rs.perLink()
	if rs.g == 1 || c < 0 {
		return 0, rs.wt
	}
	n := rs.wt / rs.g
	return c * n, n
}

// rowArgs are an adder writer's runtime args naming its link's owners.
type rowArgs struct{ x, y []kir.ArgRef }

// declare declares the owners' NoC coordinates (row_owner<c>_x, _y; the
// last row's group row_last<q>_x, _y) as runtime args of the adders'
// writer wr.
func (rs *rowSignal) declare(wr *kir.Kernel) rowArgs {
	var a rowArgs
	for i := range rs.coresPerLink() {
		s := "row_owner" + strconv.Itoa(i)
		if i >= rs.perLink() {
			s = "row_last" + strconv.Itoa(i-rs.perLink())
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
// base/wt .. (base+cnt)/wt - 1), or on every core of the last row's group
// for the link's last row (rows of them).
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
		if rs.g == 1 {
			owners(j)
			return
		}
		b.IfElse(kir.Eq(j, kir.Ci(rows-1)), func() {
			for q := range rs.g {
				inc(per + q)
			}
		}, func() { owners(j) })
	})
}
