package lower

import (
	"cmp"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Fused Gated DeltaNet decode programs (passes/fuse_gdn.go), each one
// device program built from the blocks of package blocks. Their rounding
// points are those of the ops' Doc lines (ir/opspec/fused.go): every value
// the composed chain stores is packed in that format before the next step
// reads it; everything else stays in fp32 DEST.
//
// # gdn_conv_gates
//
// One work item is one (user b, channel tile tc) page; the items are split
// over the conv cores and the cores after them compute the gates.
//
//   - Conv reader, per batch of up to maxConvBatch items (every DRAM read
//     of the batch in flight under one barrier, then every row copy under
//     a second; the zero tile is built while the first batch's reads
//     travel; the CBs hold two batches, so the next batch's reads travel
//     while compute works), per channel tile of the batch the taps page
//     (the K taps are rows 0..K-1 of one tile; rows K.. are cleared unless
//     the taps are a block float; read once for a tile's users with
//     gather, compute keeps it for all of them), and per item the window
//     tile assembled in L1:
//     the conv state page (rows 0..K-2), the qkv row copied into row K-1
//     and rows K.. cleared (ClearRows, CopyRows: a few local NoC reads).
//     From the window it also builds the new state page (window rows
//     1..K-1 moved up one row, the rest zero) for the writer: the shift
//     register advances by data movement, bit for bit.
//   - Conv compute: window x taps (mul_tiles: the row-broadcast products
//     of the K taps at once) packed in the conv dtype (the r() of each
//     product); a column reduce (sum over the K rows, fp32 DEST) into row
//     0; r() of the sum; SiLU; pack. With gather (bf16; a channel tile's
//     B users, or two channel tiles at B = 1) the group's sums are packed
//     (the r()), the writer moves their row 0s into the rows of one tile,
//     and one SiLU covers the group.
//   - Conv writer: the conv page (with gather each item's row of the SiLU
//     tile) and rows 0..K-2 of the new state page (a batch under one
//     write barrier), the latter the state's own page when the state is
//     aliased (in place: each page is read and rewritten by one core, in
//     that order).
//   - Gate cores (the (user, head tile) rows split over the free cores;
//     g and beta on separate cores when two are free): per row in row
//     form r(a + dt_bias), r(softplus), r(exp(a_log)), g = -(softplus x
//     exp) and beta = sigmoid(b); the writer stores each value into the
//     [B*H, 1] column tiles of beta and g as one 16-byte write (gates).
//
// The window must fit one tile row (K <= 32); conv, state and qkv are bf16
// or fp32 (moved by rows); beta and g bf16 or fp32 (moved by elements).
//
// # gdn_recurrence
//
// One work item is one (user b, value head h), or, with an fp32 state
// while the grid has a core for every value tile of every head, one value
// tile of it (fused_gdn_recurrence.go): the head's Dv/32 cores then each
// decay and update their column of S, compute their tile of o and their
// partial sum of o^2, and exchange those partials for the output norm as
// the split-row norms do (multicore.Exchange: the group's leader adds
// them in fp32 on the SFPU and multicasts rsqrt; the partial and the rsqrt tile
// travel through the new-state CB behind the S' tiles, which keeps the
// program within 32 CBs). Items are split over the grid, one per core
// while cores last. Dk and Dv must be multiples of 32
// (heads are whole tiles, so GQA is addressing: key head h/G's q and k
// tiles are read straight from the packed conv output). The state dtype f
// is bf16 or fp32; vectors are kept as row tiles (row 0; the reader clears
// rows 1..31 so products over the padding are exact zeros).
//
//   - Reader, per item: q and k tiles (each twice: the sum of squares is a
//     matmul of a tile by the transpose of its copy, and the two operands
//     of an FPU op come from two CBs), the item's v, z and norm_w tiles
//     (q, k, v and z all in flight, rows 1..31 cleared, three barriers),
//     beta and g (the head's element moved to (0, 0) for a scalar
//     broadcast) and the item's Kt x (value tiles) state tiles (streamed).
//   - Compute (fp32 DEST, the context's fidelity): sum(q^2) by matmul,
//     x 1/Dk + l2_eps, rsqrt; q = q x rsqrt (scalar broadcast) x l2_scale
//     x scale (SFPU), likewise k; k transposed into column tiles; S = state
//     x exp(g); per value tile d = v - k^T S; S' = S + r(k (x) d) x beta
//     (the outer product is a matmul of the k column by the d row); o =
//     q^T S' per value tile; then sum(o^2) by matmul, rsqrt, o x rsqrt x
//     norm_w (row broadcast) and x r_z(silu(z)).
//   - Writer: the S' tiles into the new state, a value column (Dk/32
//     tiles) per barrier (the state's own pages when aliased: every state
//     page is read before any is written, by the same core), the exchange
//     when a head is split, and the item's output tiles, which no other
//     item shares.
//
// For a bf16 state every r() of the Doc line is a pack into a bf16 CB (a
// round trip through one where the value would otherwise stay in DEST).
// For an fp32 state the r() are identities, and the program avoids reading
// fp32 values through the FPU's source registers (which reduce them to
// tf32, truncating) where they persist: the decay is S + S x diag(exp(g) -
// 1) with S copied into DEST exactly, so truncation costs |exp(g) - 1| *
// 2^-10 of S per step rather than 2^-10 (a state that barely decays would
// otherwise shrink by a fixed fraction every step); d is accumulated onto
// -v in DEST, and S' = S + k (x) (d x beta) onto S in DEST (associated as
// k (x) (d x beta), equal to r(r(k d^T) x beta) up to fp32 rounding).
//
// With several items per core (B > 1, or heads over fewer cores) the
// per-user SFPU work that needs no state runs once per core: the reader
// packs the core's z rows (item x value tile) and g elements into shared
// tiles after its first item's inputs, compute takes silu and exp(g) of
// those tiles once (the same element-wise arithmetic and rounding points),
// and the writer moves each item's rows back to row 0 / element (0, 0) of
// the pages its compute consumes (fused_gdn_pack.go). The per-item input
// CBs and the new-state CB are then double buffered, so the reader runs an
// item ahead and compute packs a column while the writer drains the last.

// gdnEB sets *eb to the element size of v's dtype for data movement by
// rows or elements, or returns an error naming what.
func gdnEB(eb *int, what string, v *ir.Value) error {
	if *eb = blocks.ElemBytes(v.Type.DType); *eb != 2 && *eb != 4 {
		return fmt.Errorf("rule gdn-dtype: %s %s is %s; this program moves its rows or elements, which needs bf16 or fp32", what, v, v.Type.DType)
	}
	return nil
}

func lowerGDNConvGates(op *ir.Op, ctx *Context) (*kir.Program, error) {
	cv, err := newGDNConv(op, ctx)
	if err != nil {
		return nil, err
	}
	dx, dT := cv.x.Type.DType, cv.taps.Type.DType
	B := cv.xs[0]
	items := B * cv.ct // (user, channel tile) pages
	// A conv tile is latency-bound: a core with one item waits for its
	// DRAM reads and its local row copies (batches share the waits).
	perTile := max((3*dx.TileBytes()+dT.TileBytes()+cv.conv.Type.DType.TileBytes())/NoCBytesPerCycle, 2*DRAMReadLatencyCycles+3*L1ReadLatencyCycles)
	floor := items * (3*dx.TileBytes() + dT.TileBytes()) / DRAMBytesPerCycle
	switch {
	case dx != ir.BF16:
	case B >= 2 && B <= ir.TileSize:
		cv.group = B
	case B == 1 && cv.ct%2 == 0:
		cv.group = 2
	}
	cv.gather = cv.group > 0
	unit := max(1, cv.group) // items per planned unit: one gather group
	plan := PlanSplit(items/unit, ctx.Target.NumWorkers()-1, perTile*unit, 0, floor)
	cv.splitProgram = startProgram(op, ctx, plan)
	// A core's items are read in batches of bat: every DRAM read of a
	// batch in flight, then its row copies under one more barrier.
	cv.bat = max(1, min(plan.PerCore*unit, maxConvBatch))
	if cv.gather {
		// Whole groups per batch: the writer pops a group's new states at
		// once, so a batch that split one would wait on itself.
		cv.bat = cv.group * max(1, min(plan.PerCore, maxConvBatch/cv.group))
	}
	cv.planCBs()
	rd, cp, wr := cv.reader(), cv.compute(), cv.writer()
	// The plan's units as items.
	Split{Items: items, Cores: plan.Cores, PerCore: plan.PerCore * unit}.SetArgs(cv.cores, rd, cp, wr)
	cv.gates()
	return cv.done(cv.p)
}

// page is the (user, channel tile) page of item i and tc its channel tile
// (the reader's, a variable): i itself and i % ct, or with gather user
// i % B of tile i / B.
func (cv *gdnConv) page(b *kir.Builder, i kir.Expr) (page, tc kir.Expr) {
	if !cv.gather {
		return i, b.Let("tc", kir.Mod(i, kir.Ci(cv.ct)))
	}
	tc = b.Let("tc", kir.Div(i, kir.Ci(cv.xs[0])))
	return cv.gatherPage(b, i, tc), tc
}

// itemPage is the page of item i with gather (user i % B of channel tile
// i / B).
func (cv *gdnConv) itemPage(b *kir.Builder, i kir.Expr) kir.Var {
	return cv.gatherPage(b, i, kir.Div(i, kir.Ci(cv.xs[0])))
}

// gatherPage is the page of item i of channel tile tc with gather.
func (cv *gdnConv) gatherPage(b *kir.Builder, i, tc kir.Expr) kir.Var {
	return b.Let("page", kir.Add(kir.Mul(kir.Mod(i, kir.Ci(cv.xs[0])), kir.Ci(cv.ct)), tc))
}

// gdnConv is a gdn_conv_gates program: its operands, the element sizes
// its row moves use, and (after planCBs) the conv cores' CBs; the gate
// core is added by gates.
type gdnConv struct {
	*splitProgram         // the conv cores
	op                    *ir.Op
	st, x, taps, conv, ns *ir.Value
	xs                    ir.Shape
	K, H, ct              int // taps, heads, qkv's tile columns
	eb, ebT, ebG, ebB     int // element bytes of qkv, taps (0: block float), g, beta
	round                 bool

	bat                                                                   int // items per read batch
	cbWin, cbTaps, cbScaler, cbZero, cbSlot, cbProd, cbSum, cbConv, cbNew int
	zeroBytes                                                             int
	// gather (a bf16 conv): items run channel tile by channel tile (item i
	// is user i%B of tile i/B), and the sums (cbRows, row 0 each) of a
	// group of consecutive items (a tile's B users for B >= 2, two
	// channel tiles at B = 1) are gathered into the rows of one tile
	// (cbGath) for a single SiLU, instead of one SiLU per item's tile.
	gather         bool
	group          int // items per gathered tile (0: no gather)
	cbRows, cbGath int
}

// newGDNConv checks gdn_conv_gates' operands against the rules the
// program relies on (tile layout, shapes, window, dtypes, two cores).
func newGDNConv(op *ir.Op, ctx *Context) (*gdnConv, error) {
	if err := requireTiles(opValues(op)...); err != nil {
		return nil, err
	}
	cv := &gdnConv{op: op, st: op.Operands[0], x: op.Operands[1], taps: op.Operands[2], conv: op.Results[0], ns: op.Results[1]}
	a := op.Operands[3]
	xs, ss, as := cv.x.Type.Shape, cv.st.Type.Shape, a.Type.Shape
	if xs.Rank() != 3 || xs[1] != 1 || ss.Rank() != 3 || ss[0] != xs[0] || ss[2] != xs[2] || as.Rank() != 3 {
		return nil, fmt.Errorf("rule gdn-conv-shape: want conv_state [B, K-1, C], qkv [B, 1, C] and a [B, 1, H], got %s, %s and %s", ss, xs, as)
	}
	cv.xs, cv.ct, cv.K, cv.H = xs, tilesWide(xs), ss[1]+1, as[2]
	if cv.K < 2 || cv.K > ir.TileSize {
		return nil, fmt.Errorf("rule gdn-conv-window: %d taps; the window of K taps must fit one tile row (2 <= K <= %d)", cv.K, ir.TileSize)
	}
	if err := gdnEB(&cv.eb, "qkv", cv.x); err != nil {
		return nil, err
	}
	dx := cv.x.Type.DType
	for _, v := range []*ir.Value{cv.st, cv.conv, cv.ns} {
		if v.Type.DType != dx {
			return nil, fmt.Errorf("rule gdn-conv-dtype: %s is %s but qkv is %s; the window, the state and the conv result share one dtype", v, v.Type.DType, dx)
		}
	}
	if err := cmp.Or(gdnEB(&cv.ebG, "g", op.Results[3]), gdnEB(&cv.ebB, "beta", op.Results[2])); err != nil {
		return nil, err
	}
	if n := ctx.Target.NumWorkers(); n < 2 {
		return nil, fmt.Errorf("rule gdn-conv-cores: the conv and the gates need two worker cores, the grid has %d", n)
	}
	cv.ebT = blocks.ElemBytes(cv.taps.Type.DType) // 0 for block floats: their padding rows are left as uploaded
	return cv, nil
}

// planCBs adds the conv cores' CBs (planned).
func (cv *gdnConv) planCBs() {
	dx, dT := cv.x.Type.DType, cv.taps.Type.DType
	// Two batches deep: the reader reads the next batch while compute
	// works on this one.
	depth := 2 * cv.bat
	cbs := cv.cbs
	cv.cbWin = cbs.Input("window", dx, depth)
	cv.cbTaps = cbs.Input("taps", dT, depth/cv.tapUsers())
	cv.cbScaler = cbs.Input("scaler", ir.BF16, 1)
	cv.zeroBytes = max(dx.TileBytes(), dT.TileBytes())
	cv.cbZero = cbs.Pages(blocks.ScratchCB, "zeros", dx, cv.zeroBytes, 1)
	cv.cbSlot = cbs.Scratch("qkv_slot", dx, cv.bat)
	cv.cbProd = cbs.Scratch("products", dx, max(1, cv.group))
	cv.round = blocks.Rounds(dx)
	cv.cbSum = -1
	if cv.round && !cv.gather { // gather rounds the sum by packing it to user_sums
		cv.cbSum = cbs.Scratch("sum", dx, 1)
	}
	cv.cbConv = cbs.Output("conv", dx, depth)
	cv.cbNew = cbs.Output("new_state", dx, depth)
	if cv.gather {
		cv.cbRows = cbs.Output("user_sums", dx, cv.group)
		cv.cbGath = cbs.Input("gathered_sums", dx, 1)
	}
	cv.planned("gdn_conv_gates conv cores")
}

// tapUsers is the number of consecutive items that share one taps page
// (read once, kept by compute for all of them): a channel tile's B users
// with gather, else 1.
func (cv *gdnConv) tapUsers() int {
	if cv.gather {
		return cv.xs[0]
	}
	return 1
}

// reader adds the conv cores' reader: per batch of items the DRAM reads of
// taps, state rows and the new input row, then the windows and new states
// assembled from them by row copies.
func (cv *gdnConv) reader() *kir.Kernel {
	K, eb, ebT, bat := cv.K, cv.eb, cv.ebT, cv.bat
	dx, dT := cv.x.Type.DType, cv.taps.Type.DType
	rd := newReader(cv.p, cv.rs)
	stAcc, xAcc, tAcc := cv.bind(rd, "state_addr", cv.st), cv.bind(rd, "qkv_addr", cv.x), cv.bind(rd, "taps_addr", cv.taps)
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	slot0 := blocks.ScratchPages(b, cv.cbSlot, bat, "qkv_slots")
	tb, tbT := kir.Ci(dx.TileBytes()), kir.Ci(dT.TileBytes())
	// issue reserves n pages of taps, window and new state and puts the
	// DRAM reads of items first .. first+n-1 in flight.
	tu := cv.tapUsers()
	issue := func(first, n kir.Expr) (tp0, w0, ns0 kir.Var) {
		b.Comment("taps rows 0..K-1 (once per channel tile), state rows 0..K-2 and the new input row of every item of the batch, all in flight")
		tp0 = blocks.Reserve(b, cv.cbTaps, kir.Div(n, kir.Ci(tu)), "taps_base")
		w0 = blocks.Reserve(b, cv.cbWin, n, "win_base")
		ns0 = blocks.Reserve(b, cv.cbNew, n, "ns_base")
		b.For("j", kir.C(0), n, func(j kir.Var) {
			i, tc := cv.page(b, kir.Add(first, j))
			b.If(kir.Eq(kir.Mod(j, kir.Ci(tu)), kir.C(0)), func() {
				tp := kir.Add(tp0, kir.Mul(kir.Div(j, kir.Ci(tu)), tbT))
				if ebT != 0 {
					blocks.ReadRowsTo(b, tAcc, tc, tp, K, ebT)
				} else {
					blocks.ReadPageTo(b, tAcc, tc, tp)
				}
			})
			blocks.ReadRowsTo(b, stAcc, i, kir.Add(w0, kir.Mul(j, tb)), K-1, eb)
			blocks.ReadRowsTo(b, xAcc, i, kir.Add(slot0, kir.Mul(j, tb)), 1, eb)
		})
		return
	}
	// finish assembles the batch's n windows and new states from the
	// arrived rows (the caller has waited for the reads) and pushes them.
	finish := func(n kir.Expr, tp0, w0, ns0 kir.Var, zeros kir.Expr, beforeBarrier func()) {
		b.Comment("window: the state rows, the new input in row K-1, zeros below; new state: the window's rows 1..K-1 (the shift register)")
		if ebT != 0 {
			b.For("t", kir.C(0), kir.Div(n, kir.Ci(tu)), func(t kir.Var) {
				blocks.ClearRows(b, kir.Add(tp0, kir.Mul(t, tbT)), zeros, K, ebT)
			})
		}
		b.For("j", kir.C(0), n, func(j kir.Var) {
			w := b.Let("win", kir.Add(w0, kir.Mul(j, tb)))
			ns := b.Let("ns", kir.Add(ns0, kir.Mul(j, tb)))
			slot := b.Let("qkv_slot", kir.Add(slot0, kir.Mul(j, tb)))
			cv.fail(blocks.CopyRows(b, slot, w, 0, K-1, 1, eb))
			blocks.ClearRows(b, w, zeros, K, eb)
			cv.fail(blocks.CopyRows(b, w, ns, 1, 0, K-2, eb))
			cv.fail(blocks.CopyRows(b, slot, ns, 0, K-2, 1, eb))
			blocks.ClearRows(b, ns, zeros, K-1, eb)
		})
		if beforeBarrier != nil {
			beforeBarrier()
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(cv.cbTaps, kir.Div(n, kir.Ci(tu)))
		b.CBPushBack(cv.cbNew, n)
		b.CBPushBack(cv.cbWin, n)
	}
	end := b.Let("end", kir.Add(rstart, rcount))
	n0 := b.LetT("n0", kir.U32T, rcount)
	b.If(kir.Gt(n0, kir.Ci(bat)), func() { b.Assign(n0, kir.Ci(bat)) })
	tp0, w0, ns0 := issue(rstart, n0)
	b.Comment("the zero tile is built while the first batch's reads are in flight; the reduce scaler is a copy of it with ones in row 0 of each face, completed after the batch (compute needs it only after the first product)")
	zeros := blocks.Scratch(b, cv.cbZero, "zeros")
	blocks.FillWords(b, zeros, cv.zeroBytes, 0)
	b.NoCAsyncReadBarrier()
	sp := blocks.Reserve(b, cv.cbScaler, kir.C(1), "scaler")
	finish(n0, tp0, w0, ns0, zeros, func() { blocks.LocalCopy(b, zeros, sp, ir.BF16.TileBytes()) })
	blocks.ScalerRows(b, sp, 1)
	b.CBPushBack(cv.cbScaler, kir.C(1))
	b.ForStep("s", kir.Add(rstart, n0), end, kir.Ci(bat), func(s kir.Var) {
		n := b.LetT("n", kir.U32T, kir.Sub(end, s))
		b.If(kir.Gt(n, kir.Ci(bat)), func() { b.Assign(n, kir.Ci(bat)) })
		tp, w, ns := issue(s, n)
		b.NoCAsyncReadBarrier()
		finish(n, tp, w, ns, zeros, nil)
	})
	blocks.ReleaseScratchPages(b, cv.cbSlot, bat)
	blocks.ReleaseScratch(b, cv.cbZero)
	return rd
}

// compute adds the conv cores' compute: per item silu of the column sum
// of window x taps.
func (cv *gdnConv) compute() *kir.Kernel {
	cp, c, ccount := cv.rangeCompute("count")
	cb := c.B
	c.Startup(cv.cbWin, cv.cbTaps, cv.cbProd)
	if cv.gather {
		cv.gatherCompute(c, ccount)
		cb.CBPopFront(cv.cbScaler, kir.C(1))
		return cp
	}
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		cb.Comment("r(window x taps)")
		c.BinaryTile(kir.EltMul, blocks.BcastNone, cv.cbWin, cv.cbTaps, cv.cbProd, false, nil)
		cb.Comment("silu(r(sum over the taps)), the sum in fp32")
		cb.CBWaitFront(cv.cbScaler, kir.C(1))
		cb.CBWaitFront(cv.cbProd, kir.C(1))
		c.Acquire()
		sumOut := cv.cbConv
		if cv.round {
			sumOut = cv.cbSum
		}
		c.Reduce(kir.ReduceSum, kir.ReduceCol, cv.cbProd, cv.cbScaler, sumOut, kir.C(0), kir.C(0), kir.C(0))
		cb.CBPopFront(cv.cbProd, kir.C(1))
		if cv.round {
			c.RoundThrough(cv.cbSum)
		}
		c.SFPU(blocks.SFPUStep{Op: siluFor(cv.conv.Type.DType)}, kir.C(0))
		c.PackOut(cv.cbConv, 1)
	})
	cb.CBPopFront(cv.cbScaler, kir.C(1))
	return cp
}

