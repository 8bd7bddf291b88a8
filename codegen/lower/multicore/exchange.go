package multicore

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Exchange is a group reduction with a broadcast back: the program's cores
// form groups of Group consecutive cores (Cores[g*Group:(g+1)*Group], led
// by its first core); every core contributes one partial page, the leader
// combines the group's partials into one result page and every core of the
// group receives that result. The split-row norms exchange their partial
// sums of squares this way, and the GDN recurrence the partial sums of its
// output norm.
//
// The partials are added on one level or, with 0 < Fan < Group, on a tree
// of two: the group's cores form Subs() subgroups of Fan consecutive cores
// (the last one smaller when Fan does not divide Group), each led by its
// first core (a sub-leader; the group's leader leads subgroup 0). A
// sub-leader adds its subgroup's partials in core order and multicasts
// that sum to every core of the group, and every core adds the
// subgroups' sums in order and transforms the total itself: no leader
// and no broadcast back. The sum of a group is then
// (p_0 + ... + p_{Fan-1}) + (p_Fan + ... ) + ..., each bracket a running
// sum in core order: on one level it is the running sum of all Group
// partials. The serial work drops from Group adds to about Fan + Subs()
// (2*sqrt(Group) at Fan = sqrt(Group)), and the result is ready after two
// hops, as on one level.
//
// Protocol, per core (the writer runs Emit; compute produces the partial
// and runs Combine: on one level a leader, on two every core). On one
// level:
//
//  1. wait for the partial page (CB Partial), write its first Bytes into
//     page slot k (the core's place in the group) of the leader's CB
//     Gather (one NoC write: the CB has one L1 address on every core and
//     is untouched on members, so this core's get_write_ptr is the
//     leader's), noc_async_write_barrier (the write is non-posted: the
//     barrier waits for its acknowledgement), then noc_semaphore_inc the
//     leader's SemIn (an atomic; kir.Finish ends the kernel with
//     noc_async_atomic_barrier);
//  2. a leader waits until SemIn counts Group, pushes the Group pages of
//     Gather to compute, waits for the result page compute packs to CB
//     Local, multicasts its first Bytes into CB Result of every member
//     (one noc_async_write_multicast per rectangle of FollowerRects: the
//     members exactly, split at NoC column gaps, never the leader; corners
//     in the writer's NoC order), copies it into its own Result, waits for
//     the writes (read and write barriers), sets its SemValid to 1 and
//     multicasts that word to the same rectangles
//     (noc_semaphore_set_multicast), then a write barrier; a member waits
//     until its SemValid is 1;
//  3. every core pushes its Result page.
//
// On two levels step 1 sends to page slot k mod Fan of the core's
// sub-leader's Gather (its SemIn), and then:
//
//  2. a sub-leader (of subgroup s) waits until SemIn counts its
//     subgroup's cores and pushes that many Gather pages to compute, which
//     adds them and packs the sum to Local; the writer multicasts its
//     first Bytes into page s of CB Sums of every other core of the group
//     (the rectangles of FollowerRects of the cores before it and of those
//     after it, at most 2*MaxRects), copies it into its own page s, waits
//     for the writes, sets its semaphore SemSub+s to 1 and multicasts that
//     word to the same rectangles, then a write barrier;
//  3. every core reserves the Subs() pages of Sums, waits until each of
//     the Subs() semaphores SemSub .. SemSub+Subs()-1 is 1 and pushes them
//     to compute, which adds them in order, transforms the total and packs
//     it to CB Result itself (the writer does not touch Result).
//
// Deadlock-free: a core sends its partial before it waits for anything of
// the exchange. On one level the leader waits only for its group's
// increments and its own compute; a member waits only for its leader's
// SemValid, which the leader sets after those. On two levels a
// sub-leader waits only for its subgroup's increments and its own
// compute's level-1 sum (compute adds it before it waits for Sums), then
// sets its flag; every core then waits for the Subs() flags, each set by a
// sub-leader that waits for nothing of level 2. A core with an empty
// chunk still sends its (zero) partial. Every page is written once per
// program into a CB with room for it (GatherPages() pages of Gather, one
// of Result, SumsPages() of Sums, written before or after the owner
// reserves them: the CBs are untouched until then). Semaphores start at 0
// in every launch.
type Exchange struct {
	T     *target.Target
	Group int // cores per group
	// Fan is the cores per subgroup of a two-level tree; 0 (or Group or
	// more) adds on one level.
	Fan    int
	Cores  []kir.Core     // the program's cores in group order
	Ranges []ir.CoreRange // the same cores, for the semaphores

	// Semaphore ids (AddSemaphores): partials arrived at a (sub-)leader;
	// on one level the result landed on a member; on two levels the first
	// of Subs() flags, SemSub+s set when subgroup s's sum landed.
	SemIn, SemValid, SemSub int

	// CBs: Partial (one page, compute -> writer), Gather (GatherPages()
	// pages on leaders, writer -> compute; page stride Page bytes), Local
	// (one page on leaders, compute -> writer: the result to broadcast,
	// or a sub-leader's sum to multicast), Result (one page; writer ->
	// compute on one level, packed by compute on two) and, on two levels,
	// Sums (SumsPages() pages, writer -> compute; page stride Page).
	// Partial and Local may be one CB: Emit consumes the partial before it
	// waits for Local.
	Partial, Gather, Local, Result, Sums int
	Page                                 int
	// Bytes is the prefix of a partial's page and of the result page that
	// moves (at most Page; 16-byte multiple).
	Bytes int

	// PartialName and ResultName describe the pages in the kernels'
	// comments.
	PartialName, ResultName string
}

