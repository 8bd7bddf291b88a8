package multicore

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// SplitCombine merges the partial softmax results of a split sequence
// (flash-decoding: each core of a group attends its q rows to its share
// of the KV positions) into the exact result on the group's leader. For
// each q row, core i holds a running max m_i, a running sum l_i of
// exp(s - m_i) and a partial output O_i = sum exp(s - m_i) * V over its
// positions; the result is
//
//	out = sum_i exp(m_i - M) * O_i / sum_i exp(m_i - M) * l_i,  M = max_i m_i.
//
// A partial is Pages = Rows*(Width+2) tiles of CB Partial: per tile row r
// of q (in order) the Width tiles of O, then m's tile, then l's tile; m
// and l hold each row's value in column 0 (as reduce_tile<REDUCE_ROW>
// leaves it), their other columns are never read. Only the first Live
// rows of a tile row carry data (flash decoding: the G heads of a kv
// group); the results of the others are garbage. The m_i must be finite
// and exact in tf32 (flash decoding's maxima are bf16), and the core with
// the largest m has l >= 1/2 (its largest term is exp(s - m), 1 when m is
// its largest score s, or near 1 when m is s rounded).
//
// The merge runs on a tree of at most two levels, so that a leader never
// holds more than max(Sub, Subs()) <= 32 partials: the group's Group
// cores (consecutive in Cores) form subgroups of Sub consecutive cores
// (the last one smaller when Sub does not divide Group), each led by its
// first core (a sub-leader); the group's first core (the leader) leads
// subgroup 0 and the sub-leaders. At run time only the group's first
// `used` cores have partials (1 <= used <= Group; flash decoding at a
// short position uses fewer cores than it has), and so only the
// subgroups they fall in take part:
//
//   - level 1: a core with a partial writes it into its place in its
//     sub-leader's CB Gather (the places of Sub partials first); the
//     sub-leader merges the partials of its subgroup's cores with one;
//   - when used > Sub (more than one subgroup has partials), level 2: each
//     such sub-leader's merge is itself a partial (O' = sum_i w_i O_i, m' =
//     M, l' = sum_i w_i l_i, w_i = exp(m_i - M): unnormalised), which it
//     writes into its place in the leader's Gather (those of Subs()
//     partials, after the level-1 ones), and the leader merges those
//     into the result; else the leader's level-1 merge is the result.
//
// Partials are stacked (Stack = 32/Live of them when Live <= 16, else
// 1): partial k of a level goes to slot k/Stack (Pages tiles, the slots
// of a level one after another), its Live rows of each tile to rows
// Live*(k%Stack) .. of the slot's tile, so that the merge weighs a
// whole slot with one tile product (MergeThen) and a sender moves
// Live/32 of its tiles. The rows of a slot no partial fills hold
// whatever L1 held; with Stack 1 a partial is sent whole, so its rows
// past Live must then be finite (the product adds them with weight 0).
//
// Protocol (Emit: the writer; MergeThen: compute), per level the gather
// half of Exchange: a sender waits for its partial (Pages pages of CB
// Partial; a sub-leader's merged partial comes through the same CB after
// its own partial has left), writes its live rows into its place in the
// receiver's Gather (one NoC write per face's run of rows, or per page
// when Stack is 1, on the writer's NoC; the CB
// has one L1 address on every core, and a sender reads the address from
// its own copy of the CB before it ever reserves it), waits for the
// acknowledgements (noc_async_write_barrier: the data lands before the
// count) and increments the receiver's semaphore (Sem1, Sem2; an atomic,
// drained by kir.Finish's noc_async_atomic_barrier); the receiver's
// writer (Xfer reserved and zeroed at its start: prepare) reserves the
// level's slots, waits until its semaphore counts the
// partials it expects (level 1: its subgroup's cores below used; level
// 2: the subgroups with partials, ceil(used/Sub)), pushes them to compute
// and serves the merge (serve: it packs the m_i into one tile for one
// exp of all, and lays compute's weights out as weight tiles; CBs Xfer
// and WRow). The
// senders and the counts follow from used, which every kernel of the
// group computes alike. Two semaphores, no multicast; once per program.
//
// Deadlock-free: the waits form a tree. A core waits for nothing of
// another core to send its partial (compute produces it from its own
// inputs); a sub-leader waits only for increments its subgroup's senders
// make after their own compute, and sends its merged partial after its
// own merge; the leader waits for the sub-leaders' increments, made after
// their level-1 merges, which wait for nothing of the leader; a merge's
// hand-overs between a core's writer and compute go one way at a time
// (the writer's packed maxima, compute's packed weights, the writer's
// unpacked weights). Every gather page is written at most once into a CB
// reserved whole for it.
type SplitCombine struct {
	T           *target.Target
	Group, Sub  int            // cores per group, cores per subgroup (>= Group: one level)
	Cores       []kir.Core     // the program's cores in group order
	Ranges      []ir.CoreRange // the same cores, for the semaphores
	Rows, Width int
	// Live is the rows of a q tile row that carry data (1 .. 32): the
	// merge's weights are moved for those rows only, the others' results
	// are garbage.
	Live int
	// Pages is the pages of a partial, Page their bytes.
	Pages, Page int
	// Stack is the partials a gather slot holds, 32/Live (1 when Live
	// is above 16 or the format cannot be split into rows): their Live
	// rows stacked, partial k of the slot in rows Live*k .. Live*k +
	// Live-1 of each of the slot's Pages tiles, so that one tile product
	// merges Stack partials (see MergeThen). FaceRow is the bytes of a
	// face row of the partial's format.
	Stack, FaceRow int
	// Partial (compute -> writer: the core's partial, then a sub-leader's
	// merged partial), Gather (writer -> compute: the slots of Sub
	// partials for level 1, then, on two levels, of Subs() for level 2),
	// Xfer (writer -> compute: per tile row the m_i packed into one tile,
	// -M, then the weight tiles of K = max(Sub, Subs()) partials, one
	// per slot: w_i of row q at row q, column Live*(i%Stack) + q of tile
	// i/Stack, 0 elsewhere),
	// WRow (compute -> writer: the w_i packed into one tile) and Shift
	// (compute's fp32 scratch: L or 1/L, 1/L on every column).
	Partial, Gather, Xfer, WRow, Shift int
	// Out is the caller's CB the final merge packs the result to (its
	// format rounds it), Zero the caller's CB holding a zero tile at its
	// front for the whole of compute's MergeThen.
	Out, Zero  int
	Sem1, Sem2 int
}

