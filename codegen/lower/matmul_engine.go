package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// The decode-matmul engine: fusedMatmul builds every program of the matmul
// family (matmul.go) from an optional RMSNorm prologue (mmNorm),
// parts of output columns and an epilogue (matmul_epilogue.go).
//
// A fused matmul is [M <= 32, K] x [K, N] (the activation is one tile
// row). An activation of several tile rows (B > 1 users at decode, [B, 1,
// K]: one live row per tile row; prefill beyond 32 tokens) runs every
// kernel once per tile row (fusedMatmul.rows). At prefill (not users'
// rows) each core keeps its weight slice resident in L1 when it fits, so
// the weights are streamed once for all rows and the activation rows come
// by multicast (matmul_resident.go); otherwise, and for users' rows, the
// weights are streamed again for each row and every core reads the
// activation itself. Its output is a list of parts: a
// part is a run of output tile columns with the weights whose tiles for
// those columns are multiplied on the same core (one weight; gate and up
// for matmul_swiglu) and the result the part writes. The tile columns of
// all parts, laid end to end, are split over the grid by fusedMatmul.plan
// (the cost model of PlanMatmul, with every column costing the tile
// products of all its part's weights plus its epilogue, and the prologue
// added to each core's fixed cost), so a core's range may straddle parts:
// every core gets a (start, count) per part, count 0 where it has none of
// that part.
//
// Per core the reader loads the activation's Kt tiles into a resident CB
// once (with more than one core and no prologue the activation row comes
// by multicast instead, mcast.go), then per part, per sub-block of at most
// DEST-capacity output tiles (4 with fp32 DEST) streams the Kt x sub-block
// tiles of each of the part's weights and the sub-block's tiles of the
// epilogue's inputs. Compute accumulates each weight's products over K in
// fp32 DEST and packs the sub-block to the CB the epilogue names for that
// weight (mmEpilogue.dst), which rounds it once to that CB's dtype; the
// epilogue then works tile by tile on those rounded tiles and pushes the
// result tiles, which the writer stores (or, at decode, on their live
// rows the writer gathers into one tile: matmul_gather.go). The matmul and packer
// configuration is set before the loops (blocks.Compute.MatmulConfig,
// PackConfig), so the K loop body is just the tile products.

// mmPart is one run of output tile columns: the weights multiplied for
// those columns on one core and the result the columns are written to.
type mmPart struct {
	weights []*ir.Value
	out     *ir.Value
	nt      int // output tile columns (set by check)
}

// fusedMatmul is one decode-matmul program: an optional norm prologue,
// parts of output columns, and an epilogue.
type fusedMatmul struct {
	op    *ir.Op
	act   *ir.Value // a, or x for the norm prologue
	norm  *mmNorm
	parts []mmPart
	// epi is what compute does with each sub-block's products; nil: they
	// are the result (epiPlain; set by check).
	epi mmEpilogue
	kt  int
	// rows is the activation's tile rows (set by check): 1 for a decode
	// row; more (B > 1 users, or prefill beyond 32 tokens) and every
	// kernel repeats per tile row, weights streamed once per row unless
	// resident.
	rows int
	// resident: the weights are streamed once and kept in L1 for every
	// tile row (matmul_resident.go; set by lower when they fit).
	resident bool
	// users is B > 1 when the activation is B users' packed rows [1, B,
	// K] and the results are per-user [B, 1, N] (ir.MatmulUsers): the
	// writer stores row b of each product tile into row 0 of tile row b
	// (writeUserRows); 0 otherwise.
	users int
	// oneRowBlock keeps a resident program's cores on all the rows
	// (rowBlocks 1; set by lower when the row blocks' slices do not fit).
	oneRowBlock bool
	// kChunked: the resident program receives each activation row in K
	// chunks (matmul_kchunks.go; set by lower when no whole row fits).
	kChunked bool
}

// check validates the op (its operands and results, which are the
// activation, the weights, the epilogue's inputs and the results, in tile
// layout; the shapes) and sets kt, rows, the parts' nt and a nil epi to
// epiPlain.
func (f *fusedMatmul) check() error {
	if f.epi == nil {
		f.epi = epiPlain{}
	}
	if err := requireTiles(opValues(f.op)...); err != nil {
		return err
	}
	as := f.act.Type.Shape
	if as.Rank() < 2 {
		return fmt.Errorf("rule matmul-shape: the activation %s must be [..., M, K]", as)
	}
	k := as.Cols2D()
	if k == 0 || k%ir.TileSize != 0 {
		return fmt.Errorf("rule matmul-k: K = %d must be a multiple of %d (tile padding must not enter the sum)", k, ir.TileSize)
	}
	f.kt = k / ir.TileSize
	f.rows = as.Tiles() / f.kt
	if f.norm != nil {
		ws := f.norm.w.Type.Shape
		if ws.Numel() != k || ws.Rows2D() != 1 {
			return fmt.Errorf("rule norm-weight: norm weight %s must be a row vector of the %d elements of x's last dim", ws, k)
		}
	}
	for i := range f.parts {
		p := &f.parts[i]
		ws := p.weights[0].Type.Shape
		for _, w := range p.weights {
			if w.Type.Shape.Rank() != 2 || w.Type.Shape[0] != k || !w.Type.Shape.Equal(ws) {
				return fmt.Errorf("rule matmul-shape: weight %s is %s; want [K, N] with K = %d (the activation's %s), one shape per part", w, w.Type.Shape, k, as)
			}
		}
		p.nt = tilesWide(ws)
		outRows := f.rows
		if f.users > 0 {
			if f.rows != 1 || as.Rows2D() != f.users {
				return fmt.Errorf("rule matmul-users: with users = %d the activation %s must be one tile row of %d packed rows", f.users, as, f.users)
			}
			outRows = f.users // one tile row per user
		}
		if p.out.Type.Shape.Tiles() != outRows*p.nt || p.out.Type.Shape.Cols2D() != ws[1] {
			return fmt.Errorf("rule matmul-shape: result %s must be %d tile rows of %d tiles (%d columns)", p.out.Type.Shape, outRows, p.nt, ws[1])
		}
	}
	for _, in := range f.epi.inputs() {
		if !in.v.Type.Shape.Equal(f.parts[0].out.Type.Shape) {
			return fmt.Errorf("rule matmul-epilogue-input: %s %s must have the result's shape %s", in.name, in.v.Type.Shape, f.parts[0].out.Type.Shape)
		}
	}
	return nil
}

