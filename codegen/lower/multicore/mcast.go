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

// Emit adds the two semaphores to p on rs and emits the multicast into
// kernel k on cores (the first n in row-major order; rs their ranges), as
// the type's doc describes. It returns, per core, the runtime-arg values k
// must get first: the ones Emit declares (sender flag, sender NoC x and y,
// the group's receivers, then per slot its corners and destinations).
// On return every core has pushed Pages pages of CB holding the sender's
// pages.
func (m Multicast) Emit(p *kir.Program, t *target.Target, k *kir.Kernel, cores []kir.Core, rs []ir.CoreRange) (map[kir.Core][]kir.ArgValue, error) {
	groups, err := ColumnGroups(t, cores)
	if err != nil {
		return nil, err
	}
	p.AddSemaphore(kir.Semaphore{ID: m.SemReady, Cores: rs})
	p.AddSemaphore(kir.Semaphore{ID: m.SemValid, Cores: rs})
	isSender := k.RuntimeArg(m.Name + "_sender")
	sx, sy := k.RuntimeArg(m.Name+"_sender_x"), k.RuntimeArg(m.Name+"_sender_y")
	receivers := k.RuntimeArg(m.Name + "_receivers")
	slots := DeclareSlots(MaxGroupRects, "mcast", "dests", k.RuntimeArg)
	vals := map[kir.Core][]kir.ArgValue{}
	for _, g := range groups {
		for _, c := range g.Members {
			flag, rects := uint32(0), []Rect(nil)
			if c == g.Sender {
				flag, rects = 1, g.Rects
			}
			v := []kir.ArgValue{kir.U32(flag), kir.NoCX(g.Sender), kir.NoCY(g.Sender), kir.U32(uint32(len(g.Members) - 1))}
			vals[c] = append(v, SlotValues(rects, MaxGroupRects, k.NoC)...)
		}
	}
	m.emit(k.Builder(), max(1, t.MaxNoCPacket/m.PageSize), isSender, sx, sy, receivers, slots)
	return vals, nil
}

// emit emits the kernel body of Emit, chunk pages per chunk.
func (m Multicast) emit(b *kir.Builder, chunk int, isSender, sx, sy, receivers kir.ArgRef, slots []Slot) {
	ready := b.Let("ready", kir.GetSemaphore{ID: kir.Ci(m.SemReady)})
	valid := b.Let("valid", kir.GetSemaphore{ID: kir.Ci(m.SemValid)})
	ps, kt := m.PageSize, m.Pages
	b.Comment(fmt.Sprintf("%s: read once per column group by its sender, multicast to the group in chunks of %d pages", m.What, chunk))
	b.CBReserveBack(m.CB, kir.Ci(kt))
	l1 := b.Let(m.Name+"_l1", kir.GetWritePtr{CB: m.CB})
	b.IfElse(kir.Eq(isSender, kir.C(0)), func() {
		b.NoCSemaphoreInc(kir.NoCAddr{X: sx, Y: sy, Addr: ready}, kir.C(1))
		b.NoCAsyncAtomicBarrier()
	}, func() {
		// Every page's read in flight at once, one barrier (the type's doc).
		b.For("i", kir.C(0), kir.Ci(kt), func(i kir.Var) {
			m.Read(b, i, kir.Add(l1, kir.Mul(i, kir.Ci(ps))))
		})
		b.NoCAsyncReadBarrier()
	})
	b.ForStep("p0", kir.C(0), kir.Ci(kt), kir.Ci(chunk), func(p0 kir.Var) {
		n := blocks.BlockLen(b, "n", kir.Ci(kt), p0, chunk)
		at := b.Let("at", kir.Add(l1, kir.Mul(p0, kir.Ci(ps))))
		b.IfElse(kir.Ne(isSender, kir.C(0)), func() {
			b.If(kir.Eq(p0, kir.C(0)), func() { b.NoCSemaphoreWait(ready, receivers) })
			EachSlot(b, slots, func(s Slot) { b.NoCAsyncWriteMulticast(at, s.Addr(at), kir.Mul(n, kir.Ci(ps)), s.Cores) })
			b.NoCSemaphoreSet(valid, kir.Add(kir.Div(p0, kir.Ci(chunk)), kir.C(1)))
			EachSlot(b, slots, func(s Slot) { b.NoCSemaphoreSetMulticast(valid, s.Addr(valid), s.Cores) })
			// The valid word must leave before it changes for the next chunk.
			b.NoCAsyncWritesFlushed()
		}, func() {
			b.NoCSemaphoreWaitMin(valid, kir.Add(kir.Div(p0, kir.Ci(chunk)), kir.C(1)))
		})
		b.CBPushBack(m.CB, n)
	})
	b.If(kir.Ne(isSender, kir.C(0)), func() { b.NoCAsyncWriteBarrier() })
}
