package lower

import (
	"fmt"
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
// a group of `group` consecutive cores: every core the grid has per item
// (flashDecode; fewer only when the program does not fit L1), so a long
// context streams its cache from the whole grid. At run time the n =
// pos/32 + 1 cache tiles up to the one holding pos are split over the
// group's first cores (flashSpan: per tiles each, the even split or more
// when fewer cores are cheaper, flashCost.per), so a short position uses
// only as many cores as pay off. The reader, compute and writer compute
// the split from pos (the reader reads pos and hands it to compute, which
// reads it with read_tile_value, and to the writer), so one program
// serves every position: no rebuild and nothing the host recomputes per
// step.
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
// The cost of a cache tile is its 16 tile products (2*Dt, each at most
// 6 of whose 32 q rows carry a head at the 27B shape) and the exp_tile
// of its scores, 2,123 cycles in the timing model: exactly the
// instructions tt-llk's _sfpu_exp_f32_accurate_ issues (ir/sfpu, 66 per
// 32 values), about three quarters of the products. Only the G rows of
// a score tile matter, but an exp of part of a tile needs a vector mode
// no call of the instruction tables has, and moving the rows of several
// tiles into one (for one exp per chunk row block) costs a tile product
// and a pack per tile each way, more than it saves at short positions
// and little at long ones, which the DRAM bounds.
//
// group == 1 (one core per item; several items per core when the grid has
// fewer than two cores per item) normalises on the core: out = O *
// tf32(1/l), rounded to q's dtype, times sigmoid(gate) rounded to gate's
// dtype (mul_tiles). group > 1 ends each core that had tiles with its
// partial (O, m, l) and merges the partials exactly on a tree
// (multicore.SplitCombine: subgroups of sub cores merge on their first
// core, those merged partials on the group's first core, the leader),
// whose last merge gives out = O * tf32(1/l) rounded to q's dtype. The
// sigmoid and the gate's product are spread over the group's last cores
// (the helpers, flashHelpers: one D tile each when the group has Dt
// cores; the cores a short position leaves idle): a helper takes the
// sigmoid of its gate tiles before its cache tiles, the leader sends it
// each merged tile it owns (sendResults, semaphore flashSemResult) and
// the helper multiplies and writes the result tiles as the o_proj input
// rows (writeResult).
//
// The rounding order differs from the single pass over the whole row the
// reference computes (sim/ref attendGatedFPU): the device's result agrees
// with it to within the rounding of the chunked order (the tests in
// flash_sdpa_test.go state the bound), not bit for bit.
//
// Reader: pos; a helper's gate tiles (group > 1); when the core has
// cache tiles, the q tile row and per chunk the K tiles of its cache
// tiles, up to flashKPair per barrier (and the mask page of pos's tile),
// then per vGroup D tiles a block of chunk V pages each (the chunk's
// tiles, the rest of the block unused, so every block starts at the same
// ring page; the scores and exp blocks likewise); then (group 1) the gate
// tiles. K and V rows past pos in pos's tile are cleared (stale cache
// rows may hold anything, and 0 x NaN is NaN). The writer makes the
// constant tiles: compute's scaler, ones column and zero tiles and (group > 1, for the
// core holding pos's tile) the reader's zeros and mask.

// flashChunk is the cache tiles a core streams per chunk (the scores and
// exp CBs hold one chunk, the V CB two) in flash decoding.
const flashChunk = 8

// prefillChunk is flashChunk of the flash prefill attention
// (flashPrefill). Chunks of 16 spread its per-chunk work (the rescale of
// O's Dt tiles and of l, the rescale factor's exp) over twice the cache
// tiles: the 27B's 4,096-token program takes 3,408.5 us with them, 3,711.4
// with chunks of 8 (predicted; TestFlashPrefillChunk). They are not the
// default: their rounding took the small config's 700-token prompt
// (cmd/tcc/cli TestRunQwenPromptLengths, TCC_LONG) to an fp32 logits PCC
// of 0.989451 in its step at 576..639, under the check's 0.99 (same
// formats 1.000000). sim/ref's flashChunkTiles follows it (a variable for
// the test that compares the two; the reference is bit for bit only at
// its own chunk).
var prefillChunk = 8

// prefillKVBuffers is the blocks the prefill attention's K and V CBs
// hold (K blocks of kPair cache tiles, V blocks of vGroup D tiles of a
// chunk's tiles): 4, two chunks of the 27B's (kPair 4, chunk 8, Dt 8),
// where flash decoding's 2 hold one, so the reader reads the next chunk's
// K and V while compute works on this one. With one chunk the reader
// could read the next chunk's K only after compute had taken this
// chunk's last V block, and compute waited for K at every chunk: the
// 27B's 4,096-token program took 4,002.2 us, compute waiting 240.9 us
// for K; with two 3,749.2 us and 4.8 us (predicted, with q_scaled;
// TestFlashPrefillKVBuffers). 256 KB more L1 a core.
var prefillKVBuffers = 4

// prefillOutPages is the result pages the prefill attention's out CB
// holds at Dt = 8 (scaled to Dt, at least 2): an item's Dt, so compute
// starts the next item while the writer writes this one's (with 2 it
// waited 26.5 us for the writer at 4,096 tokens; 430.6 -> 421.7 us at
// 1,024 without prefillGateAfterQ, 407.0 -> 397.1 with it, predicted;
// TestFlashPrefillGateAfterQ).
var prefillOutPages = 8

// kvBuffers is the blocks the K and V CBs hold: 2 for flash decoding,
// prefillKVBuffers for the prefill attention.
func (f *flashSDPA) kvBuffers() int {
	if f.prefill {
		return prefillKVBuffers
	}
	return 2
}

// flashKPair is the most cache tiles whose K the reader moves per barrier
// (fewer when their K rows are longer than 4*chunk tiles).
const flashKPair = 4

// The semaphores of a split program: the leader's result tiles at the
// helpers, then the combine's (flashSemCombine, and the next on two
// levels).
const (
	flashSemResult  = 0
	flashSemCombine = 1
)

// flashSDPA is a flash-decoding sdpa_decode_gated program, or (prefill,
// group 1) a flash-attention sdpa_prefill_gated one (flash_prefill.go),
// under construction; the operands, dims and reader helpers are
// gatedSDPA's.
type flashSDPA struct {
	*gatedSDPA
	group, sub int // cores per item, per subgroup of the combine
	chunk      int // cache tiles per chunk: flashChunk, or prefillChunk
	// the reader's reads per barrier: K tiles of kPair cache tiles, V
	// blocks of vGroup D tiles
	kPair, vGroup int
	helpers       int // group > 1: the group's last cores that take sigmoid(gate)
	cost          flashCost
	sc            *multicore.SplitCombine // group > 1
	// CBs: reader -> compute
	zeroT, onesT, posC int
	// group > 1: pos for the writer (from the reader), a helper's
	// sigmoid(gate) tiles (compute scratch) and the result tiles the leader
	// sends it (leader's writer -> helper's compute); own is the most
	// result tiles a helper takes, ceil(Dt/helpers)
	wpos, sigH, res, own int
	// compute state and intermediates
	pexp, nmS, nmN, lS, alpha, oS, rcol, rfull int
	// prefill (compute): the item's first masked cache tile
	maskFrom kir.Var
	// prefill with a power-of-two scale: q times scale, the q tiles the
	// score products read (qScaled; -1 when they read q itself)
	qS int
	// prefill: compute's signal to the writer that the item's q is in
	// (prefillGateAfterQ; -1 when unused)
	gateGo int
	// prefill with G > 1: K and V shared by multicast (flash_prefill_share.go)
	share *prefillShare
}

// flashDecode builds s's program (decode) by flash decoding with groups
// of every core the grid has per item (one core per item when it has
// fewer than two), the group size lowered while the program does not fit
// L1.
func flashDecode(s *gatedSDPA, ctx *Context) (*kir.Program, error) {
	cost := newFlashCost(s.d, ctx.Fidelity, s.k.Type.DType)
	g := 1
	if n := ctx.Target.NumWorkers(); 2*s.d.items <= n {
		g = n / s.d.items
	}
	for {
		p, err := flashBuild(s, ctx, g, flashChunk, cost)
		if err == nil || g == 1 || !strings.Contains(err.Error(), "rule l1-budget") {
			return p, err
		}
		g--
	}
}

// flashPrefill builds s's program (prefill) by flashBuild with one core
// per item, in chunks of prefillChunk cache tiles (the chunks sim/ref's
// flash attention follows, so there is no other size to fall back to).
func flashPrefill(s *gatedSDPA, ctx *Context) (*kir.Program, error) {
	return flashBuild(s, ctx, 1, prefillChunk, newFlashCost(s.d, ctx.Fidelity, s.k.Type.DType))
}

// flashCost is the cost estimate of flash decoding, in cycles: a cache
// tile on a core (its 2*Dt tile products with the unpacks of both
// operands, or its 2*Dt cache pages at one core's NoC rate, whichever is
// longer, plus the exp_tile of its scores and a few more tile steps:
// scale, maximum, sum, packs), and a merge on a (sub-)leader: per
// partial its G live rows of Dt + 2 fp32 tiles at one core's NoC rate
// plus the writer moving its m and weight for each of the G rows
// (perPartial), per slot of stack partials (SplitCombine stacks the
// live rows of 32/G partials in one slot; one exp for all the partials
// of a merge) its Dt + 1 tile products with the weights (perSlot).
// perMerge is what one more partial adds, perPartial + perSlot/stack.
// For Qwen3.8-27B at mesh 1x2 (Dt 8, G 6) about 6,300, 250, 1,640 and
// 570.
type flashCost struct{ perTile, perPartial, perSlot, stack, perMerge int }

func newFlashCost(d sdpaDims, f ir.MathFidelity, kv ir.DType) flashCost {
	tb := kv.TileBytes()
	exp := int(kir.SFPUTable[kir.SFPUExp].Cycles)
	step := EltwiseTileCycles + UnpackTileCycles + PackTileCycles
	fc := flashCost{
		perTile:    max(2*d.Dt*(MatmulTileCycles(f)+2*UnpackTileCycles), 2*d.Dt*tb/NoCBytesPerCycle) + exp + 8*step,
		perPartial: (d.Dt+2)*min(d.G, ir.TileSize)*ir.TileSize*ir.FP32.ElemBytes()/NoCBytesPerCycle + 20*d.G,
		perSlot:    (d.Dt + 1) * (MatmulTileCycles(f) + 2*UnpackTileCycles),
		stack:      1,
	}
	if d.G <= blocks.FaceDim {
		fc.stack = ir.TileSize / max(d.G, 1)
	}
	fc.perMerge = fc.perPartial + fc.perSlot/fc.stack
	return fc
}

// levelCycles is the estimate of one merge of u partials.
func (fc flashCost) levelCycles(u int) int {
	return u*fc.perPartial + (u+fc.stack-1)/fc.stack*fc.perSlot
}

// mergeCycles is the estimate of merging u partials on a tree of
// subgroups of sub: the leader's level-1 merge, plus the level-2 merge
// and a merged partial's transfer on two levels.
func (fc flashCost) mergeCycles(u, sub int) int {
	if u <= sub {
		return fc.levelCycles(u)
	}
	return fc.levelCycles(sub) + fc.levelCycles((u+sub-1)/sub) + fc.perPartial
}

// subgroup is the cores per subgroup of the combine of a group of g: the
// s minimising the merge of the whole group, mergeCycles(g, s) (ties to
// the larger s, one level when that is as cheap).
func (fc flashCost) subgroup(g int) int {
	best := g
	for s := g - 1; s >= 1; s-- {
		if fc.mergeCycles(g, s) < fc.mergeCycles(g, best) {
			best = s
		}
	}
	return best
}

// flashHelpers is the number of helpers of a group of g cores: min(g,
// Dt), the group's last; helper k (slot g-1-k) takes gate tiles k, k +
// helpers, ... .
func flashHelpers(g, Dt int) int { return min(g, Dt) }

// flashBuild builds the program with groups of g cores per item.
func flashBuild(s0 *gatedSDPA, ctx *Context, g, chunk int, cost flashCost) (*kir.Program, error) {
	s := *s0 // a fresh copy per attempt
	f := &flashSDPA{gatedSDPA: &s, group: g, chunk: chunk, cost: cost}
	t, d := ctx.Target, s.d
	var err error
	if c := shareCores(d.items, d.G, t.NumWorkers()); s.prefill && g == 1 && c > 0 {
		f.share = &prefillShare{cores: c}
		cores, rs := firstCores(t, c)
		s.splitProgram, err = newProgramOn(s.op, ctx, cores, rs)
	} else if g == 1 {
		plan := PlanSplit(d.items, t.NumWorkers(), d.Lt*2*d.Dt*MatmulTileCycles(ctx.Fidelity), 0, 0)
		s.splitProgram, err = newSplitProgram(s.op, ctx, plan)
	} else {
		f.sub, f.helpers = cost.subgroup(g), flashHelpers(g, d.Dt)
		cores, rs := firstCores(t, d.items*g)
		s.splitProgram, err = newProgramOn(s.op, ctx, cores, rs)
	}
	if err != nil {
		return nil, err
	}
	if err := f.planCBs(); err != nil {
		return nil, err
	}
	read := f.reader
	if s.prefill {
		s.kBlk = largestDivisor(d.Dt, sdpaCacheBlock)
		read = f.prefillReader
	}
	if err := read(); err != nil {
		return nil, err
	}
	f.compute()
	if err := f.writer(); err != nil {
		return nil, err
	}
	return s.p, f.setArgs()
}

// planCBs plans the program's CBs (and, group > 1, the combine's CBs and
// the semaphores).
func (f *flashSDPA) planCBs() error {
	s, cbs, Dt, C := f.gatedSDPA, f.cbs, f.d.Dt, f.chunk
	s.cbQ = cbs.Input("q", s.q.Type.DType, Dt)
	f.qS, f.gateGo = -1, -1
	if s.prefill && prefillGateAfterQ {
		f.gateGo = cbs.Pages(blocks.OutputCB, "gate_go", ir.UInt32, f.ctx.Target.L1Align, 2)
	}
	if qScaled(s) {
		f.qS = cbs.Scratch("q_scaled", s.q.Type.DType, Dt)
	}
	f.kPair, f.vGroup = max(1, min(flashKPair, 4*C/Dt)), largestDivisor(Dt, 4)
	kvb := f.kvBuffers()
	s.cbK = cbs.Input("k", s.k.Type.DType, kvb*f.kPair*Dt)
	s.cbV = cbs.Input("v", s.v.Type.DType, kvb*f.vGroup*C)
	masks := 1
	if s.prefill {
		masks = 2 // an item's one or two tiles crossing the diagonal
	}
	s.mask = cbs.Input("mask", ir.FP32, masks)
	gateCB := 2
	if s.prefill {
		gateCB = Dt // an item's gate tiles, read early (prefillReader)
	}
	s.cbGate = cbs.Input("gate", s.gate.Type.DType, gateCB)
	s.scaler = cbs.Input("scaler", ir.BF16, 1)
	f.zeroT = cbs.Input("zero", ir.BF16, 1)
	f.onesT = cbs.Input("ones_column", ir.BF16, 1)
	f.posC = cbs.Pages(blocks.InputCB, "pos_for_compute", ir.UInt32, f.ctx.Target.L1Align, 1)
	s.slotQ, s.asm = -1, -1
	if !s.prefill {
		s.slotQ = cbs.Scratch("q_tile", s.q.Type.DType, 1)
	}
	gatePages := 1
	if s.prefill {
		gatePages = prefillGatePages(s.d)
	}
	s.slotG = cbs.Scratch("gate_tile", s.gate.Type.DType, gatePages)
	s.consts = cbs.Pages(blocks.ScratchCB, "const_tiles", ir.FP32, ir.FP32.TileBytes(), 2)
	s.cbPos = cbs.Pages(blocks.ScratchCB, "pos", ir.UInt32, posPageBytes(f.ctx.Target, s.pos), 1)
	s.scores = cbs.Scratch("scores", ir.FP32, C)
	f.pexp = cbs.Scratch("exp", ir.FP32, C)
	f.nmS = cbs.Scratch("neg_max", ir.BF16, 2)
	f.nmN = cbs.Scratch("neg_max_new", ir.BF16, 1)
	f.lS = cbs.Scratch("row_sum", ir.FP32, 2)
	f.alpha = cbs.Scratch("rescale", ir.FP32, 1)
	f.oS = cbs.Scratch("out_acc", ir.FP32, Dt+1)
	if f.group == 1 {
		s.attn = cbs.Scratch("attn", s.q.Type.DType, 1)
		outPages := 2
		if s.prefill {
			outPages = prefillOutPages * Dt / 8
		}
		s.cbOut = cbs.Output("out", s.out.Type.DType, max(2, outPages))
		if !s.prefill {
			s.asm = cbs.Scratch("out_tiles", s.out.Type.DType, s.d.G)
		}
	} else {
		// the leader's merged tiles, rounded to q's dtype, to its writer
		// (the combine's Out); a helper's result tiles, all at once
		f.own = (Dt + f.helpers - 1) / f.helpers
		s.attn = cbs.Output("attn", s.q.Type.DType, 2)
		s.cbOut = cbs.Output("out", s.out.Type.DType, f.own)
		s.asm = cbs.Scratch("out_tiles", s.out.Type.DType, s.d.G*f.own)
	}
	if f.group == 1 {
		f.rcol = cbs.Scratch("recip_sum", ir.FP32, 1)
		f.rfull = cbs.Scratch("recip_sum_rows", ir.FP32, 1)
		s.sig = cbs.Scratch("sigmoid_gate", s.gate.Type.DType, 1)
	} else {
		f.sigH = cbs.Scratch("sigmoid_gate", s.gate.Type.DType, f.own)
		f.res = cbs.Input("merged", s.q.Type.DType, f.own)
		f.wpos = cbs.Pages(blocks.InputCB, "pos_for_writer", ir.UInt32, f.ctx.Target.L1Align, 1)
		s.p.AddSemaphore(kir.Semaphore{ID: flashSemResult, Cores: s.rs})
		var err error
		if f.sc, err = multicore.NewSplitCombine(s.p, f.ctx.Target, cbs, s.cores, s.rs, f.group, f.sub, 1, Dt, s.d.G, ir.FP32, s.attn, f.zeroT, flashSemCombine); err != nil {
			return fmt.Errorf("%s: %w", s.op.Name(), err)
		}
	}
	return cbs.Err(fmt.Sprintf("%s split over %d cores per kv head (chunks of %d cache tiles, subgroups of %d)", s.op.Name(), f.group, C, f.sub))
}

// flashSplit is a core's share of the visible cache tiles, as variables
// of the kernel that emitted it.
type flashSplit struct {
	lptr   kir.Var // the tile holding pos
	n, per kir.Var // visible tiles, tiles per core (group > 1)
	used   kir.Var // cores with tiles (group > 1)
	lo, hi kir.Var // the core's tiles [lo, hi)
}

// flashSpan emits the split of the n = pos/32 + 1 visible tiles: the
// core at slot takes [slot*per, (slot+1)*per) within [0, n), so the
// group's first used = ceil(n/per) cores have tiles. per is the even split
// ceil(n/group), or more tiles per core when fewer cores are cheaper: u
// cores with a tiles each cost about a*perTile + merge(u), merge(u) =
// u*perMerge while u <= sub (one level), (sub + u/sub)*perMerge beyond
// (two), so the best a is isqrt(n*perMerge/perTile) when that leaves at
// most sub cores, else isqrt(n*perMerge/(perTile*sub)) (flashCost; isqrt
// bit by bit). Reader, compute and writer emit it alike, so their loop
// counts agree.
func (f *flashSDPA) flashSpan(b *kir.Builder, pos, slot kir.Expr) flashSplit {
	var sp flashSplit
	group := f.group
	sp.lptr = b.Let("lptr", kir.Div(pos, kir.Ci(ir.TileSize)))
	sp.n = b.Let("n_tiles", kir.Add(sp.lptr, kir.C(1)))
	if group == 1 {
		sp.lo, sp.hi = b.Let("lo", kir.C(0)), sp.n
		return sp
	}
	isqrt := func(name string, x kir.Expr) kir.Var {
		// bit by bit (x is below 2^32, the root below 2^16); at least 1
		xv := b.Let(name+"_x", x)
		root := b.LetT(name, kir.U32T, kir.C(0))
		b.For("bit", kir.C(0), kir.C(16), func(i kir.Var) {
			cand := b.Let("cand", kir.Add(root, kir.Shr(kir.C(1<<15), i)))
			b.If(kir.Le(kir.Mul(cand, cand), xv), func() { b.Assign(root, cand) })
		})
		b.If(kir.Eq(root, kir.C(0)), func() { b.Assign(root, kir.C(1)) })
		return root
	}
	pm, pt := kir.Ci(f.cost.perMerge), kir.Ci(f.cost.perTile)
	sp.per = isqrt("per", kir.Div(kir.Mul(sp.n, pm), pt))
	if f.sub < group {
		b.If(kir.Gt(kir.Div(kir.Add(sp.n, kir.Sub(sp.per, kir.C(1))), sp.per), kir.Ci(f.sub)), func() {
			b.Assign(sp.per, isqrt("per2", kir.Div(kir.Mul(sp.n, pm), kir.Ci(f.cost.perTile*f.sub))))
		})
	}
	even := b.Let("per_even", kir.Div(kir.Add(sp.n, kir.Ci(group-1)), kir.Ci(group)))
	b.If(kir.Gt(even, sp.per), func() { b.Assign(sp.per, even) })
	sp.used = b.Let("used", kir.Div(kir.Add(sp.n, kir.Sub(sp.per, kir.C(1))), sp.per))
	sp.lo = b.LetT("lo", kir.U32T, kir.Mul(slot, sp.per))
	b.If(kir.Gt(sp.lo, sp.n), func() { b.Assign(sp.lo, sp.n) })
	sp.hi = b.LetT("hi", kir.U32T, kir.Add(sp.lo, sp.per))
	b.If(kir.Gt(sp.hi, sp.n), func() { b.Assign(sp.hi, sp.n) })
	return sp
}

// helper emits whether the core at slot is a helper (group > 1) and its
// first gate tile k (its helper index).
func (f *flashSDPA) helper(b *kir.Builder, slot kir.Expr) (is, k kir.Var) {
	is = b.Let("helper", kir.Ge(slot, kir.Ci(f.group-f.helpers)))
	k = b.Let("helper_k", kir.Sub(kir.Ci(f.group-1), slot))
	return is, k
}

// chunkEnd emits min(t0 + chunk, hi), the end of the chunk at t0.
func chunkEnd(b *kir.Builder, t0, hi kir.Expr, chunk int) kir.Var {
	end := b.LetT("cend", kir.U32T, kir.Add(t0, kir.Ci(chunk)))
	b.If(kir.Gt(end, hi), func() { b.Assign(end, hi) })
	return end
}

// gateItem emits item i's vars for reading gate tiles without its q rows
// (decodeItem reads those): the user and the group's first row, or the
// gate gather's row map.
func (f *flashSDPA) gateItem(b *kir.Builder, i kir.Expr) sdpaItem {
	s, d := f.gatedSDPA, f.d
	var it sdpaItem
	it.head = b.Let("ghead", i)
	if s.groupRows {
		it.user = b.Let("guser", kir.Div(it.head, kir.Ci(d.Hkv)))
		it.groupRow = b.Let("ggroup_row", kir.Mul(kir.Mod(it.head, kir.Ci(d.Hkv)), kir.Ci(d.G)))
		return it
	}
	first := b.Let("gfirst", kir.Add(kir.Mul(kir.Div(it.head, kir.Ci(d.Hkv)), kir.Ci(d.H)), kir.Mul(kir.Mod(it.head, kir.Ci(d.Hkv)), kir.Ci(d.G))))
	s.gg.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		return []blocks.Run{{Src: 0, Row: kir.Add(first, row), Col: col}}
	}
	return it
}

