package lower

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Shared K and V in sdpa_prefill_gated: the G = H/Hkv query heads of a kv
// head see the same cache tiles for the same token tile row st (the
// visible tiles and the rows cleared past the last visible position
// depend only on pos and st), so with G > 1 the items are grouped, G
// consecutive cores per (user, kv head, st): core c's item in round k is
// group-major index x = k*C + c (C cores, a multiple of G; x = q*G + g,
// group q = x / G the group of rank n = shareRank(q), n = (St-1-st)*B*Hkv
// + u*Hkv + j, is item ((u*Hkv + j)*G + g)*St + st, head h = j*G + g).
// Each group's cores run the same loops over the same tiles, so their K
// and V CBs advance alike: per block (one cache tile's K, or a V block)
// the group's sender (the first core of each NoC-contiguous column run
// of the group, multicore.ColumnGroups) reads the tiles, clears the rows
// past the last visible position and multicasts them into the same CB
// pages of the other cores, its receivers. Without it every core read its
// kv head's whole visible cache itself: at 256 tokens of the 27B at
// position 3,840 (mesh 1x2: 96 cores, 2 kv heads), 96 x 4 MB, about 400
// MB per program, bound by the DRAM; with it each group's K and V are
// read once per column run (TestFlashPrefillSharesKV).
//
// Protocol per block (seq counts the blocks, the same on every core of a
// group): every core reserves the block's pages; a receiver then
// increments its sender's flashSemShareReady and waits until its
// flashSemShareValid reaches seq; the sender reads the block, waits until
// its ready count reaches receivers*seq, multicasts each run of pages (at
// most one NoC packet per write) to its rectangles, sets its valid word to
// seq and multicasts it after the data (same NoC and virtual channel: it
// cannot overtake them), then flushes the word before it changes again.
// Every core then pushes the pages. Deadlock-free as multicore.Rounds: a
// receiver's ready for block seq+1 comes only after it has block seq and
// has reserved the pages of seq+1, and the sender waits for nothing else.

// The semaphores of a shared prefill program.
const (
	flashSemShareReady = 0
	flashSemShareValid = 1
)

// prefillShare is the shared-K/V state of a prefill program: its cores
// (C, a multiple of G) and, in the reader, the multicast's arguments and
// the block counter.
type prefillShare struct {
	cores                       int
	isSender, sx, sy, receivers kir.ArgRef
	slots                       []multicore.Slot
	ready, valid, seq           kir.Var
	vals                        map[kir.Core][]kir.ArgValue
	index                       map[kir.Core]int // a core's group-major index (shareOrder)
}

// shareCores is the cores of a shared prefill program of items items with
// groups of g: the most multiple of g up to min(items, workers); 0 when
// there is nothing to share (g == 1) or no group fits.
func shareCores(items, g, workers int) int {
	if g <= 1 {
		return 0
	}
	return min(items, workers) / g * g
}

// shareItem emits the item of group-major index x (see above): group q
// = x / G is the n-th group of the causal triangle's balanced order
// (shareRank), n = (St-1-st)*B*Hkv + u*Hkv + j.
func (f *flashSDPA) shareItem(b *kir.Builder, x kir.Expr) kir.Var {
	d := f.d
	g := b.Let("g", kir.Mod(x, kir.Ci(d.G)))
	q := b.Let("grp", kir.Div(x, kir.Ci(d.G)))
	n := f.shareRank(b, q)
	uh := d.B * d.Hkv
	st := kir.Sub(kir.Ci(d.St-1), kir.Div(n, kir.Ci(uh)))
	uj := kir.Mod(n, kir.Ci(uh)) // u*Hkv + j
	return b.Let("item", kir.Add(kir.Mul(kir.Add(kir.Mul(uj, kir.Ci(d.G)), g), kir.Ci(d.St)), st))
}

