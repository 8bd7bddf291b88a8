package lower

import (
	"fmt"
	"strconv"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// Fused ops of the common fusion families (ir/opspec/fused.go,
// fusedCommonOps; the collectives are lowered elsewhere). Every program is
// assembled from package blocks and reproduces the rounding points of the
// op's Doc line: a value the composed chain stores in some dtype is packed
// into a CB of that dtype before the next step reads it.
//
// # Matmul family: one engine
//
// matmul2/3/4, matmul_add, rmsnorm_matmul and matmul_swiglu are decode
// matmuls [M <= 32, K] x [K, N] (the activation is one tile row) built by
// one engine, fusedMatmul. An activation of several tile rows (B > 1
// users at decode, [B, 1, K]: one live row per tile row; prefill beyond
// 32 tokens) runs every kernel once per tile row, the weights streamed
// again for each (fusedMatmul.rows; no multicast then). Its output is a list of parts: a part is a run
// of output tile columns with the weights whose tiles for those columns
// are multiplied on the same core (one weight; gate and up for
// matmul_swiglu) and the result the part writes. The tile columns of all
// parts, laid end to end, are split over the grid by fusedMatmul.plan (the
// cost model of PlanMatmul, with every column costing the tile products of
// all its part's weights plus its epilogue, and the prologue added to each
// core's fixed cost), so a core's range may straddle parts: every core gets
// a (start, count) per part, count 0 where it has none of that part.
//
// Per core the reader loads the activation's Kt tiles into a resident CB
// once, then per part, per sub-block of at most DEST-capacity output tiles
// (4 with fp32 DEST) streams the Kt x sub-block tiles of each of the part's
// weights (and, for matmul_add, the sub-block's residual tiles). Compute
// accumulates each weight's products over K in fp32 DEST and packs the
// sub-block, which rounds it once to the result dtype; the epilogue then
// works tile by tile on those rounded tiles. The matmul and packer
// configuration is set before the loops (blocks.Compute.MatmulConfig,
// PackConfig), so the K loop body is just the tile products:
//
//   - matmul2/3/4, rmsnorm_matmul: the packed tiles are the result (each
//     sibling's tiles go to its own result; CBs are shared between parts of
//     one dtype since parts are processed in order).
//   - matmul_add: out = r(residual + r(a @ w)): the product is packed to an
//     intermediate CB of the result dtype (r), then the FPU adds the
//     residual tile (fp32 sum of the two stored values) and packs (r).
//   - matmul_swiglu: gate and up tiles of the same output columns are
//     accumulated on the same core, one after the other, and packed to two
//     CBs of a's dtype (r(a @ w_gate), r(a @ w_up)); per tile the SFPU
//     applies silu to the gate tile, packed to a's dtype (r(silu)), and the
//     FPU multiplies it by the up tile (the fp32 product of the two stored
//     values; exact for bf16 at HiFi4), packed (r).
//
// rmsnorm_matmul's prologue: every matmul core reads x and the norm weight
// and computes the normalised activation row itself (the RMSNorm steps of
// norm.go: x^2 on the SFPU, reduce_tile row sums against a scaler of 1,
// *1/K, +eps, rsqrt, x * rsqrt (column broadcast), * (wn + offset) (row
// broadcast)), packed into the activation CB in x's dtype — the rounding r
// of the Doc line — before the matmul reads it. The alternative, one core
// normalising and multicasting the row to the others, saves the redundant
// ~4 eltwise tile ops per K tile on every core but needs a semaphore
// handshake across the grid; in decode every core reads the whole
// activation row anyway, the prologue is small next to the weight stream
// of a big matmul (the 27B lm_head at 1x2: 4 tile ops per K tile against
// 160 x 194 weight tiles per core), and it keeps the program free of inter-core
// synchronisation. The cost model charges the prologue to each core.
//
// # add_rmsnorm
//
// Tile rows are split over the grid as in norm.go. Per row the FPU adds a
// and b tile by tile (fp32) and packs each sum twice, to the h result and
// to a resident CB of a's dtype (r(h)); the RMSNorm steps then run on the
// resident rounded h and produce normed.
//
// # eltwise_chain
//
// Tiles are split as for an eltwise op. Each tile is copied into fp32
// DEST and the steps run on the SFPU one after the other; between two
// steps the tile is rounded to x's dtype exactly as the composed ops
// stored it: packed into a one-page CB of that dtype and unpacked again
// (blocks.Compute.RoundThrough; nothing to do for fp32). The last step is
// packed into the result.
//
// # embedding_reshape
//
// When the reshape keeps the tile image of the gathered rows [T, H] (the
// one-token decode [1, H] -> [1, 1, H]) the result has the embedding's
// pages and the embedding lowering writes it directly. Otherwise (several
// users: [B, H] -> [B, 1, H] puts each user's row in its own tile row; any
// other regrouping), for a tile-layout table, blocks.Gather assembles the
// reshaped result's tiles: output element e of the flattened result is
// column e % H of table row ids[e / H]. A row-major table with a
// regrouping reshape is an error (rule embedding-reshape-view).

func lowerMatmulMulti(op *ir.Op, ctx *Context) (*kir.Program, error) {
	users, err := ir.MatmulUsers(op.Attrs)
	if err != nil {
		return nil, err
	}
	f := &fusedMatmul{op: op, act: op.Operands[0], epi: epiPlain, users: users}
	for i, w := range op.Operands[1:] {
		f.parts = append(f.parts, mmPart{weights: []*ir.Value{w}, out: op.Results[i]})
	}
	return f.lower(ctx)
}

func lowerMatmulAdd(op *ir.Op, ctx *Context) (*kir.Program, error) {
	f := &fusedMatmul{op: op, act: op.Operands[0], epi: epiAdd, residual: op.Operands[2],
		parts: []mmPart{{weights: []*ir.Value{op.Operands[1]}, out: op.Result()}}}
	return f.lower(ctx)
}

func lowerRMSNormMatmul(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
	}
	f := &fusedMatmul{op: op, act: op.Operands[0], norm: &mmNorm{w: op.Operands[1], eps: eps, offset: offset},
		parts: []mmPart{{weights: []*ir.Value{op.Operands[2]}, out: op.Result()}}}
	return f.lower(ctx)
}

