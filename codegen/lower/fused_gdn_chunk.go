package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// gdn_chunk_step: one step of the GDN prefill's loop over chunks
// (passes/fuse_gdn.go FuseGDNChunkStep), in one program instead of the
// ~20 the composed step takes. One work item is one (user b, value head
// h, block of vc of the head's vt value tile columns): the chunked delta
// rule is separable over the value columns (o[:, j] and S'[:, j] read
// only S[:, j], u[:, j] and the head's shared k, q, w, g terms), so each
// item computes its columns exactly as the whole head does, recomputing
// the shared decay terms (e, kd, kd^T, egl). The head's wk, qg, k, qk
// and g tiles sit in one CB (sh); when each core has one item and a head
// has several (share), one core per column group of the head's cores
// reads them and multicasts them to the others, else every item reads
// them. planGDNChunkSplit chooses vc (a divisor of vt) and the core
// count by the cost model: more items on more cores against the shared
// work every item repeats and the DRAM reads. Items are
// numbered (b*H + h)*vs + block (vs = vt/vc blocks per head) and split
// over the grid. Chunk c is a compile-time
// constant, so the reader addresses chunk c's tiles of the whole tensors
// directly (the composed slices disappear). The chunk is one tile of
// tokens (L = 32) and Dk, Dv are multiples of 32 (kt, vt tiles).
//
// gdn_chunk_scan (passes/fuse_gdn_scan.go FuseGDNChunkScan) is the same
// program over chunks first .. first+count-1: per item the reader reads
// the state once (CB state) and then, per chunk, the u tiles, sh pages
// (multicast one round per chunk with share) and g's row; the compute
// runs the step's computation per chunk, packing every chunk's new state
// but the last into a CB of its own (state_carried, two states deep: the
// one the chunk reads and the one it packs behind it) and the last one's
// to the writer; the writer puts chunk ci's o tiles at index ci of the
// [B, H, count, L, Dv] result. The per-chunk input CBs hold two chunks, so
// the reader fetches chunk ci+1 while the compute runs chunk ci. A scan's
// decay terms (e and egl) come from exps the compute runs once per item
// and g tile, not per chunk (fused_gdn_decay.go); the reader takes chunk
// c's out of them. Each chunk is the step's computation on the same
// values, so the scan equals count chained steps (and the composed chain)
// bit for bit.
//
// The program computes every step as the composed op's program does and
// packs every value the composed chain stores into a CB of the state's
// dtype f before the next step reads it, so it equals the composed chain
// (and sim/ref's evaluator) bit for bit:
//
//   - Reader, per item: its kt x vc state tiles and u tiles (vc), and
//     the head's sh pages (chunk c's wk, qg and k tiles, kt each, the qk
//     tile and g's tile holding chunk c's row; multicast with share), all
//     in flight under one barrier; chunk c's row of g (row c%32 of g's
//     tile c/32) moved element by element into column 0 of a cleared
//     tile (g as a column) and its last element to (0, 0) of two cleared
//     tiles (gl, once as an FPU operand and once copied into DEST).
//   - Compute (fp32 DEST, the context's fidelity), each product
//     accumulated over K tiles in increasing order in one DEST section as
//     the composed bmm does: per value tile j, vNew_j = r(u_j - r(wk S_j))
//     and o_j = r(r(qg S_j) + r(qk vNew_j)); the decay column e = r(exp(r(
//     -(g - gl)))) (sub with gl broadcast, negated on the SFPU: the
//     composed sub's operand swap); kd = r(k * e) (column broadcast); kd^T
//     by transpose_tile (fp32 tiles come out as tf32, which the bmm's
//     source registers read them as anyway); egl = r(exp(gl)); then per
//     state tile (row r, column j) S'_rj = r(r(S_rj * egl) + r(kd^T_r
//     vNew_j)).
//   - Writer: the item's vc o tiles, then its S' tiles a state row (vc
//     tiles) per barrier.
//
// The state and every f intermediate an FPU op reads stay in CBs that
// are FPU operands only, so fp32 values are read as tf32 exactly where
// the composed programs read them; the two values the composed chain
// copies into DEST (gl for exp(gl), and the rounded g - gl for a bf16 f)
// come from CBs that are only copied (unpacked straight to DEST).

// gdnChunk is one gdn_chunk_step program being built.
type gdnChunk struct {
	*splitProgram
	u, wk, qg, qk, k, g, s, o, ns *ir.Value
	H, N, Dk, Dv, c, kt, vt, gRt  int
	// count is the chunks the program runs (c .. c+count-1): 1 for
	// gdn_chunk_step, more for gdn_chunk_scan (scan), whose items keep
	// their state in CB s from chunk to chunk.
	count int
	scan  bool
	// per is the chunks a scan's reader reads per round under one
	// barrier (two when count >= 2, else one): chunk c's tiles of a
	// [B, H, N, L, D] operand of kt (or 1) tiles per row sit on banks
	// (c*kt + j) % 8, the same for every head, so one chunk's reads load
	// half the banks and two consecutive chunks' load all of them. A
	// padded last round (count odd) re-reads chunk first (pages
	// (ri*per + k) % count); the compute pops those pages after the
	// item's last chunk.
	per int
	// kGroup is a scan's k_group G: with G > 1 operand k is [B, H/G, N,
	// L, Dk] and item (b, h) reads k's head b*H/G + h/G (kHead).
	kGroup int
	what   string // the op kind's name
	// cur is the chunk being emitted (a constant for a step, the chunk
	// loop's c + ci for a scan) and ci its index in the scan.
	cur, ci kir.Expr
	vs, vc  int  // value blocks per head, value tiles per block
	share   bool // each head's vs cores share its sh pages by multicast
	f       ir.DType
	eb      int // bytes per element of f
	cb      gdnChunkCBs
	// shareArgs are the reader's runtime-arg values per core of the
	// multicast, before start and count (share).
	shareArgs map[kir.Core][]kir.ArgValue
}

