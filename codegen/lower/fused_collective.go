package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Fused collective family (passes/fuse_collective.go):
//
//	all_reduce_add(x, residual)            h = r(residual + r(s))
//	all_reduce_add_rmsnorm(x, residual, w) h as above, normed = r(rmsnorm(h, w))
//
// s is the element-wise sum of x over the devices of the mesh row and r
// rounds to residual's dtype (x, residual and the results share it). One
// program runs on every card: the ring all-reduce of collective.go, then
// a tail on worker cores that the ring tells when its result is in place.
//
//   - Two devices: every card reduces the whole tensor in one step, so the
//     ring's adders fold the residual in (cclOp.residual): they pack
//     r(x_local + x_received) to a scratch CB, add the residual tile and
//     write h straight to DRAM. all_reduce_add has no tail; with the norm
//     the tail is the RMSNorm pipeline of norm.go reading h.
//   - More devices: the ring leaves r(s) in h's buffer (every card holds
//     the whole sum after the all-gather steps) and the tail computes
//     h = r(residual + r(s)) in place, tile by tile, and with the norm
//     normed from the h tiles it keeps in L1 (the h tile is packed twice:
//     to the writer and to the norm's resident row).
//   - One device: no ring; the tail reads x as s.
//
// # Rounding points
//
// They are the Doc lines': r(s) is a pack to the dtype (the ring's adds;
// for two devices one rounding of the exact sum, for more every hop
// rounds the partial as the plain all_reduce does), the residual add is
// an exact fp32 FPU sum of the unpacked tiles packed once to the dtype,
// and the norm reads the rounded h. So for bf16 over one or two devices h
// equals the reference bit for bit; normed differs from the float64
// reference only by the norm pipeline's fp32 arithmetic (norm.go).
//
// # Synchronisation
//
// Every ring kernel that writes h's buffer or reads it back (adders;
// with gather steps also senders and receivers) increments a semaphore on
// the first tail core when it is done (cclOp.notify). That leader's
// reader waits for all of them, increments the semaphore of every other
// tail core, and only then does any tail reader touch h's buffer: no tail
// write can overtake a gathered chunk a sender still forwards.
//
// Over two devices with the norm, the adders instead push every h tile's
// live rows into the h CB of the tail core that owns it and count it in
// that core's semaphore (multicore.Push): no notification, no
// re-read of h.
//
// Tail cores are the worker cores after the ring's adder cores. Without
// the norm the tail splits tiles over cores (planEltwise), with it tile
// rows (one row per core while cores last, as norm.go).

// cclSemTail is the tail cores' "ring done" semaphore.
const cclSemTail = 0

