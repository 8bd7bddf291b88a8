package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Pushing the reduced tiles into the norm tail (all_reduce_add_rmsnorm on
// two devices): besides writing h to DRAM, every adder writes the live
// segments of each of its sum tiles straight into the h CB of the tail
// core that owns the tile (its page slot there), under the same write
// barrier, and then increments that core's semaphore cclSemTail once per
// tile. A tail core waits until the count equals its tile count and has
// its chunk of h without a DRAM round trip or a ring-done fan-out.
//
// The h CB has one L1 address on every tail core, but the adders cannot
// know it when they are compiled: the first tail core writes its
// get_write_ptr into its semaphore cclSemPushAddr and multicasts that
// word into the same semaphore of every adder, which waits for it (the
// address is never 0) before its first push.

// cclSemPushAddr is the semaphore, on the adders and on the tail cores,
// that carries the tail's h CB address.
const cclSemPushAddr = 3

// cclPush says where the adders push each sum tile: tile page p goes to
// page slot slot[p] of the h CB on tail core owner[p].
type cclPush struct {
	owner []kir.Core
	slot  []int
}

// pushable reports whether c's adders can push into a tail: a one-step
// all-reduce with a residual whose adders hold all their tiles (batched)
// in one packet per link.
func (c *cclOp) pushable(ctx *Context) bool {
	return c.residual != nil && c.batchedAdders(ctx) && c.plan.Packets() == 1
}

// pushArgs are the adder writer's runtime args for pushing: per lane tile
// j (j < adderTiles) the owner's NoC x, y and the byte offset of its slot.
type pushArgs struct {
	x, y, off []kir.ArgRef
}

// declarePush declares the push arguments of the adder writer wr.
func (k *cclKernels) declarePush(wr *kir.Kernel) pushArgs {
	var a pushArgs
	for j := 0; j < k.adderTiles; j++ {
		s := strconv.Itoa(j)
		a.x = append(a.x, wr.RuntimeArg("push"+s+"_x"))
		a.y = append(a.y, wr.RuntimeArg("push"+s+"_y"))
		a.off = append(a.off, wr.RuntimeArg("push"+s+"_offset"))
	}
	return a
}

// pushValues are the push argument values of the adder that handles
// tiles first+lane, first+lane+M, ... below first+count.
func (k *cclKernels) pushValues(first, count, lane int) []kir.ArgValue {
	var vals []kir.ArgValue
	m := k.plan.WorkersPerLink
	for j := 0; j < k.adderTiles; j++ {
		t := lane + j*m
		if t >= count {
			vals = append(vals, kir.U32(0), kir.U32(0), kir.U32(0))
			continue
		}
		pg := first + t
		o := k.push.owner[pg]
		vals = append(vals, kir.NoCX(o), kir.NoCY(o), kir.U32(uint32(k.push.slot[pg]*k.tb)))
	}
	return vals
}

// emitPushWrites writes the live segments of the n sum tiles at out0 to
// their owners' h CB at base (the address the tail published); the
// caller's write barrier covers them.
func (k *cclKernels) emitPushWrites(b *kir.Builder, a pushArgs, n kir.Expr, out0, base kir.Expr) {
	b.Comment("the live rows of every sum tile into its page of the owning tail core's h CB")
	for j := 0; j < k.adderTiles; j++ {
		b.If(kir.Lt(kir.Ci(j), n), func() {
			for _, sg := range k.segs {
				src := kir.Add(out0, kir.Ci(j*k.tb+sg.Off))
				dst := kir.NoCAddr{X: a.x[j], Y: a.y[j], Addr: kir.Add(kir.Add(base, a.off[j]), kir.Ci(sg.Off))}
				b.NoCAsyncWrite(src, dst, kir.Ci(sg.Size))
			}
		})
	}
}

// emitPushCounts counts each of the n pushed tiles in its owner's
// cclSemTail (after the write barrier).
func (k *cclKernels) emitPushCounts(b *kir.Builder, a pushArgs, n kir.Expr) {
	for j := 0; j < k.adderTiles; j++ {
		b.If(kir.Lt(kir.Ci(j), n), func() {
			b.NoCSemaphoreInc(kir.NoCAddr{X: a.x[j], Y: a.y[j], Addr: kir.GetSemaphore{ID: kir.Ci(cclSemTail)}}, kir.C(1))
		})
	}
}

// pushTargets builds the push map of a tail whose core i owns pages
// [page, page+count) of h (chunk(i)), over pages pages.
func pushTargets(pages int, cores []kir.Core, chunk func(i int) (page, count int)) (*cclPush, error) {
	p := &cclPush{owner: make([]kir.Core, pages), slot: make([]int, pages)}
	seen := make([]bool, pages)
	for i, c := range cores {
		first, n := chunk(i)
		for s := 0; s < n; s++ {
			pg := first + s
			if pg < 0 || pg >= pages || seen[pg] {
				return nil, fmt.Errorf("rule fused-ccl-push: tail core %d's page %d is outside h's %d pages or owned twice", i, pg, pages)
			}
			seen[pg] = true
			p.owner[pg], p.slot[pg] = c, s
		}
	}
	for pg, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("rule fused-ccl-push: no tail core owns page %d of h", pg)
		}
	}
	return p, nil
}

// publishArgs declares the tail reader's common args naming the adders'
// multicast rectangles (slots with cores == 0 are unused; only the first
// tail core uses them).
func publishArgs(t *target.Target, rd *kir.Kernel, adders []kir.Core) ([maxMcastRects][5]kir.ArgRef, error) {
	var r [maxMcastRects][5]kir.ArgRef
	rects, err := followerRects(t, adders)
	if err != nil {
		return r, err
	}
	for i := range r {
		vals := []kir.ArgValue{kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0), kir.U32(0)}
		if i < len(rects) {
			vals = rects[i].mcastArgs(rd.NoC)
		}
		for j, f := range []string{"x0", "y0", "x1", "y1", "cores"} {
			r[i][j] = rd.CommonArg("adders"+strconv.Itoa(i)+"_"+f, vals[j])
		}
	}
	return r, nil
}

// emitPublish makes the first tail core (leader != 0) publish the address
// of CB cb to every adder: into its own cclSemPushAddr, then multicast.
func emitPublish(b *kir.Builder, leader kir.Expr, cb int, rects [maxMcastRects][5]kir.ArgRef) {
	b.If(kir.Ne(leader, kir.C(0)), func() {
		b.Comment("tell the ring's adders where this CB is: they push the reduced tiles into it")
		sem := b.Let("push_addr_sem", kir.GetSemaphore{ID: kir.Ci(cclSemPushAddr)})
		b.L1Write32(sem, kir.GetWritePtr{CB: cb})
		for _, r := range rects {
			b.If(kir.Ne(r[4], kir.C(0)), func() {
				b.NoCSemaphoreSetMulticast(sem, kir.MulticastAddr{X0: r[0], Y0: r[1], X1: r[2], Y1: r[3], Addr: sem}, r[4])
			})
		}
		b.NoCAsyncWriteBarrier()
	})
}
