package lower

import (
	"fmt"
	"math"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// sdpa_decode_gated as flash decoding: the program's cost follows the
// position, not the cache length, and its L1 does not depend on the cache
// length.
//
// A work item is (user b, kv head j): the G = H/Hkv query heads of the
// group, one tile row (decodeItem, groupTiles gather them). Each item gets
// a group of `group` consecutive cores (flashCost.group: a cost estimate
// at the longest context). At run time the n = pos/32 + 1 cache tiles up
// to the one holding pos are split over the group (flashSpan: per =
// max(ceil(n/group), isqrt(n * perCore/perTile)) tiles per core, the
// group's last cores first, so a short position uses only as many cores
// as pay off). The reader, compute and writer compute the split from pos
// (the compute kernel reads it with read_tile_value from a page the
// reader pushes, the writer reads pos itself), so one program serves every
// position: no rebuild and nothing the host recomputes per step.
//
// Each core streams its tiles in chunks of flashChunk tiles (the last one
// shorter) with an online softmax. Its state is the shift nm = -m (bf16,
// column 0: m is a running row maximum rounded to bf16, which only shifts
// the exponents, so any value near the maximum serves), the row sums l
// and the unnormalised output O (Dt tiles), both fp32. The first chunk
// sets
//
//	S_t = (mask_t + q K_t^T) * scale       fp32; mask_t is 0, or -inf past pos in pos's tile
//	m   = bf16(rowmax_t S_t)               reduce_tile MAX, packed negated to bf16
//	P_t = exp(S_t - m)                     add_tiles_bcast_cols of nm, exp_tile
//	l   = rowsum_t P_t                     reduce_tile SUM
//	O_d = sum_t P_t V_td                   matmul_tiles
//
// and every later chunk rescales what came before:
//
//	m'  = bf16(max(m, rowmax_t S_t))       max(a, b) = a + relu(b - a) on the SFPU
//	a   = exp(m - m')                      (0 - nm) + (0 + nm') by two column broadcasts, exp_tile
//	l   = l * a + rowsum_t P_t             the product and sum on the SFPU (fp32)
//	O_d = O_d * a + sum_t P_t V_td         the product on the SFPU, then matmul_tiles onto it
//
// The state CBs l, O and a are only ever copied (never an FPU operand),
// so they unpack to DEST at fp32 (kir.ChooseUnpackModes) and the
// rescaling rounds once per chunk in fp32, not to tf32.
//
// group == 1 (one core per item; several items per core when the grid has
// fewer cores than items) normalises on the core: out = O * tf32(1/l),
// rounded to q's dtype, times sigmoid(gate) rounded to gate's dtype
// (mul_tiles). group > 1 ends each core with its partial (O, m, l; a core
// without tiles sends none) and merges the partials of the cores that had
// tiles exactly on the group's leader (multicore.SplitCombine.MergeThen),
// which multiplies each merged tile, rounded to q's dtype, by
// sigmoid(gate) it computed first (it has the fewest tiles). The result
// tiles are written as the o_proj input rows (writeDecodeTiles).
//
// The rounding order differs from the single pass over the whole row the
// reference computes (sim/ref attendGatedFPU): the device's result agrees
// with it to within the rounding of the chunked order (the tests in
// flash_sdpa_test.go state the bound), not bit for bit.
//
// Reader: per item the q tile row, (leader) the gate tiles, then per
// chunk the K tiles of each cache tile (and the mask page of pos's tile),
// then per D tile one block of flashChunk V pages (the chunk's tiles, the
// rest of the block unused, so every block starts at the same ring page;
// the scores and exp blocks likewise), then (group 1) the gate tiles. K
// and V rows past pos in pos's tile are cleared (stale cache rows may
// hold anything, and 0 x NaN is NaN).

// flashChunk is the cache tiles a core streams per chunk (the scores and
// exp CBs hold one chunk, the V CB two).
const flashChunk = 8

// flashSDPA is a flash-decoding sdpa_decode_gated program under
// construction; the operands, dims and reader helpers are gatedSDPA's.
type flashSDPA struct {
	*gatedSDPA
	group int
	cost  flashCost
	sc    *multicore.SplitCombine // group > 1
	// CBs: reader -> compute
	zeroT, posC int
	// writer (group > 1): its pos page
	wpos int
	// compute state and intermediates
	pexp, nmS, nmN, lS, alpha, oS, rcol, rfull int
}

// flashDecode builds s's program (decode) by flash decoding, the group
// size chosen by flashCost.group and lowered while it does not fit L1.
func flashDecode(s *gatedSDPA, ctx *Context) (*kir.Program, error) {
	cost := newFlashCost(s.d, ctx.Fidelity, s.k.Type.DType)
	g := cost.group(s.d, ctx.Target.NumWorkers())
	for {
		p, err := flashBuild(s, ctx, g, cost)
		if err == nil || g == 1 || !strings.Contains(err.Error(), "rule l1-budget") {
			return p, err
		}
		g--
	}
}

// flashCost is the cost estimate of flash decoding, in cycles: a cache
// tile on a core (its 2*Dt tile products with the unpacks of both
// operands, or its 2*Dt cache pages at one core's NoC rate, whichever is
// longer, plus the exp_tile of its scores and a few more tile steps:
// scale, maximum, sum, packs), a core past the first (the leader
// receiving its partial, Dt + 2 fp32 tiles at one core's NoC rate, and
// merging it: an exp_tile, Dt products, a few steps; plus its dispatch)
// and the leader's sigmoid(gate) (Dt sigmoid_tile). For Qwen3.8-27B at
// mesh 1x2 (Dt 8) about 6,300, 5,600 and 20,000.
type flashCost struct{ perTile, perCore, gate, floor int }

func newFlashCost(d sdpaDims, f ir.MathFidelity, kv ir.DType) flashCost {
	tb := kv.TileBytes()
	exp := int(kir.SFPUTable[kir.SFPUExp].Cycles)
	step := EltwiseTileCycles + UnpackTileCycles + PackTileCycles
	return flashCost{
		perTile: max(2*d.Dt*(MatmulTileCycles(f)+2*UnpackTileCycles), 2*d.Dt*tb/NoCBytesPerCycle) + exp + 8*step,
		perCore: DispatchCycles + (d.Dt+2)*ir.FP32.TileBytes()/NoCBytesPerCycle + exp + d.Dt*(EltwiseTileCycles+2*UnpackTileCycles) + 10*step,
		gate:    d.Dt * int(kir.SFPUTable[kir.SFPUSigmoid].Cycles),
		// the DRAM floor of reading every item's cache
		floor: d.items * d.Lt * 2 * d.Dt * tb / DRAMBytesPerCycle,
	}
}

// per is the tiles per core of n visible tiles over g cores at run time
// (flashSpan): max(ceil(n/g), isqrt(n * perCore/perTile), minPer()).
func (fc flashCost) per(n, g int) int {
	return max((n+g-1)/g, int(math.Sqrt(float64(n*fc.perCore/fc.perTile))), fc.minPer())
}

// minPer is the tiles a core can take while the leader computes
// sigmoid(gate) (at least 1).
func (fc flashCost) minPer() int { return max(fc.gate/fc.perTile, 1) }

// time is the estimate of n visible tiles over a group of g cores split
// as flashSpan does: u = ceil(n/per) cores get tiles, the group's last,
// and the leader (the first) gets the remainder on top of its sigmoid
// when u = g; then it merges u partials.
func (fc flashCost) time(n, g int) int {
	if g == 1 {
		return n*fc.perTile + fc.gate
	}
	per := fc.per(n, g)
	u := (n + per - 1) / per
	work := per * fc.perTile
	if u == g {
		work = max(work, (n-(g-1)*per)*fc.perTile+fc.gate)
	} else {
		work = max(work, fc.gate)
	}
	return (u-1)*fc.perCore + max(work, fc.floor)
}

// group is the cores per item: 1 when the grid has fewer than two cores
// per item, else the g in 1 .. min(cores/items, Lt) minimising the
// estimate at the longest context (time(Lt, g)); ties go to fewer cores.
// For Qwen3.8-27B at mesh 1x2 (2 items) this is g = 3 at a 128-long
// cache, 14 at 4096 and the L1 limit beyond (flashDecode lowers g while
// the combine's CBs do not fit: 23 cores per item). At run time a
// position uses fewer when that is cheaper (flashSpan).
func (fc flashCost) group(d sdpaDims, cores int) int {
	if 2*d.items > cores {
		return 1
	}
	best, bestCost := 1, 0
	for g := 1; g <= min(cores/d.items, d.Lt); g++ {
		if c := fc.time(d.Lt, g); g == 1 || c < bestCost {
			best, bestCost = g, c
		}
	}
	return best
}

// flashBuild builds the program with groups of g cores per item.
func flashBuild(s0 *gatedSDPA, ctx *Context, g int, cost flashCost) (*kir.Program, error) {
	s := *s0 // a fresh copy per attempt
	f := &flashSDPA{gatedSDPA: &s, group: g, cost: cost}
	t, d := ctx.Target, s.d
	var err error
	if g == 1 {
		plan := PlanSplit(d.items, t.NumWorkers(), d.Lt*2*d.Dt*MatmulTileCycles(ctx.Fidelity), 0, 0)
		s.splitProgram, err = newSplitProgram(s.op, ctx, plan)
	} else {
		cores, rs := firstCores(t, d.items*g)
		s.splitProgram, err = newProgramOn(s.op, ctx, cores, rs)
	}
	if err != nil {
		return nil, err
	}
	s.kBlk = largestDivisor(d.Dt, sdpaCacheBlock)
	if err := f.planCBs(); err != nil {
		return nil, err
	}
	if err := f.reader(); err != nil {
		return nil, err
	}
	f.compute()
	if err := f.writer(); err != nil {
		return nil, err
	}
	return s.p, f.setArgs()
}

// planCBs plans the program's CBs (and, group > 1, the combine's CBs and
// semaphore 0).
func (f *flashSDPA) planCBs() error {
	s, cbs, Dt, C := f.gatedSDPA, f.cbs, f.d.Dt, flashChunk
	s.cbQ = cbs.Input("q", s.q.Type.DType, Dt)
	s.cbK = cbs.Input("k", s.k.Type.DType, 2*s.kBlk)
	s.cbV = cbs.Input("v", s.v.Type.DType, 2*C)
	s.mask = cbs.Input("mask", ir.FP32, 1)
	s.cbGate = cbs.Input("gate", s.gate.Type.DType, 2)
	s.scaler = cbs.Input("scaler", ir.BF16, 1)
	f.zeroT = cbs.Input("zero", ir.BF16, 1)
	f.posC = cbs.Pages(blocks.InputCB, "pos_for_compute", ir.UInt32, f.ctx.Target.L1Align, 1)
	s.slotQ = cbs.Scratch("q_tile", s.q.Type.DType, 1)
	s.slotG = cbs.Scratch("gate_tile", s.gate.Type.DType, 1)
	s.consts = cbs.Pages(blocks.ScratchCB, "const_tiles", ir.FP32, ir.FP32.TileBytes(), 2)
	s.cbPos = cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, s.pos.Type.DType.ElemBytes(), 1)
	s.scores = cbs.Scratch("scores", ir.FP32, C)
	f.pexp = cbs.Scratch("exp", ir.FP32, C)
	f.nmS = cbs.Scratch("neg_max", ir.BF16, 2)
	f.nmN = cbs.Scratch("neg_max_new", ir.BF16, 1)
	f.lS = cbs.Scratch("row_sum", ir.FP32, 2)
	f.alpha = cbs.Scratch("rescale", ir.FP32, 1)
	f.oS = cbs.Scratch("out_acc", ir.FP32, Dt+1)
	if f.group == 1 {
		f.rcol = cbs.Scratch("recip_sum", ir.FP32, 1)
		f.rfull = cbs.Scratch("recip_sum_rows", ir.FP32, 1)
	}
	s.attn = cbs.Scratch("attn", s.q.Type.DType, 1)
	sigPages := 1
	if f.group > 1 {
		sigPages = Dt // the leader's, computed before the merge
	}
	s.sig = cbs.Scratch("sigmoid_gate", s.gate.Type.DType, sigPages)
	s.cbOut = cbs.Output("out", s.out.Type.DType, 2)
	s.asm = cbs.Scratch("out_tiles", s.out.Type.DType, s.d.G)
	if f.group > 1 {
		f.wpos = cbs.Pages(blocks.ScratchCB, "pos_writer", ir.UInt32, s.pos.Type.DType.ElemBytes(), 1)
		f.sc = multicore.NewSplitCombine(s.p, f.ctx.Target, cbs, s.cores, s.rs, f.group, 1, Dt, ir.FP32, 0)
	}
	return cbs.Err(fmt.Sprintf("%s split over %d cores per kv head (chunks of %d cache tiles)", s.op.Name(), f.group, C))
}