// maxMerge is the most partials one merge takes: one fp32 tile's columns.
const maxMerge = ir.TileSize

// NewSplitCombine returns the combine of groups of group consecutive
// cores (their ranges rs) in subgroups of sub cores (sub >= group: one
// level) over partials of rows q tile rows (live rows each) and width O
// tiles in format dt, its CBs planned on cbs, the result packed to the
// caller's CB out, zero a CB holding a zero tile, and its semaphores sem
// and sem+1 (two levels) added to p. A merge takes at most 32 partials:
// sub and the number of subgroups must not exceed that.
func NewSplitCombine(p *kir.Program, t *target.Target, cbs *blocks.CBPlan, cores []kir.Core, rs []ir.CoreRange, group, sub, rows, width, live int, dt ir.DType, out, zero, sem int) (*SplitCombine, error) {
	sub = min(max(sub, 1), group)
	n := rows * (width + 2)
	sc := &SplitCombine{T: t, Group: group, Sub: sub, Cores: cores, Ranges: rs, Rows: rows, Width: width, Live: min(max(live, 1), ir.TileSize),
		Pages: n, Page: dt.TileBytes(), Out: out, Zero: zero, Sem1: sem, Sem2: -1, Stack: 1}
	if eb := blocks.ElemBytes(dt); eb > 0 && sc.Live <= blocks.FaceDim {
		sc.Stack, sc.FaceRow = ir.TileSize/sc.Live, blocks.FaceDim*eb
	}
	if k := sc.k(); k > maxMerge {
		return nil, fmt.Errorf("combine: groups of %d in subgroups of %d merge %d partials at once, more than %d", group, sub, k, maxMerge)
	}
	sc.Partial = cbs.Output("partial", dt, n)
	sc.Gather = cbs.Input("group_partials", dt, sc.slots(0)+sc.slots(1))
	sc.Xfer = cbs.Input("combine_weights", ir.FP32, 2+sc.stacks(sc.k()))
	sc.WRow = cbs.Output("combine_packed_weights", ir.FP32, 1)
	sc.Shift = cbs.Scratch("combine_recip", ir.FP32, 2)
	if sc.Subs() > 1 {
		sc.Sem2 = sem + 1
		p.AddSemaphore(kir.Semaphore{ID: sc.Sem2, Cores: rs})
	}
	p.AddSemaphore(kir.Semaphore{ID: sc.Sem1, Cores: rs})
	return sc, nil
}