// AddSemaphores sets SemIn, SemValid and SemSub to in, valid and sub and
// adds the semaphores the exchange uses (initial value 0) on Ranges: in,
// and valid on one level, the Subs() flags sub .. sub+Subs()-1 on two
// (ids that must be free).
func (x *Exchange) AddSemaphores(p *kir.Program, in, valid, sub int) {
	x.SemIn, x.SemValid, x.SemSub = in, valid, sub
	p.AddSemaphore(kir.Semaphore{ID: in, Cores: x.Ranges})
	if !x.twoLevels() {
		p.AddSemaphore(kir.Semaphore{ID: valid, Cores: x.Ranges})
		return
	}
	for s := range x.Subs() {
		p.AddSemaphore(kir.Semaphore{ID: sub + s, Cores: x.Ranges})
	}
}

// twoLevels reports whether the partials are added on a tree of two
// levels (0 < Fan < Group).
func (x *Exchange) twoLevels() bool { return x.Fan > 0 && x.Fan < x.Group }

// Subs is the number of subgroups: ceil(Group/Fan) on two levels, else 1.
func (x *Exchange) Subs() int {
	if !x.twoLevels() {
		return 1
	}
	return (x.Group + x.Fan - 1) / x.Fan
}

// GatherPages is the pages CB Gather must hold: Group on one level, the
// Fan level-1 slots on two.
func (x *Exchange) GatherPages() int {
	if !x.twoLevels() {
		return x.Group
	}
	return x.Fan
}

// SumsPages is the pages CB Sums must hold: Subs() on two levels, 0 (no
// CB) on one.
func (x *Exchange) SumsPages() int {
	if !x.twoLevels() {
		return 0
	}
	return x.Subs()
}

// rectSlots is the number of multicast slots a writer declares: MaxRects
// on one level (a leader's members), twice that on two (a sub-leader's
// cores before it and after it).
func (x *Exchange) rectSlots() int {
	if x.twoLevels() {
		return 2 * MaxRects
	}
	return MaxRects
}

// ExchangeArgs are the writer's per-core arguments of an exchange, in
// declaration order: the leader flag, the core's slot in its group, the
// leader's NoC coordinates, on two levels the sub-leader's, and the
// multicast slots (MaxRects, used on leaders; on two levels 2*MaxRects,
// used on sub-leaders).
type ExchangeArgs struct {
	Leader, Slot, LX, LY kir.ArgRef
	SubX, SubY           kir.ArgRef // two levels only
	Rects                []Slot
}

// Declare declares the exchange arguments of writer wr (values from
// Values).
func (x *Exchange) Declare(wr *kir.Kernel) ExchangeArgs {
	a := ExchangeArgs{Leader: wr.RuntimeArg("leader"), Slot: wr.RuntimeArg("slot"),
		LX: wr.RuntimeArg("leader_x"), LY: wr.RuntimeArg("leader_y")}
	if x.twoLevels() {
		a.SubX, a.SubY = wr.RuntimeArg("sub_leader_x"), wr.RuntimeArg("sub_leader_y")
	}
	a.Rects = DeclareSlots(x.rectSlots(), "mcast", "cores", wr.RuntimeArg)
	return a
}