// flashSplit is a core's share of the visible cache tiles, as variables
// of the kernel that emitted it.
type flashSplit struct {
	lptr   kir.Var // the tile holding pos
	n, per kir.Var // visible tiles, tiles per core (group > 1)
	lo, hi kir.Var // the core's tiles [lo, hi)
}

// flashSpan emits the split of the n = pos/32 + 1 visible tiles: the
// core at slot (rank r = group-1-slot) takes [r*per, (r+1)*per) within
// [0, n), per = max(ceil(n/group), isqrt(n * perCore/perTile), minPer):
// the group's cores share the tiles evenly unless fewer cores are
// cheaper, sqrt(n * perTile/perCore) of them minimising (cores-1)*perCore
// + n/cores*perTile (a short position on a group sized for a long cache),
// and no core takes fewer tiles than the leader's sigmoid(gate) takes.
// The cores with tiles are then the group's last (flashFirst), and the
// leader (slot 0) has the fewest: none unless every core has some, so it
// computes sigmoid(gate) while the others work. Reader and compute emit
// it alike, so their loop counts agree.
func (f *flashSDPA) flashSpan(b *kir.Builder, pos, slot kir.Expr) flashSplit {
	var sp flashSplit
	group := f.group
	sp.lptr = b.Let("lptr", kir.Div(pos, kir.Ci(ir.TileSize)))
	sp.n = b.Let("n_tiles", kir.Add(sp.lptr, kir.C(1)))
	if group == 1 {
		sp.lo, sp.hi = b.Let("lo", kir.C(0)), sp.n
		return sp
	}
	sp.per = b.LetT("per", kir.U32T, kir.Div(kir.Add(sp.n, kir.Ci(group-1)), kir.Ci(group)))
	// isqrt(n * perCore / perTile) bit by bit (that is below 2^32, the root below 2^16)
	x := b.Let("per_x", kir.Div(kir.Mul(sp.n, kir.Ci(f.cost.perCore)), kir.Ci(f.cost.perTile)))
	root := b.LetT("per_root", kir.U32T, kir.C(0))
	b.For("bit", kir.C(0), kir.C(16), func(i kir.Var) {
		cand := b.Let("cand", kir.Add(root, kir.Shr(kir.C(1<<15), i)))
		b.If(kir.Le(kir.Mul(cand, cand), x), func() { b.Assign(root, cand) })
	})
	b.If(kir.Gt(root, sp.per), func() { b.Assign(sp.per, root) })
	if m := f.cost.minPer(); m > 1 {
		b.If(kir.Lt(sp.per, kir.Ci(m)), func() { b.Assign(sp.per, kir.Ci(m)) })
	}
	sp.lo = b.LetT("lo", kir.U32T, kir.Mul(kir.Sub(kir.Ci(group-1), slot), sp.per))
	b.If(kir.Gt(sp.lo, sp.n), func() { b.Assign(sp.lo, sp.n) })
	sp.hi = b.LetT("hi", kir.U32T, kir.Add(sp.lo, sp.per))
	b.If(kir.Gt(sp.hi, sp.n), func() { b.Assign(sp.hi, sp.n) })
	return sp
}