// mmCosts are the cost-model inputs of a fused matmul.
type mmCosts struct {
	// colCycles is the cost of one output column of the costliest part:
	// per K tile, the tile product (or the weight tile's NoC time) of each
	// of the part's weights; plus the epilogue's tile ops and input reads.
	colCycles int
	// coreCycles is every core's fixed cost: reading the activation, and
	// the prologue.
	coreCycles int
	// floorCycles is DRAM reading every weight tile once.
	floorCycles int
	items       int
}

// costs are f's cost-model inputs (f checked) when the weights are
// streamed per row (residentCosts: when they are resident). A one-row
// (decode) plan waits on its weight stream, so it charges a weight on
// SrcB the products of its exact fidelity on SrcA: the split, and the
// weight's block layout (WeightBlocks), do not depend on the source the
// weight feeds (TestWeightBlocksSameOnSrcB).
func (f *fusedMatmul) costs(fid ir.MathFidelity) mmCosts {
	var c mmCosts
	bytes := 0
	for _, p := range f.parts {
		col := 0
		for _, w := range p.weights {
			wf := fid
			if f.rows == 1 && onSrcB(w) {
				wf = ir.ExactMatmulFidelity(w.Type.DType)
			}
			col += f.kt * max(MatmulTileCycles(wf)+2*UnpackTileCycles, w.Type.DType.TileBytes()/NoCBytesPerCycle)
			bytes += p.nt * w.Type.DType.TileBytes()
		}
		c.colCycles = max(c.colCycles, col)
		c.items += p.nt
	}
	c.colCycles += f.epi.tileOps() * EltwiseTileCycles
	for _, in := range f.epi.inputs() {
		c.colCycles += in.v.Type.DType.TileBytes() / NoCBytesPerCycle
	}
	c.coreCycles = f.kt * f.act.Type.DType.TileBytes() / NoCBytesPerCycle
	if f.norm != nil {
		// Reading the norm weight; square, reduce and two multiplies per tile.
		c.coreCycles += f.kt*f.norm.w.Type.DType.TileBytes()/NoCBytesPerCycle + 4*f.kt*EltwiseTileCycles
	}
	c.floorCycles = f.kt * bytes / DRAMBytesPerCycle
	// Every tile row streams the weights again.
	c.colCycles *= f.rows
	c.coreCycles *= f.rows
	c.floorCycles *= f.rows
	return c
}

// planSplit splits the output columns of all parts over at most maxCores
// cores. With one part of one weight and no prologue or epilogue it is
// PlanMatmul.
func (f *fusedMatmul) planSplit(maxCores int, fid ir.MathFidelity) Split {
	c := f.costs(fid)
	if f.resident {
		c = f.residentCosts(fid)
	}
	return PlanSplit(c.items, maxCores, c.colCycles, c.coreCycles, c.floorCycles)
}

// coreRanges is each core's run of the concatenated output columns
// under split, one entry per core. When every part can start on a core of
// its own without a core taking more than split.PerCore columns or the
// grid running out (sum over parts of ceil(nt/PerCore) <= maxCores), no
// run straddles two parts: a straddling core would run one K loop per
// part, each over the whole activation, the first one stalled on the
// activation's arrival (the 27B attention's q/k/v matmul3 at 1x2: 19 us of
// its 112). Otherwise the columns are cut every PerCore, as split.Range.
func (f *fusedMatmul) coreRanges(split Split, maxCores int) [][2]int {
	var aligned [][2]int
	off := 0
	for _, pt := range f.parts {
		for s := 0; s < pt.nt; s += split.PerCore {
			aligned = append(aligned, [2]int{off + s, min(split.PerCore, pt.nt-s)})
		}
		off += pt.nt
	}
	if len(aligned) <= maxCores {
		return aligned
	}
	cut := make([][2]int, split.Cores)
	for i := range cut {
		cut[i][0], cut[i][1] = split.Range(i)
	}
	return cut
}