// gatherCompute is compute with gather: per group, each item's r(window x
// taps) (a channel tile's users all with its one taps page) packed into
// the products pages, then each item's column sum rounded into a
// user_sums page (the pack is the r()), then SiLU once on the tile the
// writer gathers their row 0s into, packed.
func (cv *gdnConv) gatherCompute(c *blocks.Compute, ccount kir.ArgRef) {
	cb, G, tu := c.B, cv.group, cv.tapUsers()
	c.ForStep("g", kir.C(0), ccount, kir.Ci(G), func(kir.Var) {
		cb.Comment("r(window x taps) of the group's items, a channel tile's users with its one taps page")
		c.For("t", kir.C(0), kir.Ci(G/tu), func(kir.Var) {
			cb.CBWaitFront(cv.cbTaps, kir.C(1))
			c.For("u", kir.C(0), kir.Ci(tu), func(kir.Var) {
				cb.CBWaitFront(cv.cbWin, kir.C(1))
				c.Acquire()
				c.Binary(kir.EltMul, blocks.BcastNone, cv.cbWin, cv.cbTaps, kir.C(0), kir.C(0), kir.C(0))
				cb.CBPopFront(cv.cbWin, kir.C(1))
				c.PackOut(cv.cbProd, 1)
			})
			cb.CBPopFront(cv.cbTaps, kir.C(1))
		})
		cb.Comment("r(sum over the taps) of each item, the sum in fp32")
		cb.CBWaitFront(cv.cbScaler, kir.C(1))
		c.For("u", kir.C(0), kir.Ci(G), func(kir.Var) {
			cb.CBWaitFront(cv.cbProd, kir.C(1))
			c.Acquire()
			c.Reduce(kir.ReduceSum, kir.ReduceCol, cv.cbProd, cv.cbScaler, cv.cbRows, kir.C(0), kir.C(0), kir.C(0))
			cb.CBPopFront(cv.cbProd, kir.C(1))
			c.PackOut(cv.cbRows, 1)
		})
		cb.Comment("silu of the group's items, gathered into the rows of one tile")
		c.Unary(cv.cbGath, cv.cbConv, []blocks.SFPUStep{{Op: siluFor(cv.conv.Type.DType)}})
	})
}