// flashFirst emits the first slot with tiles: group - ceil(n/per).
func flashFirst(b *kir.Builder, sp flashSplit, group int) kir.Var {
	return b.Let("first", kir.Sub(kir.Ci(group), kir.Div(kir.Add(sp.n, kir.Sub(sp.per, kir.C(1))), sp.per)))
}

// chunkEnd emits min(t0 + flashChunk, hi), the end of the chunk at t0.
func chunkEnd(b *kir.Builder, t0, hi kir.Expr) kir.Var {
	end := b.LetT("cend", kir.U32T, kir.Add(t0, kir.Ci(flashChunk)))
	b.If(kir.Gt(end, hi), func() { b.Assign(end, hi) })
	return end
}

// reader adds the reader (see the file's doc). Runtime args: start,
// count (items), slot and, group > 1, leader.
func (f *flashSDPA) reader() error {
	s, Dt, C := f.gatedSDPA, f.d.Dt, flashChunk
	if err := s.readerSetup(); err != nil {
		return err
	}
	rd := s.rd
	rstart, rcount, rslot := rd.RuntimeArg("start"), rd.RuntimeArg("count"), rd.RuntimeArg("slot")
	var rleader kir.Expr
	if f.group > 1 {
		rleader = rd.RuntimeArg("leader")
	}
	b := rd.Builder()
	blocks.ScalerTile(b, s.scaler, 1)
	zt := blocks.Reserve(b, f.zeroT, kir.C(1), "zero_tile")
	blocks.FillWords(b, zt, ir.BF16.TileBytes(), 0)
	b.CBPushBack(f.zeroT, kir.C(1))
	s.posv = readPos(b, s.pAcc, s.cbPos)
	b.Comment("pos, for the compute kernel's loop counts (read_tile_value)")
	pp := blocks.Reserve(b, f.posC, kir.C(1), "pos_page")
	b.L1Write32(pp, s.posv)
	b.CBPushBack(f.posC, kir.C(1))
	sp := f.flashSpan(b, s.posv, rslot)
	lptr, lo, hi := sp.lptr, sp.lo, sp.hi
	s.lptr = lptr
	s.lrow = b.Let("lrow", kir.Mod(s.posv, kir.Ci(ir.TileSize)))
	b.Comment("constant tiles: zeros, and the mask of the tile holding pos (-inf past it)")
	fb := ir.FP32.TileBytes()
	consts := blocks.ScratchPages(b, s.consts, 2, "consts")
	s.zero = b.Let("zero", consts)
	s.bound = b.Let("bound", kir.Add(consts, kir.Ci(fb)))
	blocks.FillWords(b, s.zero, fb, 0)
	b.For("c", kir.C(0), kir.Ci(ir.TileSize), func(c kir.Var) {
		b.L1Write32(kir.Add(s.bound, blocks.FaceOffset(kir.C(0), c, 4)), kir.Mul(kir.Gt(c, s.lrow), kir.C(negInf)))
	})
	blocks.FillRowsFromRow0(b, s.bound, 4)
	s.gq.Begin(b, []int{s.slotQ})
	s.gg.Begin(b, []int{s.slotG})
	b.For("i", rstart, kir.Add(rstart, rcount), func(i kir.Var) {
		it := s.decodeItem(b, i)
		gate := func() {
			b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) {
				if s.groupRows {
					s.groupTiles(b, s.cbGate, s.gAcc, s.gate, "gate_l1", it, 1, func(int) kir.Expr { return dd })
				} else {
					s.gg.Page(b, s.cbGate, dd)
				}
			})
		}
		if f.group > 1 {
			b.Comment("the leader's gate tiles first: its compute takes their sigmoid before anything else")
			b.If(kir.Ne(rleader, kir.C(0)), gate)
		}
		b.ForStep("t0", lo, hi, kir.Ci(C), func(t0 kir.Var) {
			cend := chunkEnd(b, t0, hi)
			b.For("t", t0, cend, func(tt kir.Var) {
				b.If(kir.Eq(tt, lptr), func() {
					m := blocks.Reserve(b, s.mask, kir.C(1), "m")
					blocks.LocalCopy(b, s.bound, m, fb)
					b.NoCAsyncReadBarrier()
					b.CBPushBack(s.mask, kir.C(1))
				})
				b.ForStep("d0", kir.C(0), kir.Ci(Dt), kir.Ci(s.kBlk), func(d0 kir.Var) {
					s.cacheTiles(b, s.kAcc, s.cbK, s.k.Type.DType, it.head, s.kBlk, func(j kir.Expr) (kir.Expr, kir.Expr) { return tt, kir.Add(d0, j) })
				})
			})
			b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) { f.valueBlock(b, it.head, t0, cend, dd) })
		})
		if f.group == 1 {
			gate()
		}
	})
	if s.err != nil {
		return s.err
	}
	s.gg.End(b)
	s.gq.End(b)
	blocks.ReleaseScratchPages(b, s.consts, 2)
	blocks.ReleaseScratch(b, s.cbPos)
	return nil
}