// gdnChunkCBs are the program's CBs (round is -1 for an fp32 state).
type gdnChunkCBs struct {
	s, sh, u, gcol, gl, glCopy int
	// A scan's: the item's g tiles (an FPU operand and a copy), their
	// last columns as column 0, the decay rows and exp(g) tiles the
	// compute makes of them once per item, and the chunk's decay
	// column and exp(gl) the reader takes out of those.
	gt, gcp, glc, erows, egrows              int
	sin                                      int // the item's first state: s, or a scan's own CB
	p1, vnew, p2, p3, round, e, kd, kdT, egl int
	sd, p4, o, ns                            int
}

// The pages of the shared CB sh (the head's tiles every item of the head
// reads): wk's kt tiles, qg's, k's, the qk tile and (a step's only: a
// scan's decay terms come from its g tiles, readGTiles) g's tile holding
// chunk c's row.
func (r *gdnChunk) shWK() int { return 0 }
func (r *gdnChunk) shQG() int { return r.kt }
func (r *gdnChunk) shK() int  { return 2 * r.kt }
func (r *gdnChunk) shQK() int { return 3 * r.kt }
func (r *gdnChunk) shG() int  { return 3*r.kt + 1 }
func (r *gdnChunk) shPages() int {
	if r.scan {
		return 3*r.kt + 1
	}
	return 3*r.kt + 2
}

// lowerGDNChunkStep builds the gdn_chunk_step program.
func lowerGDNChunkStep(op *ir.Op, ctx *Context) (*kir.Program, error) {
	r, err := planGDNChunk(op, ctx)
	if err != nil {
		return nil, err
	}
	r.addCBs()
	rd, cp, wr := r.reader(), r.compute(), r.writer()
	r.plan.SetArgs(r.cores, rd, cp, wr)
	if r.share {
		for i, c := range r.cores {
			st, n := r.plan.Range(i)
			rd.SetRuntimeArgs(c, append(r.shareArgs[c], kir.U32(uint32(st)), kir.U32(uint32(n)))...)
		}
	}
	return r.done(r.p)
}

// planGDNChunk checks op's operands and chunk and plans the work
// (planGDNChunkSplit): items of vc value tiles of one (user, value head).
func planGDNChunk(op *ir.Op, ctx *Context) (*gdnChunk, error) {
	if len(op.Operands) != 7 || len(op.Results) != 2 {
		return nil, fmt.Errorf("rule gdn-chunk-arity: %s has %d operands and %d results, want 7 and 2", op.Name(), len(op.Operands), len(op.Results))
	}
	r := &gdnChunk{u: op.Operands[0], wk: op.Operands[1], qg: op.Operands[2], qk: op.Operands[3], k: op.Operands[4], g: op.Operands[5],
		s: op.Operands[6], o: op.Results[0], ns: op.Results[1]}
	if err := requireTiles(opValues(op)...); err != nil {
		return nil, err
	}
	c, ok := op.Attrs["chunk"].(int)
	count, scan := 1, op.Kind == ir.OpGDNChunkScan
	if scan {
		var ok2 bool
		c, ok = op.Attrs["first"].(int)
		count, ok2 = op.Attrs["count"].(int)
		ok = ok && ok2 && count >= 1
	}
	if !ok {
		return nil, fmt.Errorf("rule attr: %s needs an int attribute \"chunk\" (a scan: \"first\" and \"count\" >= 1)", op.Name())
	}
	ss, gs := r.s.Type.Shape, r.g.Type.Shape
	if ss.Rank() != 5 || ss[2] != 1 || gs.Rank() != 4 || gs[0] != ss[0] || gs[1] != ss[1] {
		return nil, fmt.Errorf("rule gdn-chunk-shape: want state [B, H, 1, Dk, Dv] and g [B, H, N, L], got %s and %s", ss, gs)
	}
	B, H, Dk, Dv, N, L := ss[0], ss[1], ss[3], ss[4], gs[2], gs[3]
	const T = ir.TileSize
	if L != T || Dk%T != 0 || Dv%T != 0 {
		return nil, fmt.Errorf("rule gdn-chunk-tiles: the chunk length %d must be %d and the head dims %d, %d multiples of %d (one tile of tokens, whole head tiles)", L, T, Dk, Dv, T)
	}
	if c < 0 || c+count > N {
		return nil, fmt.Errorf("rule gdn-chunk-index: chunks %d .. %d are outside [0, %d)", c, c+count-1, N)
	}
	r.kGroup = 1
	if scan {
		var err error
		if r.kGroup, err = ir.GDNKGroup(op.Attrs); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
	}
	if r.kGroup > 1 { // k's shape against the state's heads (the shape rule)
		if _, err := ir.InferTypes(op.Kind, op.Operands, op.Attrs); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
	}
	f := r.s.Type.DType
	if f != ir.BF16 && f != ir.FP32 {
		return nil, fmt.Errorf("rule gdn-chunk-dtype: state %s is %s; the program moves g's elements and rounds to the state's dtype, which needs bf16 or fp32", r.s, f)
	}
	for _, v := range opValues(op) {
		if v.Type.DType != f {
			return nil, fmt.Errorf("rule gdn-chunk-dtype: %s is %s but the state is %s", v, v.Type.DType, f)
		}
	}
	r.H, r.N, r.Dk, r.Dv, r.c, r.f, r.eb = H, N, Dk, Dv, c, f, blocks.ElemBytes(f)
	r.kt, r.vt, r.gRt = Dk/T, Dv/T, (N+T-1)/T
	r.count, r.scan, r.cur, r.ci, r.what, r.per = count, scan, kir.Ci(c), kir.C(0), "gdn_chunk_step", 1
	if scan {
		r.what, r.per = "gdn_chunk_scan", 2-count%2
	}
	plan, vs := planGDNChunkSplit(B*H, r.kt, r.vt, count, ctx.Target.NumWorkers(), f, ctx.Fidelity)
	r.vs, r.vc = vs, r.vt/vs
	r.share = vs > 1 && plan.PerCore == 1
	r.splitProgram = startProgram(op, ctx, plan)
	return r, nil
}