// gatherWriter is writer with gather: per group, its items' new state
// pages (under one barrier), their sums' row 0 gathered into row u of a
// tile for compute, and the SiLU tile's row u written as row 0 of item
// u's conv page (two half-row writes; the page's other rows are padding
// no reader takes).
func (cv *gdnConv) gatherWriter(wb *kir.Builder, cAcc, nAcc *blocks.Access, wstart, wcount kir.ArgRef) {
	G, eb := cv.group, cv.eb
	half := blocks.FaceDim * eb
	tb := kir.Ci(cv.x.Type.DType.TileBytes())
	wend := wb.Let("end", kir.Add(wstart, wcount))
	wb.ForStep("g", wstart, wend, kir.Ci(G), func(g kir.Var) { // g: the group's first item
		wb.Comment("the items' new state pages")
		nb := wb.Let("ns_base", kir.GetReadPtr{CB: cv.cbNew})
		wb.For("u", kir.C(0), kir.Ci(G), func(u kir.Var) {
			pg := cv.itemPage(wb, kir.Add(g, u))
			wb.CBWaitFront(cv.cbNew, kir.Add(u, kir.C(1)))
			blocks.WriteRowsFrom(wb, nAcc, pg, kir.Add(nb, kir.Mul(u, kir.Ci(nAcc.PageSize()))), cv.K-1, eb)
		})
		wb.Comment("row 0 of each item's sum into row u of one tile")
		wb.CBWaitFront(cv.cbRows, kir.Ci(G))
		rows := wb.Let("sums", kir.GetReadPtr{CB: cv.cbRows})
		gt := blocks.Reserve(wb, cv.cbGath, kir.C(1), "gathered")
		wb.For("u", kir.C(0), kir.Ci(G), func(u kir.Var) {
			src := kir.Add(rows, kir.Mul(u, tb))
			for h := range 2 {
				blocks.LocalCopy(wb, kir.Add(src, kir.Ci(h*256*eb)), kir.Add(gt, blocks.FaceOffset(u, kir.Ci(h*blocks.FaceDim), eb)), half)
			}
		})
		wb.NoCAsyncReadBarrier()
		wb.CBPushBack(cv.cbGath, kir.C(1))
		wb.CBPopFront(cv.cbRows, kir.Ci(G))
		wb.Comment("row u of the SiLU tile to row 0 of item u's conv page")
		wb.CBWaitFront(cv.cbConv, kir.C(1))
		out := wb.Let("silu", kir.GetReadPtr{CB: cv.cbConv})
		wb.For("u", kir.C(0), kir.Ci(G), func(u kir.Var) {
			pg := cv.itemPage(wb, kir.Add(g, u))
			for h := range 2 {
				wb.NoCAsyncWrite(kir.Add(out, blocks.FaceOffset(u, kir.Ci(h*blocks.FaceDim), eb)), cAcc.PageAddrAt(pg, h*256*eb), kir.Ci(half))
			}
		})
		wb.NoCAsyncWriteBarrier()
		wb.CBPopFront(cv.cbConv, kir.C(1))
		wb.CBPopFront(cv.cbNew, kir.Ci(G))
	})
}