// valueBlock emits one block of flashChunk pages of the V CB: V tiles
// (t, dd) of head for t in [t0, cend) in its first pages (rows past pos
// cleared in pos's tile), the rest unused.
func (f *flashSDPA) valueBlock(b *kir.Builder, head kir.Expr, t0, cend kir.Var, dd kir.Var) {
	s := f.gatedSDPA
	dt := s.v.Type.DType
	tb := dt.TileBytes()
	base := blocks.Reserve(b, s.cbV, kir.Ci(flashChunk), "vl1")
	b.For("j", kir.C(0), kir.Sub(cend, t0), func(j kir.Var) {
		page := kir.Add(kir.Mul(kir.Add(kir.Mul(head, kir.Ci(s.d.Lt)), kir.Add(t0, j)), kir.Ci(s.d.Dt)), dd)
		blocks.ReadPageTo(b, s.vAcc, page, kir.Add(base, kir.Mul(j, kir.Ci(tb))))
	})
	b.NoCAsyncReadBarrier()
	b.If(kir.LAnd(kir.Le(t0, s.lptr), kir.Lt(s.lptr, cend)), func() {
		blocks.ZeroRowsFromDT(b, kir.Add(base, kir.Mul(kir.Sub(s.lptr, t0), kir.Ci(tb))), s.zero, kir.Add(s.lrow, kir.C(1)), dt)
		b.NoCAsyncReadBarrier()
	})
	b.CBPushBack(s.cbV, kir.Ci(flashChunk))
}

