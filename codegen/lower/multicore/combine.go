package multicore

import (
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
// positions; the leader computes
//
//	out = sum_i exp(m_i - M) * O_i / sum_i exp(m_i - M) * l_i,  M = max_i m_i.
//
// A partial is Rows*(Width+2) tiles of CB X.Partial: per tile row r of q
// (in order) the Width tiles of O, then m's tile, then l's tile; m and l
// hold each row's value in column 0 (as reduce_tile<REDUCE_ROW> leaves
// it), their other columns are never read. The m_i must be finite, with
// |m_i| < 2^20 (a core that saw no position gives m = -2^16, l = 0, O =
// 0: its weight underflows to 0), and the core with the largest m has
// l >= 1/2 (its largest term is exp(s - m), 1 when m is its largest score
// s, or near 1 when m is s rounded, as flash decoding's bf16 maxima are).
//
// Protocol: the gather half of Exchange (X, GatherOnly). Every core's
// writer waits for its partial, writes it into its slot of the leader's
// Gather CB (one NoC write per page on the writer's NoC; the CB has one
// L1 address on every core), waits for the acknowledgements
// (noc_async_write_barrier, so the data lands before the count) and
// increments the leader's semaphore X.SemIn (an atomic, drained by
// kir.Finish's noc_async_atomic_barrier); the leader's writer reserves
// Group partials of Gather, waits until SemIn counts Group and pushes
// them to compute (Merge), whose Rows*Width result tiles go to CB Out.
// One semaphore, no multicast; once per program. Deadlock-free: the
// leader waits only for increments every core makes before it waits for
// anything of the combine (compute must produce its partial before
// Merge), members wait for nothing, and every Gather page is written
// once into a fresh CB with room for it.
type SplitCombine struct {
	X           *Exchange
	Rows, Width int
	// Shift (one page) and Weights (2*Group pages: a row fills it once)
	// are the leader's fp32 scratch CBs; Out (two pages) the result.
	Shift, Weights, Out int
}

// NewSplitCombine returns the combine of groups of group consecutive
// cores (their ranges rs) over partials of rows q tile rows and width O
// tiles in format dt, its CBs planned on cbs (the result in dt) and its
// semaphore sem added to p.
func NewSplitCombine(p *kir.Program, t *target.Target, cbs *blocks.CBPlan, cores []kir.Core, rs []ir.CoreRange, group, rows, width int, dt ir.DType, sem int) *SplitCombine {
	n := rows * (width + 2)
	x := &Exchange{T: t, Group: group, Cores: cores, Ranges: rs, GatherOnly: true, Pages: n, Page: dt.TileBytes(), Bytes: dt.TileBytes(),
		Partial: cbs.Output("partial", dt, n), Gather: cbs.Input("group_partials", dt, group*n), PartialName: "partial (O, m, l)"}
	x.AddSemaphores(p, sem, -1)
	return &SplitCombine{X: x, Rows: rows, Width: width, Shift: cbs.Scratch("combine_shift", ir.FP32, 1),
		Weights: cbs.Scratch("combine_weights", ir.FP32, 2*group), Out: cbs.Output("combined", dt, 2)}
}

// Merge is MergeThen of every partial, the result pages left to another
// kernel (the writer) to consume.
func (sc *SplitCombine) Merge(c *blocks.Compute, leader kir.Expr) { sc.MergeThen(c, leader, nil, nil) }

// MergeThen emits the leader's compute (when leader != 0). Per tile row r,
// in DEST[0] and DEST[1]:
//
//  1. M: the fold of the m_i by max(a, b) = a + relu(b - a) on the SFPU
//     (in fp32, so within 2^-3 of the max for |m_i| < 2^20: M only
//     shifts the exponents, so it need not be exact); -M to Shift;
//  2. w_i = exp(m_i - M) to Weights (one exp_tile per core);
//  3. L = sum_i w_i * l_i, then 1/L (recip_tile) to Shift;
//  4. s_i = w_i * (1/L) (an fp32 product on the SFPU) to Weights;
//  5. per O tile j, sum_i O_ij * s_i (s_i broadcast along the row) to Out.
//
// The w_i of steps 3 and 4 are the same FPU reads (tf32), so the weights
// s_i sum to 1 up to the fp32 roundings of L, its reciprocal and the
// products.
// The sums of products accumulate in DEST: mul_tiles adds its product to
// DEST (ELWMUL), which tile_regs_acquire hands over cleared. The products
// run on the FPU at the kernel's math fidelity (HiFi4 multiplies the
// tf32 operands the FPU truncates fp32 data to in full), the rest in fp32
// (FP32DestAccEn). It consumes Group partials of X.Gather and produces
// Rows*Width pages of Out (row r's Width tiles in order). Out holds two
// pages, so its consumer runs alongside: the writer, or, when then is not
// nil, compute itself: then is emitted after each page is pushed and must
// consume it (wait for, use and pop one page of Out), e.g. to round the
// result or go on computing with it.
//
// first (nil: 0), a run-time value below Group, skips the partials of
// the group's cores before it: they are taken as empty (weight 0) and not
// read, so a split that leaves cores without positions (flash decoding
// at a short position) merges only the cores that had some, which must
// be the last ones.
func (sc *SplitCombine) MergeThen(c *blocks.Compute, leader, first kir.Expr, then func()) {
	x, g, n, w := sc.X, kir.Ci(sc.X.Group), sc.X.Pages, sc.Width
	d0, d1 := kir.C(0), kir.C(1)
	if first == nil {
		first = kir.C(0)
	}
	sfpu := func(op kir.SFPUOp, d kir.Expr) { c.SFPU(blocks.SFPUStep{Op: op}, d) }
	add := func() { c.SFPUBinary(kir.SFPUAddBinary, d0, d1) }
	c.If(kir.Ne(leader, kir.C(0)), func() {
		c.B.Comment("leader: combine the group's partial softmax results")
		c.B.CBWaitFront(x.Gather, kir.Ci(x.Group*n))
		c.For("r", kir.C(0), kir.Ci(sc.Rows), func(r kir.Var) {
			tile := func(i, j kir.Expr) kir.Expr {
				return kir.Add(kir.Add(kir.Mul(i, kir.Ci(n)), kir.Mul(r, kir.Ci(w+2))), j)
			}
			m, l := func(i kir.Expr) kir.Expr { return tile(i, kir.Ci(w)) }, func(i kir.Expr) kir.Expr { return tile(i, kir.Ci(w+1)) }
			c.Acquire()
			foldTerms(c, first, g, func(i, d kir.Expr) { c.Copy(x.Gather, m(i), d) }, func() {
				sfpu(kir.SFPUNegative, d0)
				c.SFPUBinary(kir.SFPUAddBinary, d1, d0)
				sfpu(kir.SFPURelu, d1)
				sfpu(kir.SFPUNegative, d0)
				add()
			})
			sfpu(kir.SFPUNegative, d0)
			c.PackOut(sc.Shift, 1)
			c.B.Comment("w_i = exp(m_i - M)")
			c.B.CBWaitFront(sc.Shift, kir.C(1))
			// (a skipped partial's weight: 0, DEST as acquired)
			c.For("i", kir.C(0), g, func(i kir.Var) {
				c.Acquire()
				c.If(kir.Ge(i, first), func() {
					c.Copy(x.Gather, m(i), d0)
					c.Copy(sc.Shift, kir.C(0), d1)
					add()
					sfpu(kir.SFPUExp, d0)
				}, nil)
				c.PackOut(sc.Weights, 1)
			})
			c.B.CBPopFront(sc.Shift, kir.C(1))
			c.B.CBWaitFront(sc.Weights, g)
			c.B.Comment("1/L, L = sum_i w_i l_i; s_i = w_i / L")
			c.Acquire()
			c.For("i", first, g, func(i kir.Var) { c.Binary(kir.EltMul, blocks.BcastNone, sc.Weights, x.Gather, i, l(i), d0) })
			sfpu(kir.SFPURecip, d0)
			c.PackOut(sc.Shift, 1)
			c.B.CBWaitFront(sc.Shift, kir.C(1))
			c.For("i", kir.C(0), g, func(i kir.Var) {
				c.Acquire()
				c.If(kir.Ge(i, first), func() {
					c.Copy(sc.Weights, i, d0)
					c.Copy(sc.Shift, kir.C(0), d1)
					c.SFPUBinary(kir.SFPUMulBinary, d0, d1)
				}, nil)
				c.PackOut(sc.Weights, 1)
			})
			c.B.CBPopFront(sc.Shift, kir.C(1))
			c.B.CBPopFront(sc.Weights, g)
			c.B.CBWaitFront(sc.Weights, g)
			c.For("j", kir.C(0), kir.Ci(w), func(j kir.Var) {
				c.Acquire()
				c.For("i", first, g, func(i kir.Var) { c.Binary(kir.EltMul, blocks.BcastCols, x.Gather, sc.Weights, tile(i, j), i, d0) })
				c.PackOut(sc.Out, 1)
				if then != nil {
					then()
				}
			})
			c.B.CBPopFront(sc.Weights, g)
		})
		c.B.CBPopFront(x.Gather, kir.Ci(x.Group*n))
	}, nil)
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