// gdnChunkItemCycles is the cost model's time of one gdn_chunk_step item
// of vc value tiles (kt state rows, dtype f) on a core: its reader's
// one barrier over the item's tiles (gdnChunkItemTiles), then its
// compute: per value tile 3kt+1 tile products, 2kt+2 eltwise ops and
// 3kt+5 packs, and the head's shared terms (kd and its transpose, two
// exps, the negation and the g subtraction) that every item repeats.
func gdnChunkItemCycles(kt, vc int, f ir.DType, fid ir.MathFidelity) int {
	mm := MatmulTileCycles(fid) + 2*UnpackTileCycles
	elt := EltwiseTileCycles + 2*UnpackTileCycles
	sfpu := func(op kir.SFPUOp) int { return int(kir.SFPUTable[op].Cycles) }
	perColumn := (3*kt+1)*mm + (2*kt+2)*elt + (3*kt+5)*PackTileCycles
	shared := 2*kt*(elt+PackTileCycles) + 2*sfpu(kir.SFPUExp) + sfpu(kir.SFPUNegative) + 2*(elt+PackTileCycles)
	read := DRAMReadLatencyCycles + gdnChunkItemTiles(kt, vc)*f.TileBytes()/NoCBytesPerCycle
	return read + shared + vc*perColumn
}

// gdnChunkItemTiles is the tiles one item of vc value tiles reads: its
// kt x vc state tiles and vc u tiles, and the head's kt wk, qg and k
// tiles, qk tile and g tile.
func gdnChunkItemTiles(kt, vc int) int { return kt*vc + vc + 3*kt + 2 }

// planGDNChunkSplit chooses the value blocks per head vs (a divisor of
// vt) and the split of the heads*vs items over at most maxCores cores:
// for each vs, PlanSplit of items costing gdnChunkItemCycles(kt, vt/vs)
// with DRAM reading the tiles as the floor: each head's 3kt+2 shared
// tiles once when its vs cores share them (vs > 1 and one item per core:
// gdnChunk.share), else once per item, and every item's own state and u
// tiles; a scan of count chunks repeats both count times. The cheapest
// wins, ties to fewer blocks.
func planGDNChunkSplit(heads, kt, vt, count, maxCores int, f ir.DType, fid ir.MathFidelity) (Split, int) {
	var best Split
	bestVS := 0
	for vs := 1; vs <= vt; vs++ {
		if vt%vs != 0 {
			continue
		}
		vc, items := vt/vs, heads*vs
		floor := func(shared bool) int {
			tiles := items * gdnChunkItemTiles(kt, vc)
			if shared {
				tiles -= (items - heads) * (3*kt + 2)
			}
			return count * tiles * f.TileBytes() / DRAMBytesPerCycle
		}
		cyc := count * gdnChunkItemCycles(kt, vc, f, fid)
		s := PlanSplit(items, maxCores, cyc, 0, floor(vs > 1))
		if vs > 1 && s.PerCore > 1 {
			s = PlanSplit(items, maxCores, cyc, 0, floor(false))
		}
		if bestVS == 0 || s.Cost < best.Cost {
			best, bestVS = s, vs
		}
	}
	return best, bestVS
}

// addCBs adds the program's CBs, sized for one item (vc value tiles).
func (r *gdnChunk) addCBs() {
	f, kt, vt, cbs := r.f, r.kt, r.vc, r.cbs
	c := gdnChunkCBs{round: -1}
	if r.scan {
		// The reader's first state, and the states the compute carries
		// from chunk to chunk: the chunk's and the next one it packs
		// behind it (a CB of its own, so the reader's next item never
		// lands between them).
		c.sin = cbs.Input("state", f, kt*vt)
		c.s = cbs.Scratch("state_carried", f, 2*kt*vt)
	} else {
		c.s = cbs.Input("state", f, kt*vt)
		c.sin = c.s
	}
	// A scan's reader fetches the next round's inputs while the compute
	// works on this one's: two rounds' pages in each of its input CBs.
	per := 1
	if r.scan {
		per = 2 * r.per
	}
	c.sh, c.u = cbs.Input("head_shared", f, per*r.shPages()), cbs.Input("u", f, per*vt)
	if r.scan {
		g := r.gTiles()
		c.gt, c.gcp, c.glc = cbs.Input("g_tiles", f, g), cbs.Input("g_tiles_copy", f, g), cbs.Input("g_last_columns", f, g)
		c.erows, c.egrows = cbs.Output("decay_rows", f, g), cbs.Output("exp_g_rows", f, g)
		c.e, c.egl = cbs.Input("decay_column", f, per), cbs.Input("exp_g_last", f, per)
	} else {
		c.gcol, c.gl, c.glCopy = cbs.Input("g_column", f, per), cbs.Input("g_last", f, per), cbs.Input("g_last_copy", f, per)
	}
	c.p1, c.vnew = cbs.Scratch("wk_state", f, 1), cbs.Scratch("v_new", f, vt)
	c.p2, c.p3 = cbs.Scratch("qg_state", f, 1), cbs.Scratch("qk_v_new", f, 1)
	if blocks.Rounds(f) {
		c.round = cbs.Scratch("round", f, 1)
	}
	if !r.scan {
		c.e = cbs.Scratch("decay_column", f, 1)
	}
	c.kd, c.kdT = cbs.Scratch("kd", f, kt), cbs.Scratch("kd_transposed", f, kt)
	if !r.scan {
		c.egl = cbs.Scratch("exp_g_last", f, 1)
	}
	c.sd, c.p4 = cbs.Scratch("state_decayed", f, r.sBlock()), cbs.Scratch("kd_t_v_new", f, r.sBlock())
	c.o, c.ns = cbs.Output("o", f, vt), cbs.Output("new_state", f, 2*vt)
	r.cb = c
	r.planned(fmt.Sprintf("%s keeps a %dx%d state of %s per item", r.what, r.Dk, r.vc*ir.TileSize, f))
}