// compute adds the compute kernel (see the file's doc). Runtime args:
// items, slot and, group > 1, leader.
func (f *flashSDPA) compute() {
	s, Dt, C := f.gatedSDPA, f.d.Dt, flashChunk
	var c *blocks.Compute
	s.cp, c = fp32Compute(s.p, s.rs, s.ctx)
	items, slot := s.cp.RuntimeArg("items"), s.cp.RuntimeArg("slot")
	var leader kir.Expr
	if f.group > 1 {
		leader = s.cp.RuntimeArg("leader")
	}
	c.MatmulStartup(s.cbQ, s.cbK, s.scores)
	for _, cb := range []int{s.scaler, f.zeroT, f.posC} {
		c.B.CBWaitFront(cb, kir.C(1))
	}
	pos := c.B.Let("pos", kir.ReadTileValue{CB: f.posC, Tile: kir.C(0), Offset: kir.C(0)})
	sp := f.flashSpan(c.B, pos, slot)
	lptr, lo, hi := sp.lptr, sp.lo, sp.hi
	if f.group > 1 {
		c.If(kir.Ne(leader, kir.C(0)), func() {
			c.B.Comment("leader: sigmoid(gate) first (it has the fewest cache tiles, none at short positions)")
			c.For("d", kir.C(0), kir.Ci(Dt), func(kir.Var) {
				c.Unary(s.cbGate, s.sig, []blocks.SFPUStep{{Op: kir.SFPUSigmoid}})
			})
		}, nil)
	}
	c.For("i", kir.C(0), items, func(kir.Var) {
		c.B.CBWaitFront(s.cbQ, kir.Ci(Dt))
		c.ForStep("t0", lo, hi, kir.Ci(C), func(t0 kir.Var) {
			cend := chunkEnd(c.B, t0, hi)
			n := c.B.Let("n", kir.Sub(cend, t0))
			later := c.B.Let("later", kir.Ne(t0, lo)) // not the first chunk
			f.chunkScores(c, t0, cend, lptr)
			f.chunkSoftmax(c, n, later)
			f.chunkValues(c, n, later)
		})
		c.B.CBPopFront(s.cbQ, kir.Ci(Dt))
		if f.group == 1 {
			f.normalise(c)
		} else {
			f.partial(c, kir.Eq(lo, hi))
		}
	})
	if f.group > 1 {
		// the leader merges the partials of the cores with tiles and
		// multiplies each merged tile by sigmoid(gate)
		f.sc.MergeThen(c, leader, flashFirst(c.B, sp, f.group), func() {
			c.B.CBWaitFront(f.sc.Out, kir.C(1))
			c.Acquire()
			c.Copy(f.sc.Out, kir.C(0), kir.C(0))
			c.B.CBPopFront(f.sc.Out, kir.C(1))
			c.PackOut(s.attn, 1)
			c.BinaryTile(kir.EltMul, blocks.BcastNone, s.attn, s.sig, s.cbOut, false, nil)
		})
	}
	for _, cb := range []int{f.posC, f.zeroT, s.scaler} {
		c.B.CBPopFront(cb, kir.C(1))
	}
}