// writer adds the conv cores' writer: the new state and conv pages of each
// batch under one barrier.
func (cv *gdnConv) writer() *kir.Kernel {
	wr := newWriter(cv.p, cv.rs)
	cAcc, nAcc := cv.bind(wr, "conv_addr", cv.conv), cv.bind(wr, "new_state_addr", cv.ns)
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	wb := wr.Builder()
	if cv.gather {
		cv.gatherWriter(wb, cAcc, nAcc, wstart, wcount)
		return wr
	}
	wb.Comment("the new state and conv pages of a batch of items written under one barrier")
	wend := wb.Let("end", kir.Add(wstart, wcount))
	wb.ForStep("s", wstart, wend, kir.Ci(cv.bat), func(s kir.Var) {
		n := wb.LetT("n", kir.U32T, kir.Sub(wend, s))
		wb.If(kir.Gt(n, kir.Ci(cv.bat)), func() { wb.Assign(n, kir.Ci(cv.bat)) })
		nb := wb.Let("ns_base", kir.GetReadPtr{CB: cv.cbNew})
		cvb := wb.Let("conv_base", kir.GetReadPtr{CB: cv.cbConv})
		wb.For("j", kir.C(0), n, func(j kir.Var) {
			i := kir.Add(s, j)
			wb.CBWaitFront(cv.cbNew, kir.Add(j, kir.C(1)))
			blocks.WriteRowsFrom(wb, nAcc, i, kir.Add(nb, kir.Mul(j, kir.Ci(nAcc.PageSize()))), cv.K-1, cv.eb)
			wb.CBWaitFront(cv.cbConv, kir.Add(j, kir.C(1)))
			wb.NoCAsyncWrite(kir.Add(cvb, kir.Mul(j, kir.Ci(cAcc.PageSize()))), cAcc.PageAddr(i), kir.Ci(cAcc.PageSize()))
		})
		wb.NoCAsyncWriteBarrier()
		wb.CBPopFront(cv.cbNew, n)
		wb.CBPopFront(cv.cbConv, n)
	})
	return wr
}