// gateTile emits the push of gate tile dd of item it into the gate CB.
func (f *flashSDPA) gateTile(b *kir.Builder, it sdpaItem, dd kir.Expr) {
	s := f.gatedSDPA
	if s.groupRows {
		s.groupTiles(b, s.cbGate, s.gAcc, s.gate, "gate_l1", it, 1, func(int) kir.Expr { return dd })
	} else {
		s.gg.Page(b, s.cbGate, dd)
	}
}

// reader adds the reader (see the file's doc). Runtime args: start,
// count (items) and slot.
func (f *flashSDPA) reader() error {
	s, Dt, C := f.gatedSDPA, f.d.Dt, f.chunk
	if err := s.readerSetup(); err != nil {
		return err
	}
	rd := s.rd
	rstart, rcount, rslot := rd.RuntimeArg("start"), rd.RuntimeArg("count"), rd.RuntimeArg("slot")
	b := rd.Builder()
	if f.group == 1 {
		f.tileConsts(b)
	}
	posPage := readPosPage(b, s.pAcc, s.cbPos, s.pos)
	perItem := f.perItemPos()
	// pushPos emits the push of pos into the compute kernel's (and, group
	// > 1, the writer's) pos page.
	pushPos := func(pos kir.Var) {
		b.Comment("pos, for the compute kernel's loop counts (read_tile_value)")
		for _, cb := range []int{f.posC, f.wpos} {
			if cb == f.wpos && f.group == 1 {
				continue
			}
			pp := blocks.Reserve(b, cb, kir.C(1), "pos_page")
			b.L1Write32(pp, pos)
			b.CBPushBack(cb, kir.C(1))
		}
	}
	var lptr, lo, hi, holds kir.Var
	// span emits the split of the visible tiles of position pos (the
	// core's own, or with perItem the item's).
	span := func(pos kir.Var) {
		s.posv = pos
		sp := f.flashSpan(b, s.posv, rslot)
		lptr, lo, hi = sp.lptr, sp.lo, sp.hi
		s.lptr = lptr
		s.lrow = b.Let("lrow", kir.Mod(s.posv, kir.Ci(ir.TileSize)))
	}
	if !perItem {
		// pos [1], or (group > 1) the one item's user's word of pos [B]
		pos := posPage.shared
		if posPage.perUser {
			pos = posPage.of(b, kir.Div(rstart, kir.Ci(f.d.Hkv)), "pos")
		}
		pushPos(pos)
		span(pos)
	}
	s.gq.Begin(b, []int{s.slotQ})
	s.gg.Begin(b, []int{s.slotG})
	if f.group > 1 {
		is, k := f.helper(b, rslot)
		b.If(is, func() {
			b.Comment("a helper's gate tiles first: its compute takes their sigmoid before anything else")
			it := f.gateItem(b, rstart)
			b.ForStep("d", k, kir.Ci(Dt), kir.Ci(f.helpers), func(dd kir.Var) { f.gateTile(b, it, dd) })
		})
	}
	fb := ir.FP32.TileBytes()
	if !perItem {
		// holds: the core's tiles include pos's (group > 1: only that core
		// needs the constant tiles, which its writer makes)
		holds = b.Let("holds_pos", kir.LAnd(kir.Le(lo, lptr), kir.Lt(lptr, hi)))
	}
	stream := func() {
		var consts kir.Var
		if f.group == 1 {
			consts = blocks.ScratchPages(b, s.consts, 2, "consts")
			if !perItem {
				f.maskConsts(b, consts, s.lrow)
			}
			s.zero = b.Let("zero", consts)
			s.bound = b.Let("bound", kir.Add(consts, kir.Ci(fb)))
		} else {
			s.zero = b.LetT("zero", kir.U32T, kir.C(0))
			s.bound = b.LetT("bound", kir.U32T, kir.C(0))
		}
		kpos := b.LetT("kpos", kir.U32T, kir.C(0)) // K cache tiles pushed
		b.For("i", rstart, kir.Add(rstart, rcount), func(i kir.Var) {
			if perItem {
				b.Comment("the item's user's position: its visible tiles and mask")
				pos := posPage.of(b, kir.Div(i, kir.Ci(f.d.Hkv)), "pos")
				pushPos(pos)
				span(pos)
				f.maskConsts(b, consts, s.lrow)
			}
			it := s.decodeItem(b, i)
			b.ForStep("t0", lo, hi, kir.Ci(C), func(t0 kir.Var) {
				cend := chunkEnd(b, t0, hi, C)
				// K: the tiles of kPair cache tiles per barrier (two when a
				// cache tile's K row is one block), so that a core keeps
				// more reads in flight
				tt := b.LetT("t", kir.U32T, t0)
				// (kir has no while: a loop over the chunk's tiles that
				// acts at the next tile not yet read)
				b.For("tk", t0, cend, func(tk kir.Var) {
					b.If(kir.Eq(tk, tt), func() { f.kTiles(b, it, tt, cend, lptr, kpos, fb) })
				})
				b.ForStep("d", kir.C(0), kir.Ci(Dt), kir.Ci(f.vGroup), func(dd kir.Var) { f.valueBlock(b, it.head, t0, cend, dd) })
			})
			if f.group == 1 {
				b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) { f.gateTile(b, it, dd) })
			}
		})
		if f.group == 1 {
			blocks.ReleaseScratchPages(b, s.consts, 2)
		} else {
			b.If(holds, func() { b.CBPopFront(s.consts, kir.C(2)) })
		}
	}
	if f.group == 1 {
		stream()
	} else {
		b.If(kir.Lt(lo, hi), stream)
	}
	if s.err != nil {
		return s.err
	}
	s.gg.End(b)
	s.gq.End(b)
	blocks.ReleaseScratch(b, s.cbPos)
	return nil
}