// weightBlockBytes is about the bytes of one weight block (a reader
// barrier and a compute wait) of a full sub-block. Smaller blocks shorten
// the stream's tail — after the last block arrives, compute still runs its
// products — at the price of more barriers. The timing model's B=1 27B
// step at 1x2 by block size (tcc perf qwen27b --mesh 1x2, predicted):
// 64 KiB 30,059 us; 32 KiB 29,094; 24 KiB 28,980; 16 KiB 28,794; 12 KiB
// 28,764; 10 KiB 28,770; 8 KiB 33,667 (one bfp8_b K row per block: the
// barriers no longer overlap the stream).
const weightBlockBytes = 12 << 10

// kBlock is the number of K rows of weight tiles the reader moves per
// barrier: as many as fit about weightBlockBytes per block of dest
// columns, at least 1, at most Kt.
func (f *fusedMatmul) kBlock(dest int) int {
	biggest := 0
	for _, pt := range f.parts {
		for _, w := range pt.weights {
			biggest = max(biggest, w.Type.DType.TileBytes())
		}
	}
	kb := max(1, weightBlockBytes/(dest*biggest))
	return min(kb, f.kt)
}

// kbRows emits the K rows of one weight block of a sub-block of sb
// columns when a full sub-block has full columns and kb rows: kb*full/sb
// (kb for a full sub-block; at most kb*dest tiles, the block's pages).
// The reader and compute kernels must agree on it.
func kbRows(b *kir.Builder, sb kir.Var, kb, full int) kir.Var {
	return b.Let("kb_rows", kir.Div(kir.Ci(kb*full), sb))
}

// rowLoop emits body once per activation tile row r (0 <= r < rows): a
// loop when rows > 1, the body with r = 0 inline otherwise (so a decode
// row's kernels have no loop).
func rowLoop(b *kir.Builder, rows int, body func(r kir.Expr)) {
	if rows == 1 {
		body(kir.C(0))
		return
	}
	b.For("r", kir.C(0), kir.Ci(rows), func(r kir.Var) { body(r) })
}

// rowPage is page p of tile row r of a value n tiles wide (p itself for a
// one-row activation).
func (f *fusedMatmul) rowPage(r kir.Expr, n, p kir.Expr) kir.Expr {
	if f.rows == 1 {
		return p
	}
	return kir.Add(kir.Mul(r, n), p)
}

// partRange is core range [s, s+n) of the concatenated columns intersected
// with part columns [off, off+nt), in the part's own columns (0, 0 when
// empty).
func partRange(s, n, off, nt int) (start, count int) {
	lo, hi := max(s, off), min(s+n, off+nt)
	if hi <= lo {
		return 0, 0
	}
	return lo - off, hi - lo
}

// cbKey is a CB shared by values of one role and dtype.
type cbKey struct {
	role int
	dt   ir.DType
}

// mmNorm is a fused matmul's RMSNorm prologue (rmsnorm_matmul): the
// activation is x normalised with weight w, eps and offset. Every matmul
// core reads x and the norm weight and computes the normalised activation
// row itself (the RMSNorm steps of norm.go: x^2 on the SFPU, reduce_tile
// row sums against a scaler of 1, *1/K, +eps, rsqrt, x * rsqrt (column
// broadcast), * (wn + offset) (row broadcast)), packed into the activation
// CB in x's dtype — the rounding r of the Doc line — before the matmul
// reads it. The alternative, one core normalising and multicasting the row
// to the others, saves the redundant ~4 eltwise tile ops per K tile on
// every core but needs a semaphore handshake across the grid; in decode
// every core reads the whole activation row anyway, the prologue is small
// next to the weight stream of a big matmul (the 27B lm_head at 1x2: 4
// tile ops per K tile against 160 x 194 weight tiles per core), and it
// keeps the program free of inter-core synchronisation. The cost model
// charges the prologue to each core.
type mmNorm struct {
	w           *ir.Value
	eps, offset float64
	x, scaler   int     // the input CBs (set by allocCBs)
	nc          normCBs // the norm's CBs (set by allocCBs)
}

// mmProgram is a fused matmul's program while it is built: the program on
// the plan's cores (splitProgram, which keeps the first error), the CBs
// its reader, compute and writer share.
type mmProgram struct {
	*fusedMatmul
	*splitProgram
	dest, kb int
	ranges   [][2]int // each core's columns (coreRanges; per row block)
	// rowBlocks is the runs of cores that split the activation rows
	// (planGrid; 1: every core multiplies every row); rdRow0 and wrRow0
	// are the reader's and the writer's first row of their core's block
	// (nil when rowBlocks is 1).
	rowBlocks      int
	rdRow0, wrRow0 kir.Expr
	share          *weightShare // pairs of row blocks share the weight stream
	// wHeld, when set, is compute's flag that every resident weight tile
	// has been waited for (after the core's first row: residentWaits).
	wHeld *kir.Var
	mcast bool // the writer receives the activation row by multicast
	// actRows is the activation tile rows cbAct holds: 1, or with resident
	// weights and the multicast 2 when they fit (actRing).
	actRows int
	cbAct   int // the activation CB (the prologue's result)
	cbPart  int // the fp32 partial sums between K chunks (kChunk)
	wCB     map[cbKey]int
	// readBlocks: every weight is placed in blocks whose groups are the
	// cores' sub-blocks (blocksMatch); the reader moves blocks.
	readBlocks bool
	// live is the live rows per output tile the epilogue was offered for
	// gathered rows (gatherRows; 0: none).
	live int
	// epiT: the epilogue takes its products as C^T tiles (every weight on
	// SrcB; mmEpilogue.transposed), so productDone and productChunk pack
	// them without transposing them back.
	epiT       bool
	inCB       []int // the epilogue's inputs, in inputs() order
	outCB      map[ir.DType]int
	rd, cp, wr *kir.Kernel
}