// maxConvBatch bounds the items a conv reader has in flight at once.
const maxConvBatch = 8

// gates adds the gate kernels of gdn_conv_gates on the worker cores after
// the conv cores: the (user, head tile) rows of g and beta split over as
// many of the free cores as there are rows (each row's SFPU chain, a few
// microseconds, is the gates' whole cost), each core computing its rows
// and storing each value as its own 16-byte DRAM write into the [B*H, 1]
// column tiles (the element in column 0 of its row, the rest of the 16
// bytes zero): cores never write the same bytes, so no page is assembled
// on one core. The columns past 0 and the rows past B*H keep what the
// buffers held; readers take column 0 of rows < B*H only.
//
// With two free cores or more, g and beta run on separate cores in
// parallel (gate_* kernels: softplus, exp and the product; beta_*:
// sigmoid), the cores split between them by gateCores; with one free core
// it computes both.
func (cv *gdnConv) gates() {
	rows := cv.xs[0] * tilesWide(cv.op.Operands[3].Type.Shape)
	free := max(1, cv.ctx.Target.NumWorkers()-cv.plan.Cores)
	if free < 2 {
		cv.gateKernels("gate", cv.plan.Cores, free, true, true)
		return
	}
	gc, bc := gateCores(rows, free)
	cv.gateKernels("gate", cv.plan.Cores, gc, true, false)
	cv.gateKernels("beta", cv.plan.Cores+gc, bc, false, true)
}

