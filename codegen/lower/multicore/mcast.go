package multicore

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Multicast shares Pages pages that every core of a program needs (a
// decode matmul's activation row): one core per column group, the sender,
// reads them once and multicasts them into the same CB of the group's
// other cores, the receivers, instead of every core reading them.
//
// Protocol, in the kernel Emit builds into (a data-movement kernel; the
// decode matmul uses its writer, idle until the first result tile):
//
//   - every core reserves the Pages pages of CB (a fresh CB: its write
//     pointer is the CB's base, the same L1 address on every core);
//   - a receiver noc_semaphore_inc's its sender's SemReady, then
//     noc_async_atomic_barrier;
//   - the sender reads every page with all reads in flight and one
//     barrier (the weight streams that start with the program fill the
//     DRAM queues; a chunk at a time would wait in them per chunk); before
//     the first multicast it waits until SemReady counts its receivers;
//     per chunk (of whole pages, one NoC packet) it multicasts the pages to each rectangle of
//     its receivers (noc_async_write_multicast, corners in the kernel's
//     NoC order), sets its SemValid to the number of chunks sent and
//     multicasts that word after the data (noc_semaphore_set_multicast,
//     same NoC and virtual channel: the word cannot overtake the data),
//     then noc_async_writes_flushed (the word has left L1) before the
//     word changes again; it ends with noc_async_write_barrier (every
//     multicast acknowledged);
//   - a receiver waits until its SemValid counts the chunk
//     (noc_semaphore_wait_min);
//   - every core pushes each chunk's pages as soon as it has them.
//
// Deadlock-free: the sender waits only for increments every receiver
// makes before it waits itself, and receivers wait only for the sender's
// multicasts. Cores are the first n in row-major order; they split into
// column groups where the NoC columns are not contiguous (Blackhole's DRAM
// and PCIe columns), each with its own sender (its first core)
// multicasting to the FollowerRects of its other cores (at most
// MaxGroupRects: the rest of its first row, its full rows and a partial
// last row).
type Multicast struct {
	CB, Pages, PageSize int
	SemReady, SemValid  int // semaphore ids (Emit adds them)
	// Read issues the sender's read of page pg into L1 address l1 (the
	// caller's barrier follows).
	Read func(b *kir.Builder, pg, l1 kir.Expr)
	// Name prefixes the kernel's argument and variable names (Name_sender,
	// ...); What names the pages in its comment.
	Name, What string
	// Blocks > 1 splits the cores into that many runs of equal length,
	// each multicasting its own pages (BlockColumnGroups): a prefill
	// matmul whose cores split the activation rows as well as the columns
	// (the sender's Read then reads its block's rows). 0 or 1: one run.
	Blocks int
	// Loopback gives every rectangle of a column group its own sender
	// (RectGroups): it reads the pages and multicasts each chunk once, to
	// its whole rectangle itself included (the _loopback_src calls, as
	// tt-metal's in0 sender of the 2D multicast matmul), instead of one
	// sender multicasting it once per rectangle of its group: its NoC port
	// then sends each chunk once, for DRAM reads of the pages once per
	// rectangle.
	Loopback bool
}

// MaxGroupRects is the number of multicast slots of a Multicast kernel.
const MaxGroupRects = 3

// ColumnGroup is one sender and the rectangles it multicasts to: the
// program's cores in one run of NoC-contiguous columns.
type ColumnGroup struct {
	Sender  kir.Core
	Members []kir.Core // the group's cores in row-major order, Sender first
	Rects   []Rect     // Members[1:] exactly, at most MaxGroupRects
}

// ColumnGroups splits cores (the first n in row-major order) into column
// groups, each with its own sender (its first core) and the rectangles of
// its other cores, so no multicast spans a NoC column gap. Every core is
// in exactly one group; groups are in column order.
func ColumnGroups(t *target.Target, cores []kir.Core) ([]ColumnGroup, error) {
	var groups []ColumnGroup
	index := map[int]int{} // NoC x - x, the same along a run of NoC-contiguous columns -> group
	for _, c := range cores {
		nx, _, err := t.WorkerNoC(c.X, c.Y)
		if err != nil {
			return nil, err
		}
		i, ok := index[nx-c.X]
		if !ok {
			i, index[nx-c.X] = len(groups), len(groups)
			groups = append(groups, ColumnGroup{Sender: c})
		}
		groups[i].Members = append(groups[i].Members, c)
	}
	for i := range groups {
		g := &groups[i]
		var err error
		if g.Rects, err = FollowerRects(t, g.Members[1:]); err != nil {
			return nil, err
		}
		if len(g.Rects) > MaxGroupRects {
			return nil, fmt.Errorf("rule mcast-rect: the column group of %v needs %d multicast rectangles, at most %d", g.Sender, len(g.Rects), MaxGroupRects)
		}
	}
	return groups, nil
}

// BlockColumnGroups is ColumnGroups of each of blocks runs of equal
// length of cores (the first n in row-major order; blocks <= 1: one run),
// in order: no multicast spans two runs.
func BlockColumnGroups(t *target.Target, cores []kir.Core, blocks int) ([]ColumnGroup, error) {
	blocks = max(1, blocks)
	if len(cores)%blocks != 0 {
		return nil, fmt.Errorf("rule mcast-blocks: %d cores do not split into %d runs of equal length", len(cores), blocks)
	}
	n := len(cores) / blocks
	var groups []ColumnGroup
	for b := range blocks {
		gs, err := ColumnGroups(t, cores[b*n:(b+1)*n])
		if err != nil {
			return nil, err
		}
		groups = append(groups, gs...)
	}
	return groups, nil
}

// RectGroups splits every column group of groups into one group per
// rectangle covering its cores (FollowerRects of all its members): each
// with its first core as Sender, its cores as Members in row-major order
// and Rects that one rectangle, the sender included (a loopback
// multicast), or none when the rectangle is the sender alone. Every core
// is in exactly one group.
func RectGroups(t *target.Target, groups []ColumnGroup) ([]ColumnGroup, error) {
	var out []ColumnGroup
	for _, g := range groups {
		rects, err := FollowerRects(t, g.Members)
		if err != nil {
			return nil, err
		}
		for _, r := range rects {
			ng := ColumnGroup{}
			for _, c := range g.Members {
				if c.X >= r.X0 && c.X <= r.X1 && c.Y >= r.Y0 && c.Y <= r.Y1 {
					ng.Members = append(ng.Members, c)
				}
			}
			ng.Sender = ng.Members[0]
			if r.Cores() > 1 {
				ng.Rects = []Rect{r}
			}
			out = append(out, ng)
		}
	}
	return out, nil
}

// Emit adds the two semaphores to p on rs and emits the multicast into
// kernel k on cores (the first n in row-major order; rs their ranges), as
// the type's doc describes. It returns, per core, the runtime-arg values k
// must get first: the ones Emit declares (sender flag, sender NoC x and y,
// the group's receivers, then per slot its corners and destinations).
// On return every core has pushed Pages pages of CB holding the sender's
// pages.
func (m Multicast) Emit(p *kir.Program, t *target.Target, k *kir.Kernel, cores []kir.Core, rs []ir.CoreRange) (map[kir.Core][]kir.ArgValue, error) {
	r, vals, err := m.Start(p, t, k, cores, rs)
	if err != nil {
		return nil, err
	}
	b := k.Builder()
	r.Round(b, nil)
	r.Finish(b)
	return vals, nil
}

// Rounds is a Multicast declared in a kernel that may run it for several
// rounds (Round), each moving the next Pages pages (a prefill matmul's
// activation tile rows: round r's page i is page r*Pages+i of what Read
// reads) into the next Pages pages of CB. Per round every core reserves
// the round's pages, a receiver signals ready after reserving (SemReady
// counts receivers per round: the sender of round r waits until it holds
// receivers*(r+1)), and SemValid keeps counting chunks across rounds
// (round r's chunk c is valid once it reaches r*chunks+c+1). The CB may
// hold one round's pages or more (a ring): every core pushes and its
// consumer pops the same pages in the same order, so the write pointer
// after the reserve is the same L1 address on every core. Deadlock-free
// as Multicast, round by round: a receiver's ready for round r+1 comes
// only after it has round r's pages, so the sender never waits for a
// round its receivers cannot reserve.
type Rounds struct {
	m                           Multicast
	chunk                       int
	isSender, sx, sy, receivers kir.ArgRef
	slots                       []Slot
	ready, valid                kir.Var
}

// Start adds the two semaphores to p on rs, declares the multicast's
// runtime args in k and emits its semaphore addresses; it returns the
// rounds to emit (Round, then Finish) and, per core, the runtime-arg
// values k must get first (as Emit).
func (m Multicast) Start(p *kir.Program, t *target.Target, k *kir.Kernel, cores []kir.Core, rs []ir.CoreRange) (*Rounds, map[kir.Core][]kir.ArgValue, error) {
	groups, err := BlockColumnGroups(t, cores, m.Blocks)
	if err != nil {
		return nil, nil, err
	}
	slots := MaxGroupRects
	if m.Loopback {
		if groups, err = RectGroups(t, groups); err != nil {
			return nil, nil, err
		}
		slots = 1
	}
	p.AddSemaphore(kir.Semaphore{ID: m.SemReady, Cores: rs})
	p.AddSemaphore(kir.Semaphore{ID: m.SemValid, Cores: rs})
	r := &Rounds{m: m, chunk: max(1, t.MaxNoCPacket/m.PageSize)}
	r.isSender = k.RuntimeArg(m.Name + "_sender")
	r.sx, r.sy = k.RuntimeArg(m.Name+"_sender_x"), k.RuntimeArg(m.Name+"_sender_y")
	r.receivers = k.RuntimeArg(m.Name + "_receivers")
	r.slots = DeclareSlots(slots, "mcast", "dests", k.RuntimeArg)
	vals := map[kir.Core][]kir.ArgValue{}
	for _, g := range groups {
		for _, c := range g.Members {
			flag, rects := uint32(0), []Rect(nil)
			if c == g.Sender {
				flag, rects = 1, g.Rects
			}
			v := []kir.ArgValue{kir.U32(flag), kir.NoCX(g.Sender), kir.NoCY(g.Sender), kir.U32(uint32(len(g.Members) - 1))}
			vals[c] = append(v, SlotValues(rects, slots, k.NoC)...)
		}
	}
	b := k.Builder()
	r.ready = b.Let("ready", kir.GetSemaphore{ID: kir.Ci(m.SemReady)})
	r.valid = b.Let("valid", kir.GetSemaphore{ID: kir.Ci(m.SemValid)})
	return r, vals, nil
}

// Round emits round round (an expression of the kernel; nil: the only
// round, Emit's form) into b: the type's protocol for the round's Pages
// pages, each core pushing each chunk's pages as soon as it has them.
func (r *Rounds) Round(b *kir.Builder, round kir.Expr) {
	m, chunk := r.m, r.chunk
	ps, kt := m.PageSize, m.Pages
	chunks := (kt + chunk - 1) / chunk
	// page i of the round, the readiness the sender waits for and the
	// valid count of chunk c
	page, ready, valid := func(i kir.Expr) kir.Expr { return i }, kir.Expr(r.receivers), func(c kir.Expr) kir.Expr { return c }
	if round != nil {
		page = func(i kir.Expr) kir.Expr { return kir.Add(kir.Mul(round, kir.Ci(kt)), i) }
		ready = kir.Mul(r.receivers, kir.Add(round, kir.C(1)))
		valid = func(c kir.Expr) kir.Expr { return kir.Add(kir.Mul(round, kir.Ci(chunks)), c) }
	}
	b.Comment(fmt.Sprintf("%s: read once per column group by its sender, multicast to the group in chunks of %d pages", m.What, chunk))
	b.CBReserveBack(m.CB, kir.Ci(kt))
	l1 := b.Let(m.Name+"_l1", kir.GetWritePtr{CB: m.CB})
	b.IfElse(kir.Eq(r.isSender, kir.C(0)), func() {
		b.NoCSemaphoreInc(kir.NoCAddr{X: r.sx, Y: r.sy, Addr: r.ready}, kir.C(1))
		b.NoCAsyncAtomicBarrier()
	}, func() {
		// Every page's read in flight at once, one barrier (the type's doc).
		b.For("i", kir.C(0), kir.Ci(kt), func(i kir.Var) {
			m.Read(b, page(i), kir.Add(l1, kir.Mul(i, kir.Ci(ps))))
		})
		b.NoCAsyncReadBarrier()
	})
	b.ForStep("p0", kir.C(0), kir.Ci(kt), kir.Ci(chunk), func(p0 kir.Var) {
		n := blocks.BlockLen(b, "n", kir.Ci(kt), p0, chunk)
		at := b.Let("at", kir.Add(l1, kir.Mul(p0, kir.Ci(ps))))
		b.IfElse(kir.Ne(r.isSender, kir.C(0)), func() {
			b.If(kir.Eq(p0, kir.C(0)), func() {
				if round == nil {
					b.NoCSemaphoreWait(r.ready, ready)
				} else {
					b.NoCSemaphoreWaitMin(r.ready, ready)
				}
			})
			EachSlot(b, r.slots, func(s Slot) {
				if m.Loopback {
					b.NoCAsyncWriteMulticastLoopbackSrc(at, s.Addr(at), kir.Mul(n, kir.Ci(ps)), s.Cores)
				} else {
					b.NoCAsyncWriteMulticast(at, s.Addr(at), kir.Mul(n, kir.Ci(ps)), s.Cores)
				}
			})
			b.NoCSemaphoreSet(r.valid, valid(kir.Add(kir.Div(p0, kir.Ci(chunk)), kir.C(1))))
			EachSlot(b, r.slots, func(s Slot) {
				if m.Loopback {
					b.NoCSemaphoreSetMulticastLoopbackSrc(r.valid, s.Addr(r.valid), s.Cores)
				} else {
					b.NoCSemaphoreSetMulticast(r.valid, s.Addr(r.valid), s.Cores)
				}
			})
			// The valid word must leave before it changes for the next chunk.
			b.NoCAsyncWritesFlushed()
		}, func() {
			b.NoCSemaphoreWaitMin(r.valid, valid(kir.Add(kir.Div(p0, kir.Ci(chunk)), kir.C(1))))
		})
		b.CBPushBack(m.CB, n)
	})
}

// Finish emits the sender's closing noc_async_write_barrier (every
// multicast acknowledged), after the last round.
func (r *Rounds) Finish(b *kir.Builder) {
	b.If(kir.Ne(r.isSender, kir.C(0)), func() { b.NoCAsyncWriteBarrier() })
}