// lower builds f's program: with resident weights when f may keep them
// (residentOK) and its CBs then fit L1 (with whole activation rows, else
// rows in K chunks: matmul_kchunks.go), else streaming them per row.
func (f *fusedMatmul) lower(ctx *Context) (*kir.Program, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.residentOK() {
		f.resident = true
		if p, fits, err := f.build(ctx); fits {
			return p, err
		}
		if !f.oneRowBlock {
			// the row blocks' wider slices, again on all the rows
			f.oneRowBlock = true
			if p, fits, err := f.build(ctx); fits {
				return p, err
			}
		}
		if f.kChunkOK() {
			// the rows in K chunks next to the weights
			f.kChunked = true
			if p, fits, err := f.build(ctx); fits {
				return p, err
			}
			f.kChunked = false
		}
		f.resident = false
	}
	p, _, err := f.build(ctx)
	return p, err
}

// build builds f's program (f checked) as f.resident says. With resident
// weights whose CBs exceed the L1 budget it returns fits false and no
// program.
func (f *fusedMatmul) build(ctx *Context) (p *kir.Program, fits bool, err error) {
	t := ctx.Target
	plan, ranges, rowBlocks := f.planGrid(t, ctx.Fidelity)
	plan.Cores = len(ranges)
	sp := startProgram(f.op, ctx, plan)
	m := &mmProgram{fusedMatmul: f, splitProgram: sp, dest: t.DestTiles(false, true), ranges: ranges, actRows: 1, rowBlocks: rowBlocks}
	if rowBlocks > 1 {
		// full-sync DEST: sub-blocks of up to 8 fp32 tiles (fullSyncDest)
		m.dest = t.DestTiles(true, true)
	}
	m.kb = f.kBlock(m.dest)
	if m.sharesWeights() {
		m.kb = min(shareBlockScale*m.kb, f.kt) // weightShare's round trip per block
	}
	// otherwise each tile is read on its own, at its place in the blocks
	m.readBlocks = m.blocksMatch()
	m.mcast = f.norm == nil && plan.Cores > 1 && (f.rows == 1 || f.resident)
	if f.kChunked && m.kChunk() == 0 {
		return nil, false, nil
	}
	m.allocCBs()
	if f.resident && m.cbs.Bytes() > t.L1Budget() {
		return nil, false, nil
	}
	m.reader()
	m.compute()
	m.writer()
	p, err = m.done(m.p)
	return p, true, err
}

// allocCBs adds the CBs: the activation (or the prologue's inputs), the
// weight CBs shared by the weights of one slot (gate: 0, up: 1) and dtype,
// the epilogue's inputs, the result CBs shared by results of one dtype,
// the epilogue's scratch and the prologue's (planned).
func (m *mmProgram) allocCBs() {
	cbs, adt := m.cbs, m.act.Type.DType
	if n := m.norm; n != nil {
		n.x, n.scaler = cbs.Input("x", adt, m.kt), cbs.Input("scaler", ir.BF16, 1)
	} else {
		if m.resident && m.mcast {
			m.actRows = m.actRing(weightSliceBytes(m.ctx.Target, m.residentPages(m.ranges)))
		}
		pages := m.actRows * m.kt
		if p := m.kChunk(); p > 0 {
			pages = 2 * p // a ring of two K chunks
		}
		m.cbAct = cbs.Input("act", adt, pages)
		if m.kChunk() > 0 && !m.kChunkHeld() {
			m.cbPart = cbs.Scratch("partials", ir.FP32, m.partialPages())
		}
	}
	m.wCB = map[cbKey]int{}
	depth := m.weightDepth()
	for _, pt := range m.parts {
		for slot, w := range pt.weights {
			key := cbKey{slot, w.Type.DType}
			if _, ok := m.wCB[key]; !ok {
				pages := depth * m.kb * m.dest
				if m.resident {
					pages = m.residentPages(m.ranges)[key]
				}
				m.wCB[key] = cbs.Input(fmt.Sprintf("weights%d", len(m.wCB)), w.Type.DType, pages)
			}
		}
	}
	for _, in := range m.epi.inputs() {
		m.inCB = append(m.inCB, cbs.Input(in.name, in.v.Type.DType, m.dest))
	}
	m.outCB = map[ir.DType]int{}
	for _, pt := range m.parts {
		if _, ok := m.outCB[pt.out.Type.DType]; !ok {
			m.outCB[pt.out.Type.DType] = cbs.Output(fmt.Sprintf("out%d", len(m.outCB)), pt.out.Type.DType, m.dest)
		}
	}
	m.live = m.gatherRows()
	m.epi.scratch(cbs, m.parts[0].out.Type.DType, m.dest, m.live)
	if n := m.norm; n != nil {
		// Squares in fp32 when the resident rows fit next to x and the
		// activation, else bf16.
		sq := ir.FP32
		if m.kt*(2*adt.TileBytes()+ir.FP32.TileBytes())+64<<10 > m.ctx.Target.L1Budget() {
			sq = ir.BF16
		}
		m.cbAct = cbs.Scratch("act", adt, m.kt)
		n.nc = fusedNormCBs(cbs, n.x, n.scaler, m.cbAct, n.w.Type.DType, m.kt, n.offset, sq)
	}
	m.planned(fmt.Sprintf("the fused decode matmul keeps the activation's %d tiles per core", m.kt))
}