// Values are core i's values of Declare's arguments for a writer issuing
// on NoC noc. The first is the leader flag (1 on a group's first core),
// which compute takes too on one level (ComputeValue).
func (x *Exchange) Values(i, noc int) ([]kir.ArgValue, error) {
	if i < 0 || i >= len(x.Cores) || x.Group < 1 || len(x.Cores)%x.Group != 0 {
		return nil, fmt.Errorf("exchange: core %d of %d in groups of %d", i, len(x.Cores), x.Group)
	}
	if x.Fan < 0 {
		return nil, fmt.Errorf("exchange: fan-in %d, want 0 (one level) or a subgroup size", x.Fan)
	}
	g, k := i/x.Group, i%x.Group
	lead := x.Cores[g*x.Group]
	leader := uint32(0)
	if k == 0 {
		leader = 1
	}
	vals := []kir.ArgValue{kir.U32(leader), kir.U32(uint32(k)), kir.NoCX(lead), kir.NoCY(lead)}
	if x.twoLevels() {
		sub := x.Cores[i-k%x.Fan]
		vals = append(vals, kir.NoCX(sub), kir.NoCY(sub))
	}
	var rects []Rect
	group := x.Cores[g*x.Group : (g+1)*x.Group]
	switch {
	case x.twoLevels() && k%x.Fan == 0:
		before, err := FollowerRects(x.T, group[:k])
		if err != nil {
			return nil, err
		}
		after, err := FollowerRects(x.T, group[k+1:])
		if err != nil {
			return nil, err
		}
		rects = append(before, after...)
	case !x.twoLevels() && k == 0:
		var err error
		if rects, err = FollowerRects(x.T, group[1:]); err != nil {
			return nil, err
		}
	}
	return append(vals, SlotValues(rects, x.rectSlots(), noc)...), nil
}

// ComputeDeclare declares compute kernel cp's exchange argument, the role
// Combine takes (value from ComputeValue): on one level the leader flag
// ("leader"), on two the core's slot in its group ("group_slot").
func (x *Exchange) ComputeDeclare(cp *kir.Kernel) kir.ArgRef {
	if x.twoLevels() {
		return cp.RuntimeArg("group_slot")
	}
	return cp.RuntimeArg("leader")
}

// ComputeValue is core i's value of ComputeDeclare's argument: on one
// level the leader flag (Values' first), on two the core's slot in its
// group.
func (x *Exchange) ComputeValue(i int) kir.ArgValue {
	k := i % x.Group
	if x.twoLevels() {
		return kir.U32(uint32(k))
	}
	if k == 0 {
		return kir.U32(1)
	}
	return kir.U32(0)
}

// Emit emits the writer's part of the exchange (the protocol of the
// type's doc) with the arguments a of Declare. It consumes one Partial
// page (and on leaders and sub-leaders one Local page), produces
// GatherPages() Gather pages on leaders (a sub-leader's subgroup's count
// on a sub-leader) and one Result page on every core.
func (x *Exchange) Emit(b *kir.Builder, a ExchangeArgs) {
	if x.twoLevels() {
		x.emitTree(b, a)
		return
	}
	b.Comment(fmt.Sprintf("send this core's %s to its page of the group leader's gather CB", x.PartialName))
	x.send(b, x.Partial, nil, a.LX, a.LY, a.Slot, x.SemIn)
	b.CBReserveBack(x.Result, kir.C(1))
	valid := b.Let("valid_sem", kir.GetSemaphore{ID: kir.Ci(x.SemValid)})
	b.IfElse(kir.Ne(a.Leader, kir.C(0)), func() {
		b.Comment("leader: the group's partials in, to compute; then broadcast the " + x.ResultName)
		x.receive(b, kir.Ci(x.Group), x.SemIn)
		x.broadcast(b, a, valid)
	}, func() {
		b.Comment("follower: wait for the leader's " + x.ResultName)
		b.NoCSemaphoreWait(valid, kir.C(1))
	})
	b.CBPushBack(x.Result, kir.C(1))
}