// tileConsts emits the compute kernel's constant tiles: the reduce
// scaler (1.0), the ones column (the row sums' matmul) and a bf16 zero
// tile.
func (f *flashSDPA) tileConsts(b *kir.Builder) {
	blocks.ScalerTile(b, f.scaler, 1)
	blocks.OnesColumnTile(b, f.onesT)
	zt := blocks.Reserve(b, f.zeroT, kir.C(1), "zero_tile")
	blocks.FillWords(b, zt, ir.BF16.TileBytes(), 0)
	b.CBPushBack(f.zeroT, kir.C(1))
}

// maskConsts emits the reader's fp32 constant tiles at consts: zeros,
// then the mask of the tile holding pos (0, -inf in the columns past row
// lrow's position).
func (f *flashSDPA) maskConsts(b *kir.Builder, consts kir.Expr, lrow kir.Expr) {
	fb := ir.FP32.TileBytes()
	b.Comment("constant tiles: zeros, and the mask of the tile holding pos (-inf past it), from their row 0s together")
	bound := b.Let("bound_tile", kir.Add(consts, kir.Ci(fb)))
	b.For("c", kir.C(0), kir.Ci(ir.TileSize), func(c kir.Var) {
		off := b.Let("row0", blocks.FaceOffset(kir.C(0), c, 4))
		b.L1Write32(kir.Add(consts, off), kir.C(0))
		b.L1Write32(kir.Add(bound, off), kir.Mul(kir.Gt(c, lrow), kir.C(negInf)))
	})
	blocks.FillRowsFromRow0Tiles(b, 4, consts, bound)
}