// k is the most partials a merge takes, max(Sub, Subs()).
func (sc *SplitCombine) k() int { return max(sc.Sub, sc.Subs()) }

// Subs is the number of subgroups, ceil(Group/Sub).
func (sc *SplitCombine) Subs() int { return (sc.Group + sc.Sub - 1) / sc.Sub }

// stacks is the gather slots (and weight tiles) of n partials,
// ceil(n/Stack).
func (sc *SplitCombine) stacks(n int) int { return (n + sc.Stack - 1) / sc.Stack }

// slots is the pages of Gather level lvl (0, 1) takes: the slots of Sub
// partials, and on two levels those of Subs() more after them.
func (sc *SplitCombine) slots(lvl int) int {
	if lvl == 0 {
		return sc.stacks(sc.Sub) * sc.Pages
	}
	if sc.Subs() == 1 {
		return 0
	}
	return sc.stacks(sc.Subs()) * sc.Pages
}

// CombineArgs are the writer's per-core arguments of a combine, in
// declaration order: the core's slot in its group and the NoC coordinates
// of its sub-leader and of its leader.
type CombineArgs struct {
	Slot, SubX, SubY, TopX, TopY kir.ArgRef
}

// Declare declares the combine's arguments of writer wr (values from
// Values).
func (sc *SplitCombine) Declare(wr *kir.Kernel) CombineArgs {
	return CombineArgs{Slot: wr.RuntimeArg("slot"), SubX: wr.RuntimeArg("sub_leader_x"), SubY: wr.RuntimeArg("sub_leader_y"),
		TopX: wr.RuntimeArg("leader_x"), TopY: wr.RuntimeArg("leader_y")}
}

// Values are core i's values of Declare's arguments (the first, the
// core's slot, is what compute's MergeThen takes too).
func (sc *SplitCombine) Values(i int) ([]kir.ArgValue, error) {
	if i < 0 || i >= len(sc.Cores) {
		return nil, fmt.Errorf("combine: core %d of %d", i, len(sc.Cores))
	}
	slot := i % sc.Group
	top := sc.Cores[i-slot]
	sub := sc.Cores[i-slot%sc.Sub]
	return []kir.ArgValue{kir.U32(uint32(slot)), kir.NoCX(sub), kir.NoCY(sub), kir.NoCX(top), kir.NoCY(top)}, nil
}

// roles are the run-time quantities of a core's part in the tree, as
// variables of the kernel that emitted them (roles).
type roles struct {
	sub, rank, base kir.Var // subgroup, place in it, its first slot
	// lead: a sub-leader whose subgroup has partials; cnt1 the partials it
	// merges; two: level 2 takes part (used > Sub); cnt2 the partials the
	// leader merges there.
	lead, cnt1, two, cnt2 kir.Var
}

// roles emits the roles of the core at slot when the group's first used
// cores have partials.
func (sc *SplitCombine) roles(b *kir.Builder, slot, used kir.Expr) roles {
	var r roles
	S := kir.Ci(sc.Sub)
	r.sub = b.Let("sub", kir.Div(slot, S))
	r.rank = b.Let("rank", kir.Mod(slot, S))
	r.base = b.Let("sub_base", kir.Mul(r.sub, S))
	r.lead = b.Let("sub_lead", kir.LAnd(kir.Eq(r.rank, kir.C(0)), kir.Lt(r.base, used)))
	// cnt1 = min(Sub, Group - base, used - base) when lead
	r.cnt1 = b.LetT("cnt1", kir.U32T, kir.C(0))
	b.If(r.lead, func() {
		b.Assign(r.cnt1, kir.Sub(used, r.base))
		b.If(kir.Gt(r.cnt1, S), func() { b.Assign(r.cnt1, S) })
	})
	if sc.Subs() > 1 {
		r.two = b.Let("two_levels", kir.Gt(used, S))
		r.cnt2 = b.Let("cnt2", kir.Div(kir.Add(used, kir.Ci(sc.Sub-1)), S))
	}
	return r
}