// emitTree is Emit on two levels.
func (x *Exchange) emitTree(b *kir.Builder, a ExchangeArgs) {
	fan := kir.Ci(x.Fan)
	b.Comment(fmt.Sprintf("level 1: send this core's %s to its page of its sub-leader's gather CB", x.PartialName))
	rank := b.Let("rank", kir.Mod(a.Slot, fan))
	sub := b.Let("sub", kir.Div(a.Slot, fan))
	x.send(b, x.Partial, nil, a.SubX, a.SubY, rank, x.SemIn)
	sums := b.Let("sums_base", kir.GetWritePtr{CB: x.Sums})
	b.If(kir.Eq(rank, kir.C(0)), func() {
		b.Comment("sub-leader: its subgroup's partials in, to compute; then its subgroup's sum to page sub of every core's sums CB")
		x.receive(b, x.subCount(b, sub), x.SemIn)
		src := blocks.WaitFront(b, x.Local, kir.C(1), "sum_src")
		dst := b.Let("sum_dst", kir.Add(sums, kir.Mul(sub, kir.Ci(x.Page))))
		flag := b.Let("flag_sem", kir.GetSemaphore{ID: kir.Add(kir.Ci(x.SemSub), sub)})
		x.multicast(b, a, src, dst, flag)
		b.CBPopFront(x.Local, kir.C(1))
	})
	b.Comment("level 2: every subgroup's sum in, to compute (it adds them in order)")
	n := kir.Ci(x.Subs())
	b.CBReserveBack(x.Sums, n)
	for s := range x.Subs() {
		b.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.Ci(x.SemSub + s)}, kir.C(1))
	}
	b.CBPushBack(x.Sums, n)
}

// subCount emits the number of cores in subgroup sub: Fan, or fewer in
// the last subgroup.
func (x *Exchange) subCount(b *kir.Builder, sub kir.Expr) kir.Expr {
	last := x.Group - (x.Subs()-1)*x.Fan
	if last == x.Fan {
		return kir.Ci(x.Fan)
	}
	n := b.LetT("sub_cores", kir.U32T, kir.Ci(x.Fan))
	b.If(kir.Eq(sub, kir.Ci(x.Subs()-1)), func() { b.Assign(n, kir.Ci(last)) })
	return n
}

// send emits the write of the first Bytes of the front page of cb into
// page slot of the Gather CB of the core at NoC (nx, ny), the barrier,
// the increment of that core's semaphore sem and the pop. gather is
// Gather's base address, or nil to read it first (get_write_ptr, before
// this core reserves any of Gather); send returns it.
func (x *Exchange) send(b *kir.Builder, cb int, gather kir.Expr, nx, ny, slot kir.Expr, sem int) kir.Expr {
	b.CBWaitFront(cb, kir.Ci(1))
	if gather == nil {
		gather = b.Let("gather_base", kir.GetWritePtr{CB: x.Gather})
	}
	b.NoCAsyncWrite(kir.GetReadPtr{CB: cb}, kir.NoCAddr{X: nx, Y: ny, Addr: kir.Add(gather, kir.Mul(slot, kir.Ci(x.Page)))}, kir.Ci(x.Bytes))
	b.NoCAsyncWriteBarrier()
	b.NoCSemaphoreInc(kir.NoCAddr{X: nx, Y: ny, Addr: kir.GetSemaphore{ID: kir.Ci(sem)}}, kir.C(1))
	b.CBPopFront(cb, kir.Ci(1))
	return gather
}

// receive emits the reservation of n Gather pages, the wait until
// semaphore sem counts n and their push to compute.
func (x *Exchange) receive(b *kir.Builder, n kir.Expr, sem int) {
	b.CBReserveBack(x.Gather, n)
	b.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.Ci(sem)}, n)
	b.CBPushBack(x.Gather, n)
}

// broadcast emits a leader's broadcast of the result page compute packs
// to Local (step 2 of the type's doc); valid is SemValid's address.
func (x *Exchange) broadcast(b *kir.Builder, a ExchangeArgs, valid kir.Expr) {
	src := blocks.WaitFront(b, x.Local, kir.C(1), "rs_src")
	dst := b.Let("rs_dst", kir.GetWritePtr{CB: x.Result})
	x.multicast(b, a, src, dst, valid)
	b.CBPopFront(x.Local, kir.C(1))
}