// shareRank emits the rank n of group q (x / G) in the groups sorted by
// their work, largest first: the groups of a round (R = C/G of them, one
// per G cores) go in order on even rounds and in reverse on odd full
// rounds, so core group r's ranks are r, 2R-1-r, 2R+r, ... and the
// largest items (the last token tile rows, which see the most cache
// tiles) are spread over the cores rather than piled on the ones whose
// slot they fall on. Before (group q = ((u*Hkv + j)*St + st) in round
// order) the 27B's 4,096-token program gave its busiest cores 1,024 tile
// rows of K and V, 1.12x the mean (917); now 1.002x (TestFlashPrefillKBlocksBalanced).
func (f *flashSDPA) shareRank(b *kir.Builder, q kir.Var) kir.Var {
	d := f.d
	R, Q := f.share.cores/d.G, d.items/d.G
	round := b.Let("round", kir.Div(q, kir.Ci(R)))
	n := b.LetT("rank", kir.U32T, q)
	if !prefillBalanced {
		b.Comment("unbalanced: group q is the q-th in (user, kv head, st) order")
		b.Assign(n, kir.Add(kir.Mul(kir.Sub(kir.Ci(d.St-1), kir.Mod(q, kir.Ci(d.St))), kir.Ci(d.B*d.Hkv)), kir.Div(q, kir.Ci(d.St))))
		return n
	}
	b.If(kir.LAnd(kir.Eq(kir.Mod(round, kir.C(2)), kir.C(1)), kir.Le(kir.Mul(kir.Add(round, kir.C(1)), kir.Ci(R)), kir.Ci(Q))), func() {
		b.Assign(n, kir.Sub(kir.Add(kir.Mul(round, kir.Ci(R)), kir.Ci(R-1)), kir.Mod(q, kir.Ci(R))))
	})
	return n
}

// prefillBalanced enables shareRank's order (a variable for the test that
// compares it with the order before).
var prefillBalanced = true

// eachItem emits body for each item of the kernel's cores: start ..
// start+count-1, or (shared) the group-major indices start + k*C for k <
// count, as items.
func (f *flashSDPA) eachItem(b *kir.Builder, start, count kir.Expr, body func(i kir.Var)) {
	if f.share == nil {
		b.For("i", start, kir.Add(start, count), body)
		return
	}
	b.For("k", kir.C(0), count, func(k kir.Var) {
		body(f.shareItem(b, kir.Add(start, kir.Mul(k, kir.Ci(f.share.cores)))))
	})
}

// shareRange is core c's (start, count) of a shared program: its index x
// in shareOrder and the rounds k with k*C + x < items.
func (f *flashSDPA) shareRange(c kir.Core) (start, count int) {
	C, x := f.share.cores, f.share.index[c]
	return x, (f.d.items - x + C - 1) / C
}

// shareOrder is the order of the groups' cores: the program's cores by
// run of NoC-contiguous columns (Blackhole's logical columns 0-6, then
// 7-10), then row-major, so that a group of consecutive cores spans one
// run where it can (one sender reading its K and V, not one per run: in
// plain row-major order most groups of 6 straddle the DRAM columns).
func shareOrder(t *target.Target, cores []kir.Core) ([]kir.Core, error) {
	run := map[kir.Core]int{}
	for _, c := range cores {
		nx, _, err := t.WorkerNoC(c.X, c.Y)
		if err != nil {
			return nil, err
		}
		run[c] = nx - c.X
	}
	order := slices.Clone(cores)
	slices.SortStableFunc(order, func(a, b kir.Core) int {
		return cmp.Or(cmp.Compare(run[a], run[b]), cmp.Compare(a.Y, b.Y), cmp.Compare(a.X, b.X))
	})
	return order, nil
}

// startShare declares the multicast's reader args (after start and
// count) and semaphores, and computes every core's values.
func (f *flashSDPA) startShare() error {
	sh, s, t := f.share, f.gatedSDPA, f.ctx.Target
	s.p.AddSemaphore(kir.Semaphore{ID: flashSemShareReady, Cores: s.rs})
	s.p.AddSemaphore(kir.Semaphore{ID: flashSemShareValid, Cores: s.rs})
	rd := s.rd
	sh.isSender = rd.RuntimeArg("kv_sender")
	sh.sx, sh.sy = rd.RuntimeArg("kv_sender_x"), rd.RuntimeArg("kv_sender_y")
	sh.receivers = rd.RuntimeArg("kv_receivers")
	sh.slots = multicore.DeclareSlots(multicore.MaxGroupRects, "kv_mcast", "dests", rd.RuntimeArg)
	sh.vals = map[kir.Core][]kir.ArgValue{}
	G := f.d.G
	order, err := shareOrder(t, s.cores)
	if err != nil {
		return fmt.Errorf("%s: %w", s.op.Name(), err)
	}
	sh.index = map[kir.Core]int{}
	for i, c := range order {
		sh.index[c] = i
	}
	for g0 := 0; g0 < len(order); g0 += G {
		groups, err := multicore.ColumnGroups(t, order[g0:g0+G])
		if err != nil {
			return fmt.Errorf("%s: %w", s.op.Name(), err)
		}
		for _, cg := range groups {
			for _, c := range cg.Members {
				flag, rects := uint32(0), []multicore.Rect(nil)
				if c == cg.Sender {
					flag, rects = 1, cg.Rects
				}
				v := []kir.ArgValue{kir.U32(flag), kir.NoCX(cg.Sender), kir.NoCY(cg.Sender), kir.U32(uint32(len(cg.Members) - 1))}
				sh.vals[c] = append(v, multicore.SlotValues(rects, multicore.MaxGroupRects, rd.NoC)...)
			}
		}
	}
	b := rd.Builder()
	sh.ready = b.Let("kv_ready", kir.GetSemaphore{ID: kir.Ci(flashSemShareReady)})
	sh.valid = b.Let("kv_valid", kir.GetSemaphore{ID: kir.Ci(flashSemShareValid)})
	sh.seq = b.LetT("kv_seq", kir.U32T, kir.C(0))
	return nil
}