// Emit emits the writer's part of the combine with the arguments a of
// Declare, when the group's first used cores (a run-time value in 1 ..
// Group) have partials: such a core sends its partial (consuming Pages
// pages of Partial), a sub-leader with partials receives its subgroup's
// (producing slots(0) pages of Gather), serves its merge (serve) and, on
// two levels, sends its merged partial (Pages more pages of Partial), and
// the leader receives those (slots(1) more pages of Gather) and serves
// that merge too. Gather's address on the receivers is its base, which
// Emit reads from its own copy before it reserves any: nothing else may
// reserve Gather.
func (sc *SplitCombine) Emit(b *kir.Builder, a CombineArgs, used kir.Expr) {
	n := sc.Pages
	base := b.Let("gather_base", kir.GetWritePtr{CB: sc.Gather})
	// send writes the partial into place idx of the level's slots (from
	// page first of Gather): slot idx/Stack, rows Live*(idx%Stack) on
	send := func(first, idx kir.Expr, x, y kir.Expr, sem kir.Expr, what string) {
		b.Comment("send " + what + " to its place in the receiver's gather CB")
		b.CBWaitFront(sc.Partial, kir.Ci(n))
		slot := kir.Add(first, kir.Mul(kir.Div(idx, kir.Ci(sc.Stack)), kir.Ci(n)))
		dst := b.Let("gather_dst", kir.Add(base, kir.Mul(slot, kir.Ci(sc.Page))))
		src := b.Let("partial_src", kir.GetReadPtr{CB: sc.Partial})
		to := func(a kir.Expr) kir.NoCAddr { return kir.NoCAddr{X: x, Y: y, Addr: a} }
		if sc.Stack == 1 {
			b.For("pg", kir.C(0), kir.Ci(n), func(pg kir.Var) {
				off := kir.Mul(pg, kir.Ci(sc.Page))
				b.NoCAsyncWrite(kir.Add(src, off), to(kir.Add(dst, off)), kir.Ci(sc.Page))
			})
		} else {
			// the Live rows (all in the top faces) to rows R .. R+Live-1:
			// the first `top` of them to the top faces, the rest to the
			// bottom ones, each face's run of rows one write
			fr, fb := sc.FaceRow, blocks.FaceDim*sc.FaceRow
			row := b.Let("stack_row", kir.Mul(kir.Mod(idx, kir.Ci(sc.Stack)), kir.Ci(sc.Live)))
			top := b.LetT("top_rows", kir.U32T, kir.C(0))
			b.If(kir.Lt(row, kir.Ci(blocks.FaceDim)), func() {
				b.Assign(top, kir.Sub(kir.Ci(blocks.FaceDim), row))
				b.If(kir.Gt(top, kir.Ci(sc.Live)), func() { b.Assign(top, kir.Ci(sc.Live)) })
			})
			b.For("pg", kir.C(0), kir.Ci(n), func(pg kir.Var) {
				s0 := b.Let("src_tile", kir.Add(src, kir.Mul(pg, kir.Ci(sc.Page))))
				d0 := b.Let("dst_tile", kir.Add(dst, kir.Mul(pg, kir.Ci(sc.Page))))
				for h := range 2 {
					b.If(kir.Gt(top, kir.C(0)), func() {
						b.NoCAsyncWrite(kir.Add(s0, kir.Ci(h*fb)), to(kir.Add(d0, kir.Add(kir.Ci(h*fb), kir.Mul(row, kir.Ci(fr))))), kir.Mul(top, kir.Ci(fr)))
					})
					b.If(kir.Lt(top, kir.Ci(sc.Live)), func() {
						at := kir.Mul(kir.Sub(kir.Add(row, top), kir.Ci(blocks.FaceDim)), kir.Ci(fr))
						b.NoCAsyncWrite(kir.Add(s0, kir.Add(kir.Ci(h*fb), kir.Mul(top, kir.Ci(fr)))), to(kir.Add(d0, kir.Add(kir.Ci((2+h)*fb), at))),
							kir.Mul(kir.Sub(kir.Ci(sc.Live), top), kir.Ci(fr)))
					})
				}
			})
		}
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreInc(to(kir.GetSemaphore{ID: sem}), kir.C(1))
		b.CBPopFront(sc.Partial, kir.Ci(n))
	}
	receive := func(pages, count, sem kir.Expr) {
		b.CBReserveBack(sc.Gather, pages)
		b.NoCSemaphoreWait(kir.GetSemaphore{ID: sem}, count)
		b.CBPushBack(sc.Gather, pages)
	}
	r := sc.roles(b, a.Slot, used)
	sc.prepare(b, r)
	if sc.Subs() == 1 {
		b.If(kir.Lt(a.Slot, used), func() {
			send(kir.C(0), r.rank, a.SubX, a.SubY, kir.Ci(sc.Sem1), "this core's partial (O, m, l)")
		})
		b.If(r.lead, func() {
			b.Comment("leader: the group's partials in, to compute")
			receive(kir.Ci(sc.slots(0)), r.cnt1, kir.Ci(sc.Sem1))
			sc.serve(b, base, r.cnt1)
		})
		return
	}
	b.Comment("level 1: this core's partial to its sub-leader, which receives its subgroup's; level 2 (when more than one subgroup has partials): a sub-leader's merged partial to the leader, which receives those")
	b.For("level", kir.C(0), kir.C(2), func(lvl kir.Var) {
		l1 := b.Let("level1", kir.Eq(lvl, kir.C(0)))
		pick := func(name string, one, two kir.Expr) kir.Var {
			v := b.LetT(name, kir.U32T, two)
			b.If(l1, func() { b.Assign(v, one) })
			return v
		}
		sends := pick("sends", kir.Lt(a.Slot, used), kir.LAnd(r.lead, r.two))
		first := pick("first_page", kir.C(0), kir.Ci(sc.slots(0)))
		idx := pick("place", r.rank, r.sub)
		x, y := pick("to_x", a.SubX, a.TopX), pick("to_y", a.SubY, a.TopY)
		sem := pick("sem", kir.Ci(sc.Sem1), kir.Ci(sc.Sem2))
		b.If(sends, func() { send(first, idx, x, y, sem, "a partial (this core's, or the subgroup's merged)") })
		receives := pick("receives", r.lead, kir.LAnd(kir.Eq(a.Slot, kir.C(0)), r.two))
		pages := pick("pages", kir.Ci(sc.slots(0)), kir.Ci(sc.slots(1)))
		cnt := pick("cnt", r.cnt1, r.cnt2)
		front := pick("front", base, kir.Add(base, kir.Ci(sc.slots(0)*sc.Page)))
		b.If(receives, func() {
			b.Comment("a (sub-)leader: the partials in, to compute")
			receive(pages, cnt, sem)
			sc.serve(b, front, cnt)
		})
	})
}