// mmPartArgs are a part's reader arguments: its weights' page access, its
// width and the core's (start, count) of its columns.
type mmPartArgs struct {
	wAcc         []*blocks.Access
	nt           kir.ArgRef
	start, count kir.ArgRef
}

// reader adds the reader: per tile row the activation (or the prologue's
// inputs; nothing when multicast), then per part, per sub-block, the
// weight blocks of each slot (in row 0 only when resident) and the
// epilogue's input tiles.
func (m *mmProgram) reader() {
	m.rd = newReader(m.p, m.rs)
	rKt := m.rd.CompileArg("kt", uint32(m.kt))
	var xAcc, wnAcc, aAcc *blocks.Access
	if m.norm != nil {
		xAcc, wnAcc = m.bind(m.rd, "x_addr", m.act), m.bind(m.rd, "wn_addr", m.norm.w)
	} else if !m.mcast {
		aAcc = m.bind(m.rd, "a_addr", m.act)
	}
	inAcc := make([]*blocks.Access, len(m.inCB))
	for i, in := range m.epi.inputs() {
		inAcc[i] = m.bind(m.rd, in.name+"_addr", in.v)
	}
	pas := make([]mmPartArgs, len(m.parts))
	for pi, pt := range m.parts {
		pa := &pas[pi]
		for slot, w := range pt.weights {
			pa.wAcc = append(pa.wAcc, m.bind(m.rd, fmt.Sprintf("w%d_%d_addr", pi, slot), w))
		}
		pa.nt = m.rd.CompileArg(fmt.Sprintf("nt%d", pi), uint32(pt.nt))
		pa.start, pa.count = m.rd.RuntimeArg(fmt.Sprintf("start%d", pi)), m.rd.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	if m.rowBlocks > 1 {
		m.rdRow0 = m.rd.RuntimeArg("row0")
	}
	b := m.rd.Builder()
	m.startWeightShare(b)
	if m.norm != nil {
		blocks.OnesColumnTile(b, m.norm.scaler)
	}
	if m.rowsInner() {
		m.readRowsInner(b, pas, inAcc, rKt)
		return
	}
	rowLoop(b, m.coreRows(), func(r kir.Expr) {
		if m.kChunk() > 0 {
			m.readWeightsFirst(b, r, pas, inAcc, rKt)
			return
		}
		if m.norm != nil {
			blocks.ReadPages(b, xAcc, m.norm.x, m.rowPage(m.permRow(r), rKt, kir.C(0)), rKt)
			blocks.ReadPages(b, wnAcc, m.norm.nc.w, kir.C(0), rKt)
		} else if !m.mcast {
			blocks.ReadPagesBatch(b, aAcc, m.cbAct, m.rowPage(m.permRow(r), rKt, kir.C(0)), rKt)
		}
		for pi, pt := range m.parts {
			pa := pas[pi]
			b.ForStep("nb", kir.C(0), pa.count, kir.Ci(m.dest), func(nb kir.Var) {
				sb := blocks.BlockLen(b, "sb", pa.count, nb, m.dest)
				col := b.Let("col", kir.Add(pa.start, nb))
				readWeights := func() { m.readSubBlockWeights(b, pt, pa, rKt, col, sb) }
				if m.resident {
					// resident: the weights arrive with row 0 and stay
					b.If(kir.Eq(r, kir.C(0)), readWeights)
				} else {
					readWeights()
				}
				for i, acc := range inAcc {
					blocks.ReadPages(b, acc, m.inCB[i], m.rowPage(blockRow(m.rdRow0, m.permRow(r)), pa.nt, col), sb)
				}
			})
		}
	})
}

// readSubBlockWeights emits the reads of the weight blocks of each of
// part pt's weights (reader arguments pa) for the sub-block of sb columns
// at col.
func (m *mmProgram) readSubBlockWeights(b *kir.Builder, pt mmPart, pa mmPartArgs, kt kir.Expr, col, sb kir.Var) {
	for slot, w := range pt.weights {
		cb, tb := m.wCB[cbKey{slot, w.Type.DType}], w.Type.DType.TileBytes()
		if m.readBlocks {
			m.readWeightBlocks(b, cb, pa.wAcc[slot], m.ctx.Blocks[w], tb, kt, col, sb)
			continue
		}
		m.readWeights(b, cb, pa.wAcc[slot], tb, kt, pa.nt, col, sb)
	}
}

// readWeights emits the reads of the kt x sb weight tiles of sub-block
// columns [col, col+sb) of a weight nt tiles wide (tiles of tb bytes) into
// cb. Blocks of kbRows K rows of the sub-block's sb columns (a sub-block
// narrower than the plan's takes more rows, so every barrier waits for
// about as many tiles as a full one): every read of a block in flight, one
// barrier per block. A block always occupies kb x dest pages of the ring
// (a short last block or sub-block leaves pages unused), so blocks never
// straddle the ring's end.
func (m *mmProgram) readWeights(b *kir.Builder, cb int, acc *blocks.Access, tb int, kt, nt kir.Expr, col, sb kir.Var) {
	kr := kbRows(b, sb, m.kb, min(m.dest, m.plan.PerCore))
	b.ForStep("k0", kir.C(0), kt, kr, func(k0 kir.Var) {
		kc := blocks.BlockLenOf(b, "kc", kt, k0, kr)
		m.weightBlock(b, cb, m.blockPages(kc, sb), func(l1 kir.Var) (kir.Expr, func()) {
			return kir.Mul(kir.Mul(kc, sb), kir.Ci(tb)), func() {
				b.For("k", kir.C(0), kc, func(kk kir.Var) {
					b.For("j", kir.C(0), sb, func(j kir.Var) {
						page := kir.Add(kir.Mul(kir.Add(k0, kk), nt), kir.Add(col, j))
						dst := kir.Add(l1, kir.Mul(kir.Add(kir.Mul(kk, sb), j), kir.Ci(tb)))
						b.NoCAsyncRead(acc.PageAddr(page), dst, kir.Ci(tb))
					})
				})
			}
		})
	})
	m.drainWeightShare(b, cb)
}

// blockPages is the CB pages a weight block of kc K rows of sb columns
// takes: kb x dest (a ring slot) when streamed, kc x sb (its tiles) when
// resident.
func (m *mmProgram) blockPages(kc, sb kir.Var) kir.Expr {
	if m.resident {
		return kir.Mul(kc, sb)
	}
	return kir.Ci(m.kb * m.dest)
}

// compute adds the compute kernel: fp32 DEST; per tile row the prologue,
// then per part, per sub-block of at most dest output tiles, the products
// of each weight slot packed to the epilogue's CB for it, and the
// epilogue.
func (m *mmProgram) compute() {
	var c *blocks.Compute
	m.cp, c = m.splitProgram.compute()
	m.cp.Compute.DstFullSyncEn = m.dest > m.ctx.Target.DestTiles(false, true)
	m.epiT = m.epi.transposed(m.allOnSrcB(), m.cp.Compute.FP32DestAccEn)
	cKt := m.cp.CompileArg("kt", uint32(m.kt))
	counts := make([]kir.ArgRef, len(m.parts))
	for pi := range m.parts {
		counts[pi] = m.cp.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	if n := m.norm; n != nil {
		c.Startup(n.x, n.scaler, n.nc.sq)
		c.B.CBWaitFront(n.scaler, kir.C(1))
	} else {
		c.MatmulStartup(m.cbAct, m.wCB[cbKey{0, m.parts[0].weights[0].Type.DType}], m.outCB[m.parts[0].out.Type.DType])
	}
	// resident: each weight CB's position in its resident tiles
	var wPos map[int]kir.Var
	if m.resident {
		wPos = m.residentWeightPos(c.B)
	}
	computeRow := func() {
		for _, cb := range m.weightCBs() {
			if v, ok := wPos[cb]; ok {
				c.B.Assign(v, kir.C(0))
			}
		}
		if n := m.norm; n != nil {
			c.B.Comment("RMSNorm prologue: the normalised activation row, rounded to x's dtype")
			n.nc.row(c, cKt, m.kt*ir.TileSize, n.eps, n.offset)
		}
		if p := m.kChunk(); p > 0 {
			if m.kChunkHeld() {
				m.computeRowChunks(c, cKt, counts, wPos, p) // the sums held in DEST over the chunks
				return
			}
			m.computeRowKChunks(c, cKt, counts, wPos, p)
			return
		}
		if m.popEarly() {
			m.computeRowPopEarly(c, cKt, counts[0], wPos)
			return
		}
		if p := m.rowChunks(); p > 0 {
			m.computeRowChunks(c, cKt, counts, wPos, p)
			return
		}
		for pi, pt := range m.parts {
			out := m.outCB[pt.out.Type.DType]
			// Enter the loop configured for the first product and its packing,
			// so a plain part's loop body keeps that configuration.
			c.PackConfig(m.epi.dst(0, out))
			c.ForStep("nb", kir.C(0), counts[pi], kir.Ci(m.dest), func(nb kir.Var) {
				sb := blocks.BlockLen(c.B, "sb", counts[pi], nb, m.dest)
				for slot, w := range pt.weights {
					wcb := m.wCB[cbKey{slot, w.Type.DType}]
					m.product(c, onSrcB(w), wcb, wPos[wcb], m.epi.dst(slot, out), cKt, sb, nil)
					m.epi.packed(c, slot, sb)
				}
				m.epi.compute(c, sb, m.inCB, out)
			})
		}
		c.B.CBWaitFront(m.cbAct, cKt)
		c.B.CBPopFront(m.cbAct, cKt)
	}
	switch {
	case m.rowsInner():
		m.computeRowsInner(c, cKt, counts, wPos)
	case m.rows == 1:
		computeRow()
	default:
		m.wHeld = m.residentWaits(c.B)
		c.For("r", kir.C(0), kir.Ci(m.coreRows()), func(kir.Var) {
			computeRow()
			if m.wHeld != nil {
				c.B.Assign(*m.wHeld, kir.C(1))
			}
		})
	}
	for _, cb := range m.weightCBs() {
		if v, ok := wPos[cb]; ok {
			c.B.CBPopFront(cb, v) // the whole resident slice, after the last row
		}
	}
	if m.norm != nil {
		c.B.CBPopFront(m.norm.scaler, kir.C(1))
	}
	m.cp.Define("MM_CORES", strconv.Itoa(m.plan.Cores))
	m.cp.Define("MM_TILES_PER_CORE", strconv.Itoa(m.plan.PerCore))
	m.cp.Define("MM_SUBBLOCK", strconv.Itoa(m.dest))
}

// product emits the sb tiles of one weight's products: the K loop over
// the weight blocks of wcb accumulating in DEST, then the sb tiles packed
// to dst, one page each. Per K step the activation tile is unpacked once
// for the sub-block's sb weight tiles. With resident weights the blocks
// are not popped: they are read at wpos, the weight CB's running
// position, which advances past them. actRow, when not nil, is the
// activation's tile row in cbAct (from its front) when it holds several.
// wT: the weight is on SrcB (matmul_srcb.go); the results are the same
// tiles of C.
func (m *mmProgram) product(c *blocks.Compute, wT bool, wcb int, wpos kir.Var, dst int, kt kir.Expr, sb kir.Var, actRow kir.Expr) {
	cb := c.B
	m.blockConfig(c, wT, wcb, sb, kt)
	c.Acquire()
	kr := kbRows(cb, sb, m.kb, min(m.dest, m.plan.PerCore))
	if m.resident && m.wHeld != nil && m.actRows > 1 {
		// per K block two waits => after the first row one K block of kt
		// (the row came during the one before: a ring of one row keeps the
		// blocks, its products start on the row's first pages)
		cb.If(kir.Ne(*m.wHeld, kir.C(0)), func() { cb.Assign(kr, kt) })
	}
	c.ForStep("k0", kir.C(0), kt, kr, func(k0 kir.Var) {
		kc := blocks.BlockLenOf(cb, "kc", kt, k0, kr)
		// The activation arrives in chunks: wait for the pages this block
		// uses (immediate after the first sub-block).
		if m.resident {
			a0 := kir.Expr(k0) // the block's first activation tile
			if actRow != nil {
				a0 = kir.Add(kir.Mul(actRow, kt), k0)
			}
			cb.CBWaitFront(m.cbAct, kir.Add(a0, kc))
			end := kir.Add(wpos, m.blockPages(kc, sb))
			m.weightWait(cb, wcb, end)
			c.For("k", kir.C(0), kc, func(kk kir.Var) {
				m.blockStep(c, wT, wcb, kir.Add(a0, kk), kir.Add(wpos, kir.Mul(kk, sb)), sb, kt)
			})
			cb.Assign(wpos, end)
			return
		}
		cb.CBWaitFront(m.cbAct, kir.Add(k0, kc))
		cb.CBWaitFront(wcb, kir.Ci(m.kb*m.dest))
		c.For("k", kir.C(0), kc, func(kk kir.Var) {
			m.blockStep(c, wT, wcb, kir.Add(k0, kk), kir.Mul(kk, sb), sb, kt)
		})
		cb.CBPopFront(wcb, kir.Ci(m.kb*m.dest))
	})
	m.productDone(c, wT, dst, sb)
}

// writer adds the writer: each part's tiles to its result, in order (per
// user row with users; gathered rows: writeGathered), after receiving the activation row by multicast
// when m.mcast (with resident weights one round per tile row: row r+1
// before row r's results when cbAct holds two rows, else row r); then
// every kernel's per-core runtime arguments.
func (m *mmProgram) writer() {
	m.wr = newWriter(m.p, m.rs)
	var mcastArgs map[kir.Core][]kir.ArgValue
	var rounds *multicore.Rounds // the activation rows' multicast (resident weights)
	if m.mcast && m.rows == 1 {
		var err error
		mcastArgs, err = actMulticast(m.p, m.ctx.Target, m.wr, m.cbAct, m.bind(m.wr, "a_addr", m.act), m.kt, blocks.LiveRows(m.act.Type.Shape), m.cores, m.rs)
		m.fail(err)
	} else if m.mcast {
		var err error
		interleave := 0
		if m.rowsInner() {
			interleave = m.rows
		}
		rounds, mcastArgs, err = actMulticastRows(m.p, m.ctx.Target, m.wr, m.cbAct, m.bind(m.wr, "a_addr", m.act), m.kt, interleave, m.rowSubRounds(), m.rowBlocks, m.actLoopback(m.ctx.Target, m.ctx.Fidelity), func() kir.Expr { return m.wrRow0 }, m.permFunc(), m.cores, m.rs)
		m.fail(err)
	}
	oAccs := make([]*blocks.Access, len(m.parts))
	for pi, pt := range m.parts {
		oAccs[pi] = m.bind(m.wr, fmt.Sprintf("out%d_addr", pi), pt.out)
	}
	wStarts, wCounts := make([]kir.ArgRef, len(m.parts)), make([]kir.ArgRef, len(m.parts))
	for pi := range m.parts {
		wStarts[pi], wCounts[pi] = m.wr.RuntimeArg(fmt.Sprintf("start%d", pi)), m.wr.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	if m.rowBlocks > 1 {
		m.wrRow0 = m.wr.RuntimeArg("row0")
	}
	sig := m.declareRowSignal() // last of the writer's runtime args (setArgs)
	wb := m.wr.Builder()
	// Each result CB's ring position (blocks.WriteTilesLive).
	ringPos := map[int]kir.Var{}
	for _, pt := range m.parts {
		if ocb := m.outCB[pt.out.Type.DType]; ringPos[ocb] == (kir.Var{}) {
			ringPos[ocb] = wb.LetT("out_pos", kir.U32T, kir.C(0))
		}
	}
	if m.rowsInner() {
		m.writeRowsInner(wb, rounds, oAccs, wStarts, wCounts, ringPos)
		// every row completes with the last sub-block
		sig.emit(wb, kir.Ci(m.coreRows()))
		sig.finish(wb)
		m.setArgs(mcastArgs)
		return
	}
	ahead := m.actRows > 1 || m.popEarly() || m.rowChunks() > 0 // multicast row r+1 before writing row r's results
	// row r's multicast: one round, or rowSubRounds sub-rounds (rowChunks)
	sub := m.rowSubRounds()
	rowRound := func(r kir.Expr) {
		if sub == 1 {
			rounds.Round(wb, r)
			return
		}
		wb.For("sub", kir.C(0), kir.Ci(sub), func(j kir.Var) { rounds.Round(wb, kir.Add(kir.Mul(r, kir.Ci(sub)), j)) })
	}
	chunkAhead := rounds != nil && m.kChunk() > 0 && sub > 1 // K chunks: the next row's first chunk before row r's results
	if rounds != nil && ahead {
		rowRound(kir.C(0))
	}
	if chunkAhead {
		rounds.Round(wb, kir.C(0))
	}
	rowLoop(wb, m.coreRows(), func(r kir.Expr) {
		if chunkAhead {
			m.writeRowChunksAhead(wb, rounds, r, sub)
		} else if rounds != nil {
			if ahead {
				// the next row, while compute works on this one
				wb.If(kir.Lt(kir.Add(r, kir.C(1)), kir.Ci(m.coreRows())), func() { rowRound(kir.Add(r, kir.C(1))) })
			} else {
				rowRound(r)
			}
		}
		for pi, pt := range m.parts {
			ocb := m.outCB[pt.out.Type.DType]
			if gs := m.epi.gathers(); len(gs) > 0 {
				m.writeGathered(wb, gs, oAccs[pi], ocb, pt, wStarts[pi], wCounts[pi])
				continue
			}
			if m.users > 0 {
				writeUserRows(wb, oAccs[pi], ocb, m.users, pt.nt, blocks.ElemBytes(pt.out.Type.DType), wStarts[pi], wCounts[pi])
				continue
			}
			// A decode row's padding rows are not written: readers of
			// the result read its live rows (blocks.ReadTilesLive).
			live := ir.TileSize
			if m.rows == 1 {
				live = blocks.LiveRows(pt.out.Type.Shape)
			}
			blocks.WriteTilesLive(wb, oAccs[pi], ocb, m.rowPage(blockRow(m.wrRow0, m.permRow(r)), kir.Ci(pt.nt), wStarts[pi]), wCounts[pi], live, blocks.ElemBytes(pt.out.Type.DType), m.dest, ringPos[ocb])
		}
		sig.emit(wb, kir.C(1))
	})
	if rounds != nil {
		rounds.Finish(wb)
	}
	sig.finish(wb)
	m.setArgs(mcastArgs)
}

// setArgs sets every core's runtime arguments: the (start, count) of each
// part in its range for the reader and the writer (after the multicast's
// arguments), the counts for compute.
func (m *mmProgram) setArgs(mcastArgs map[kir.Core][]kir.ArgValue) {
	for i, core := range m.cores {
		s, n := m.ranges[i][0], m.ranges[i][1]
		off := 0
		rv := make([]kir.ArgValue, 0, 2*len(m.parts))
		cv := make([]kir.ArgValue, 0, len(m.parts))
		for _, pt := range m.parts {
			ps, pn := partRange(s, n, off, pt.nt)
			off += pt.nt
			rv = append(rv, kir.U32(uint32(ps)), kir.U32(uint32(pn)))
			cv = append(cv, kir.U32(uint32(pn)))
		}
		if m.rowBlocks > 1 {
			// the core's row block: cores run block by block (planGrid)
			rv = append(rv, kir.U32(uint32(i/(len(m.cores)/m.rowBlocks)*m.coreRows())))
		}
		m.rd.SetRuntimeArgs(core, append(append([]kir.ArgValue(nil), rv...), m.partnerArgs(i)...)...)
		m.cp.SetRuntimeArgs(core, cv...)
		wv := make([]kir.ArgValue, 0, len(mcastArgs[core])+len(rv))
		m.wr.SetRuntimeArgs(core, append(append(append(wv, mcastArgs[core]...), rv...), m.rowSignalValues(i)...)...)
	}
}

// packDest ends a DEST acquire whose first n tiles hold results: commit,
// wait, then each tile packed to dst as one page, and the release.
// Postcondition: n pages pushed to dst, DEST released.
func packDest(c *blocks.Compute, dst int, n kir.Expr) {
	c.Commit()
	c.Wait()
	c.PackConfig(dst)
	c.For("j", kir.C(0), n, func(j kir.Var) {
		c.B.CBReserveBack(dst, kir.C(1))
		c.Pack(j, dst)
		c.B.CBPushBack(dst, kir.C(1))
	})
	c.Release()
}