// gateCores splits free >= 2 cores between g's rows and beta's (gc + bc
// <= free, both >= 1), minimising the slower side's rows per core with a
// g row counted as two beta rows (softplus and exp against one sigmoid);
// ties go to fewer cores.
func gateCores(rows, free int) (gc, bc int) {
	best := -1
	for g := 1; g < free; g++ {
		pg := (rows + g - 1) / g
		g := (rows + pg - 1) / pg // the cores that load needs
		for b := 1; b <= free-g; b++ {
			pb := (rows + b - 1) / b
			b := (rows + pb - 1) / pb
			cost := max(2*pg, pb)*1000 + g + b
			if best < 0 || cost < best {
				best, gc, bc = cost, g, b
			}
		}
	}
	return gc, bc
}

// gateKernels adds the reader, compute and writer named name_* of n cores
// from core first that compute g (doG) and beta (doBeta) of the (user,
// head tile) rows split over them.
func (cv *gdnConv) gateKernels(name string, first, n int, doG, doBeta bool) {
	o, res, p, ctx := cv.op.Operands, cv.op.Results, cv.p, cv.ctx
	a, bv, alog, dtb, beta, g := o[3], o[4], o[5], o[6], res[2], res[3]
	B, H, ht := cv.xs[0], cv.H, tilesWide(a.Type.Shape)
	gd, bd := g.Type.DType, beta.Type.DType
	rows := B * ht
	split := Split{Items: rows, Cores: min(rows, n)}
	split.PerCore = (rows + split.Cores - 1) / split.Cores
	split.Cores = (rows + split.PerCore - 1) / split.PerCore
	gcores, grs := blocks.CoresFrom(ctx.Target, first, split.Cores)
	per := split.PerCore
	cbs := blocks.NewCBPlan(p, ctx.Target, grs)
	// Every row's inputs read under one barrier (dt_bias and a_log again
	// for each user, so compute takes one of each per row).
	cbA, cbDt, cbAl, cbB, cbT, cbSp, cbE, cbGr, cbBr := -1, -1, -1, -1, -1, -1, -1, -1, -1
	if doG {
		cbA = cbs.Input("a", a.Type.DType, per)
		cbDt = cbs.Input("dt_bias", dtb.Type.DType, per)
		cbAl = cbs.Input("a_log", alog.Type.DType, per)
	}
	if doBeta {
		cbB = cbs.Input("b", bv.Type.DType, per)
	}
	if doG {
		cbT = cbs.Scratch("a_plus_dt", gd, 1)
		cbSp = cbs.Scratch("softplus", gd, 1)
		cbE = cbs.Scratch("exp_a_log", gd, 1)
		cbGr = cbs.Output("g_rows", gd, per)
	}
	if doBeta {
		cbBr = cbs.Output("beta_rows", bd, per)
	}
	outs := 0
	for _, do := range []bool{doG, doBeta} {
		if do {
			outs++
		}
	}
	// Each value's 16-byte write source: a slot per head of the core's rows.
	const slot = 16
	slots := per * ir.TileSize * slot
	cbW := cbs.Pages(blocks.ScratchCB, "write_slots", ir.UInt32, outs*slots, 1)
	cv.fail(cbs.Err(fmt.Sprintf("gdn_conv_gates %s cores keep %d gate row tiles of each result", name, per)))

	rd := p.AddKernel(&kir.Kernel{Name: name + "_reader", Role: kir.RoleReader, Processor: kir.RISCV1, NoC: 1, Cores: grs})
	type stream struct {
		acc  *blocks.Access
		cb   int
		page func(row kir.Expr) kir.Expr
		l1   kir.Var
	}
	perUser := func(row kir.Expr) kir.Expr { return row }
	shared := func(row kir.Expr) kir.Expr { return kir.Mod(row, kir.Ci(ht)) }
	var streams []*stream
	if doG {
		aAcc, dtAcc, alAcc := cv.bind(rd, "a_addr", a), cv.bind(rd, "dt_bias_addr", dtb), cv.bind(rd, "a_log_addr", alog)
		streams = append(streams, &stream{acc: aAcc, cb: cbA, page: perUser}, &stream{acc: dtAcc, cb: cbDt, page: shared}, &stream{acc: alAcc, cb: cbAl, page: shared})
	}
	if doBeta {
		streams = append(streams, &stream{acc: cv.bind(rd, "b_addr", bv), cb: cbB, page: perUser})
	}
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	for _, st := range streams {
		st.l1 = blocks.Reserve(b, st.cb, rcount, "l1")
	}
	b.For("j", kir.C(0), rcount, func(j kir.Var) {
		row := b.Let("row", kir.Add(rstart, j))
		for _, st := range streams {
			blocks.ReadPageTo(b, st.acc, st.page(row), kir.Add(st.l1, kir.Mul(j, kir.Ci(st.acc.PageSize()))))
		}
	})
	b.NoCAsyncReadBarrier()
	for _, st := range streams {
		b.CBPushBack(st.cb, rcount)
	}

	cp := p.AddKernel(&kir.Kernel{Name: name + "_compute", Role: kir.RoleCompute, Processor: kir.ComputeProc, Cores: grs,
		Compute: kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true}})
	ccount := cp.RuntimeArg("count")
	c := blocks.NewCompute(p, cp)
	cb := c.B
	z := kir.C(0)
	if doG {
		c.Startup(cbA, cbDt, cbT)
	} else {
		c.Startup(cbB, cbB, cbBr)
	}
	c.For("j", z, ccount, func(kir.Var) {
		if doG {
			cb.Comment("r(a + dt_bias)")
			c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbA, cbDt, cbT, false, nil)
			cb.Comment("r(softplus(.))")
			c.Unary(cbT, cbSp, []blocks.SFPUStep{{Op: kir.SFPUSoftplus}})
			cb.Comment("r(exp(a_log))")
			c.Unary(cbAl, cbE, []blocks.SFPUStep{{Op: kir.SFPUExp}})
			cb.Comment("g = -(softplus x exp(a_log))")
			c.BinaryTile(kir.EltMul, blocks.BcastNone, cbSp, cbE, cbGr, true, nil)
		}
		if doBeta {
			cb.Comment("beta = sigmoid(b)")
			c.Unary(cbB, cbBr, []blocks.SFPUStep{{Op: kir.SFPUSigmoid}})
		}
	})

	wr := p.AddKernel(&kir.Kernel{Name: name + "_writer", Role: kir.RoleWriter, Processor: kir.RISCV0, NoC: 0, Cores: grs})
	var gAcc, btAcc *blocks.Access
	if doG {
		gAcc = cv.bind(wr, "g_addr", g)
	}
	if doBeta {
		btAcc = cv.bind(wr, "beta_addr", beta)
	}
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	w := wr.Builder()
	w.Comment("zero the write slots while compute works: each value leaves as 16 bytes, itself then zeros")
	ws := blocks.Scratch(w, cbW, "slots")
	blocks.FillWords(w, ws, outs*slots, 0)
	store := func(acc *blocks.Access, rowsCB int, base kir.Expr, dt ir.DType, eb int) {
		w.Comment("each head's value of each row to (u*H + h, 0) of the column tiles, one 16-byte write")
		src := w.Let("rows", kir.GetReadPtr{CB: rowsCB})
		w.For("j", z, wcount, func(j kir.Var) {
			row := w.Let("row", kir.Add(wstart, j))
			u := w.Let("u", kir.Div(row, kir.Ci(ht)))
			th := w.Let("th", kir.Mod(row, kir.Ci(ht)))
			w.For("h", z, kir.Ci(ir.TileSize), func(h kir.Var) {
				hh := w.Let("hh", kir.Add(kir.Mul(th, kir.Ci(ir.TileSize)), h))
				w.If(kir.Lt(hh, kir.Ci(H)), func() {
					idx := w.Let("idx", kir.Add(kir.Mul(u, kir.Ci(H)), hh))
					sl := w.Let("slot", kir.Add(base, kir.Mul(kir.Add(kir.Mul(j, kir.Ci(ir.TileSize)), h), kir.Ci(slot))))
					blocks.MoveElem(w, kir.Add(src, kir.Mul(j, kir.Ci(dt.TileBytes()))), z, h, sl, z, z, eb)
					off := blocks.FaceOffset(kir.Mod(idx, kir.Ci(ir.TileSize)), z, eb)
					w.NoCAsyncWrite(sl, acc.PageAddrAtExpr(kir.Div(idx, kir.Ci(ir.TileSize)), off), kir.Ci(slot))
				})
			})
		})
	}
	// g's rows leave while compute finishes beta's.
	base := kir.Expr(ws)
	if doG {
		w.CBWaitFront(cbGr, wcount)
		store(gAcc, cbGr, base, gd, cv.ebG)
		base = kir.Add(ws, kir.Ci(slots))
	}
	if doBeta {
		w.CBWaitFront(cbBr, wcount)
		store(btAcc, cbBr, base, bd, cv.ebB)
	}
	w.NoCAsyncWriteBarrier()
	blocks.ReleaseScratch(w, cbW)
	if doG {
		w.CBPopFront(cbGr, wcount)
	}
	if doBeta {
		w.CBPopFront(cbBr, wcount)
	}
	split.SetArgs(gcores, rd, cp, wr)
}