// kTiles emits the K reads at cache tile tt of a chunk ending at cend:
// kPair tiles under one barrier where the K CB's ring allows (kpos, the
// K tiles pushed so far, even), else one; then tt moves past them. The
// mask page of pos's tile goes first (group > 1: after the constant
// tiles the writer makes).
func (f *flashSDPA) kTiles(b *kir.Builder, it sdpaItem, tt, cend, lptr, kpos kir.Var, fb int) {
	s, Dt := f.gatedSDPA, f.d.Dt
	pair := b.LetT("pair", kir.U32T, kir.Ci(f.kPair))
	// (a pair only where the K CB's ring has room for both tiles before
	// its end, at an even tile, and not for the first two: compute starts
	// on the first tile alone)
	b.If(kir.LOr(kir.LOr(kir.Gt(kir.Add(tt, pair), cend), kir.Ne(kir.Mod(kpos, kir.Ci(f.kPair)), kir.C(0))), kir.Lt(kpos, kir.C(2))), func() {
		b.Assign(pair, kir.C(1))
	})
	b.Assign(kpos, kir.Add(kpos, pair))
	b.If(kir.LAnd(kir.Le(tt, lptr), kir.Lt(lptr, kir.Add(tt, pair))), func() {
		if f.group > 1 {
			b.Comment("the constant tiles (the writer makes them; first used here): zeros, and the mask of the tile holding pos")
			consts := blocks.WaitFront(b, s.consts, kir.C(2), "consts")
			b.Assign(s.zero, consts)
			b.Assign(s.bound, kir.Add(consts, kir.Ci(fb)))
		}
		m := blocks.Reserve(b, s.mask, kir.C(1), "m")
		blocks.LocalCopy(b, s.bound, m, fb)
		b.NoCAsyncReadBarrier()
		b.CBPushBack(s.mask, kir.C(1))
	})
	b.Comment("K of the pair's cache tiles (rows past pos cleared in pos's tile)")
	tb := s.k.Type.DType.TileBytes()
	n := b.Let("k_pages", kir.Mul(pair, kir.Ci(Dt)))
	base := blocks.Reserve(b, s.cbK, n, "kl1")
	b.For("j", kir.C(0), n, func(j kir.Var) {
		page := kir.Add(kir.Mul(kir.Add(kir.Mul(it.head, kir.Ci(s.d.Lt)), tt), kir.Ci(Dt)), j)
		blocks.ReadPageTo(b, s.kAcc, page, kir.Add(base, kir.Mul(j, kir.Ci(tb))))
	})
	b.NoCAsyncReadBarrier()
	b.If(kir.LAnd(kir.Le(tt, lptr), kir.Lt(lptr, kir.Add(tt, pair))), func() {
		b.For("d", kir.C(0), kir.Ci(Dt), func(dd kir.Var) {
			at := kir.Add(base, kir.Mul(kir.Add(kir.Mul(kir.Sub(lptr, tt), kir.Ci(Dt)), dd), kir.Ci(tb)))
			blocks.ZeroRowsFromDT(b, at, s.zero, kir.Add(s.lrow, kir.C(1)), s.k.Type.DType)
		})
		b.NoCAsyncReadBarrier()
	})
	b.CBPushBack(s.cbK, n)
	b.Assign(tt, kir.Add(tt, pair))
}