// prepare emits, on a (sub-)leader with partials, at the writer's start
// (before any merge: off the merge's path), the reservation of Xfer and
// the zeroing of its pages: serve writes the same entries of the weight
// tiles at every merge (w_i, or 0 past the merge's partials), the rest
// of them stay 0. The rows of a gather slot no partial fills (past the
// last partial's, or past Stack*Live) hold whatever L1 held; the merge's
// tile products take them with weight 0, which the FPU multiplies to 0
// whatever the other operand holds (ir/numerics' datapath; the combine
// test runs on NaN-filled L1), so they need no clearing.
func (sc *SplitCombine) prepare(b *kir.Builder, r roles) {
	xp := 2 + sc.stacks(sc.k())
	b.If(r.lead, func() {
		b.Comment("a (sub-)leader: the weight tiles zeroed")
		b.CBReserveBack(sc.Xfer, kir.Ci(xp))
		blocks.FillWords(b, b.Let("xfer_zeros", kir.GetWritePtr{CB: sc.Xfer}), xp*ir.FP32.TileBytes(), 0)
	})
}

// fp32 bits the writer's data movement works with.
const (
	signBit = 0x80000000
	allBits = 0xFFFFFFFF
)

// serve emits the writer's part of one merge of the cnt partials at L1
// address front (Gather's pages as compute sees them), per tile row r:
// it packs m_i (row q, column 0 of partial i's m tile) into row q, column
// i of one tile and -M, M = max_i m_i (compared as integers: an fp32's
// bits with the sign bit set become allBits - bits, else bits + signBit,
// which orders them as the values), into the same places of another, for
// the Live rows q (two pages of Xfer), then takes compute's packed weights (a
// page of WRow, w_i in row q, column i) and writes them into the weight
// tiles (pages of Xfer: w_i at row q, column Live*(i%Stack) + q of tile
// i/Stack, 0 for the i from cnt on; their other entries stay 0 from
// prepare). Partial i's m is row Live*(i%Stack) + q of slot i/Stack's m
// tile.
func (sc *SplitCombine) serve(b *kir.Builder, front kir.Expr, cnt kir.Expr) {
	n, w, pb := sc.Pages, sc.Width, sc.Page
	at := func(q, c kir.Expr) kir.Expr { return blocks.FaceOffset(q, c, 4) }
	key := func(bits kir.Expr) kir.Var {
		k := b.LetT("key", kir.U32T, kir.Add(bits, kir.C(signBit)))
		b.If(kir.Ge(bits, kir.C(signBit)), func() { b.Assign(k, kir.Sub(kir.C(allBits), bits)) })
		return k
	}
	b.For("r", kir.C(0), kir.Ci(sc.Rows), func(r kir.Var) {
		// partial i's m: in slot i/Stack, its rows from Live*(i%Stack)
		mTile := func(i kir.Expr) kir.Expr {
			return kir.Add(front, kir.Mul(kir.Add(kir.Mul(kir.Div(i, kir.Ci(sc.Stack)), kir.Ci(n)), kir.Add(kir.Mul(r, kir.Ci(w+2)), kir.Ci(w))), kir.Ci(pb)))
		}
		mRow := func(i, q kir.Expr) kir.Expr {
			return kir.Add(kir.Mul(kir.Mod(i, kir.Ci(sc.Stack)), kir.Ci(sc.Live)), q)
		}
		b.Comment("the m_i packed into one tile, and -M")
		mp := blocks.Reserve(b, sc.Xfer, kir.C(2), "m_packed")
		b.For("q", kir.C(0), kir.Ci(sc.Live), func(q kir.Var) {
			best := b.LetT("best", kir.U32T, kir.C(0))
			bestKey := b.LetT("best_key", kir.U32T, kir.C(0))
			b.For("i", kir.C(0), cnt, func(i kir.Var) {
				bits := b.Let("m_bits", kir.L1Read32{Addr: kir.Add(mTile(i), at(mRow(i, q), kir.C(0)))})
				b.L1Write32(kir.Add(mp, at(q, i)), bits)
				k := key(bits)
				b.If(kir.LOr(kir.Eq(i, kir.C(0)), kir.Gt(k, bestKey)), func() {
					b.Assign(best, bits)
					b.Assign(bestKey, k)
				})
			})
			b.For("i", kir.C(0), cnt, func(i kir.Var) {
				b.L1Write32(kir.Add(kir.Add(mp, kir.Ci(pb)), at(q, i)), kir.Add(best, kir.C(signBit)))
			})
		})
		b.CBPushBack(sc.Xfer, kir.C(2))
		b.Comment("compute's w_i = exp(m_i - M) as the weight tiles: w_i of row q at row q, column Live*(i%Stack) + q of tile i/Stack (0 for i >= cnt)")
		ks := sc.stacks(sc.k())
		wp := blocks.WaitFront(b, sc.WRow, kir.C(1), "w_packed")
		wc := blocks.Reserve(b, sc.Xfer, kir.Ci(ks), "w_tiles")
		b.For("i", kir.C(0), kir.Ci(ks*sc.Stack), func(i kir.Var) {
			live := b.Let("w_live", kir.Lt(i, cnt))
			b.For("q", kir.C(0), kir.Ci(sc.Live), func(q kir.Var) {
				v := b.LetT("w_bits", kir.U32T, kir.C(0))
				b.If(live, func() { b.Assign(v, kir.L1Read32{Addr: kir.Add(wp, at(q, i))}) })
				wt := kir.Add(wc, kir.Mul(kir.Div(i, kir.Ci(sc.Stack)), kir.Ci(pb)))
				b.L1Write32(kir.Add(wt, at(q, mRow(i, q))), v)
			})
		})
		b.CBPushBack(sc.Xfer, kir.Ci(ks))
		b.CBPopFront(sc.WRow, kir.C(1))
	})
}