func lowerFusedCollective(op *ir.Op, ctx *Context) (*kir.Program, error) {
	t := ctx.Target
	x, res, h := op.Operands[0], op.Operands[1], op.Results[0]
	if err := requireTiles(opValues(op)...); err != nil {
		return nil, err
	}
	dt := x.Type.DType
	if dt != ir.BF16 && dt != ir.FP32 {
		return nil, fmt.Errorf("rule ccl-dtype: collectives move bf16 or fp32 tiles; x is %s", dt)
	}
	for _, v := range append([]*ir.Value{res}, op.Results...) { // the weight may have any tile dtype
		if v.Type.DType != dt || !v.Type.Shape.Equal(x.Type.Shape) {
			return nil, fmt.Errorf("rule fused-ccl-types: x, residual and the results must share x's shape %s and dtype %s; %s is %s %s", x.Type.Shape, dt, v, v.Type.Shape, v.Type.DType)
		}
	}
	n, ok := op.Attrs["devices"].(int)
	if !ok || n < 1 {
		return nil, fmt.Errorf("rule attr: %s needs an int attribute \"devices\" >= 1", op.Name())
	}
	tl := &cclTail{accessBinder: accessBinder{ctx: ctx}, name: op.Name(), dt: dt, s: x, res: res, h: h}
	if op.Kind == ir.OpAllReduceAddRMSNorm {
		eps, ok1 := op.Attrs["eps"].(float64)
		offset, ok2 := op.Attrs["offset"].(float64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
		}
		tl.w, tl.normed, tl.eps, tl.offset = op.Operands[2], op.Results[1], eps, offset
		if err := tl.checkNorm(); err != nil {
			return nil, err
		}
	}
	p, err := newProgram(op, ctx)
	tl.fail(err)
	var ring *cclOp
	used := 0 // worker cores the ring's adders take
	if n > 1 {
		for _, v := range []*ir.Value{x, res, h} {
			if v.Type.Mem.Kind != ir.DRAMInterleaved {
				return nil, fmt.Errorf("rule ccl-placement: the ring reads and writes DRAM-interleaved tensors; %s is %s", v, v.Type.Mem)
			}
		}
		if hb := ctx.BufferName(h); hb == ctx.BufferName(x) || hb == ctx.BufferName(res) {
			return nil, fmt.Errorf("rule fused-ccl-alias: h is written into buffer %q, which also holds x or the residual; the ring writes partial results into h's buffer while other cores still read x and the residual", hb)
		}
		rctx := ctx
		if tl.w != nil && ctx.Ring.WorkersPerLink == 0 {
			rctx = tl.jointRing(x, n, ctx)
		}
		if ring, err = newAllReduce(x, h, res, n, rctx); err != nil {
			return nil, err
		}
		if ring.plan.ReduceSteps > 0 {
			used = ring.plan.Links * ring.plan.WorkersPerLink
		}
		tl.s = h // the ring leaves r(s) (or, folded, h) in h's buffer
		if ring.residual != nil {
			tl.res = nil // the adders already added it
		}
	}
	if tl.res != nil || tl.w != nil {
		if err := tl.plan(t, used); err != nil {
			return nil, err
		}
		switch {
		case ring != nil && tl.ns != nil && ring.pushable(ctx):
			// The adders push h into the tail cores' L1 (multicore.Push).
			ns := tl.ns
			if ring.push, err = multicore.NewPush(h.Type.Shape.Tiles(), ns.cores, func(i int) (int, int) {
				page, _, n := ns.chunk(i)
				return page, n
			}); err != nil {
				return nil, fmt.Errorf("%s: %w", op.Name(), err)
			}
			tl.pushed, _ = firstCores(t, used)
		case ring != nil && tl.ns == nil && tl.w != nil && tl.res == nil && !ring.batchedAdders(ctx) &&
			streamRows(t, ring, tl.wt, used, 1, 0) != nil:
			// The adders count each row of h on its tail core, which norms
			// it as soon as it is in (fused_collective_stream.go); a
			// cached-weight tail shares each row among a group of cores.
			ring.rows = streamRows(t, ring, tl.wt, used, 1, 0)
			tl.stream, tl.linkTiles = ring.rows, ring.plan.LinkTiles
			if tl.cachedWeight() {
				if rs := groupedRows(t, ring, tl.wt, used); rs != nil {
					ring.rows, tl.stream = rs, rs
				}
				if n := tl.keptRows(); n > 0 {
					tl.stream.kept = n
					tl.stream.adders, _ = firstCores(t, used)
				}
			}
			tl.cores, tl.ranges = blocks.CoresFrom(t, used, ring.rows.coresPerLink()*ring.plan.Links)
			tl.split = Split{Items: tl.h.Type.Shape.Tiles() / tl.wt, Cores: len(tl.cores), PerCore: 1}
		case ring != nil:
			ring.notify, ring.notifySem = &tl.cores[0], cclSemTail
			tl.wait = ring.notifications()
		}
	}
	if ring != nil {
		tl.fail(ring.build(p, ctx))
	}
	if tl.split.Cores > 0 {
		tl.build(p)
	}
	return tl.done(p)
}