// chunkScores emits the scores of cache tiles [t0, cend) into one block
// of the scores CB (its unused pages left as they are): DEST = mask (pos's
// tile only) + q K_t^T, times scale.
func (f *flashSDPA) chunkScores(c *blocks.Compute, t0, cend, lptr kir.Var) {
	s := f.gatedSDPA
	c.B.Comment("chunk scores: (mask + q k^T) * scale")
	c.B.CBReserveBack(s.scores, kir.Ci(flashChunk))
	c.For("t", t0, cend, func(tt kir.Var) {
		c.Acquire()
		c.If(kir.Eq(tt, lptr), func() {
			c.B.CBWaitFront(s.mask, kir.C(1))
			c.Copy(s.mask, kir.C(0), kir.C(0))
			c.B.CBPopFront(s.mask, kir.C(1))
		}, nil)
		c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(dd kir.Var) {
			c.B.CBWaitFront(s.cbK, kir.C(1))
			c.Matmul(s.cbQ, s.cbK, dd, kir.C(0), kir.C(0), true)
			c.B.CBPopFront(s.cbK, kir.C(1))
		})
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUMulScalar, Param: float32(s.scale)}, kir.C(0))
		c.Commit()
		c.Wait()
		c.Pack(kir.C(0), s.scores)
		c.Release()
	})
	c.B.CBPushBack(s.scores, kir.Ci(flashChunk))
}