// valueBlock emits vGroup blocks of f.chunk pages of the V CB under
// one barrier: block k holds V tiles (t, d0+k) of head for t in [t0,
// cend) in its first pages (rows past pos cleared in pos's tile), the
// rest unused.
func (f *flashSDPA) valueBlock(b *kir.Builder, head kir.Expr, t0, cend kir.Var, d0 kir.Var) {
	base := blocks.Reserve(b, f.cbV, kir.Ci(f.vGroup*f.chunk), "vl1")
	if f.share == nil {
		f.valueBlockInto(b, head, t0, cend, d0, base)
	} else {
		runs := make([]pageRun, f.vGroup)
		for k := range runs {
			runs[k] = pageRun{kir.Ci(k * f.chunk), kir.Sub(cend, t0)}
		}
		f.shareBlock(b, base, f.v.Type.DType.TileBytes(), runs, func() { f.valueBlockInto(b, head, t0, cend, d0, base) })
	}
	b.CBPushBack(f.cbV, kir.Ci(f.vGroup*f.chunk))
}

// valueBlockInto is valueBlock into the reserved pages at base, without
// the push.
func (f *flashSDPA) valueBlockInto(b *kir.Builder, head kir.Expr, t0, cend kir.Var, d0 kir.Var, base kir.Var) {
	s, C, nd := f.gatedSDPA, f.chunk, f.vGroup
	dt := s.v.Type.DType
	tb := dt.TileBytes()
	b.For("k", kir.C(0), kir.Ci(nd), func(k kir.Var) {
		b.For("j", kir.C(0), kir.Sub(cend, t0), func(j kir.Var) {
			page := kir.Add(kir.Mul(kir.Add(kir.Mul(head, kir.Ci(s.d.Lt)), kir.Add(t0, j)), kir.Ci(s.d.Dt)), kir.Add(d0, k))
			blocks.ReadPageTo(b, s.vAcc, page, kir.Add(base, kir.Mul(kir.Add(j, kir.Mul(k, kir.Ci(C))), kir.Ci(tb))))
		})
	})
	b.NoCAsyncReadBarrier()
	b.If(kir.LAnd(kir.Le(t0, s.lptr), kir.Lt(s.lptr, cend)), func() {
		b.For("k", kir.C(0), kir.Ci(nd), func(k kir.Var) {
			blocks.ZeroRowsFromDT(b, kir.Add(base, kir.Mul(kir.Add(kir.Sub(s.lptr, t0), kir.Mul(k, kir.Ci(C))), kir.Ci(tb))), s.zero, kir.Add(s.lrow, kir.C(1)), dt)
		})
		b.NoCAsyncReadBarrier()
	})
}

