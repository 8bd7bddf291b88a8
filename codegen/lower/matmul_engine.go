package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// The decode-matmul engine: fusedMatmul builds every program of the matmul
// family (matmul.go) from an optional RMSNorm prologue (matmul_prologue.go),
// parts of output columns and an epilogue (matmul_epilogue.go).
//
// A fused matmul is [M <= 32, K] x [K, N] (the activation is one tile
// row). An activation of several tile rows (B > 1 users at decode, [B, 1,
// K]: one live row per tile row; prefill beyond 32 tokens) runs every
// kernel once per tile row, the weights streamed again for each
// (fusedMatmul.rows; no multicast then). Its output is a list of parts: a
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
// result tiles, which the writer stores. The matmul and packer
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
	// kernel repeats per tile row, weights streamed once per row.
	rows int
	// users is B > 1 when the activation is B users' packed rows [1, B,
	// K] and the results are per-user [B, 1, N] (ir.MatmulUsers): the
	// writer stores row b of each product tile into row 0 of tile row b
	// (writeUserRows); 0 otherwise.
	users int
}

// check validates the shapes and sets kt, rows, the parts' nt and a nil
// epi to epiPlain.
func (f *fusedMatmul) check() error {
	if f.epi == nil {
		f.epi = epiPlain{}
	}
	vals := []*ir.Value{f.act}
	for _, p := range f.parts {
		vals = append(vals, p.out)
		vals = append(vals, p.weights...)
	}
	for _, in := range f.epi.inputs() {
		vals = append(vals, in.v)
	}
	if f.norm != nil {
		vals = append(vals, f.norm.w)
	}
	for _, v := range vals {
		if err := requireTile("value", v); err != nil {
			return err
		}
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
		if err := f.checkPart(&f.parts[i], k); err != nil {
			return err
		}
	}
	for _, in := range f.epi.inputs() {
		if !in.v.Type.Shape.Equal(f.parts[0].out.Type.Shape) {
			return fmt.Errorf("rule matmul-epilogue-input: %s %s must have the result's shape %s", in.name, in.v.Type.Shape, f.parts[0].out.Type.Shape)
		}
	}
	return nil
}

// checkPart validates part p's weights ([K, N], one shape) and result and
// sets p.nt.
func (f *fusedMatmul) checkPart(p *mmPart, k int) error {
	as := f.act.Type.Shape
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

// costs are f's cost-model inputs (f checked).
func (f *fusedMatmul) costs(fid ir.MathFidelity) mmCosts {
	var c mmCosts
	bytes := 0
	for _, p := range f.parts {
		col := 0
		for _, w := range p.weights {
			col += f.kt * max(MatmulTileCycles(fid)+2*UnpackTileCycles, w.Type.DType.TileBytes()/NoCBytesPerCycle)
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
		c.coreCycles += f.norm.coreCycles(f.kt)
	}
	c.floorCycles = f.kt * bytes / DRAMBytesPerCycle
	// Every tile row streams the weights again.
	c.colCycles *= f.rows
	c.coreCycles *= f.rows
	c.floorCycles *= f.rows
	return c
}

// plan splits the output columns of all parts over at most maxCores
// cores. With one part of one weight and no prologue or epilogue it is
// PlanMatmul.
func (f *fusedMatmul) plan(maxCores int, fid ir.MathFidelity) Split {
	c := f.costs(fid)
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

// kBlock is the number of K rows of weight tiles the reader moves per
// barrier: as many as fit about 32 KiB per block of dest columns (two
// blocks per weight CB), at most Kt.
func (f *fusedMatmul) kBlock(dest int) int {
	biggest := 0
	for _, pt := range f.parts {
		for _, w := range pt.weights {
			biggest = max(biggest, w.Type.DType.TileBytes())
		}
	}
	kb := max(1, (32<<10)/(dest*biggest))
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

// mmProgram is a fused matmul's program while it is built: the plan, the
// cores and the CBs its reader, compute and writer share.
type mmProgram struct {
	*fusedMatmul
	ctx        *Context
	t          *target.Target
	p          *kir.Program
	dest, kb   int
	plan       Split
	ranges     [][2]int
	cores      []kir.Core
	rs         []ir.CoreRange
	mcast      bool // the writer receives the activation row by multicast
	cbAct      int  // the activation CB (the prologue's result)
	wCB        map[cbKey]int
	inCB       []int // the epilogue's inputs, in inputs() order
	outCB      map[ir.DType]int
	rd, cp, wr *kir.Kernel
}

// lower builds f's program.
func (f *fusedMatmul) lower(ctx *Context) (*kir.Program, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	p, err := newProgram(f.op, ctx)
	if err != nil {
		return nil, err
	}
	t := ctx.Target
	m := &mmProgram{fusedMatmul: f, ctx: ctx, t: t, p: p, dest: t.DestTiles(false, true)}
	m.plan = f.plan(t.NumWorkers(), ctx.Fidelity)
	m.ranges = f.coreRanges(m.plan, t.NumWorkers())
	m.plan.Cores = len(m.ranges)
	m.cores, m.rs = firstCores(t, m.plan.Cores)
	m.kb = f.kBlock(m.dest)
	m.mcast = f.norm == nil && m.plan.Cores > 1 && f.rows == 1
	if err := m.allocCBs(); err != nil {
		return nil, err
	}
	if err := m.reader(); err != nil {
		return nil, err
	}
	m.compute()
	mcastArgs, err := m.writer()
	if err != nil {
		return nil, err
	}
	m.setArgs(mcastArgs)
	return p, nil
}

// allocCBs adds the CBs: the activation (or the prologue's inputs), the
// weight CBs shared by the weights of one slot (gate: 0, up: 1) and dtype,
// the epilogue's inputs, the result CBs shared by results of one dtype,
// the epilogue's scratch and the prologue's scratch.
func (m *mmProgram) allocCBs() error {
	cbs := blocks.NewCBPlan(m.p, m.t, m.rs)
	adt := m.act.Type.DType
	if m.norm != nil {
		m.norm.inputCBs(cbs, adt, m.kt)
	} else {
		m.cbAct = cbs.Input("act", adt, m.kt)
	}
	m.wCB = map[cbKey]int{}
	for _, pt := range m.parts {
		for slot, w := range pt.weights {
			key := cbKey{slot, w.Type.DType}
			if _, ok := m.wCB[key]; !ok {
				m.wCB[key] = cbs.Input(fmt.Sprintf("weights%d", len(m.wCB)), w.Type.DType, 2*m.kb*m.dest)
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
	m.epi.scratch(cbs, m.parts[0].out.Type.DType, m.dest)
	if m.norm != nil {
		m.cbAct = m.norm.scratchCBs(cbs, m.t, adt, m.kt)
	}
	return cbs.Err(fmt.Sprintf("the fused decode matmul keeps the activation's %d tiles per core", m.kt))
}