// cclTail is the worker-core part of a fused collective: h = r(res + s)
// (res nil: h is already in place) and, with a weight, normed =
// rmsnorm(h, w). It keeps the first error while it is built (accessBinder).
type cclTail struct {
	accessBinder
	name string // the op's, for errors
	dt   ir.DType
	// s is the value whose buffer holds r(s) (x over one device, else h),
	// res the residual (nil when the ring folded it in).
	s, res, h *ir.Value
	// w and normed are the norm's weight and result (nil: no norm).
	w, normed   *ir.Value
	eps, offset float64
	// wait is the number of ring notifications the leader waits for (0:
	// no ring, or the ring pushes).
	wait int
	// pushed, when set, lists the ring's adder cores, which push h into
	// the tail's h CB (multicore.Push): each tail core waits for its
	// own tiles instead of reading h's buffer.
	pushed []kir.Core
	// stream, when set, is the ring's row stream: tail core i norms rows
	// stream.tailRange(i, linkTiles), each once the adders counted it.
	stream    *rowSignal
	linkTiles int
	// split divides tiles (no norm) or tile rows (norm) over cores; ns,
	// when set, is the norm's split-row plan instead (tl.buildSplit).
	split  Split
	ns     *normSplit
	wt     int // tiles per row (norm)
	cores  []kir.Core
	ranges []ir.CoreRange
}

// checkNorm checks the norm's hidden size and weight.
func (tl *cclTail) checkNorm() error {
	hid := tl.h.Type.Shape.Cols2D()
	if hid%ir.TileSize != 0 {
		return fmt.Errorf("rule rmsnorm-hidden: the last dim %d of h must be a multiple of %d (tile padding must not enter the mean)", hid, ir.TileSize)
	}
	if tl.w.Type.Shape.Numel() != hid || tl.w.Type.Shape.Rows2D() != 1 {
		return fmt.Errorf("rule norm-weight: weight %s must be a row vector of the %d elements of h's last dim", tl.w.Type.Shape, hid)
	}
	tl.wt = hid / ir.TileSize
	return nil
}

// jointRing returns ctx with the ring's adders per link fixed to the count
// that minimises the ring's estimate plus its norm tail's on the worker
// cores the adders leave (PlanRing's and PlanNormSplit's cycles; the tail
// starts when the ring's sums arrive): more adders shorten the ring's adds
// but take cores a split-row norm would use. With more rows than the
// cores left (a streaming ring whose tail norms whole rows as they come
// in), the count that minimises the larger of the ring's estimate and the
// tail's rows per core, plus the last row's norm after the ring
// (streamNormTileCycles a tile). ctx itself when the ring plan
// fails (newAllReduce then reports it) or the tail cannot split.
func (tl *cclTail) jointRing(x *ir.Value, n int, ctx *Context) *Context {
	t := ctx.Target
	probe, err := newAllReduce(x, tl.h, tl.res, n, ctx)
	if err != nil || probe.plan.ReduceSteps == 0 {
		return ctx
	}
	tile := normTileCycles
	if probe.residual == nil && tl.res != nil {
		tile += EltwiseTileCycles + 2*UnpackTileCycles
	}
	rows, best, bestM := tl.h.Type.Shape.Tiles()/tl.wt, -1, 0
	type streamCost struct{ m, cost int }
	var streamed []streamCost
	for m := 1; m <= probe.plan.WorkersPerLink; m++ {
		c := *ctx
		c.Ring.WorkersPerLink = m
		r, err := newAllReduce(x, tl.h, tl.res, n, &c)
		if err != nil {
			return ctx
		}
		avail := t.NumWorkers() - r.plan.Links*r.plan.WorkersPerLink
		if avail < rows {
			if r.plan.Streaming() && avail > 0 {
				row := tl.wt * streamNormTileCycles
				streamed = append(streamed, streamCost{m, max(r.plan.Cost, (rows+avail-1)/avail*row) + row})
			}
			continue
		}
		s := PlanNormSplit(tl.wt, avail/rows, tile)
		if cost := r.plan.Cost + s.Cost; best < 0 || cost < best {
			best, bestM = cost, m
		}
	}
	if bestM == 0 {
		// More rows than cores: a streaming ring's tail norms whole rows
		// under it (streamRows), so the slower of the two bounds it.
		for _, sc := range streamed {
			if best < 0 || sc.cost < best {
				best, bestM = sc.cost, sc.m
			}
		}
	}
	if bestM == 0 {
		return ctx
	}
	c := *ctx
	c.Ring.WorkersPerLink = bestM
	return &c
}