// chunkSoftmax emits, for the chunk's n score tiles, the new shift nm' =
// -max(m, row max) (later chunks; the first chunk's row max alone) to nmN
// and behind the old one in nmS, P = exp(S + nm') into the exp CB and l =
// rowsum P, plus (later chunks) l * a, a = exp(m - m') the rescale factor
// on every column, left in its CB for chunkValues. It pops the scores,
// the old nm and l, and leaves the exp block for chunkValues.
func (f *flashSDPA) chunkSoftmax(c *blocks.Compute, n, later kir.Var) {
	s := f.gatedSDPA
	sfpu := func(op kir.SFPUOp, d int) { c.SFPU(blocks.SFPUStep{Op: op}, kir.Ci(d)) }
	c.B.Comment("new shift: -max(m, row max of the chunk), rounded to bf16")
	c.B.CBWaitFront(s.scores, kir.Ci(flashChunk))
	c.Acquire()
	c.For("j", kir.C(0), n, func(j kir.Var) {
		c.Reduce(kir.ReduceMax, kir.ReduceRow, s.scores, s.scaler, f.nmN, j, kir.C(0), kir.C(0))
	})
	c.If(later, func() {
		c.B.CBWaitFront(f.nmS, kir.C(1))
		c.Copy(f.nmS, kir.C(0), kir.C(1))
		sfpu(kir.SFPUNegative, 1) // m
		// DEST[0] = max(DEST[0], DEST[1]) = a + relu(b - a)
		sfpu(kir.SFPUNegative, 0)
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(1), kir.C(0))
		sfpu(kir.SFPURelu, 1)
		sfpu(kir.SFPUNegative, 0)
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
	}, nil)
	sfpu(kir.SFPUNegative, 0)
	c.PackOutTo(f.nmN, f.nmS)
	c.B.CBWaitFront(f.nmN, kir.C(1))
	c.B.Comment("p = exp(s - m')")
	c.B.CBReserveBack(f.pexp, kir.Ci(flashChunk))
	c.For("j", kir.C(0), n, func(j kir.Var) {
		c.Acquire()
		c.Binary(kir.EltAdd, blocks.BcastCols, s.scores, f.nmN, j, kir.C(0), kir.C(0))
		sfpu(kir.SFPUExp, 0)
		c.Commit()
		c.Wait()
		c.Pack(kir.C(0), f.pexp)
		c.Release()
	})
	c.B.CBPushBack(f.pexp, kir.Ci(flashChunk))
	c.B.CBPopFront(s.scores, kir.Ci(flashChunk))
	c.If(later, func() {
		c.B.Comment("rescale factor a = exp(m - m') on every column")
		c.Acquire()
		c.Binary(kir.EltSub, blocks.BcastCols, f.zeroT, f.nmS, kir.C(0), kir.C(0), kir.C(0))
		c.Binary(kir.EltAdd, blocks.BcastCols, f.zeroT, f.nmN, kir.C(0), kir.C(0), kir.C(1))
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
		sfpu(kir.SFPUExp, 0)
		c.PackOut(f.alpha, 1)
		c.B.CBPopFront(f.nmS, kir.C(1))
		c.B.CBWaitFront(f.alpha, kir.C(1))
	}, nil)
	c.B.CBPopFront(f.nmN, kir.C(1))
	c.B.Comment("l = l * a + row sum of p")
	c.B.CBWaitFront(f.pexp, kir.Ci(flashChunk))
	c.Acquire()
	c.For("j", kir.C(0), n, func(j kir.Var) {
		c.Reduce(kir.ReduceSum, kir.ReduceRow, f.pexp, s.scaler, f.lS, j, kir.C(0), kir.C(0))
	})
	c.If(later, func() {
		c.B.CBWaitFront(f.lS, kir.C(1))
		c.Copy(f.lS, kir.C(0), kir.C(1))
		c.Copy(f.alpha, kir.C(0), kir.C(2))
		c.SFPUBinary(kir.SFPUMulBinary, kir.C(1), kir.C(2))
		c.SFPUBinary(kir.SFPUAddBinary, kir.C(0), kir.C(1))
		c.B.CBPopFront(f.lS, kir.C(1))
	}, nil)
	c.PackOut(f.lS, 1)
}

// chunkValues emits O_d = sum_j P_j V_jd for every D tile (one V block
// each), plus (later chunks) O_d * a, and pops the exp block and a.
func (f *flashSDPA) chunkValues(c *blocks.Compute, n, later kir.Var) {
	s := f.gatedSDPA
	c.B.Comment("O = O * a + p v, per D tile")
	c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(kir.Var) {
		c.B.CBWaitFront(s.cbV, kir.Ci(flashChunk))
		c.Acquire()
		c.If(later, func() {
			c.B.CBWaitFront(f.oS, kir.C(1))
			c.Copy(f.oS, kir.C(0), kir.C(0))
			c.Copy(f.alpha, kir.C(0), kir.C(1))
			c.SFPUBinary(kir.SFPUMulBinary, kir.C(0), kir.C(1))
			c.B.CBPopFront(f.oS, kir.C(1))
		}, nil)
		c.For("j", kir.C(0), n, func(j kir.Var) {
			c.Matmul(f.pexp, s.cbV, j, j, kir.C(0), false)
		})
		c.B.CBPopFront(s.cbV, kir.Ci(flashChunk))
		c.PackOut(f.oS, 1)
	})
	c.B.CBPopFront(f.pexp, kir.Ci(flashChunk))
	c.If(later, func() { c.B.CBPopFront(f.alpha, kir.C(1)) }, nil)
}

// normalise emits (group 1) out_d = O_d * tf32(1/l) (an fp32 product on
// the SFPU with 1/l broadcast along the rows), then the gate, and pops
// the item's state.
func (f *flashSDPA) normalise(c *blocks.Compute) {
	s := f.gatedSDPA
	c.B.Comment("1/l on every column")
	c.B.CBWaitFront(f.lS, kir.C(1))
	c.Acquire()
	c.Copy(f.lS, kir.C(0), kir.C(0))
	c.SFPU(blocks.SFPUStep{Op: kir.SFPURecip}, kir.C(0))
	c.B.CBPopFront(f.lS, kir.C(1))
	c.PackOut(f.rcol, 1)
	c.B.CBWaitFront(f.rcol, kir.C(1))
	c.Acquire()
	c.Binary(kir.EltAdd, blocks.BcastCols, f.zeroT, f.rcol, kir.C(0), kir.C(0), kir.C(0))
	c.B.CBPopFront(f.rcol, kir.C(1))
	c.PackOut(f.rfull, 1)
	c.B.CBWaitFront(f.nmS, kir.C(1))
	c.B.CBPopFront(f.nmS, kir.C(1))
	c.B.CBWaitFront(f.rfull, kir.C(1))
	c.B.Comment("per D tile: O / l, times sigmoid(gate)")
	c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(kir.Var) {
		c.B.CBWaitFront(f.oS, kir.C(1))
		c.Acquire()
		c.Copy(f.oS, kir.C(0), kir.C(0))
		c.Copy(f.rfull, kir.C(0), kir.C(1))
		c.SFPUBinary(kir.SFPUMulBinary, kir.C(0), kir.C(1))
		c.B.CBPopFront(f.oS, kir.C(1))
		c.PackOut(s.attn, 1)
		c.Unary(s.cbGate, s.sig, []blocks.SFPUStep{{Op: kir.SFPUSigmoid}})
		c.BinaryTile(kir.EltMul, blocks.BcastNone, s.attn, s.sig, s.cbOut, false, nil)
	})
	c.B.CBPopFront(f.rfull, kir.C(1))
}