// sBlock is the state tiles the compute's S' update handles per block
// (kt*vc tiles: all S * egl, then all kd^T vNew, then the sums): the
// largest divisor of kt*vc that fits fp32 DEST's half (one DEST section
// holds the block's products).
func (r *gdnChunk) sBlock() int {
	return largestDivisor(r.kt*r.vc, r.ctx.Target.DestTiles(false, true))
}

// chunkPage is the page of chunk cur's tile (row 0, column j) of a [B, H,
// N, L, D] operand of d tiles per row, for item (b*H + h) bh.
func (r *gdnChunk) chunkPage(bh kir.Expr, d int, j kir.Expr) kir.Expr {
	return kir.Add(kir.Mul(kir.Add(kir.Mul(bh, kir.Ci(r.N)), r.cur), kir.Ci(d)), j)
}

// kHead is k's (user, head) index for item bh = b*H + h: bh itself, or
// b*H/G + h/G with k_group G > 1 (k per key head).
func (r *gdnChunk) kHead(bh kir.Expr) kir.Expr {
	if r.kGroup <= 1 {
		return bh
	}
	H, G := kir.Ci(r.H), kir.Ci(r.kGroup)
	return kir.Add(kir.Mul(kir.Div(bh, H), kir.Ci(r.H/r.kGroup)), kir.Div(kir.Mod(bh, H), G))
}

// gTile and gRow are the tile of g holding chunk cur's row (for item bh)
// and the row in it.
func (r *gdnChunk) gTile(bh kir.Expr) kir.Expr {
	if !r.scan {
		return kir.Add(kir.Mul(bh, kir.Ci(r.gRt)), kir.Ci(r.c/ir.TileSize))
	}
	return kir.Add(kir.Mul(bh, kir.Ci(r.gRt)), kir.Div(r.cur, kir.Ci(ir.TileSize)))
}

// gTiles is the number of g's tiles holding a scan's chunks' rows
// (chunks c .. c+count-1 sit in tiles c/32 .. (c+count-1)/32).
func (r *gdnChunk) gTiles() int {
	return (r.c+r.count-1)/ir.TileSize - r.c/ir.TileSize + 1
}

func (r *gdnChunk) gRow() kir.Expr {
	if !r.scan {
		return kir.Ci(r.c % ir.TileSize)
	}
	return kir.Mod(r.cur, kir.Ci(ir.TileSize))
}

// item is item i's (user, head) index b*H + h and its first value tile
// column (block i%vs of vc columns), as kernel values of kernel builder b.
func (r *gdnChunk) item(b *kir.Builder, i kir.Var) (bh, j0 kir.Expr) {
	if r.vs == 1 {
		return i, kir.C(0)
	}
	return b.Let("bh", kir.Div(i, kir.Ci(r.vs))), b.Let("j0", kir.Mul(kir.Mod(i, kir.Ci(r.vs)), kir.Ci(r.vc)))
}

// statePage is the page of the item's state tile t (row t/vc, column
// j0 + t%vc of the head's kt x vt tiles starting at page sbase).
func (r *gdnChunk) statePage(sbase, j0, t kir.Expr) kir.Expr {
	if r.vs == 1 {
		return kir.Add(sbase, t)
	}
	return kir.Add(kir.Add(sbase, j0), kir.Add(kir.Mul(kir.Div(t, kir.Ci(r.vc)), kir.Ci(r.vt)), kir.Mod(t, kir.Ci(r.vc))))
}

// gdnRun is a run of n pages of acc, page j at page(j).
type gdnRun struct {
	acc  *blocks.Access
	n    int
	page func(j kir.Expr) kir.Expr
}

// gdnOwnRun is a run an item reads into its own CB cb.
type gdnOwnRun struct {
	gdnRun
	cb int
}