// streamNormTileCycles is jointRing's estimate of a row-streamed norm
// tail's compute per tile: two passes over the row (the sum of squares,
// then the scaling by its rsqrt and the weight), about 1,460 cycles a
// tile as the timing model predicts the tail of a 4,096-token prefill's
// all_reduce_add_rmsnorm (1.08 us a tile), twice normTileCycles.
const streamNormTileCycles = 2 * normTileCycles

// plan splits the tail's work over the worker cores after the first used
// ones.
func (tl *cclTail) plan(t *target.Target, used int) error {
	avail := t.NumWorkers() - used
	if avail < 1 {
		return fmt.Errorf("rule fused-ccl-cores: the ring's %d adder cores leave no worker core for the residual add and norm", used)
	}
	tiles := tl.h.Type.Shape.Tiles()
	if tl.w == nil {
		tl.split = planEltwise(tiles, avail, 3*tl.dt.TileBytes())
	} else {
		tile := normTileCycles
		if tl.res != nil {
			tile += EltwiseTileCycles + 2*UnpackTileCycles
		}
		if tl.ns = planNormSplit(t, tiles/tl.wt, tl.wt, used, avail, tile); tl.ns != nil {
			tl.ns.h, tl.ns.eps, tl.ns.offset = tl.wt*ir.TileSize, tl.eps, tl.offset
			tl.ns.live = blocks.LiveRows(tl.s.Type.Shape)
			tl.split = Split{Items: len(tl.ns.cores), Cores: len(tl.ns.cores), PerCore: 1}
			tl.cores, tl.ranges = tl.ns.cores, tl.ns.ranges
			return nil
		}
		per := 4 * tl.wt * EltwiseTileCycles
		if tl.res != nil {
			per += tl.wt * EltwiseTileCycles
		}
		tl.split = PlanSplit(tiles/tl.wt, avail, per, 0, 0)
	}
	tl.cores, tl.ranges = blocks.CoresFrom(t, used, tl.split.Cores)
	return nil
}

// tailCBs are the tail's CBs (-1 when unused).
type tailCBs struct {
	s, res, hOut int
	norm         normCBs
	// partial is the cached-weight tail's running sum of squares (-1:
	// not that tail; fused_collective_cached.go).
	partial int
}