func lowerMatmulSwiGLU(op *ir.Op, ctx *Context) (*kir.Program, error) {
	f := &fusedMatmul{op: op, act: op.Operands[0], epi: epiSwiGLU,
		parts: []mmPart{{weights: []*ir.Value{op.Operands[1], op.Operands[2]}, out: op.Result()}}}
	return f.lower(ctx)
}

// mmEpilogue is what a fused matmul does with the packed product tiles.
type mmEpilogue uint8

const (
	// epiPlain: the packed products are the result.
	epiPlain mmEpilogue = iota
	// epiAdd: result = r(residual + r(product)).
	epiAdd
	// epiSwiGLU: result = r(r(silu(r(gate))) * r(up)); the part has the
	// gate and the up weight.
	epiSwiGLU
)

// mmPart is one run of output tile columns: the weights multiplied for
// those columns on one core and the result the columns are written to.
type mmPart struct {
	weights []*ir.Value
	out     *ir.Value
	nt      int // output tile columns (set by check)
}

// mmNorm is an RMSNorm prologue: the activation is x normalised with
// weight w, eps and offset.
type mmNorm struct {
	w           *ir.Value
	eps, offset float64
}

// fusedMatmul is one decode-matmul program: an optional norm prologue,
// parts of output columns, and an epilogue.
type fusedMatmul struct {
	op       *ir.Op
	act      *ir.Value // a, or x for the norm prologue
	norm     *mmNorm
	parts    []mmPart
	epi      mmEpilogue
	residual *ir.Value // epiAdd
	kt       int
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

// check validates the shapes and sets kt and the parts' nt.
func (f *fusedMatmul) check() error {
	vals := []*ir.Value{f.act}
	for _, p := range f.parts {
		vals = append(vals, p.out)
		vals = append(vals, p.weights...)
	}
	if f.residual != nil {
		vals = append(vals, f.residual)
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
	if f.residual != nil && !f.residual.Type.Shape.Equal(f.parts[0].out.Type.Shape) {
		return fmt.Errorf("rule matmul-add-residual: residual %s must have the result's shape %s", f.residual.Type.Shape, f.parts[0].out.Type.Shape)
	}
	return nil
}

// mmCosts are the cost-model inputs of a fused matmul.
type mmCosts struct {
	// colCycles is the cost of one output column of the costliest part:
	// per K tile, the tile product (or the weight tile's NoC time) of each
	// of the part's weights; plus the epilogue's tile ops.
	colCycles int
	// coreCycles is every core's fixed cost: reading the activation, and
	// the prologue.
	coreCycles int
	// floorCycles is DRAM reading every weight tile once.
	floorCycles int
	items       int
}

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
	switch f.epi {
	case epiAdd:
		c.colCycles += EltwiseTileCycles + f.residual.Type.DType.TileBytes()/NoCBytesPerCycle
	case epiSwiGLU:
		c.colCycles += 2 * EltwiseTileCycles
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

func (f *fusedMatmul) lower(ctx *Context) (*kir.Program, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	t := ctx.Target
	p, err := newProgram(f.op, ctx)
	if err != nil {
		return nil, err
	}
	kt := f.kt
	dest := t.DestTiles(false, true)
	plan := f.plan(t.NumWorkers(), ctx.Fidelity)
	ranges := f.coreRanges(plan, t.NumWorkers())
	plan.Cores = len(ranges)
	cores, rs := firstCores(t, plan.Cores)
	adt := f.act.Type.DType

	// CBs. Weight CBs are shared by the weights of one slot (gate: 0, up:
	// 1) and dtype; result CBs by results of one dtype.
	cbs := blocks.NewCBPlan(p, t, rs)
	var nc *normCBs
	var cbX, cbScaler int
	if f.norm != nil {
		cbX = cbs.Input("x", adt, kt)
		cbScaler = cbs.Input("scaler", ir.BF16, 1)
	}
	cbAct := -1
	if f.norm == nil {
		cbAct = cbs.Input("act", adt, kt)
	}
	wCB := map[cbKey]int{}
	kb := f.kBlock(dest)
	for _, pt := range f.parts {
		for slot, w := range pt.weights {
			key := cbKey{slot, w.Type.DType}
			if _, ok := wCB[key]; !ok {
				wCB[key] = cbs.Input(fmt.Sprintf("weights%d", len(wCB)), w.Type.DType, 2*kb*dest)
			}
		}
	}
	cbRes := -1
	if f.epi == epiAdd {
		cbRes = cbs.Input("residual", f.residual.Type.DType, dest)
	}
	outCB := map[ir.DType]int{}
	for _, pt := range f.parts {
		if _, ok := outCB[pt.out.Type.DType]; !ok {
			outCB[pt.out.Type.DType] = cbs.Output(fmt.Sprintf("out%d", len(outCB)), pt.out.Type.DType, dest)
		}
	}
	odt := f.parts[0].out.Type.DType
	cbMM, cbGate, cbUp, cbSilu := -1, -1, -1, -1
	switch f.epi {
	case epiAdd:
		cbMM = cbs.Scratch("product", odt, dest)
	case epiSwiGLU:
		cbGate = cbs.Scratch("gate", odt, dest)
		cbUp = cbs.Scratch("up", odt, dest)
		cbSilu = cbs.Scratch("silu_gate", odt, 1)
	}
	if f.norm != nil {
		// Squares in fp32 when the resident rows fit next to x and the
		// activation, else bf16.
		sq := ir.FP32
		if kt*(2*adt.TileBytes()+ir.FP32.TileBytes())+64<<10 > t.L1Budget() {
			sq = ir.BF16
		}
		cbAct = cbs.Scratch("act", adt, kt)
		n := fusedNormCBs(cbs, cbX, cbScaler, cbAct, f.norm.w.Type.DType, kt, f.norm.offset, sq)
		nc = &n
	}
	if err := cbs.Err(fmt.Sprintf("the fused decode matmul keeps the activation's %d tiles per core", kt)); err != nil {
		return nil, err
	}

	// Reader. With more than one core and no norm prologue the activation
	// row comes by multicast (mcast.go), received by the writer.
	mcast := f.norm == nil && plan.Cores > 1 && f.rows == 1
	rd := newReader(p, rs)
	rKt := rd.CompileArg("kt", uint32(kt))
	b := rd.Builder()
	var xAcc, wnAcc *blocks.Access
	if f.norm != nil {
		if xAcc, err = accessOf(ctx, rd, "x_addr", f.act); err != nil {
			return nil, err
		}
		if wnAcc, err = accessOf(ctx, rd, "wn_addr", f.norm.w); err != nil {
			return nil, err
		}
		blocks.ScalerTile(b, cbScaler, 1)
	}
	var aAcc *blocks.Access
	if f.norm == nil && !mcast {
		if aAcc, err = accessOf(ctx, rd, "a_addr", f.act); err != nil {
			return nil, err
		}
	}
	var resAcc *blocks.Access
	if f.epi == epiAdd {
		if resAcc, err = accessOf(ctx, rd, "residual_addr", f.residual); err != nil {
			return nil, err
		}
	}
	type partArgs struct {
		wAcc         []*blocks.Access
		nt           kir.ArgRef
		start, count kir.ArgRef
	}
	pas := make([]partArgs, len(f.parts))
	for pi, pt := range f.parts {
		pa := &pas[pi]
		pa.wAcc = make([]*blocks.Access, len(pt.weights))
		for slot, w := range pt.weights {
			if pa.wAcc[slot], err = accessOf(ctx, rd, fmt.Sprintf("w%d_%d_addr", pi, slot), w); err != nil {
				return nil, err
			}
		}
		pa.nt = rd.CompileArg(fmt.Sprintf("nt%d", pi), uint32(pt.nt))
		pa.start, pa.count = rd.RuntimeArg(fmt.Sprintf("start%d", pi)), rd.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	// rowPage is page p of tile row r of a value n tiles wide.
	rowPage := func(r kir.Expr, n, p kir.Expr) kir.Expr {
		if f.rows == 1 {
			return p
		}
		return kir.Add(kir.Mul(r, n), p)
	}
	rowLoop(b, f.rows, func(r kir.Expr) {
		if f.norm != nil {
			blocks.ReadPages(b, xAcc, cbX, rowPage(r, rKt, kir.C(0)), rKt)
			blocks.ReadPages(b, wnAcc, nc.w, kir.C(0), rKt)
		} else if !mcast {
			blocks.ReadPagesBatch(b, aAcc, cbAct, rowPage(r, rKt, kir.C(0)), rKt)
		}
		for pi, pt := range f.parts {
			wAcc, rNt, start, count := pas[pi].wAcc, pas[pi].nt, pas[pi].start, pas[pi].count
			b.ForStep("nb", kir.C(0), count, kir.Ci(dest), func(nb kir.Var) {
				sb := subBlock(b, count, nb, dest)
				col := b.Let("col", kir.Add(start, nb))
				for slot, w := range pt.weights {
					cb := wCB[cbKey{slot, w.Type.DType}]
					tb := w.Type.DType.TileBytes()
					// Blocks of kbRows K rows of the sub-block's sb columns (a
					// sub-block narrower than the plan's takes more rows, so every
					// barrier waits for about as many tiles as a full one): every
					// read of a block in flight, one barrier per block. A block always
					// occupies kb x dest pages of the ring (a short last block or
					// sub-block leaves pages unused), so blocks never straddle the
					// ring's end.
					kr := kbRows(b, sb, kb, min(dest, plan.PerCore))
					b.ForStep("k0", kir.C(0), rKt, kr, func(k0 kir.Var) {
						kc := blocks.BlockLenOf(b, "kc", rKt, k0, kr)
						b.CBReserveBack(cb, kir.Ci(kb*dest))
						l1 := b.Let("l1", kir.GetWritePtr{CB: cb})
						b.For("k", kir.C(0), kc, func(kk kir.Var) {
							b.For("j", kir.C(0), sb, func(j kir.Var) {
								page := kir.Add(kir.Mul(kir.Add(k0, kk), rNt), kir.Add(col, j))
								dst := kir.Add(l1, kir.Mul(kir.Add(kir.Mul(kk, sb), j), kir.Ci(tb)))
								b.NoCAsyncRead(wAcc[slot].PageAddr(page), dst, kir.Ci(tb))
							})
						})
						b.NoCAsyncReadBarrier()
						b.CBPushBack(cb, kir.Ci(kb*dest))
					})
				}
				if f.epi == epiAdd {
					blocks.ReadPages(b, resAcc, cbRes, rowPage(r, rNt, col), sb)
				}
			})
		}
	})

	// Compute: fp32 DEST, sub-blocks of at most `dest` output tiles.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	cKt := cp.CompileArg("kt", uint32(kt))
	c := blocks.NewCompute(p, cp)
	cb := c.B
	counts := make([]kir.ArgRef, len(f.parts))
	for pi := range f.parts {
		counts[pi] = cp.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	firstW := wCB[cbKey{0, f.parts[0].weights[0].Type.DType}]
	if f.norm != nil {
		c.Startup(cbX, cbScaler, nc.sq)
		cb.CBWaitFront(cbScaler, kir.C(1))
	} else {
		c.MatmulStartup(cbAct, firstW, outCB[f.parts[0].out.Type.DType])
	}
	computeRow := func() {
		if f.norm != nil {
			cb.Comment("RMSNorm prologue: the normalised activation row, rounded to x's dtype")
			nc.row(c, cKt, kt*ir.TileSize, f.norm.eps, f.norm.offset)
		}
		for pi, pt := range f.parts {
			out := outCB[pt.out.Type.DType]
			count := counts[pi]
			// Enter the loop configured for the first product and its packing,
			// so a plain part's loop body keeps that configuration.
			first := out
			switch f.epi {
			case epiAdd:
				first = cbMM
			case epiSwiGLU:
				first = cbGate
			}
			c.PackConfig(first)
			c.ForStep("nb", kir.C(0), count, kir.Ci(dest), func(nb kir.Var) {
				sb := subBlock(cb, count, nb, dest)
				for slot, w := range pt.weights {
					wcb := wCB[cbKey{slot, w.Type.DType}]
					dst := out
					switch {
					case f.epi == epiAdd:
						dst = cbMM
					case f.epi == epiSwiGLU && slot == 0:
						dst = cbGate
					case f.epi == epiSwiGLU:
						dst = cbUp
					}
					// Block matmul: per K step the activation tile is unpacked
					// once for the sub-block's sb weight tiles.
					c.MatmulBlockConfig(cbAct, wcb, sb, cKt)
					c.Acquire()
					kr := kbRows(cb, sb, kb, min(dest, plan.PerCore))
					c.ForStep("k0", kir.C(0), cKt, kr, func(k0 kir.Var) {
						kc := blocks.BlockLenOf(cb, "kc", cKt, k0, kr)
						// The activation arrives in chunks: wait for the pages
						// this block uses (immediate after the first sub-block).
						cb.CBWaitFront(cbAct, kir.Add(k0, kc))
						cb.CBWaitFront(wcb, kir.Ci(kb*dest))
						c.For("k", kir.C(0), kc, func(kk kir.Var) {
							c.MatmulBlock(cbAct, wcb, kir.Add(k0, kk), kir.Mul(kk, sb), kir.C(0), sb, cKt)
						})
						cb.CBPopFront(wcb, kir.Ci(kb*dest))
					})
					c.Commit()
					c.Wait()
					c.PackConfig(dst)
					c.For("j", kir.C(0), sb, func(j kir.Var) {
						cb.CBReserveBack(dst, kir.C(1))
						c.Pack(j, dst)
						cb.CBPushBack(dst, kir.C(1))
					})
					c.Release()
				}
				switch f.epi {
				case epiAdd:
					cb.Comment("epilogue: residual + the rounded product")
					c.For("j", kir.C(0), sb, func(kir.Var) {
						c.BinaryTile(kir.EltAdd, blocks.BcastNone, cbRes, cbMM, out, false, nil)
					})
				case epiSwiGLU:
					cb.Comment("epilogue: silu(gate), rounded, times up")
					c.For("j", kir.C(0), sb, func(kir.Var) {
						c.Unary(cbGate, cbSilu, []blocks.SFPUStep{{Op: kir.SFPUSiLU}})
						c.BinaryTile(kir.EltMul, blocks.BcastNone, cbSilu, cbUp, out, false, nil)
					})
				}
			})
		}
		cb.CBWaitFront(cbAct, cKt)
		cb.CBPopFront(cbAct, cKt)
	}
	if f.rows == 1 {
		computeRow()
	} else {
		c.For("r", kir.C(0), kir.Ci(f.rows), func(kir.Var) { computeRow() })
	}
	if f.norm != nil {
		cb.CBPopFront(cbScaler, kir.C(1))
	}
	cp.Define("MM_CORES", strconv.Itoa(plan.Cores))
	cp.Define("MM_TILES_PER_CORE", strconv.Itoa(plan.PerCore))
	cp.Define("MM_SUBBLOCK", strconv.Itoa(dest))

	// Writer: each part's tiles to its result, in order.
	wr := newWriter(p, rs)
	var mcastArgs map[kir.Core][]kir.ArgValue
	if mcast {
		aAcc, err := accessOf(ctx, wr, "a_addr", f.act)
		if err != nil {
			return nil, err
		}
		if mcastArgs, err = actMulticast(p, t, wr, cbAct, aAcc, kt, blocks.LiveRows(f.act.Type.Shape), cores, rs); err != nil {
			return nil, err
		}
	}
	wb := wr.Builder()
	oAccs := make([]*blocks.Access, len(f.parts))
	for pi, pt := range f.parts {
		if oAccs[pi], err = accessOf(ctx, wr, fmt.Sprintf("out%d_addr", pi), pt.out); err != nil {
			return nil, err
		}
	}
	wStarts, wCounts := make([]kir.ArgRef, len(f.parts)), make([]kir.ArgRef, len(f.parts))
	for pi := range f.parts {
		wStarts[pi], wCounts[pi] = wr.RuntimeArg(fmt.Sprintf("start%d", pi)), wr.RuntimeArg(fmt.Sprintf("count%d", pi))
	}
	rowLoop(wb, f.rows, func(r kir.Expr) {
		for pi, pt := range f.parts {
			if f.users > 0 {
				writeUserRows(wb, oAccs[pi], outCB[pt.out.Type.DType], f.users, pt.nt, blocks.ElemBytes(pt.out.Type.DType), wStarts[pi], wCounts[pi])
				continue
			}
			blocks.WritePages(wb, oAccs[pi], outCB[pt.out.Type.DType], rowPage(r, kir.Ci(pt.nt), wStarts[pi]), wCounts[pi])
		}
	})

	for i, core := range cores {
		s, n := ranges[i][0], ranges[i][1]
		off := 0
		var rv, cv, wv []kir.ArgValue
		for _, pt := range f.parts {
			ps, pn := partRange(s, n, off, pt.nt)
			off += pt.nt
			rv = append(rv, kir.U32(uint32(ps)), kir.U32(uint32(pn)))
			cv = append(cv, kir.U32(uint32(pn)))
		}
		wv = rv
		if mcast {
			wv = append(append([]kir.ArgValue(nil), mcastArgs[core]...), rv...)
		}
		rd.SetRuntimeArgs(core, rv...)
		cp.SetRuntimeArgs(core, cv...)
		wr.SetRuntimeArgs(core, wv...)
	}
	return p, nil
}

// fusedNormCBs adds the CBs normCBs.row needs besides x, the scaler and
// out: the weight stream (wdt), the wt squares in sq format, rsqrt, x *
// rsqrt and weight + offset when offset != 0.
func fusedNormCBs(cbs *blocks.CBPlan, x, scaler, out int, wdt ir.DType, wt int, offset float64, sq ir.DType) normCBs {
	n := normCBs{x: x, scaler: scaler, out: out, wo: -1}
	n.w = cbs.Input("norm_weight", wdt, 2)
	n.sq = cbs.Scratch("x_squared", sq, wt)
	n.rs = cbs.Scratch("rsqrt_mean", ir.FP32, 1)
	n.xn = cbs.Scratch("x_normed", ir.FP32, 2)
	if offset != 0 {
		n.wo = cbs.Scratch("weight_plus_offset", ir.FP32, 2)
	}
	return n
}

// lowerAddRMSNorm: h = r(a + b), normed = r(rmsnorm(h) * (w + offset)).
func lowerAddRMSNorm(op *ir.Op, ctx *Context) (*kir.Program, error) {
	eps, ok1 := op.Attrs["eps"].(float64)
	offset, ok2 := op.Attrs["offset"].(float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule attr: %s needs float attributes \"eps\" and \"offset\"", op.Name())
	}
	t := ctx.Target
	a, bv, w := op.Operands[0], op.Operands[1], op.Operands[2]
	h, normed := op.Results[0], op.Results[1]
	for _, v := range []*ir.Value{a, bv, w, h, normed} {
		if err := requireTile("value", v); err != nil {
			return nil, err
		}
	}
	xs := a.Type.Shape
	hd := xs.Cols2D()
	if hd == 0 || hd%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule rmsnorm-hidden: the last dim %d of a must be a multiple of %d (tile padding must not enter the mean)", hd, ir.TileSize)
	}
	if !bv.Type.Shape.Equal(xs) || !h.Type.Shape.Equal(xs) || !normed.Type.Shape.Equal(xs) {
		return nil, fmt.Errorf("rule eltwise-shape: b %s and the results %s, %s must have a's shape %s", bv.Type.Shape, h.Type.Shape, normed.Type.Shape, xs)
	}
	if w.Type.Shape.Numel() != hd || w.Type.Shape.Rows2D() != 1 {
		return nil, fmt.Errorf("rule norm-weight: weight %s must be a row vector of the %d elements of a's last dim", w.Type.Shape, hd)
	}
	wt := hd / ir.TileSize
	rows := xs.Tiles() / wt
	if ns := planNormSplit(t, rows, wt, 0, t.NumWorkers(), normTileCycles+EltwiseTileCycles+2*UnpackTileCycles); ns != nil {
		ns.h, ns.eps, ns.offset = hd, eps, offset
		ns.live = blocks.LiveRows(xs)
		return addRMSNormSplit(op, ctx, ns)
	}
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	// A tile row costs an add and about four norm tile ops per tile.
	plan := PlanSplit(rows, t.NumWorkers(), 5*wt*EltwiseTileCycles, 0, 0)
	cores, rs := firstCores(t, plan.Cores)
	rdt := h.Type.DType
	sq := ir.FP32
	if (rdt.TileBytes()+ir.FP32.TileBytes())*wt > t.L1Budget()*3/4 {
		sq = ir.BF16
	}
	cbs := blocks.NewCBPlan(p, t, rs)
	cbA := cbs.Input("a", a.Type.DType, 2)
	cbB := cbs.Input("b", bv.Type.DType, 2)
	cbScaler := cbs.Input("scaler", ir.BF16, 1)
	cbHOut := cbs.Output("h", rdt, 2)
	cbNOut := cbs.Output("normed", normed.Type.DType, 2)
	cbH := cbs.Scratch("h_row", rdt, wt)
	nc := fusedNormCBs(cbs, cbH, cbScaler, cbNOut, w.Type.DType, wt, offset, sq)
	if err := cbs.Err(fmt.Sprintf("add_rmsnorm over H = %d keeps %d h and h^2 tiles per core", hd, wt)); err != nil {
		return nil, err
	}

	// Reader: the scaler, then per tile row its a and b tiles in pairs and
	// the weight tiles.
	rd := newReader(p, rs)
	aAcc, err := accessOf(ctx, rd, "a_addr", a)
	if err != nil {
		return nil, err
	}
	bAcc, err := accessOf(ctx, rd, "b_addr", bv)
	if err != nil {
		return nil, err
	}
	wAcc, err := accessOf(ctx, rd, "w_addr", w)
	if err != nil {
		return nil, err
	}
	rWt := rd.CompileArg("wt", uint32(wt))
	rstart, rrows := rd.RuntimeArg("start_row"), rd.RuntimeArg("num_rows")
	b := rd.Builder()
	blocks.ScalerTile(b, cbScaler, 1)
	b.For("r", kir.C(0), rrows, func(r kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(rstart, r), rWt))
		b.For("j", kir.C(0), rWt, func(j kir.Var) {
			blocks.ReadPage(b, aAcc, cbA, kir.Add(first, j))
			blocks.ReadPage(b, bAcc, cbB, kir.Add(first, j))
		})
		blocks.ReadPages(b, wAcc, nc.w, kir.C(0), rWt)
	})

	// Compute.
	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	crows := cp.RuntimeArg("num_rows")
	c := blocks.NewCompute(p, cp)
	cb := c.B
	c.Startup(cbA, cbB, cbH)
	cb.CBWaitFront(cbScaler, kir.C(1))
	c.For("r", kir.C(0), crows, func(kir.Var) {
		cb.Comment("h = a + b, stored to the result and kept (rounded) for the norm")
		c.For("j", kir.C(0), kir.Ci(wt), func(kir.Var) {
			cb.CBWaitFront(cbA, kir.C(1))
			cb.CBWaitFront(cbB, kir.C(1))
			c.Acquire()
			c.Binary(kir.EltAdd, blocks.BcastNone, cbA, cbB, kir.C(0), kir.C(0), kir.C(0))
			cb.CBPopFront(cbA, kir.C(1))
			cb.CBPopFront(cbB, kir.C(1))
			c.PackOutTo(cbH, cbHOut)
		})
		nc.row(c, kir.Ci(wt), hd, eps, offset)
	})
	cb.CBPopFront(cbScaler, kir.C(1))

	// Writer: per row, the h tiles then the normed tiles.
	wr := newWriter(p, rs)
	hAcc, err := accessOf(ctx, wr, "h_addr", h)
	if err != nil {
		return nil, err
	}
	nAcc, err := accessOf(ctx, wr, "normed_addr", normed)
	if err != nil {
		return nil, err
	}
	wWt := wr.CompileArg("wt", uint32(wt))
	wstart, wrows := wr.RuntimeArg("start_row"), wr.RuntimeArg("num_rows")
	b = wr.Builder()
	b.For("r", kir.C(0), wrows, func(r kir.Var) {
		first := b.Let("first", kir.Mul(kir.Add(wstart, r), wWt))
		blocks.WritePages(b, hAcc, cbHOut, first, wWt)
		blocks.WritePages(b, nAcc, cbNOut, first, wWt)
	})

	for i, core := range cores {
		s, n := plan.Range(i)
		rd.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
		cp.SetRuntimeArgs(core, kir.U32(uint32(n)))
		wr.SetRuntimeArgs(core, kir.U32(uint32(s)), kir.U32(uint32(n)))
	}
	return p, nil
}

// lowerEltwiseChain: the SFPU steps of the ops attribute on each tile in
// fp32 DEST, rounded to x's dtype between steps.
func lowerEltwiseChain(op *ir.Op, ctx *Context) (*kir.Program, error) {
	s, ok := op.Attrs["ops"].(string)
	if !ok {
		return nil, fmt.Errorf("rule attr: %s needs a string attribute \"ops\"", op.Name())
	}
	chain, err := ir.ParseEltwiseChain(s)
	if err != nil {
		return nil, err
	}
	steps := make([]blocks.SFPUStep, len(chain))
	for i, st := range chain {
		sf, ok := sfpuOps[st.Op]
		if !ok {
			return nil, fmt.Errorf("rule eltwise-chain-op: step %d (%s) of %q has no SFPU operation", i, st, s)
		}
		steps[i] = blocks.SFPUStep{Op: sf, Param: float32(st.Value)}
	}
	t := ctx.Target
	x, out := op.Operands[0], op.Result()
	if err := requireTile("operand", x); err != nil {
		return nil, err
	}
	if err := requireTile("result", out); err != nil {
		return nil, err
	}
	if !x.Type.Shape.Equal(out.Type.Shape) || x.Type.DType != out.Type.DType {
		return nil, fmt.Errorf("rule eltwise-shape: result %s %s must have the operand's shape and dtype %s %s", out.Type.Shape, out.Type.DType, x.Type.Shape, x.Type.DType)
	}
	dt := x.Type.DType
	p, err := newProgram(op, ctx)
	if err != nil {
		return nil, err
	}
	tiles := x.Type.Shape.Tiles()
	plan := planEltwise(tiles, t.NumWorkers(), 2*dt.TileBytes())
	cores, rs := firstCores(t, plan.Cores)
	cbs := blocks.NewCBPlan(p, t, rs)
	cbIn := cbs.Input("in", dt, 2)
	cbOut := cbs.Output("out", dt, 2)
	cbRound := -1
	if blocks.Rounds(dt) {
		cbRound = cbs.Scratch("rounded", dt, 1)
	}
	if err := cbs.Err("eltwise_chain"); err != nil {
		return nil, err
	}

	rd := newReader(p, rs)
	xAcc, err := accessOf(ctx, rd, "x_addr", x)
	if err != nil {
		return nil, err
	}
	rstart, rcount := rd.RuntimeArg("start_tile"), rd.RuntimeArg("num_tiles")
	blocks.ReadPages(rd.Builder(), xAcc, cbIn, rstart, rcount)

	cp := newCompute(p, rs, kir.ComputeConfig{MathFidelity: ctx.Fidelity, FP32DestAccEn: true})
	ccount := cp.RuntimeArg("num_tiles")
	c := blocks.NewCompute(p, cp)
	c.Startup(cbIn, cbIn, cbOut)
	c.For("i", kir.C(0), ccount, func(kir.Var) {
		c.B.CBWaitFront(cbIn, kir.C(1))
		c.Acquire()
		c.Copy(cbIn, kir.C(0), kir.C(0))
		c.B.CBPopFront(cbIn, kir.C(1))
		for i, st := range steps {
			if i > 0 && cbRound >= 0 {
				c.B.Comment(fmt.Sprintf("round to %s, as %s stored it", dt, chain[i-1].Op))
				c.RoundThrough(cbRound)
			}
			c.SFPU(st, kir.C(0))
		}
		c.PackOut(cbOut, 1)
	})

	if err := writeSplitPages(ctx, p, rs, out, cbOut, cores, plan, rd, cp); err != nil {
		return nil, err
	}
	return p, nil
}

// lowerEmbeddingReshape: the embedding gather writing the reshaped result.
func lowerEmbeddingReshape(op *ir.Op, ctx *Context) (*kir.Program, error) {
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	if table.Type.Shape.Rank() != 2 {
		return nil, fmt.Errorf("rule embedding-table: table must be [vocab, hidden], got %s", table.Type.Shape)
	}
	tokens, hd := ids.Type.Shape.Numel(), table.Type.Shape[1]
	im := blocks.ImageOf(out.Type.Shape)
	if out.Type.Layout == ir.TileLayout && im.B == 1 && im.R == tokens && im.C == hd {
		// The reshape keeps the tile image of [tokens, H] (a [1, H] row
		// viewed as [1, 1, H]): the embedding's own pages.
		return lowerEmbedding(op, ctx)
	}
	if table.Type.Layout != ir.TileLayout {
		return nil, fmt.Errorf("rule embedding-reshape-view: the result %s does not have the tile image of the %d gathered rows of %d elements; regrouping them needs a tile-layout table (the row-major table %s is gathered a whole row at a time)", out.Type.Shape, tokens, hd, table.Type.Shape)
	}
	return embeddingRegrouped(op, ctx)
}

// embeddingRegrouped gathers into a result whose 2-D view differs from
// [tokens, H]: output element e (row-major over the result) is element e %
// H of table row ids[e / H].
func embeddingRegrouped(op *ir.Op, ctx *Context) (*kir.Program, error) {
	ids, table, out := op.Operands[0], op.Operands[1], op.Result()
	if ids.Type.DType != ir.UInt32 && ids.Type.DType != ir.Int32 {
		return nil, fmt.Errorf("rule embedding-ids: ids %s must be uint32 or int32", ids.Type.DType)
	}
	if ids.Type.Layout != ir.RowMajorLayout || ids.Type.Shape.Rows2D() != 1 {
		return nil, fmt.Errorf("rule embedding-ids: ids must be one row-major row of token ids (shape [T] or [1, T]), got %s in %s layout", ids.Type.Shape, ids.Type.Layout)
	}
	if table.Type.DType != ir.BF16 && table.Type.DType != ir.FP32 {
		return nil, fmt.Errorf("rule embedding-table-layout: the table must be bf16 or fp32 (data movement cannot split block-float rows); %s is %s", table.Name, table.Type.DType)
	}
	if err := requireTile("result", out); err != nil {
		return nil, err
	}
	if out.Type.DType != table.Type.DType {
		return nil, fmt.Errorf("rule embedding-dtype: result dtype %s must be the table's %s", out.Type.DType, table.Type.DType)
	}
	tokens, hd := ids.Type.Shape.Cols2D(), table.Type.Shape[1]
	if hd == 0 || tokens == 0 {
		return nil, fmt.Errorf("rule embedding-shape: %d ids of a table with %d columns gather nothing", tokens, hd)
	}
	if out.Type.Shape.Numel() != tokens*hd {
		return nil, fmt.Errorf("rule reshape-numel: %d ids x %d columns do not fill the result %s", tokens, hd, out.Type.Shape)
	}
	return embeddingFromTiles(op, ctx, "embedding_reshape", func(g *blocks.Gather, idsL1 kir.Var) {
		oim := g.Out
		g.Seg = blocks.SegFor(hd, oim.C)
		g.Fill = oim.R%ir.TileSize != 0 || oim.C%ir.TileSize != 0
		g.Map = func(b *kir.Builder, row, col kir.Var) []blocks.Run {
			e := b.Let("e", kir.Add(kir.Mul(row, kir.Ci(oim.C)), col))
			id := kir.L1Read32{Addr: kir.Add(idsL1, kir.Mul(kir.Div(e, kir.Ci(hd)), kir.C(4)))}
			return []blocks.Run{{Src: 0, Row: id, Col: kir.Mod(e, kir.Ci(hd))}}
		}
	})
}