// writer adds the writer: group 1 writes its items' result tiles as
// sdpa_decode_gated always did (start, count); group > 1: every core
// takes its part in the combine, the leader sends each merged tile to the
// helper that owns it (sendResults) and a helper writes its result tiles
// (start: the item; then the combine's arguments, then the helpers' NoC
// coordinates).
func (f *flashSDPA) writer() error {
	s, Dt := f.gatedSDPA, f.d.Dt
	if s.prefill {
		return f.prefillWriter()
	}
	if f.group == 1 {
		return s.writer()
	}
	wr := newWriter(s.p, s.rs)
	oAcc := s.bind(wr, "out_addr", s.out)
	if s.err != nil {
		return s.err
	}
	s.wr = wr
	item := wr.RuntimeArg("start")
	ca := f.sc.Declare(wr)
	hx, hy := make([]kir.ArgRef, f.helpers), make([]kir.ArgRef, f.helpers)
	for k := range f.helpers {
		hx[k], hy[k] = wr.RuntimeArg(fmt.Sprintf("helper%d_x", k)), wr.RuntimeArg(fmt.Sprintf("helper%d_y", k))
	}
	b := wr.Builder()
	resBase := b.Let("res_base", kir.GetWritePtr{CB: f.res})
	b.Comment("the constant tiles: compute's, then (after pos) the reader's")
	f.tileConsts(b)
	b.Comment("pos from the reader (one DRAM read of it per core)")
	pos := b.Let("pos", kir.L1Read32{Addr: blocks.WaitFront(b, f.wpos, kir.C(1), "pos_page")})
	b.CBPopFront(f.wpos, kir.C(1))
	sp := f.flashSpan(b, pos, ca.Slot)
	b.If(kir.LAnd(kir.Le(sp.lo, sp.lptr), kir.Lt(sp.lptr, sp.hi)), func() {
		consts := blocks.Reserve(b, s.consts, kir.C(2), "consts")
		f.maskConsts(b, consts, b.Let("lrow", kir.Mod(pos, kir.Ci(ir.TileSize))))
		b.CBPushBack(s.consts, kir.C(2))
	})
	is, k := f.helper(b, ca.Slot)
	otiles := b.Let("otiles", kir.GetWritePtr{CB: s.asm})
	b.If(is, func() {
		b.Comment("helper: zeroed result tiles")
		b.CBReserveBack(s.asm, kir.Ci(s.d.G*f.own))
		blocks.FillWords(b, otiles, s.d.G*f.own*s.out.Type.DType.TileBytes(), 0)
	})
	f.sc.Emit(b, ca, sp.used)
	b.If(kir.Eq(ca.Slot, kir.C(0)), func() { f.sendResults(b, resBase, hx, hy) })
	b.If(is, func() {
		b.Comment("helper: the leader's merged tiles in, one at a time, to compute; the result tiles out")
		b.CBReserveBack(f.res, kir.Ci(f.own))
		b.For("t", kir.C(0), kir.Sub(kir.Div(kir.Add(kir.Sub(kir.Ci(Dt), k), kir.Ci(f.helpers-1)), kir.Ci(f.helpers)), kir.C(0)), func(t kir.Var) {
			b.NoCSemaphoreWaitMin(kir.GetSemaphore{ID: kir.Ci(flashSemResult)}, kir.Add(t, kir.C(1)))
			b.CBPushBack(f.res, kir.C(1))
		})
		f.writeResult(b, oAcc, otiles, b.Let("head", item), k)
		b.CBPushBack(s.asm, kir.Ci(s.d.G*f.own))
		b.CBWaitFront(s.asm, kir.Ci(s.d.G*f.own))
		b.CBPopFront(s.asm, kir.Ci(s.d.G*f.own))
	})
	return nil
}