// multicast emits the multicast of the first Bytes at L1 address src to
// L1 address dst of the cores of a's rectangles and the copy into this
// core's dst, the barriers, then the flag: semaphore word flag set to 1
// here and multicast to the same rectangles, and a write barrier.
func (x *Exchange) multicast(b *kir.Builder, a ExchangeArgs, src, dst, flag kir.Expr) {
	sb := kir.Ci(x.Bytes)
	EachSlot(b, a.Rects, func(r Slot) { b.NoCAsyncWriteMulticast(src, r.Addr(dst), sb, r.Cores) })
	blocks.LocalCopy(b, src, dst, x.Bytes)
	b.NoCAsyncReadBarrier()
	b.NoCAsyncWriteBarrier()
	b.NoCSemaphoreSet(flag, kir.C(1))
	EachSlot(b, a.Rects, func(r Slot) { b.NoCSemaphoreSetMulticast(flag, r.Addr(flag), r.Cores) })
	b.NoCAsyncWriteBarrier()
}

// Combine emits the compute part of the exchange; role is
// ComputeDeclare's argument. On one level (role: the leader flag), a
// leader waits for the Group Gather pages, adds them in core order in
// DEST[0] (partial 0 copied, each further one copied to DEST[1] and added
// with add_binary_tile: the pages unpack straight to DEST, so the adds
// are fp32 exact), lets finish transform DEST[0], packs it to Local and
// pops the Gather pages. On two levels (role: the core's slot in its
// group) a sub-leader adds its subgroup's pages so and packs the sum to
// Local; then every core adds the Subs() pages of Sums so, lets finish
// transform the total and packs it to Result. comment, when not empty,
// opens the (sub-)leader's branch. idle, when not nil, is work of the
// core's own that does not depend on the exchange: on two levels every
// core runs it before it waits for Sums (a sub-leader after its level-1
// sum), while the sums travel; on one level it is not emitted (a
// follower's caller runs it before it waits for Result).
func (x *Exchange) Combine(c *blocks.Compute, role kir.Expr, comment string, finish, idle func()) {
	if x.twoLevels() {
		x.combineTree(c, role, comment, finish, idle)
		return
	}
	c.If(kir.Ne(role, kir.C(0)), func() {
		if comment != "" {
			c.B.Comment(comment)
		}
		g := kir.Ci(x.Group)
		c.B.CBWaitFront(x.Gather, g)
		c.Acquire()
		x.fold(c, x.Gather, g)
		finish()
		c.PackOut(x.Local, 1)
		c.B.CBPopFront(x.Gather, g)
	}, nil)
}

// fold emits the running sum of pages 0 .. n-1 of cb into DEST[0] (page 0
// copied there, each further one copied to DEST[1] and added).
func (x *Exchange) fold(c *blocks.Compute, cb int, n kir.Expr) {
	foldTerms(c, kir.C(0), n, func(k, dst kir.Expr) { c.Copy(cb, k, dst) }, func() { c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1)) })
}

// combineTree is Combine on two levels.
func (x *Exchange) combineTree(c *blocks.Compute, slot kir.Expr, comment string, finish, idle func()) {
	fan := kir.Ci(x.Fan)
	c.If(kir.Eq(kir.Mod(slot, fan), kir.C(0)), func() {
		if comment != "" {
			c.B.Comment(comment)
		}
		c.B.Comment("level 1 (a sub-leader): this subgroup's partials, the sum to the writer (it multicasts it to the group)")
		n1 := x.subCount(c.B, kir.Div(slot, fan))
		c.B.CBWaitFront(x.Gather, n1)
		c.Acquire()
		x.fold(c, x.Gather, n1)
		c.PackOut(x.Local, 1)
		c.B.CBPopFront(x.Gather, n1)
	}, nil)
	if idle != nil {
		idle()
	}
	c.B.Comment("level 2 (every core): the subgroups' sums, in order")
	n := kir.Ci(x.Subs())
	c.B.CBWaitFront(x.Sums, n)
	c.Acquire()
	x.fold(c, x.Sums, n)
	finish()
	c.PackOut(x.Result, 1)
	c.B.CBPopFront(x.Sums, n)
}
