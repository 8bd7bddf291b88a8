package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Activation multicast: a decode matmul's cores all need the same
// activation row (Kt tiles), so one core, the sender, reads it from DRAM
// once and multicasts it into the same CB of every other core, instead of
// every core reading it: at B=1 the 27B MLP down-projection's 80 cores
// would otherwise read 80 x 272 activation tiles (44.6 MB) next to its
// 47.4 MB of weights.
//
// The writer kernel does it (it is idle until the first result tile), so
// the reader streams weights from the start and the weight CBs fill while
// the row is on its way:
//
//   - every core reserves the Kt pages of the activation CB (a fresh CB:
//     its write pointer is the CB's base, the same L1 address on every
//     core of the program);
//   - a receiver increments its sender's "ready" semaphore;
//   - the sender reads the row in chunks of whole pages (one NoC packet
//     each, the next chunk's reads in flight while it multicasts this
//     one); before the first multicast it waits until ready counts every
//     receiver; per chunk it multicasts the pages to each rectangle of
//     receivers, sets its "valid" word to the number of chunks sent and
//     multicasts that word after the data (same NoC, same virtual channel:
//     the flag cannot overtake the data), then lets the word leave
//     (noc_async_writes_flushed) before changing it again;
//   - a receiver waits until its valid word counts the chunk and pushes
//     the chunk's pages, so compute starts on the first chunk.
//
// Deadlock-free: the sender waits only for increments every receiver
// makes before waiting itself, and receivers wait only for the sender's
// final multicast. The program's cores are the first n in row-major order,
// so they split into column groups where the NoC columns are not
// contiguous (Blackhole's DRAM and PCIe columns 8 and 9), each with its own
// sender multicasting to the rectangles of its other cores
// (followerRects: at most three, never containing the sender).

// Semaphores of the activation multicast.
const (
	mcastSemReady = 0 // on the sender: receivers that have reserved the CB
	mcastSemValid = 1 // on a receiver: 1 once the row has landed
)

// mcastGroup is one sender and the rectangles it multicasts to: the
// program's cores in one run of NoC-contiguous columns.
type mcastGroup struct {
	x0, x1 int // its logical columns
	sender kir.Core
	rects  []coreRect // the group's other cores exactly (followerRects), at most mcastMaxRects
	size   int        // cores in the group, sender included
}

// mcastMaxRects is the number of rectangles a group's sender multicasts
// to: the rest of its first row, its full rows and a partial last row.
const mcastMaxRects = 3

// mcastGroups splits cores (the first n in row-major order) into column
// groups, each with its own sender (its first core) and the rectangles
// of its other cores, so no multicast spans a NoC column gap.
func mcastGroups(t *target.Target, cores []kir.Core) ([]mcastGroup, error) {
	maxX := 0
	for _, c := range cores {
		maxX = max(maxX, c.X)
	}
	var groups []mcastGroup
	for x0 := 0; x0 <= maxX; {
		x1 := x0
		for x1 < maxX {
			a, _, err := t.WorkerNoC(x1, 0)
			if err != nil {
				return nil, err
			}
			b, _, err := t.WorkerNoC(x1+1, 0)
			if err != nil {
				return nil, err
			}
			if b != a+1 {
				break
			}
			x1++
		}
		var members []kir.Core
		for _, c := range cores {
			if c.X >= x0 && c.X <= x1 {
				members = append(members, c)
			}
		}
		g := mcastGroup{x0: x0, x1: x1, sender: members[0], size: len(members)}
		rects, err := followerRects(t, members[1:])
		if err != nil {
			return nil, err
		}
		if len(rects) > mcastMaxRects {
			return nil, fmt.Errorf("rule mcast-rect: column group %d..%d needs %d multicast rectangles, at most %d", x0, x1, len(rects), mcastMaxRects)
		}
		g.rects = rects
		groups = append(groups, g)
		x0 = x1 + 1
	}
	return groups, nil
}