// pageRun is a run of n pages at page offset off of a block.
type pageRun struct{ off, n kir.Expr }

// shareBlock emits one block of cb at base (reserved by the caller):
// unshared, fill (the reads, their barrier and the clears); shared, the
// sender fills and multicasts the runs, a receiver waits for them (see
// above). The caller pushes the pages.
func (f *flashSDPA) shareBlock(b *kir.Builder, base kir.Expr, tb int, runs []pageRun, fill func()) {
	sh := f.share
	if sh == nil {
		fill()
		return
	}
	b.Assign(sh.seq, kir.Add(sh.seq, kir.C(1)))
	b.IfElse(kir.Eq(sh.isSender, kir.C(0)), func() {
		b.NoCSemaphoreInc(kir.NoCAddr{X: sh.sx, Y: sh.sy, Addr: sh.ready}, kir.C(1))
		b.NoCAsyncAtomicBarrier()
		b.NoCSemaphoreWaitMin(sh.valid, sh.seq)
	}, func() {
		fill()
		b.NoCSemaphoreWaitMin(sh.ready, kir.Mul(sh.receivers, sh.seq))
		chunk := max(1, f.ctx.Target.MaxNoCPacket/tb)
		for _, r := range runs {
			b.ForStep("p0", kir.C(0), r.n, kir.Ci(chunk), func(p0 kir.Var) {
				n := blocks.BlockLenOf(b, "n", r.n, p0, kir.Ci(chunk))
				at := b.Let("at", kir.Add(base, kir.Mul(kir.Add(r.off, p0), kir.Ci(tb))))
				multicore.EachSlot(b, sh.slots, func(s multicore.Slot) {
					b.NoCAsyncWriteMulticast(at, s.Addr(at), kir.Mul(n, kir.Ci(tb)), s.Cores)
				})
			})
		}
		b.NoCSemaphoreSet(sh.valid, sh.seq)
		multicore.EachSlot(b, sh.slots, func(s multicore.Slot) { b.NoCSemaphoreSetMulticast(sh.valid, s.Addr(sh.valid), s.Cores) })
		b.NoCAsyncWritesFlushed()
	})
}

// finishShare emits the sender's closing write barrier.
func (f *flashSDPA) finishShare(b *kir.Builder) {
	if f.share != nil {
		b.If(kir.Ne(f.share.isSender, kir.C(0)), func() { b.NoCAsyncWriteBarrier() })
	}
}

// sharedCacheTiles pushes into cb n cache tiles of head read by
// gatedSDPA.cacheTilesInto, the block shared by the group (shareBlock).
func (f *flashSDPA) sharedCacheTiles(b *kir.Builder, a *blocks.Access, cb int, dtype ir.DType, head kir.Expr, n int, tile func(j kir.Expr) (tt, dd kir.Expr)) {
	s := f.gatedSDPA
	base := blocks.Reserve(b, cb, kir.Ci(n), "l1")
	f.shareBlock(b, base, dtype.TileBytes(), []pageRun{{kir.C(0), kir.Ci(n)}}, func() { s.cacheTilesInto(b, a, base, dtype, head, n, tile) })
	b.CBPushBack(cb, kir.Ci(n))
}