// reader adds the reader kernel: per item its inputs (see the doc above).
// With share, the head's sh pages are read by one core of each column
// group of the head's vs cores and multicast to the others
// (multicore.Multicast, one block per head: semaphores 0 and 1).
func (r *gdnChunk) reader() *kir.Kernel {
	rd := r.splitProgram.reader()
	acc := map[string]*blocks.Access{}
	for _, a := range []struct {
		name string
		v    *ir.Value
	}{{"state", r.s}, {"wk", r.wk}, {"qg", r.qg}, {"k", r.k}, {"u", r.u}, {"qk", r.qk}, {"g", r.g}} {
		acc[a.name] = r.bind(rd, a.name+"_addr", a.v)
	}
	b, c, kt, vt, vc := rd.Builder(), r.cb, r.kt, r.vt, r.vc
	var bh, j0 kir.Expr // the item's, while its loop body is emitted
	// shared is the head's runs of sh pages, in order.
	shared := func() []gdnRun {
		runs := []gdnRun{
			{acc["wk"], kt, func(j kir.Expr) kir.Expr { return r.chunkPage(bh, kt, j) }},
			{acc["qg"], kt, func(j kir.Expr) kir.Expr { return r.chunkPage(bh, kt, j) }},
			{acc["k"], kt, func(j kir.Expr) kir.Expr { return r.chunkPage(r.kHead(bh), kt, j) }},
			{acc["qk"], 1, func(j kir.Expr) kir.Expr { return r.chunkPage(bh, 1, j) }},
		}
		if r.scan { // no g tile (shPages)
			return runs
		}
		return append(runs, gdnRun{acc["g"], 1, func(kir.Expr) kir.Expr { return r.gTile(bh) }})
	}
	var rounds *multicore.Rounds
	if r.share && r.err == nil {
		m := multicore.Multicast{CB: c.sh, Pages: r.per * r.shPages(), PageSize: r.f.TileBytes(), SemReady: 0, SemValid: 1,
			Name: "head", What: "the head's wk, qg, k, qk and g tiles", Blocks: len(r.cores) / r.vs,
			// Page pg of sh: the run holding it, by comparisons.
			Read: func(b *kir.Builder, pg, l1 kir.Expr) {
				if r.scan { // round ri's page i is page ri*per*shPages + i: chunk k of the round at i/shPages
					cur := r.cur
					r.cur = b.Let("chunk", kir.Add(kir.Ci(r.c), r.padded(kir.Div(pg, kir.Ci(r.shPages())))))
					pg = b.Let("pg", kir.Mod(pg, kir.Ci(r.shPages())))
					defer func() { r.cur = cur }()
				}
				var emit func(runs []gdnRun, first int)
				emit = func(runs []gdnRun, first int) {
					rn := runs[0]
					read := func() { blocks.ReadPageTo(b, rn.acc, rn.page(kir.Sub(pg, kir.Ci(first))), l1) }
					if len(runs) == 1 {
						read()
						return
					}
					b.IfElse(kir.Lt(pg, kir.Ci(first+rn.n)), read, func() { emit(runs[1:], first+rn.n) })
				}
				emit(shared(), 0)
			}}
		var vals map[kir.Core][]kir.ArgValue
		var err error
		rounds, vals, err = m.Start(r.p, r.ctx.Target, rd, r.cores, r.rs)
		r.fail(err)
		r.shareArgs = vals
	}
	start, count := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	if r.err != nil {
		return rd
	}
	b.For("i", start, kir.Add(start, count), func(i kir.Var) {
		bh, j0 = r.item(b, i)
		sbase := b.Let("sbase", kir.Mul(bh, kir.Ci(kt*vt)))
		state := gdnOwnRun{gdnRun{acc["state"], kt * vc, func(j kir.Expr) kir.Expr { return r.statePage(sbase, j0, j) }}, c.s}
		var own []gdnOwnRun
		if r.scan {
			b.Comment("the item's state, once: the compute keeps it in CB state from chunk to chunk")
			l1 := blocks.Reserve(b, c.sin, kir.Ci(state.n), "l1")
			ps := kir.Ci(state.acc.PageSize())
			b.For("j", kir.C(0), kir.Ci(state.n), func(j kir.Var) {
				b.NoCAsyncRead(state.acc.PageAddr(state.page(j)), kir.Add(l1, kir.Mul(j, ps)), ps)
			})
			b.NoCAsyncReadBarrier()
			b.CBPushBack(c.sin, kir.Ci(state.n))
			r.readGTiles(b, acc["g"], bh)
		} else {
			own = append(own, state)
		}
		if r.scan {
			b.For("ri", kir.C(0), kir.Ci(r.rounds()), func(ri kir.Var) { r.readRound(b, acc, bh, j0, shared, rounds, ri) })
		} else {
			r.readChunk(b, acc, bh, j0, own, shared, rounds)
		}
		if r.scan {
			g := kir.Ci(r.gTiles())
			b.CBPopFront(c.erows, g)
			b.CBPopFront(c.egrows, g)
		}
	})
	if rounds != nil {
		rounds.Finish(b)
	}
	return rd
}

// rounds is the number of a scan's read rounds (per chunks each).
func (r *gdnChunk) rounds() int { return (r.count + r.per - 1) / r.per }

// padded is a scan's chunk index k (from first) as read: k % count when
// the last round is padded (chunk first again), else k.
func (r *gdnChunk) padded(k kir.Expr) kir.Expr {
	if r.count%r.per == 0 {
		return k
	}
	return kir.Mod(k, kir.Ci(r.count))
}