// MergeThen emits compute's part of the combine on the core at slot
// (run-time) when the group's first used cores have partials: a
// sub-leader with partials merges its subgroup's (cnt1 of the level-1
// slots) and, on two levels, packs the merged partial to Partial, and
// the leader merges the subgroups' (cnt2 of the level-2 slots); the
// final merge produces the Rows*Width result pages of Out (row r's Width
// tiles in order). Out holds two pages, so its consumer runs alongside:
// then, when not nil, is emitted after each page is pushed with the
// page's index (r*Width + j) and must consume it (wait for, use and pop
// one page of Out), e.g. to go on computing with it; with then nil
// another kernel (the writer) consumes Out. Both levels run the one merge
// loop (the code once, for the kernel's code size).
//
// A merge, per tile row r (the writer's serve moves the values between
// tiles):
//
//  1. W = exp(m_packed - M) on the packed tile (add_binary_tile of -M,
//     exp_tile): the weights w_i = exp(m_i - M) of every partial at
//     once, exact arguments (the m_i are flash decoding's bf16 maxima, or
//     M's of level 1, which are those too), to WRow;
//  2. L = sum_s W_s x l-tile of slot s (matmul_tiles, one per slot: row
//     q of the product is sum_k w_(s*Stack+k) of row q times l of row
//     Live*k + q, the partial's l), accumulated in DEST; the final merge
//     takes 1/L (recip_tile) and spreads it over the columns
//     (add_tiles_bcast_cols onto zeros);
//  3. per O tile j, O'_j = sum_s W_s x O-tile j of slot s (matmul_tiles,
//     one per slot), the final merge times 1/L (mul_binary_tile, fp32)
//     to Out; a level-1 merge on two levels packs O'_j, then m' = M and
//     l' = L, to Partial.
//
// A merge of cnt partials thus takes ceil(cnt/Stack) tile products per
// O tile, not cnt. The weight tiles' other entries are 0, and the FPU
// multiplies 0 by anything a slot's unfilled rows hold to 0 (a zero
// source operand gives a zero product, whatever the other holds, NaN
// patterns included: ir/numerics' datapath). The FPU reads the w_i
// as tf32 in the same way for L and O', so their quotient does not see
// it (nor a level-1 partial's, whose O' and l' carry the same w_i); 1/L
// is applied as tf32(1/L), as the single-core normalisation does. The
// sums of products accumulate in DEST: matmul_tiles adds its product to
// DEST, which tile_regs_acquire hands over cleared. The products run on
// the FPU at the kernel's math fidelity
// (HiFi4 multiplies the tf32 operands the FPU truncates fp32 data to in
// full), the rest in fp32 (FP32DestAccEn).
func (sc *SplitCombine) MergeThen(c *blocks.Compute, slot, used kir.Expr, then func(page kir.Expr)) {
	r := sc.roles(c.B, slot, used)
	if sc.Subs() == 1 {
		c.If(r.lead, func() {
			c.B.Comment("leader: merge the group's partials")
			sc.merge(c, kir.Ci(sc.slots(0)), r.cnt1, nil, then)
		}, nil)
		return
	}
	c.B.Comment("level 1 (a sub-leader), then level 2 (the leader, when more than one subgroup has partials)")
	c.For("level", kir.C(0), kir.C(2), func(lvl kir.Var) {
		l1 := c.B.Let("level1", kir.Eq(lvl, kir.C(0)))
		take := c.B.LetT("take", kir.U32T, kir.LAnd(kir.Eq(slot, kir.C(0)), r.two))
		cnt := c.B.LetT("cnt", kir.U32T, r.cnt2)
		final := c.B.LetT("final", kir.U32T, kir.C(1))
		pages := c.B.LetT("pages", kir.U32T, kir.Ci(sc.slots(1)))
		c.B.If(l1, func() {
			c.B.Assign(take, r.lead)
			c.B.Assign(cnt, r.cnt1)
			c.B.Assign(final, kir.Eq(r.two, kir.C(0)))
			c.B.Assign(pages, kir.Ci(sc.slots(0)))
		})
		c.If(take, func() { sc.merge(c, pages, cnt, final, then) }, nil)
	})
}

