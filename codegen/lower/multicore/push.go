package multicore

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Push moves pages from the cores that produce them, the pushers, straight
// into a CB of the cores that consume them, the owners, without a DRAM
// round trip: page p goes to page slot Slot[p] of the CB on core Owner[p].
// The all_reduce_add_rmsnorm ring's adders push the reduced tiles into the
// norm tail this way.
//
// The CB has one L1 address on every owner, but the pushers cannot know it
// when they are built, so the owners publish it:
//
//   - the first owner writes the CB's get_write_ptr into its own semaphore
//     SemAddr and multicasts that word into SemAddr of every pusher
//     (noc_semaphore_set_multicast on the rectangles of FollowerRects of
//     the pushers, corners in its NoC's order; a write barrier after);
//   - a pusher waits until its SemAddr is not 0 (an L1 address never is)
//     and reads the address from it (AwaitAddress);
//   - a pusher writes the live segments of each page into its owner's
//     slot (Writes: non-posted noc_async_write, acknowledged at the
//     pusher's noc_async_write_barrier), then noc_semaphore_inc's the
//     owner's SemCount once per page (Counts, after the barrier: the
//     count never overtakes the data);
//   - an owner reserves its pages of the CB, waits until SemCount equals
//     its page count and pushes them. The CB must be fresh and written by
//     nobody else, so the pushed pages are its first pages whenever they
//     land.
//
// Deadlock-free: the owners wait only for pushes, the pushers only for
// the published address, which the first owner sends before it waits.
// Both semaphores start at 0; SemCount must exist on the pushers too
// (Counts).
type Push struct {
	Owner []kir.Core
	Slot  []int
}

// NewPush maps pages pages to the owners: owner i owns pages [page,
// page+count) of chunk(i), in slots 0.., each page exactly one owner's.
func NewPush(pages int, owners []kir.Core, chunk func(i int) (page, count int)) (*Push, error) {
	p := &Push{Owner: make([]kir.Core, pages), Slot: make([]int, pages)}
	seen := make([]bool, pages)
	for i, c := range owners {
		first, n := chunk(i)
		for s := 0; s < n; s++ {
			pg := first + s
			if pg < 0 || pg >= pages || seen[pg] {
				return nil, fmt.Errorf("rule push-map: owner %d's page %d is outside the %d pages or owned twice", i, pg, pages)
			}
			seen[pg] = true
			p.Owner[pg], p.Slot[pg] = c, s
		}
	}
	for pg, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("rule push-map: no owner has page %d", pg)
		}
	}
	return p, nil
}

// DeclarePublish declares, as common args of the owners' kernel k, the
// MaxRects multicast slots covering the pushers (named prefix<i>_x0, ...,
// prefix<i>_cores; slots with cores == 0 unused).
func DeclarePublish(t *target.Target, k *kir.Kernel, prefix string, pushers []kir.Core) ([]Slot, error) {
	rects, err := FollowerRects(t, pushers)
	if err != nil {
		return nil, err
	}
	vals := SlotValues(rects, MaxRects, k.NoC)
	return DeclareSlots(MaxRects, prefix, "cores", func(name string) kir.ArgRef {
		v := vals[0]
		vals = vals[1:]
		return k.CommonArg(name, v)
	}), nil
}

// Publish emits the publication of CB cb's address by the first owner
// (leader != 0): into its semaphore sem, multicast to the pushers' slots
// of DeclarePublish, then a write barrier. comment opens the branch.
func Publish(b *kir.Builder, leader kir.Expr, sem, cb int, slots []Slot, comment string) {
	b.If(kir.Ne(leader, kir.C(0)), func() {
		b.Comment(comment)
		addr := b.Let("push_addr_sem", kir.GetSemaphore{ID: kir.Ci(sem)})
		b.L1Write32(addr, kir.GetWritePtr{CB: cb})
		EachSlot(b, slots, func(s Slot) { b.NoCSemaphoreSetMulticast(addr, s.Addr(addr), s.Cores) })
		b.NoCAsyncWriteBarrier()
	})
}

// AwaitAddress emits a pusher's wait for the address the owners publish
// in semaphore sem and returns the variable holding it.
func AwaitAddress(b *kir.Builder, sem int) kir.Var {
	addr := b.Let("push_addr_sem", kir.GetSemaphore{ID: kir.Ci(sem)})
	b.NoCSemaphoreWaitMin(addr, kir.C(1))
	return b.Let("push_base", kir.L1Read32{Addr: addr})
}