// sendResults emits the leader's sends of its Dt merged tiles (pages of
// the combine's Out, rounded to q's dtype) to their helpers: tile j to
// helper k = j mod helpers (NoC coordinates hx[k], hy[k]), into page j /
// helpers of its CB res (at resBase: the CB's address, read before it is
// reserved anywhere), then an increment of that helper's semaphore
// flashSemResult once the write has landed. A helper takes its tiles in
// order, waiting until the semaphore counts each (noc_semaphore_wait_min).
// Deadlock-free: the leader sends after its last merge, which waits only
// for the partials every core sends before it waits for anything; a
// helper waits for its tiles only after it has sent its partial; every
// res page is written once into a CB its helper reserved whole.
func (f *flashSDPA) sendResults(b *kir.Builder, resBase kir.Var, hx, hy []kir.ArgRef) {
	s, Dt := f.gatedSDPA, f.d.Dt
	pb := s.q.Type.DType.TileBytes()
	b.Comment("leader: each merged tile to the helper that owns it")
	b.For("j", kir.C(0), kir.Ci(Dt), func(j kir.Var) {
		k := b.Let("owner", kir.Mod(j, kir.Ci(f.helpers)))
		x, y := b.LetT("owner_x", kir.U32T, hx[0]), b.LetT("owner_y", kir.U32T, hy[0])
		for h := 1; h < f.helpers; h++ {
			b.If(kir.Eq(k, kir.Ci(h)), func() {
				b.Assign(x, hx[h])
				b.Assign(y, hy[h])
			})
		}
		src := blocks.WaitFront(b, s.attn, kir.C(1), "merged")
		to := func(a kir.Expr) kir.NoCAddr { return kir.NoCAddr{X: x, Y: y, Addr: a} }
		b.NoCAsyncWrite(src, to(kir.Add(resBase, kir.Mul(kir.Div(j, kir.Ci(f.helpers)), kir.Ci(pb)))), kir.Ci(pb))
		b.NoCAsyncWriteBarrier()
		b.NoCSemaphoreInc(to(kir.GetSemaphore{ID: kir.Ci(flashSemResult)}), kir.C(1))
		b.CBPopFront(s.attn, kir.C(1))
	})
}