// readRound emits a scan's reader work for round ri of item bh (first
// value tile j0): the u tiles and the head's sh pages of the round's per
// chunks (multicast by rounds when shared) under one barrier, then each
// real chunk's decay terms (readDecay).
func (r *gdnChunk) readRound(b *kir.Builder, acc map[string]*blocks.Access, bh, j0 kir.Expr, shared func() []gdnRun, rounds *multicore.Rounds, ri kir.Expr) {
	c, vt, vc, R := r.cb, r.vt, r.vc, r.per
	cur := r.cur
	defer func() { r.cur = cur }()
	k0 := kir.Mul(ri, kir.Ci(R))
	// chunk k of the round as read (padded) and as computed
	read := func(k int) kir.Expr { return kir.Add(kir.Ci(r.c), r.padded(kir.Add(k0, kir.Ci(k)))) }
	b.Comment(fmt.Sprintf("the round's %d chunks' u tiles and the head's tiles, all in flight", R))
	ua := acc["u"]
	ups := kir.Ci(ua.PageSize())
	l1u := blocks.Reserve(b, c.u, kir.Ci(R*vc), "l1u")
	for k := range R {
		r.cur = read(k)
		b.For("j", kir.C(0), kir.Ci(vc), func(j kir.Var) {
			b.NoCAsyncRead(ua.PageAddr(r.chunkPage(bh, vt, kir.Add(j0, j))), kir.Add(l1u, kir.Mul(kir.Add(kir.Ci(k*vc), j), ups)), ups)
		})
	}
	if rounds != nil {
		rounds.Round(b, ri)
		b.NoCAsyncReadBarrier()
	} else {
		b.CBReserveBack(c.sh, kir.Ci(R*r.shPages()))
		sh := b.Let("sh", kir.GetWritePtr{CB: c.sh})
		for k := range R {
			r.cur = read(k)
			readRunsAt(b, sh, k*r.shPages(), shared())
		}
		b.NoCAsyncReadBarrier()
		b.CBPushBack(c.sh, kir.Ci(R*r.shPages()))
	}
	b.CBPushBack(c.u, kir.Ci(R*vc))
	for k := range R {
		r.cur = kir.Add(kir.Ci(r.c), kir.Add(k0, kir.Ci(k)))
		if r.count%R == 0 {
			r.readDecay(b)
			continue
		}
		b.If(kir.Lt(kir.Add(k0, kir.Ci(k)), kir.Ci(r.count)), func() { r.readDecay(b) })
	}
}

// readRunsAt emits the reads of runs, all in flight, into L1 from address
// sh plus first pages on (each run's pages after the last run's).
func readRunsAt(b *kir.Builder, sh kir.Expr, first int, runs []gdnRun) {
	for _, rn := range runs {
		ps := kir.Ci(rn.acc.PageSize())
		l1 := b.Let("l1", kir.Add(sh, kir.Ci(first*rn.acc.PageSize())))
		b.For("j", kir.C(0), kir.Ci(rn.n), func(j kir.Var) {
			b.NoCAsyncRead(rn.acc.PageAddr(rn.page(j)), kir.Add(l1, kir.Mul(j, ps)), ps)
		})
		first += rn.n
	}
}

// readChunk emits the reader's work for chunk cur of item bh (first value
// tile j0): the item's own runs (a step's state) and u tiles and the
// head's sh pages under one barrier (multicast by rounds when shared),
// then g's row as a column and its last element.
func (r *gdnChunk) readChunk(b *kir.Builder, acc map[string]*blocks.Access, bh, j0 kir.Expr, own []gdnOwnRun, shared func() []gdnRun, rounds *multicore.Rounds) {
	c, vt, vc := r.cb, r.vt, r.vc
	{
		own = append(own, gdnOwnRun{gdnRun{acc["u"], vc, func(j kir.Expr) kir.Expr { return r.chunkPage(bh, vt, kir.Add(j0, j)) }}, c.u})
		b.Comment("the item's state and u tiles, all in flight")
		for _, rn := range own {
			l1 := blocks.Reserve(b, rn.cb, kir.Ci(rn.n), "l1")
			ps := kir.Ci(rn.acc.PageSize())
			b.For("j", kir.C(0), kir.Ci(rn.n), func(j kir.Var) {
				b.NoCAsyncRead(rn.acc.PageAddr(rn.page(j)), kir.Add(l1, kir.Mul(j, ps)), ps)
			})
		}
		sh := b.Let("sh", kir.GetWritePtr{CB: c.sh})
		if rounds != nil {
			var round kir.Expr
			if r.scan {
				round = r.ci
			}
			rounds.Round(b, round)
			b.NoCAsyncReadBarrier()
		} else {
			b.Comment("the head's chunk c wk, qg, k and qk tiles and g's tile holding chunk c's row, all in flight")
			b.CBReserveBack(c.sh, kir.Ci(r.shPages()))
			readRunsAt(b, sh, 0, shared())
			b.NoCAsyncReadBarrier()
			b.CBPushBack(c.sh, kir.Ci(r.shPages()))
		}
		for _, rn := range own {
			b.CBPushBack(rn.cb, kir.Ci(rn.n))
		}

		if r.scan {
			r.readDecay(b)
			return
		}
		b.Comment("g of chunk c as a column (element j of its row to (j, 0)), and its last element to (0, 0) of two tiles")
		gtile := b.Let("g_tile", kir.Add(sh, kir.Ci(r.shG()*r.f.TileBytes())))
		gr := r.gRow()
		tb := r.f.TileBytes()
		gcol := blocks.Reserve(b, c.gcol, kir.C(1), "gcol")
		gl := blocks.Reserve(b, c.gl, kir.C(1), "gl")
		gl2 := blocks.Reserve(b, c.glCopy, kir.C(1), "gl2")
		for _, t := range []kir.Var{gcol, gl, gl2} {
			blocks.FillWords(b, t, tb, 0)
		}
		b.For("j", kir.C(0), kir.Ci(ir.TileSize), func(j kir.Var) {
			blocks.MoveElem(b, gtile, gr, j, gcol, j, kir.C(0), r.eb)
		})
		last := kir.Ci(ir.TileSize - 1)
		blocks.MoveElem(b, gtile, gr, last, gl, kir.C(0), kir.C(0), r.eb)
		blocks.MoveElem(b, gtile, gr, last, gl2, kir.C(0), kir.C(0), r.eb)
		for _, cb := range []int{c.gcol, c.gl, c.glCopy} {
			b.CBPushBack(cb, kir.C(1))
		}
	}
}