// build adds the tail's CBs, semaphores and kernels to p (on tl.ns's
// split-row plan: buildSplit's).
func (tl *cclTail) build(p *kir.Program) {
	c := tl.addCBs(p)
	if tl.wait > 0 || tl.pushed != nil || tl.stream != nil {
		p.AddSemaphore(kir.Semaphore{ID: cclSemTail, Cores: tl.ranges})
	}
	if tl.stream != nil && tl.stream.kept > 0 {
		p.AddSemaphore(kir.Semaphore{ID: cclSemPushAddr, Cores: tl.ranges})
	}
	// The tail's reader, compute (fp32 DEST with the norm or for fp32) and
	// writer.
	rd := p.AddKernel(&kir.Kernel{Name: "tail_reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: tl.ranges})
	cp := p.AddKernel(&kir.Kernel{Name: "tail_compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: tl.ranges,
		Compute: kir.ComputeConfig{MathFidelity: tl.ctx.Fidelity, FP32DestAccEn: tl.w != nil || tl.dt != ir.BF16}})
	wr := p.AddKernel(&kir.Kernel{Name: "tail_writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: tl.ranges})
	if tl.ns != nil {
		tl.buildSplit(p, c, rd, cp, wr)
		return
	}
	tl.reader(rd, c)
	tl.compute(p, cp, c)
	tl.writer(wr, c)
	for i, core := range tl.cores {
		if tl.stream != nil {
			s, n, stride := tl.stream.tailRange(i, tl.linkTiles)
			vals := []kir.ArgValue{kir.U32(uint32(s)), kir.U32(uint32(n)), kir.U32(uint32(stride))}
			if tl.stream.kept > 0 {
				// leader (the first core publishes the h CB), kept_rows (those of its rows the adders write into it)
				rd.SetRuntimeArgs(core, append(vals, kir.U32(uint32(max(0, 1-i))), kir.U32(uint32(min(n, tl.stream.kept))))...)
			} else {
				rd.SetRuntimeArgs(core, vals...)
			}
			if c.partial >= 0 {
				c0, cn := tl.stream.colRange(i)
				cols := []kir.ArgValue{kir.U32(uint32(c0)), kir.U32(uint32(cn))}
				cp.SetRuntimeArgs(core, append([]kir.ArgValue{kir.U32(uint32(n))}, cols...)...)
				wr.SetRuntimeArgs(core, append(vals, cols...)...)
				continue
			}
			cp.SetRuntimeArgs(core, kir.U32(uint32(n)))
			wr.SetRuntimeArgs(core, vals...)
			continue
		}
		s, n := tl.split.Range(i)
		vals := append([]kir.ArgValue{kir.U32(uint32(s)), kir.U32(uint32(n))}, tl.ringArgs(i)...)
		rd.SetRuntimeArgs(core, vals...)
		cp.SetRuntimeArgs(core, kir.U32(uint32(n)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
}

// addCBs adds the tail's CBs (splitCBs on a split-row plan) and keeps the
// plan's error.
func (tl *cclTail) addCBs(p *kir.Program) tailCBs {
	t := tl.ctx.Target
	cbs := blocks.NewCBPlan(p, t, tl.ranges)
	if tl.ns != nil {
		return tl.splitCBs(cbs)
	}
	c := tailCBs{s: -1, res: -1, hOut: -1, partial: -1, norm: normCBs{x: -1, scaler: -1, w: -1, wo: -1, out: -1, sq: -1, rs: -1, xn: -1}}
	what := fmt.Sprintf("the residual add of %d tiles", tl.h.Type.Shape.Tiles())
	switch {
	case tl.cachedWeight():
		what = fmt.Sprintf("the norm over H = %d keeps %d h tiles and the weight per core", tl.wt*ir.TileSize, tl.wt)
		c.partial = tl.cachedCBs(cbs, &c)
	case tl.w == nil:
		c.s = cbs.Input("reduced", tl.dt, 2)
		c.res = cbs.Input("residual", tl.dt, 2)
		c.hOut = cbs.Output("h", tl.dt, 2)
	default:
		what = fmt.Sprintf("the norm over H = %d keeps %d h and h^2 tiles per core", tl.wt*ir.TileSize, tl.wt)
		n := &c.norm
		blk := largestDivisor(tl.wt, 16) // tiles read per barrier
		if tl.res != nil {
			c.s = cbs.Input("reduced", tl.dt, 2*blk)
			c.res = cbs.Input("residual", tl.dt, 2*blk)
			n.x = cbs.Scratch("h_row", tl.dt, tl.wt)
		} else {
			n.x = cbs.Input("h_row", tl.dt, tl.wt)
		}
		n.scaler = cbs.Input("scaler", ir.BF16, 1)
		n.w = cbs.Input("weight", tl.w.Type.DType, 2*blk)
		if tl.res != nil {
			c.hOut = cbs.Output("h", tl.dt, 2)
		}
		n.out = cbs.Output("normed", tl.dt, 2)
		sq := ir.FP32
		if (tl.dt.TileBytes()+ir.FP32.TileBytes())*tl.wt > t.L1Budget()*3/4 {
			sq = ir.BF16
		}
		n.sq = cbs.Scratch("h_squared", sq, tl.wt)
		n.rs = cbs.Scratch("rsqrt_mean", ir.FP32, 1)
		n.xn = cbs.Scratch("h_normed", ir.FP32, 2)
		if tl.offset != 0 {
			n.wo = cbs.Scratch("weight_plus_offset", ir.FP32, 2)
		}
	}
	tl.fail(cbs.Err(fmt.Sprintf("%s after the ring", what)))
	return c
}

// addResidual emits one tile of h = residual + s (the FPU's exact sum of
// the unpacked tiles), packed to the writer's CB hOut and to the norm's
// resident row norm.x. Consumes a page of s and res, produces one of each.
func (c tailCBs) addResidual(k *blocks.Compute) {
	k.BinaryTileTo(kir.EltAdd, blocks.BcastNone, c.res, c.s, c.hOut, c.norm.x)
}

// ringFollowers declares the tail reader's common arguments naming the
// tail cores after the first (with a ring to wait for; else none).
func (tl *cclTail) ringFollowers(rd *kir.Kernel) (fx, fy []kir.ArgRef) {
	if tl.wait == 0 {
		return nil, nil
	}
	for j := 1; j < len(tl.cores); j++ {
		name := "follower" + strconv.Itoa(j)
		fx = append(fx, rd.CommonArg(name+"_x", kir.NoCX(tl.cores[j])))
		fy = append(fy, rd.CommonArg(name+"_y", kir.NoCY(tl.cores[j])))
	}
	return fx, fy
}

// ringWait emits the tail reader's wait for the ring (with a ring): the
// first tail core waits for the ring's notifications and then increments
// the semaphore of every other tail core (fx, fy from ringFollowers),
// which wait for that one increment. With several tail cores it declares
// the runtime arguments sem_target and leader (values from ringArgs).
func (tl *cclTail) ringWait(rd *kir.Kernel, fx, fy []kir.ArgRef) {
	if tl.wait == 0 {
		return
	}
	b := rd.Builder()
	b.Comment("Wait until the ring has left its result in h's buffer on this card.")
	sem := b.Let("ring_done_sem", kir.GetSemaphore{ID: kir.Ci(cclSemTail)})
	if len(tl.cores) == 1 {
		b.NoCSemaphoreWait(sem, kir.Ci(tl.wait))
		return
	}
	target, leader := rd.RuntimeArg("sem_target"), rd.RuntimeArg("leader")
	b.NoCSemaphoreWait(sem, target)
	b.If(kir.Ne(leader, kir.C(0)), func() {
		for j := range fx {
			b.NoCSemaphoreInc(kir.NoCAddr{X: fx[j], Y: fy[j], Addr: kir.GetSemaphore{ID: kir.Ci(cclSemTail)}}, kir.C(1))
		}
	})
}

// ringArgs are tail core i's values for ringWait's runtime arguments,
// or with a push the split reader's leader flag (1 on the first core).
func (tl *cclTail) ringArgs(i int) []kir.ArgValue {
	if tl.pushed != nil {
		return []kir.ArgValue{kir.U32(uint32(max(0, 1-i)))}
	}
	if tl.wait == 0 || len(tl.cores) == 1 {
		return nil
	}
	if i == 0 {
		return []kir.ArgValue{kir.U32(uint32(tl.wait)), kir.U32(1)}
	}
	return []kir.ArgValue{kir.U32(1), kir.U32(0)}
}

// reader emits the tail reader: wait for the ring, then per tile (no
// norm) the s and residual tiles, or per row the row's s and residual
// tiles (or h tiles) and the weight tiles.
func (tl *cclTail) reader(rd *kir.Kernel, c tailCBs) {
	kept := tl.stream != nil && tl.stream.kept > 0
	sAcc, rAcc, wAcc := tl.bind(rd, "s_addr", tl.s), tl.bind(rd, "residual_addr", tl.res), tl.bind(rd, "w_addr", tl.w)
	fx, fy := tl.ringFollowers(rd)
	start, count := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	row := tl.rowOf(rd, start)
	var adders []multicore.Slot
	var leader, keptN kir.ArgRef
	if kept {
		leader, keptN = rd.RuntimeArg("leader"), rd.RuntimeArg("kept_rows")
		var err error
		if adders, err = multicore.DeclarePublish(tl.ctx.Target, rd, "adders", tl.stream.adders); err != nil {
			tl.fail(fmt.Errorf("%s: %w", tl.name, err))
		}
	}
	b := rd.Builder()
	if kept {
		b.CBReserveBack(c.norm.x, kir.Mul(keptN, kir.Ci(tl.wt)))
		multicore.Publish(b, leader, cclSemPushAddr, c.norm.x, adders, "tell the ring's adders where this CB is: they write every tile of this core's rows into it")
	}
	if tl.w != nil {
		blocks.OnesColumnTile(b, c.norm.scaler)
	}
	tl.ringWait(rd, fx, fy)
	pair := func(page kir.Expr) {
		blocks.ReadPage(b, sAcc, c.s, page)
		blocks.ReadPage(b, rAcc, c.res, page)
	}
	if tl.w == nil {
		b.For("t", kir.C(0), count, func(i kir.Var) { pair(kir.Add(start, i)) })
		return
	}
	wt := kir.Ci(tl.wt)
	blk := largestDivisor(tl.wt, 16)
	if c.partial >= 0 {
		tl.cachedWeightReads(b, wAcc, c.norm.w)
	}
	if tl.stream != nil {
		b.Comment("Rows as the ring completes them: the adders of the row's link count it here.")
	}
	b.For("r", kir.C(0), count, func(r kir.Var) {
		if tl.stream != nil {
			b.NoCSemaphoreWaitMin(kir.GetSemaphore{ID: kir.Ci(cclSemTail)}, kir.Mul(kir.Add(r, kir.C(1)), kir.Ci(tl.stream.m)))
		}
		if kept {
			b.IfElse(kir.Lt(r, keptN), func() {
				b.Comment("the adders wrote this row into its slot of the CB (reserved above)")
				b.CBPushBack(c.norm.x, wt)
			}, func() {
				b.Comment("a row past the kept slots: from DRAM, once the compute has freed a slot, in blocks the compute squares as they land")
				tl.rowBlockReads(b, sAcc, c.norm.x, kir.Mul(row(r), wt))
			})
			return // the weight is kept too (kept rows imply cachedWeight)
		}
		first := b.Let("first", kir.Mul(row(r), wt))
		// Blocks of blk tiles in flight per barrier: s and residual
		// together, then the weight.
		if tl.res != nil {
			b.For("jb", kir.C(0), kir.Ci(tl.wt/blk), func(jb kir.Var) {
				f := b.Let("f", kir.Add(first, kir.Mul(jb, kir.Ci(blk))))
				b.CBReserveBack(c.s, kir.Ci(blk))
				b.CBReserveBack(c.res, kir.Ci(blk))
				ls, lr := b.Let("ls", kir.GetWritePtr{CB: c.s}), b.Let("lr", kir.GetWritePtr{CB: c.res})
				b.For("i", kir.C(0), kir.Ci(blk), func(i kir.Var) {
					pg := kir.Add(f, i)
					b.NoCAsyncRead(sAcc.PageAddr(pg), kir.Add(ls, kir.Mul(i, kir.Ci(sAcc.PageSize()))), kir.Ci(sAcc.PageSize()))
					b.NoCAsyncRead(rAcc.PageAddr(pg), kir.Add(lr, kir.Mul(i, kir.Ci(rAcc.PageSize()))), kir.Ci(rAcc.PageSize()))
				})
				b.NoCAsyncReadBarrier()
				b.CBPushBack(c.s, kir.Ci(blk))
				b.CBPushBack(c.res, kir.Ci(blk))
			})
		} else {
			blocks.ReadPagesBatch(b, sAcc, c.norm.x, first, wt)
		}
		if c.partial >= 0 {
			return // the weight is kept
		}
		b.For("wb", kir.C(0), kir.Ci(tl.wt/blk), func(wb kir.Var) {
			blocks.ReadPagesBatch(b, wAcc, c.norm.w, kir.Mul(wb, kir.Ci(blk)), kir.Ci(blk))
		})
	})
}

// compute emits the tail compute kernel.
func (tl *cclTail) compute(p *kir.Program, cp *kir.Kernel, c tailCBs) {
	count := cp.RuntimeArg("count")
	k := blocks.NewCompute(p, cp)
	if tl.w == nil {
		k.Startup(c.res, c.s, c.hOut)
		k.For("t", kir.C(0), count, func(kir.Var) {
			k.BinaryTile(kir.EltAdd, blocks.BcastNone, c.res, c.s, c.hOut, false, nil)
		})
		return
	}
	n := c.norm
	if tl.res != nil {
		k.Startup(c.res, c.s, c.hOut)
	} else {
		k.Startup(n.x, n.scaler, n.out)
	}
	wt := kir.Ci(tl.wt)
	k.B.CBWaitFront(n.scaler, kir.C(1))
	if c.partial >= 0 {
		tl.cachedCompute(k, n, c.partial, count, cp.RuntimeArg("col0"), cp.RuntimeArg("cols"))
		k.B.CBPopFront(n.scaler, kir.C(1))
		return
	}
	k.For("r", kir.C(0), count, func(kir.Var) {
		if tl.res != nil {
			k.B.Comment("h = residual + s, to the writer and to the resident row")
			k.For("j", kir.C(0), wt, func(kir.Var) { c.addResidual(k) })
		}
		n.row(k, wt, tl.wt*ir.TileSize, tl.eps, tl.offset)
	})
	k.B.CBPopFront(n.scaler, kir.C(1))
}

// writer emits the tail writer: h tiles (when the tail computes h) and
// normed tiles, row by row.
func (tl *cclTail) writer(wr *kir.Kernel, c tailCBs) {
	hAcc, nAcc, start, count := tl.writerArgs(wr, c)
	row := tl.rowOf(wr, start)
	b := wr.Builder()
	if tl.w == nil {
		blocks.WritePages(b, hAcc, c.hOut, start, count)
		return
	}
	wt := kir.Ci(tl.wt)
	if c.partial >= 0 {
		// A cached-weight tail writes its tiles col0 .. col0+cols-1 of each row.
		col0, cols := wr.RuntimeArg("col0"), wr.RuntimeArg("cols")
		sb := tl.scaleBlock()
		b.Comment(fmt.Sprintf("the compute's blocks of %d normed tiles, each under one barrier", sb))
		b.For("r", kir.C(0), count, func(r kir.Var) {
			first := b.Let("first", kir.Add(kir.Mul(row(r), wt), col0))
			b.ForStep("j", kir.C(0), cols, kir.Ci(sb), func(j kir.Var) {
				blocks.WritePagesBatch(b, nAcc, c.norm.out, kir.Ci(sb), func(i kir.Expr) kir.Expr { return kir.Add(kir.Add(first, j), i) })
			})
		})
		return
	}
	b.For("r", kir.C(0), count, func(r kir.Var) {
		first := b.Let("first", kir.Mul(row(r), wt))
		if hAcc != nil {
			blocks.WritePages(b, hAcc, c.hOut, first, wt)
		}
		blocks.WritePages(b, nAcc, c.norm.out, first, wt)
	})
}

// writerArgs declares the tail writer's args: the h buffer (when the tail
// computes h; else nil), the normed buffer (nil without a norm), start
// and count.
func (tl *cclTail) writerArgs(wr *kir.Kernel, c tailCBs) (hAcc, nAcc *blocks.Access, start, count kir.ArgRef) {
	if c.hOut >= 0 {
		hAcc = tl.bind(wr, "h_addr", tl.h)
	}
	return hAcc, tl.bind(wr, "normed_addr", tl.normed), wr.RuntimeArg("start"), wr.RuntimeArg("count")
}

// rowOf declares, with a row stream, kernel k's runtime arg stride (after
// start and count) and returns the core's r-th row: start + r*stride, or
// start + r without a stream.
func (tl *cclTail) rowOf(k *kir.Kernel, start kir.ArgRef) func(r kir.Var) kir.Expr {
	if tl.stream == nil {
		return func(r kir.Var) kir.Expr { return kir.Add(start, r) }
	}
	stride := k.RuntimeArg("stride")
	return func(r kir.Var) kir.Expr { return kir.Add(start, kir.Mul(r, stride)) }
}
