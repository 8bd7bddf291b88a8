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
// Protocol, per core (the writer runs Emit; compute produces the partial
// and, on a leader, runs Combine):
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
// Deadlock-free: a member waits only for its leader's SemValid, which the
// leader sets after Group increments that every core makes before it
// waits for anything of the exchange; the leader never waits for a
// member's later work. Every page is written once per program into a CB
// with room for it (Group pages of Gather, one of Result). Semaphores
// start at 0 in every launch.
type Exchange struct {
	T      *target.Target
	Group  int            // cores per group
	Cores  []kir.Core     // the program's cores in group order
	Ranges []ir.CoreRange // the same cores, for the semaphores

	// Semaphore ids (AddSemaphores): partials arrived at a leader; the
	// result landed on a member.
	SemIn, SemValid int

	// CBs: Partial (one page, compute -> writer), Gather (Group pages on
	// leaders, writer -> compute; page stride Page bytes), Local (one
	// page on leaders, compute -> writer: the result to broadcast) and
	// Result (one page, writer -> compute). Partial and Local may be one
	// CB: Emit consumes the partial before it waits for the result.
	Partial, Gather, Local, Result int
	Page                           int
	// Bytes is the prefix of a partial's page and of the result page that
	// moves (at most Page; 16-byte multiple).
	Bytes int

	// PartialName and ResultName describe the pages in the kernels'
	// comments.
	PartialName, ResultName string
}

// AddSemaphores sets SemIn and SemValid to in and valid and adds both
// semaphores (initial value 0) on Ranges.
func (x *Exchange) AddSemaphores(p *kir.Program, in, valid int) {
	x.SemIn, x.SemValid = in, valid
	p.AddSemaphore(kir.Semaphore{ID: in, Cores: x.Ranges})
	p.AddSemaphore(kir.Semaphore{ID: valid, Cores: x.Ranges})
}

// ExchangeArgs are the writer's per-core arguments of an exchange, in
// declaration order: the leader flag, the core's slot in its group, the
// leader's NoC coordinates and MaxRects multicast slots (used on leaders).
type ExchangeArgs struct {
	Leader, Slot, LX, LY kir.ArgRef
	Rects                []Slot
}

// Declare declares the exchange arguments of writer wr (values from
// Values).
func (x *Exchange) Declare(wr *kir.Kernel) ExchangeArgs {
	a := ExchangeArgs{Leader: wr.RuntimeArg("leader"), Slot: wr.RuntimeArg("slot"),
		LX: wr.RuntimeArg("leader_x"), LY: wr.RuntimeArg("leader_y")}
	a.Rects = DeclareSlots(MaxRects, "mcast", "cores", wr.RuntimeArg)
	return a
}

// Values are core i's values of Declare's arguments for a writer issuing
// on NoC noc. The first is the leader flag (1 on a group's first core),
// which compute takes too (Combine).
func (x *Exchange) Values(i, noc int) ([]kir.ArgValue, error) {
	g, k := i/x.Group, i%x.Group
	lead := x.Cores[g*x.Group]
	leader := uint32(0)
	if k == 0 {
		leader = 1
	}
	vals := []kir.ArgValue{kir.U32(leader), kir.U32(uint32(k)), kir.NoCX(lead), kir.NoCY(lead)}
	var rects []Rect
	if k == 0 {
		var err error
		if rects, err = FollowerRects(x.T, x.Cores[g*x.Group+1:(g+1)*x.Group]); err != nil {
			return nil, err
		}
	}
	return append(vals, SlotValues(rects, MaxRects, noc)...), nil
}

// Emit emits the writer's part of the exchange (steps 1-3 of the type's
// doc) with the arguments a of Declare. It consumes one Partial page (and
// on leaders one Local page), produces Group Gather pages on leaders and
// one Result page on every core.
func (x *Exchange) Emit(b *kir.Builder, a ExchangeArgs) {
	b.Comment(fmt.Sprintf("send this core's %s to its page of the group leader's gather CB", x.PartialName))
	b.CBWaitFront(x.Partial, kir.Ci(1))
	row := b.Let("gather_base", kir.GetWritePtr{CB: x.Gather})
	sb := kir.Ci(x.Bytes)
	b.NoCAsyncWrite(kir.GetReadPtr{CB: x.Partial}, kir.NoCAddr{X: a.LX, Y: a.LY, Addr: kir.Add(row, kir.Mul(a.Slot, kir.Ci(x.Page)))}, sb)
	b.NoCAsyncWriteBarrier()
	b.NoCSemaphoreInc(kir.NoCAddr{X: a.LX, Y: a.LY, Addr: kir.GetSemaphore{ID: kir.Ci(x.SemIn)}}, kir.C(1))
	b.CBPopFront(x.Partial, kir.Ci(1))
	receive := func() {
		b.CBReserveBack(x.Gather, kir.Ci(x.Group))
		b.NoCSemaphoreWait(kir.GetSemaphore{ID: kir.Ci(x.SemIn)}, kir.Ci(x.Group))
		b.CBPushBack(x.Gather, kir.Ci(x.Group))
	}
	b.CBReserveBack(x.Result, kir.C(1))
	valid := b.Let("valid_sem", kir.GetSemaphore{ID: kir.Ci(x.SemValid)})
	b.IfElse(kir.Ne(a.Leader, kir.C(0)), func() {
		b.Comment("leader: the group's partials in, to compute; then broadcast the " + x.ResultName)
		receive()
		src := blocks.WaitFront(b, x.Local, kir.C(1), "rs_src")
		dst := b.Let("rs_dst", kir.GetWritePtr{CB: x.Result})
		EachSlot(b, a.Rects, func(r Slot) { b.NoCAsyncWriteMulticast(src, r.Addr(dst), sb, r.Cores) })
		blocks.LocalCopy(b, src, dst, x.Bytes)
		b.NoCAsyncReadBarrier()
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreSet(valid, kir.C(1))
		EachSlot(b, a.Rects, func(r Slot) { b.NoCSemaphoreSetMulticast(valid, r.Addr(valid), r.Cores) })
		b.NoCAsyncWriteBarrier()
		b.CBPopFront(x.Local, kir.C(1))
	}, func() {
		b.Comment("follower: wait for the leader's " + x.ResultName)
		b.NoCSemaphoreWait(valid, kir.C(1))
	})
	b.CBPushBack(x.Result, kir.C(1))
}

// Combine emits a leader's compute part (when leader != 0): it waits for
// the Group Gather pages, adds them in core order in DEST[0] (partial 0
// copied, each further one copied to DEST[1] and added with
// add_binary_tile: the pages unpack straight to DEST, so the adds are
// fp32 exact), lets finish transform DEST[0], packs it to Local and pops
// the Gather pages. comment, when not empty, opens the leader's branch.
func (x *Exchange) Combine(c *blocks.Compute, leader kir.Expr, comment string, finish func()) {
	c.If(kir.Ne(leader, kir.C(0)), func() {
		if comment != "" {
			c.B.Comment(comment)
		}
		g := kir.Ci(x.Group)
		c.B.CBWaitFront(x.Gather, g)
		c.Acquire()
		foldTerms(c, kir.C(0), g, func(k, dst kir.Expr) { c.Copy(x.Gather, k, dst) }, func() { c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1)) })
		finish()
		c.PackOut(x.Local, 1)
		c.B.CBPopFront(x.Gather, g)
	}, nil)
}