// compute adds the compute kernel (see the doc above).
func (r *gdnChunk) compute() *kir.Kernel {
	one, z0 := kir.C(1), kir.C(0)
	cp, c, ccount := r.rangeCompute("count")
	n, kt, vt := r.cb, r.kt, r.vc
	cb := c.B
	// round rounds DEST[0] to f (a bf16 state only).
	round := func() {
		if n.round >= 0 {
			c.RoundThrough(n.round)
		}
	}
	// loop emits body(i) for i < k: peeled (blocks.Compute.ForPeeled: two
	// copies of the body, no re-initialisation per iteration) when peel
	// is set, else one plain loop (one copy).
	peel := true
	loop := func(name string, k int, body func(i kir.Expr)) {
		if peel {
			c.ForPeeled(name, k, body)
			return
		}
		c.For(name, z0, kir.Ci(k), func(i kir.Var) { body(i) })
	}
	// product accumulates sum_t a[ta(t)] x b[tb(t)] over t < k into DEST[0].
	product := func(a, b, k int, ta, tb func(t kir.Expr) kir.Expr) {
		loop("t", k, func(t kir.Expr) { c.Matmul(a, b, ta(t), tb(t), z0, false) })
	}
	// repack packs DEST[0] into the one-page CB mid, then in a fresh DEST
	// runs f, which reads mid's tile, and pops it.
	repack := func(mid int, f func()) {
		c.PackOut(mid, 1)
		cb.CBWaitFront(mid, one)
		c.Acquire()
		f()
		cb.CBPopFront(mid, one)
	}
	at := func(first int) func(t kir.Expr) kir.Expr {
		return func(t kir.Expr) kir.Expr { return kir.Add(kir.Ci(first), t) }
	}
	c.MatmulStartup(n.sh, n.s, n.p1)
	// chunk emits one chunk of an item from the state in CB st, its new
	// state packed to out.
	chunk := func(st, out int) {
		n := n
		n.s = st
		cb.CBWaitFront(n.s, kir.Ci(kt*vt))
		cb.CBWaitFront(n.sh, kir.Ci(r.shPages()))
		cb.CBWaitFront(n.u, kir.Ci(vt))
		cb.Comment("vNew = r(u - r(wk S)) per value tile")
		loop("vt", vt, func(j kir.Expr) {
			c.Acquire()
			product(n.sh, n.s, kt, at(r.shWK()), func(t kir.Expr) kir.Expr { return kir.Add(kir.Mul(t, kir.Ci(vt)), j) })
			repack(n.p1, func() { c.Binary(kir.EltSub, blocks.BcastNone, n.u, n.p1, j, z0, z0) })
			c.PackOut(n.vnew, 1)
		})
		cb.CBPopFront(n.u, kir.Ci(vt))

		cb.Comment("o = r(r(qg S) + r(qk vNew)) per value tile")
		cb.CBWaitFront(n.vnew, kir.Ci(vt))
		loop("vt", vt, func(j kir.Expr) {
			c.Acquire()
			product(n.sh, n.s, kt, at(r.shQG()), func(t kir.Expr) kir.Expr { return kir.Add(kir.Mul(t, kir.Ci(vt)), j) })
			c.PackOut(n.p2, 1)
			c.Acquire()
			c.Matmul(n.sh, n.vnew, kir.Ci(r.shQK()), j, z0, false)
			c.PackOut(n.p3, 1)
			c.BinaryTile(kir.EltAdd, blocks.BcastNone, n.p2, n.p3, n.o, false, nil)
		})

		if !r.scan { // a scan's e comes from the reader (decayRows)
			cb.Comment("e = r(exp(r(gl - g))) as a column: g - gl negated (the composed sub's operand swap)")
			cb.CBWaitFront(n.gcol, one)
			cb.CBWaitFront(n.gl, one)
			c.Acquire()
			c.Binary(kir.EltSub, blocks.BcastScalar, n.gcol, n.gl, z0, z0, z0)
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, z0)
			cb.CBPopFront(n.gcol, one)
			cb.CBPopFront(n.gl, one)
			round()
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, z0)
			c.PackOut(n.e, 1)
		}

		cb.Comment("kd = r(k * e) (column broadcast), then kd^T tile by tile")
		cb.CBWaitFront(n.e, one)
		loop("kt", kt, func(t kir.Expr) {
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastCols, n.sh, n.e, kir.Add(kir.Ci(r.shK()), t), z0, z0)
			c.PackOut(n.kd, 1)
		})
		cb.CBPopFront(n.e, one)
		cb.CBWaitFront(n.kd, kir.Ci(kt))
		loop("kt", kt, func(t kir.Expr) {
			c.Acquire()
			c.Transpose(n.kd, t, z0)
			c.PackOut(n.kdT, 1)
		})
		cb.CBPopFront(n.kd, kir.Ci(kt))

		if !r.scan {
			cb.Comment("egl = r(exp(gl))")
			cb.CBWaitFront(n.glCopy, one)
			c.Acquire()
			c.Copy(n.glCopy, z0, z0)
			c.SFPU(blocks.SFPUStep{Op: kir.SFPUExp}, z0)
			cb.CBPopFront(n.glCopy, one)
			c.PackOut(n.egl, 1)
		}

		// S' per block of bt state tiles (row-major, t = row*vt + j): all
		// its S * egl in one DEST section, all its kd^T vNew in another,
		// then the sums tile by tile, so each op's FPU init runs once per
		// block instead of once per tile (the same ops on the same values).
		bt := r.sBlock()
		cb.Comment(fmt.Sprintf("S' = r(r(S * egl) + r(kd^T vNew)), %d state tiles at a time: the products, then the sums", bt))
		cb.CBWaitFront(n.egl, one)
		cb.CBWaitFront(n.kdT, kir.Ci(kt))
		c.For("sb", z0, kir.Ci(kt*vt/bt), func(sb kir.Var) {
			t0 := kir.Mul(sb, kir.Ci(bt))
			c.Acquire()
			c.For("i", z0, kir.Ci(bt), func(i kir.Var) {
				c.Binary(kir.EltMul, blocks.BcastScalar, n.s, n.egl, kir.Add(t0, i), z0, i)
			})
			c.PackOut(n.sd, bt)
			c.Acquire()
			c.For("i", z0, kir.Ci(bt), func(i kir.Var) {
				t := kir.Add(t0, i)
				c.Matmul(n.kdT, n.vnew, kir.Div(t, kir.Ci(vt)), kir.Mod(t, kir.Ci(vt)), i, false)
			})
			c.PackOut(n.p4, bt)
			c.For("i", z0, kir.Ci(bt), func(kir.Var) {
				c.BinaryTile(kir.EltAdd, blocks.BcastNone, n.sd, n.p4, out, false, nil)
			})
		})
		for _, p := range []struct{ cb, n int }{{n.egl, 1}, {n.kdT, kt}, {n.vnew, vt}, {n.s, kt * vt}, {n.sh, r.shPages()}} {
			cb.CBPopFront(p.cb, kir.Ci(p.n))
		}
	}
	c.For("i", z0, ccount, func(kir.Var) {
		if r.scan {
			r.decayRows(c, round)
		}
		if r.count == 1 {
			chunk(n.sin, n.ns)
			return
		}
		// Every chunk but the last packs its new state to the carried
		// CB (2kt x vc pages), behind the one the chunk reads there.
		// Each chunk sits in a loop of its own (the first and the last
		// of one iteration), so every loop moves one chunk's pages of
		// each CB per iteration, as the rings are sized (kir's cb-flow
		// rule checks a loop's traffic per iteration against the ring).
		// Only the middle chunks, which run count-2 times per item, peel
		// their loops: the first and the last chunk's plain loops keep
		// the kernel's code to about two copies of the chunk's (rule
		// code-size: with vc > 1, three peeled copies exceed a TRISC's
		// budget and the kernel config ring).
		cb.Comment("the first chunk, from the state read")
		peel = false
		c.For("c0", kir.C(0), kir.C(1), func(kir.Var) { chunk(n.sin, n.s) })
		if r.count > 2 {
			cb.Comment("the middle chunks: the state stays in the carried CB")
			peel = true
			c.For("ci", kir.C(1), kir.Ci(r.count-1), func(kir.Var) { chunk(n.s, n.s) })
		}
		cb.Comment("the last chunk, its new state to the writer")
		peel = false
		c.For("cl", kir.C(0), kir.C(1), func(kir.Var) { chunk(n.s, n.ns) })
		peel = true
		if pad := r.rounds()*r.per - r.count; pad > 0 {
			cb.Comment("the padded last round's pages")
			for _, p := range []struct{ cb, n int }{{n.sh, pad * r.shPages()}, {n.u, pad * vt}} {
				cb.CBWaitFront(p.cb, kir.Ci(p.n))
				cb.CBPopFront(p.cb, kir.Ci(p.n))
			}
		}
	})
	return cp
}