// actMulticast emits, into writer wr, the sharing of the activation row
// (kt pages of acc) into CB cb of every core of the program (rs, the
// first-n-row-major ranges), as the section doc describes, and adds its
// two semaphores to p. The row moves in chunks of whole pages (at most
// one NoC packet each; the sender reads only the first `rows` rows of
// each page when the others are padding): the sender reads a chunk,
// multicasts it and then the chunk count in its valid word; every core
// pushes each chunk's
// pages as soon as it has them, so compute can start on the first chunk.
// It returns, per core of cores, the runtime-arg values the writer must
// get first (the args it declares: sender flag, sender NoC x/y, group
// receivers, and per rectangle its corners and destination count).
func actMulticast(p *kir.Program, t *target.Target, wr *kir.Kernel, cb int, acc *blocks.Access, kt, rows int, cores []kir.Core, rs []ir.CoreRange) (map[kir.Core][]kir.ArgValue, error) {
	groups, err := mcastGroups(t, cores)
	if err != nil {
		return nil, err
	}
	p.AddSemaphore(kir.Semaphore{ID: mcastSemReady, Cores: rs})
	p.AddSemaphore(kir.Semaphore{ID: mcastSemValid, Cores: rs})
	isSender := wr.RuntimeArg("act_sender")
	sx, sy := wr.RuntimeArg("act_sender_x"), wr.RuntimeArg("act_sender_y")
	receivers := wr.RuntimeArg("act_receivers")
	type rectArgs struct{ x0, y0, x1, y1, dests kir.ArgRef }
	ra := make([]rectArgs, mcastMaxRects)
	for i := range ra {
		ra[i] = rectArgs{
			wr.RuntimeArg(fmt.Sprintf("mcast%d_x0", i)), wr.RuntimeArg(fmt.Sprintf("mcast%d_y0", i)),
			wr.RuntimeArg(fmt.Sprintf("mcast%d_x1", i)), wr.RuntimeArg(fmt.Sprintf("mcast%d_y1", i)),
			wr.RuntimeArg(fmt.Sprintf("mcast%d_dests", i)),
		}
	}
	vals := map[kir.Core][]kir.ArgValue{}
	for _, c := range cores {
		for _, g := range groups {
			if c.X < g.x0 || c.X > g.x1 {
				continue
			}
			flag := uint32(0)
			if c == g.sender {
				flag = 1
			}
			v := []kir.ArgValue{kir.U32(flag), kir.NoCX(g.sender), kir.NoCY(g.sender), kir.U32(uint32(g.size - 1))}
			for i := 0; i < mcastMaxRects; i++ {
				if i < len(g.rects) && c == g.sender {
					v = append(v, g.rects[i].mcastArgs(wr.NoC)...)
				} else {
					v = append(v, kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0))
				}
			}
			vals[c] = v
			break
		}
		if vals[c] == nil {
			return nil, fmt.Errorf("rule mcast-rect: core (%d,%d) is in no multicast group", c.X, c.Y)
		}
	}

	b := wr.Builder()
	ready := b.Let("ready", kir.GetSemaphore{ID: kir.C(mcastSemReady)})
	valid := b.Let("valid", kir.GetSemaphore{ID: kir.C(mcastSemValid)})
	ps := acc.PageSize()
	chunk := max(1, t.MaxNoCPacket/ps)
	// readAct issues the read of activation page pg to l1: its first rows
	// (the matmul's rows are independent, so the rest of the tile never
	// reaches a live result row) when only those hold data, else the page.
	readAct := func(b *kir.Builder, pg, l1 kir.Expr) {
		blocks.ReadTileLive(b, acc, pg, l1, rows, blocks.ElemBytes(acc.Buf.DType))
	}
	b.Comment(fmt.Sprintf("the activation row: read once per column group by its sender, multicast to the group in chunks of %d pages", chunk))
	b.CBReserveBack(cb, kir.Ci(kt))
	l1 := b.Let("act_l1", kir.GetWritePtr{CB: cb})
	b.IfElse(kir.Eq(isSender, kir.C(0)), func() {
		b.NoCSemaphoreInc(kir.NoCAddr{X: sx, Y: sy, Addr: ready}, kir.C(1))
		b.NoCAsyncAtomicBarrier()
	}, func() {
		b.For("i", kir.C(0), kir.Ci(min(chunk, kt)), func(i kir.Var) {
			readAct(b, i, kir.Add(l1, kir.Mul(i, kir.Ci(ps))))
		})
	})
	b.ForStep("p0", kir.C(0), kir.Ci(kt), kir.Ci(chunk), func(p0 kir.Var) {
		n := blocks.BlockLen(b, "n", kir.Ci(kt), p0, chunk)
		at := b.Let("at", kir.Add(l1, kir.Mul(p0, kir.Ci(ps))))
		b.IfElse(kir.Ne(isSender, kir.C(0)), func() {
			// Chunk p0's reads were issued by the previous iteration (or
			// before the loop); issue the next chunk's before multicasting
			// this one, so DRAM latency overlaps the multicast.
			b.NoCAsyncReadBarrier()
			next := b.Let("next", kir.Add(p0, kir.Ci(chunk)))
			b.If(kir.Lt(next, kir.Ci(kt)), func() {
				nn := blocks.BlockLen(b, "nn", kir.Ci(kt), next, chunk)
				b.For("i", kir.C(0), nn, func(i kir.Var) {
					readAct(b, kir.Add(next, i), kir.Add(l1, kir.Mul(kir.Add(next, i), kir.Ci(ps))))
				})
			})
			b.If(kir.Eq(p0, kir.C(0)), func() { b.NoCSemaphoreWait(ready, receivers) })
			for _, r := range ra {
				b.If(kir.Ne(r.dests, kir.C(0)), func() {
					b.NoCAsyncWriteMulticast(at, kir.MulticastAddr{X0: r.x0, Y0: r.y0, X1: r.x1, Y1: r.y1, Addr: at}, kir.Mul(n, kir.Ci(ps)), r.dests)
				})
			}
			b.NoCSemaphoreSet(valid, kir.Add(kir.Div(p0, kir.Ci(chunk)), kir.C(1)))
			for _, r := range ra {
				b.If(kir.Ne(r.dests, kir.C(0)), func() {
					b.NoCSemaphoreSetMulticast(valid, kir.MulticastAddr{X0: r.x0, Y0: r.y0, X1: r.x1, Y1: r.y1, Addr: valid}, r.dests)
				})
			}
			// The valid word must leave before it changes for the next chunk.
			b.NoCAsyncWritesFlushed()
		}, func() {
			b.NoCSemaphoreWaitMin(valid, kir.Add(kir.Div(p0, kir.Ci(chunk)), kir.C(1)))
		})
		b.CBPushBack(cb, n)
	})
	b.If(kir.Ne(isSender, kir.C(0)), func() { b.NoCAsyncWriteBarrier() })
	return vals, nil
}