// PushArgs are a pusher kernel's runtime args naming where each of its
// pages goes: per page j, the owner's NoC x, y and the byte offset of
// the page's slot in the owner's CB.
type PushArgs struct{ X, Y, Off []kir.ArgRef }

// DeclarePushArgs declares the args of n pages of pusher kernel k, named
// push<j>_x, push<j>_y, push<j>_offset.
func DeclarePushArgs(k *kir.Kernel, n int) PushArgs {
	var a PushArgs
	for j := 0; j < n; j++ {
		s := "push" + strconv.Itoa(j)
		a.X = append(a.X, k.RuntimeArg(s+"_x"))
		a.Y = append(a.Y, k.RuntimeArg(s+"_y"))
		a.Off = append(a.Off, k.RuntimeArg(s+"_offset"))
	}
	return a
}

// Values are the values of n pages of DeclarePushArgs for a pusher whose
// page j is page(j) (< 0: none, zeros), with pageSize bytes per CB page.
func (p *Push) Values(n, pageSize int, page func(j int) int) []kir.ArgValue {
	var vals []kir.ArgValue
	for j := 0; j < n; j++ {
		pg := page(j)
		if pg < 0 {
			vals = append(vals, kir.U32(0), kir.U32(0), kir.U32(0))
			continue
		}
		o := p.Owner[pg]
		vals = append(vals, kir.NoCX(o), kir.NoCY(o), kir.U32(uint32(p.Slot[pg]*pageSize)))
	}
	return vals
}

// Span is a byte range of a page.
type Span struct{ Off, Size int }

// Writes emits the writes of the first n (at most len(a.X)) of the
// pusher's pages, pageSize bytes apart from L1 address src, to their
// owners' slots at base (the published address): the spans of each page.
// The caller's write barrier covers them.
func (a PushArgs) Writes(b *kir.Builder, n, src, base kir.Expr, pageSize int, spans []Span) {
	for j := range a.X {
		b.If(kir.Lt(kir.Ci(j), n), func() {
			for _, sp := range spans {
				dst := kir.NoCAddr{X: a.X[j], Y: a.Y[j], Addr: kir.Add(kir.Add(base, a.Off[j]), kir.Ci(sp.Off))}
				b.NoCAsyncWrite(kir.Add(src, kir.Ci(j*pageSize+sp.Off)), dst, kir.Ci(sp.Size))
			}
		})
	}
}

// Counts emits, after the write barrier, one increment of the owner's
// semaphore sem per written page (the first n). The pusher must have a
// semaphore sem too: get_semaphore names the local address, the same on
// every core that has it.
func (a PushArgs) Counts(b *kir.Builder, n kir.Expr, sem int) {
	for j := range a.X {
		b.If(kir.Lt(kir.Ci(j), n), func() {
			b.NoCSemaphoreInc(kir.NoCAddr{X: a.X[j], Y: a.Y[j], Addr: kir.GetSemaphore{ID: kir.Ci(sem)}}, kir.C(1))
		})
	}
}

// WritesFrom is Writes for the pages first..first+n-1 of the pusher's
// list (a pusher that makes its pages in batches): page j of the list
// comes from src + (j-first)*pageSize.
func (a PushArgs) WritesFrom(b *kir.Builder, first, n, src, base kir.Expr, pageSize int, spans []Span) {
	for j := range a.X {
		b.If(kir.And(kir.Ge(kir.Ci(j), first), kir.Lt(kir.Ci(j), kir.Add(first, n))), func() {
			at := kir.Add(src, kir.Mul(kir.Sub(kir.Ci(j), first), kir.Ci(pageSize)))
			for _, sp := range spans {
				dst := kir.NoCAddr{X: a.X[j], Y: a.Y[j], Addr: kir.Add(kir.Add(base, a.Off[j]), kir.Ci(sp.Off))}
				b.NoCAsyncWrite(kir.Add(at, kir.Ci(sp.Off)), dst, kir.Ci(sp.Size))
			}
		})
	}
}

// CountsFrom is Counts for the pages first..first+n-1 of the list.
func (a PushArgs) CountsFrom(b *kir.Builder, first, n kir.Expr, sem int) {
	for j := range a.X {
		b.If(kir.And(kir.Ge(kir.Ci(j), first), kir.Lt(kir.Ci(j), kir.Add(first, n))), func() {
			b.NoCSemaphoreInc(kir.NoCAddr{X: a.X[j], Y: a.Y[j], Addr: kir.GetSemaphore{ID: kir.Ci(sem)}}, kir.C(1))
		})
	}
}