// merge emits one merge of the first cnt partials at the front of Gather
// (see MergeThen), popping pages of it; final nil: always the final
// merge, else a run-time flag (0: a level-1 merge whose result is a
// partial).
func (sc *SplitCombine) merge(c *blocks.Compute, pages, cnt, final kir.Expr, then func(page kir.Expr)) {
	gather, n, w := sc.Gather, sc.Pages, sc.Width
	K := sc.stacks(sc.k())
	d0, d1 := kir.C(0), kir.C(1)
	ifFinal := func(yes, no func()) {
		if final == nil {
			yes()
			return
		}
		c.If(final, yes, no)
	}
	c.B.CBWaitFront(gather, pages)
	ns := c.B.Let("stacks", kir.Div(kir.Add(cnt, kir.Ci(sc.Stack-1)), kir.Ci(sc.Stack)))
	c.For("r", kir.C(0), kir.Ci(sc.Rows), func(r kir.Var) {
		// tile j of row r of slot s
		tile := func(s, j kir.Expr) kir.Expr {
			return kir.Add(kir.Add(kir.Mul(s, kir.Ci(n)), kir.Mul(r, kir.Ci(w+2))), j)
		}
		c.B.Comment("W = exp(m_packed - M): every w_i at once")
		c.B.CBWaitFront(sc.Xfer, kir.C(2))
		c.Acquire()
		c.Copy(sc.Xfer, kir.C(0), d0)
		c.Copy(sc.Xfer, kir.C(1), d1)
		c.SFPUBinary(kir.SFPUAddBinary, d0, d1)
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, d0)
		c.PackOut(sc.WRow, 1)
		c.B.Comment("L = sum_i w_i l_i (final: 1/L on every column)")
		c.B.CBWaitFront(sc.Xfer, kir.Ci(2+K))
		wt := func(s kir.Expr) kir.Expr { return kir.Add(s, kir.C(2)) }
		c.Acquire()
		c.For("s", kir.C(0), ns, func(s kir.Var) {
			c.Matmul(sc.Xfer, gather, wt(s), tile(s, kir.Ci(w+1)), d0, false)
		})
		ifFinal(func() { c.SFPU(blocks.SFPUStep{Op: kir.SFPURecip}, d0) }, nil)
		c.PackOut(sc.Shift, 1)
		c.B.CBWaitFront(sc.Shift, kir.C(1))
		ifFinal(func() {
			// (one page at a time: the ring's pages are not always in
			// step with the merges)
			c.Acquire()
			c.Binary(kir.EltAdd, blocks.BcastCols, sc.Zero, sc.Shift, kir.C(0), kir.C(0), d0)
			c.B.CBPopFront(sc.Shift, kir.C(1))
			c.PackOut(sc.Shift, 1)
			c.B.CBWaitFront(sc.Shift, kir.C(1))
		}, nil)
		c.B.Comment("O'_j = sum_i O_ij w_i (final: times 1/L)")
		c.For("j", kir.C(0), kir.Ci(w), func(j kir.Var) {
			c.Acquire()
			c.For("s", kir.C(0), ns, func(s kir.Var) { c.Matmul(sc.Xfer, gather, wt(s), tile(s, j), d0, false) })
			ifFinal(func() {
				c.Copy(sc.Shift, kir.C(0), d1)
				c.SFPUBinary(kir.SFPUMulBinary, d0, d1)
				c.PackOut(sc.Out, 1)
				if then != nil {
					then(kir.Add(kir.Mul(r, kir.Ci(w)), j))
				}
			}, func() { c.PackOut(sc.Partial, 1) })
		})
		ifFinal(func() { c.B.CBPopFront(sc.Shift, kir.C(1)) }, func() {
			c.B.Comment("the merged partial's m' = M and l' = L")
			c.Acquire()
			c.Copy(sc.Xfer, kir.C(1), d0)
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, d0)
			c.PackOut(sc.Partial, 1)
			c.Acquire()
			c.Copy(sc.Shift, kir.C(0), d0)
			c.PackOut(sc.Partial, 1)
			c.B.CBPopFront(sc.Shift, kir.C(1))
		})
		c.B.CBPopFront(sc.Xfer, kir.Ci(2+K))
	})
	c.B.CBPopFront(gather, pages)
}

// foldTerms leaves in DEST[0] the fold of terms first .. n-1 (first < n):
// term(first) into DEST[0], then for k = first+1 .. n-1 term(k) into
// DEST[1] and merge, which folds DEST[1] into DEST[0].
func foldTerms(c *blocks.Compute, first, n kir.Expr, term func(k, dst kir.Expr), merge func()) {
	term(first, kir.C(0))
	next := kir.Add(first, kir.C(1))
	if f, ok := first.(kir.Const); ok {
		next = kir.C(f.V + 1)
	}
	c.For("k", next, n, func(k kir.Var) {
		term(k, kir.C(1))
		merge()
	})
}