// writer adds the writer kernel: per item its o tiles, then its S' tiles
// a state row per barrier.
func (r *gdnChunk) writer() *kir.Kernel {
	wr := newWriter(r.p, r.rs)
	oAcc, nsAcc := r.bind(wr, "o_addr", r.o), r.bind(wr, "new_state_addr", r.ns)
	start, count := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	w, kt, vt, vc := wr.Builder(), r.kt, r.vt, r.vc
	if r.err != nil {
		return wr
	}
	w.For("i", start, kir.Add(start, count), func(i kir.Var) {
		bh, j0 := r.item(w, i)
		if r.scan {
			// o is [B, H, count, L, Dv]: chunk ci's tiles of the item at
			// (bh*count + ci)*vt + j0.
			w.For("ci", kir.C(0), kir.Ci(r.count), func(ci kir.Var) {
				ob := w.Let("obase", kir.Add(kir.Mul(kir.Add(kir.Mul(bh, kir.Ci(r.count)), ci), kir.Ci(vt)), j0))
				blocks.WritePagesBatch(w, oAcc, r.cb.o, kir.Ci(vc), func(j kir.Expr) kir.Expr { return kir.Add(ob, j) })
			})
		} else {
			ob := w.Let("obase", kir.Add(kir.Mul(bh, kir.Ci(vt)), j0))
			blocks.WritePagesBatch(w, oAcc, r.cb.o, kir.Ci(vc), func(j kir.Expr) kir.Expr { return kir.Add(ob, j) })
		}
		sb := w.Let("sbase", kir.Add(kir.Mul(bh, kir.Ci(kt*vt)), j0))
		w.For("row", kir.C(0), kir.Ci(kt), func(row kir.Var) {
			rb := w.Let("rbase", kir.Add(sb, kir.Mul(row, kir.Ci(vt))))
			blocks.WritePagesBatch(w, nsAcc, r.cb.ns, kir.Ci(vc), func(j kir.Expr) kir.Expr { return kir.Add(rb, j) })
		})
	})
	return wr
}