// partial emits (group > 1) the core's partial for SplitCombine: O's Dt
// tiles, m = -nm, l, popping the state; a core with no tiles (empty)
// sends O = 0, m = -2^16, l = 0 (DEST as tile_regs_acquire hands it
// over, cleared, and -2^16 added on the SFPU).
func (f *flashSDPA) partial(c *blocks.Compute, empty kir.Expr) {
	x := f.sc.X
	c.B.Comment("this core's partial (O, m, l) to the writer, which sends it to the leader")
	one := func(cb int, negate bool) {
		c.B.CBWaitFront(cb, kir.C(1))
		c.Acquire()
		c.Copy(cb, kir.C(0), kir.C(0))
		if negate {
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, kir.C(0))
		}
		c.B.CBPopFront(cb, kir.C(1))
		c.PackOut(x.Partial, 1)
	}
	c.If(empty, func() {
		c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(kir.Var) {
			c.Acquire()
			c.PackOut(x.Partial, 1)
		})
		c.Acquire()
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUAddScalar, Param: -65536}, kir.C(0))
		c.PackOut(x.Partial, 1)
		c.Acquire()
		c.PackOut(x.Partial, 1)
	}, func() {
		c.For("d", kir.C(0), kir.Ci(f.d.Dt), func(kir.Var) { one(f.oS, false) })
		one(f.nmS, true)
		one(f.lS, false)
	})
}

// writer adds the writer: group 1 writes its items' result tiles as
// sdpa_decode_gated always did (start, count); group > 1 sends the
// core's partial to its leader, which writes its item's result (start:
// the item; then the exchange's arguments).
func (f *flashSDPA) writer() error {
	s := f.gatedSDPA
	if f.group == 1 {
		return s.writer()
	}
	wr := newWriter(s.p, s.rs)
	oAcc := s.bind(wr, "out_addr", s.out)
	if s.err != nil {
		return s.err
	}
	pAcc := s.bind(wr, "pos_addr", s.pos)
	if s.err != nil {
		return s.err
	}
	s.wr = wr
	item := wr.RuntimeArg("start")
	ea := f.sc.X.Declare(wr)
	b := wr.Builder()
	b.Comment("pos: a core without cache tiles sends no partial (the leader skips it), only its count")
	sp := f.flashSpan(b, readPos(b, pAcc, f.wpos), ea.Slot)
	blocks.ReleaseScratch(b, f.wpos)
	f.sc.X.EmitSending(b, ea, kir.Lt(sp.lo, sp.hi))
	b.If(kir.Ne(ea.Leader, kir.C(0)), func() {
		otiles := blocks.ScratchPages(b, s.asm, s.d.G, "otiles")
		blocks.FillWords(b, otiles, s.d.G*s.out.Type.DType.TileBytes(), 0)
		s.writeDecodeTiles(b, oAcc, otiles, b.Let("head", item))
		blocks.ReleaseScratchPages(b, s.asm, s.d.G)
	})
	return nil
}

// setArgs sets every core's runtime arguments: group 1, the items of the
// split plan (slot 0); group > 1, core i's item i/group and slot
// i%group, and the exchange's arguments.
func (f *flashSDPA) setArgs() error {
	s := f.gatedSDPA
	if f.group == 1 {
		for ci, core := range s.cores {
			st, n := s.plan.Range(ci)
			s.rd.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)), kir.U32(0))
			s.cp.SetRuntimeArgs(core, kir.U32(uint32(n)), kir.U32(0))
			s.wr.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)))
		}
		return nil
	}
	for i, core := range s.cores {
		ex, err := f.sc.X.Values(i, s.wr.NoC)
		if err != nil {
			return fmt.Errorf("%s: %w", s.op.Name(), err)
		}
		item, slot := kir.U32(uint32(i/f.group)), kir.U32(uint32(i%f.group))
		s.rd.SetRuntimeArgs(core, item, kir.U32(1), slot, ex[0])
		s.cp.SetRuntimeArgs(core, kir.U32(1), slot, ex[0])
		s.wr.SetRuntimeArgs(core, append([]kir.ArgValue{item}, ex...)...)
	}
	return nil
}