// writeResult emits a helper's writes of its result tiles of item head
// (b*Hkv + j): tiles d = k, k + helpers, ... (pages of cbOut in order);
// row g of result tile d is row 0 of head j*G + g's output tile d,
// assembled in zeroed pages at otiles (G per tile) by local copies as
// the pages arrive, then written under one barrier.
func (f *flashSDPA) writeResult(b *kir.Builder, oAcc *blocks.Access, otiles, head, k kir.Var) {
	s, d, Dt := f.gatedSDPA, f.d, f.d.Dt
	oeb, otb := blocks.ElemBytes(s.out.Type.DType), s.out.Type.DType.TileBytes()
	otile := func(t, g kir.Expr) kir.Expr {
		return kir.Add(otiles, kir.Mul(kir.Add(kir.Mul(t, kir.Ci(d.G)), g), kir.Ci(otb)))
	}
	u := b.Let("u", kir.Div(head, kir.Ci(d.Hkv)))
	j := b.Let("j", kir.Mod(head, kir.Ci(d.Hkv)))
	first := b.Let("first", kir.Add(kir.Mul(u, kir.Ci(d.H*Dt)), kir.Mul(j, kir.Ci(d.G*Dt))))
	src := b.Let("src", kir.GetReadPtr{CB: s.cbOut})
	nt := b.Let("own", kir.Div(kir.Add(kir.Sub(kir.Ci(Dt), k), kir.Ci(f.helpers-1)), kir.Ci(f.helpers)))
	b.For("t", kir.C(0), nt, func(t kir.Var) {
		b.CBWaitFront(s.cbOut, kir.Add(t, kir.C(1)))
		b.For("g", kir.C(0), kir.Ci(d.G), func(g kir.Var) {
			blocks.CopyTileRow(b, kir.Add(src, kir.Mul(t, kir.Ci(otb))), g, otile(t, g), kir.C(0), oeb)
		})
	})
	b.NoCAsyncReadBarrier()
	b.CBPopFront(s.cbOut, nt)
	b.For("t", kir.C(0), nt, func(t kir.Var) {
		dd := b.Let("dd", kir.Add(k, kir.Mul(t, kir.Ci(f.helpers))))
		b.For("g", kir.C(0), kir.Ci(d.G), func(g kir.Var) {
			b.NoCAsyncWrite(otile(t, g), oAcc.PageAddr(kir.Add(first, kir.Add(kir.Mul(g, kir.Ci(Dt)), dd))), kir.Ci(otb))
		})
	})
	b.NoCAsyncWriteBarrier()
}

// setArgs sets every core's runtime arguments: group 1, the items of the
// split plan (slot 0); group > 1, core i's item i/group and slot
// i%group, and the combine's arguments.
func (f *flashSDPA) setArgs() error {
	s := f.gatedSDPA
	if f.share != nil {
		for _, core := range s.cores {
			st, n := f.shareRange(core)
			s.rd.SetRuntimeArgs(core, append([]kir.ArgValue{kir.U32(uint32(st)), kir.U32(uint32(n))}, f.share.vals[core]...)...)
			s.cp.SetRuntimeArgs(core, kir.U32(uint32(n)), kir.U32(0))
			s.wr.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)))
		}
		return nil
	}
	if f.group == 1 {
		for ci, core := range s.cores {
			st, n := s.plan.Range(ci)
			if s.prefill {
				s.rd.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)))
			} else {
				s.rd.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)), kir.U32(0))
			}
			s.cp.SetRuntimeArgs(core, kir.U32(uint32(n)), kir.U32(0))
			s.wr.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)))
		}
		return nil
	}
	for i, core := range s.cores {
		ca, err := f.sc.Values(i)
		if err != nil {
			return fmt.Errorf("%s: %w", s.op.Name(), err)
		}
		item, slot := kir.U32(uint32(i/f.group)), kir.U32(uint32(i%f.group))
		s.rd.SetRuntimeArgs(core, item, kir.U32(1), slot)
		s.cp.SetRuntimeArgs(core, kir.U32(1), slot)
		args := append([]kir.ArgValue{item}, ca...)
		lead := i - i%f.group
		for k := range f.helpers {
			h := s.cores[lead+f.group-1-k]
			args = append(args, kir.NoCX(h), kir.NoCY(h))
		}
		s.wr.SetRuntimeArgs(core, args...)
	}
	return nil
}
