package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// gdn_chunk_wy (passes/fuse_gdn_wy.go FuseGDNChunkWY): the GDN prefill's
// per-chunk WY products in one program instead of the five of the
// composed chain (mul, bmm_transpose_b_mul, tril_inverse and two
// bmm_scale_b), whose kb, A and T went to DRAM and back. One work item is
// one (user, head, chunk) b*H*N + ... (the operands' leading three dims
// flattened): its kt tiles of kx and k, vt of v, and one tile each of
// beta, eg (columns) and gamma, all fp32, the chunk one tile of tokens
// (L = 32). Items are split over the grid by the cost model
// (gdnWYItemCycles). Each step is the composed op's compute sequence on
// the same values, with every intermediate packed to an fp32 CB where the
// composed op stored it to DRAM, so the results equal the composed chain
// (and sim/ref's evaluator) bit for bit:
//
//   - Reader: the identity tile once (tril_inverse's); per item its kx,
//     k, v, beta, eg and gamma tiles under one barrier (kx's tiles are
//     k's when the two name one buffer, the model's two reshapes of one
//     l2-normed k: then read once). Input CBs hold two items, so the
//     next item is read while the compute works.
//   - Compute: kb_t = r(kx_t * beta) (bcast cols, as mul); A = r(r(sum_t
//     kb_t k_t^T) * gamma) (matmul_tiles with k transposed, accumulated in
//     DEST in increasing t, packed, then the FPU multiply, as
//     bmm_transpose_b_mul); A packed to CB a_full for the writer, which
//     returns its strictly lower part L in CB strict_lower; T from L as
//     tril_inverse computes it (A = -L copied into DEST, four squarings
//     and products); u_j = r(T r(v_j * beta)) and wk_t = r(T r(kb_t *
//     eg)) (as bmm_scale_b: the scaled tile packed, then the product).
//   - Writer: per item it copies A's tile to strict_lower (a local NoC
//     read) and zeroes each row's diagonal and upper elements, as
//     tril_inverse's reader does (data movement: the values kept are A's
//     bits; with decay only the diagonal, A's upper elements being its
//     product times Γ's zeros, +0 on the FPU), then writes the item's u
//     and wk tiles (and qg and qk) under one barrier.
type gdnWY struct {
	*splitProgram
	kx, k, v, beta, eg, gamma, u, wk *ir.Value
	// q, qg and qk are gdn_chunk_prep's query operand and results (nil
	// for gdn_chunk_wy).
	q, qg, qk *ir.Value
	kt, vt    int
	shareK    bool // kx and k are one buffer: read once
	// expG: gdn_chunk_prep with exp_g, whose operand eg is g: the reader
	// reads g's tile into CB g and the compute packs r(exp(g)) to CB eg.
	expG bool
	// decay: gdn_chunk_prep with decay (and exp_g), whose operand gamma is
	// g's row form: the reader reads its tile into CB g_row, the compute
	// packs Γ = tril(r(exp(r(g - g_row)))) to CB gamma itself, its upper
	// triangle zeroed by the exp (gdnDecayMask), and the writer zeroes
	// only A's diagonal for L (A's upper triangle is A's product times
	// Γ's zeros: zero already).
	decay bool
	// rows: gdn_chunk_prep with rows (and decay), whose eg operand is g
	// [B, H, N, L] (gamma is g again, not read): the reader reads the tile holding
	// the item's row into CB g_row, moves the row to column 0 of a cleared
	// tile in CB g (the column form) and to row 0 of g_row's (the row
	// form), clearing g_row's other rows; n and gRt are g's chunks N and
	// its tiles per (user, head).
	rows   bool
	n, gRt int
	// betaSeq: with rows, operand beta is [B, N*L, H] (tokens first): the
	// reader reads the tile holding the item's tokens of its head into CB
	// g's page (before g's column is made there) and moves that column to
	// column 0 of a cleared tile in CB beta; h is the heads H, bHt beta's
	// tiles per token row.
	betaSeq bool
	h, bHt  int
	// qGroup: gdn_chunk_prep's q_group G; with G > 1 operand q is [B,
	// H/G, N, L, Dk] and item i = (b*H + h)*N + c reads q's item (b*H/G +
	// h/G)*N + c (qH is H, qN the chunks N). kGroup: its k_group, the
	// same for operands kx and k.
	qGroup, kGroup, qH, qN int
	// kType is k's type as its repeat by kGroup: [B, H, N, L, Dk].
	kType ir.TensorType
	cb    gdnWYCBs
}

type gdnWYCBs struct {
	kx, k, v, beta, eg, gamma, ident                       int
	kb, prod, aFull, strict, a, a2, f, p, t, scaled, u, wk int
	q, qg, qk                                              int // gdn_chunk_prep's (-1 without)
	g                                                      int // exp_g's input (-1 without)
	mask, gRow, gCol, rows, diff                           int // decay's (-1 without)
}

// gdnDecayMask is the word the decay's mask tile holds above the
// diagonal (2^100; 0 on and below it): Γ's row expansion adds the mask to
// g_row, so above the diagonal r(g - g_row) is -(2^100 + g_row - g) =
// -2^100 exactly (|g| < 2^88: g's terms fall below the sum's 11-bit
// alignment on the FPU) and the SFPU's exp of it is +0 exactly (z =
// x/ln 2 <= -127: ckernel_sfpu_exp.h's underflow branch), as tril's stores
// left it; on and below it the sums are the zero tile's, bit for bit.
// Finite, so no inf reaches the FPU, whose add is not IEEE's.
const gdnDecayMask = 0x71800000

// gdnWYItemCycles is the cost model's time of one item on a core: its
// reads (DRAM latency and the NoC moving its tiles), the kt multiplies by
// beta, the kt products of A and its multiply by gamma, the inverse's
// negation, four squarings, four products and five adds, and per result
// tile (vt + kt) a multiply and a product, each with its unpacks and
// pack, plus the writer's element stores zeroing A's upper triangle (only
// its diagonal when diagOnly: decay's Γ zeroed the rest); expG the copy,
// exp and pack of eg = r(exp(g)) too.
func gdnWYItemCycles(kt, vt int, withQ, expG, diagOnly bool, fid ir.MathFidelity) int {
	mm := MatmulTileCycles(fid) + 2*UnpackTileCycles
	elt := EltwiseTileCycles + 2*UnpackTileCycles + PackTileCycles
	read := DRAMReadLatencyCycles + gdnWYItemTiles(kt, vt, false, withQ)*ir.FP32.TileBytes()/NoCBytesPerCycle
	compute := kt*elt + kt*mm + PackTileCycles + elt + 8*(mm+PackTileCycles) + 5*elt + (vt+kt)*(elt+mm+PackTileCycles)
	if withQ { // qk's kt products and multiply, qg's kt multiplies
		compute += kt*mm + PackTileCycles + elt + kt*elt
	}
	if expG {
		compute += UnpackTileCycles + int(kir.SFPUTable[kir.SFPUExp].Cycles) + PackTileCycles
	}
	zero := ir.TileSize * ir.TileSize / 2 * FillStoreCycles
	if diagOnly {
		zero = ir.TileSize * FillStoreCycles
	}
	return read + compute + zero
}

// gdnDecayItemCycles is what decay adds to an item: Γ's row expansion
// (against the mask), subtract (negated) and exp, each with its unpacks
// and pack.
func gdnDecayItemCycles() int {
	elt := EltwiseTileCycles + 2*UnpackTileCycles + PackTileCycles
	sfpu := func(op kir.SFPUOp) int { return int(kir.SFPUTable[op].Cycles) }
	return 2*elt + sfpu(kir.SFPUNegative) + UnpackTileCycles + sfpu(kir.SFPUExp) + PackTileCycles
}

// gdnWYItemTiles is the tiles one item reads and writes: kx (unless
// shared with k), k, v, beta, eg and gamma, then u and wk; withQ q, qg
// and qk too.
func gdnWYItemTiles(kt, vt int, shareK, withQ bool) int {
	n := 2*kt + vt + 3 + vt + kt
	if shareK {
		n -= kt
	}
	if withQ {
		n += 2*kt + 1
	}
	return n
}

// lowerGDNChunkWY builds the gdn_chunk_wy program, and gdn_chunk_prep's:
// the same program that also reads each item's q tiles and writes qg =
// r(q * eg) (bcast cols, as mul) and qk = r(r(sum_t q_t k_t^T) * gamma)
// (as bmm_transpose_b_mul) after wk; with exp_g it reads g where it read
// eg and computes eg = r(exp(g)) per item first (copy, the SFPU's exp,
// pack: as the exp op's program).
func lowerGDNChunkWY(op *ir.Op, ctx *Context) (*kir.Program, error) {
	prep := op.Kind == ir.OpGDNChunkPrep
	nOps, nRes := 6, 2
	if prep {
		nOps, nRes = 7, 4
	}
	if len(op.Operands) != nOps || len(op.Results) != nRes {
		return nil, fmt.Errorf("rule gdn-chunk-wy-arity: %s has %d operands and %d results, want %d and %d", op.Name(), len(op.Operands), len(op.Results), nOps, nRes)
	}
	r := &gdnWY{kx: op.Operands[0], k: op.Operands[1], v: op.Operands[2], beta: op.Operands[3], eg: op.Operands[4], gamma: op.Operands[5],
		u: op.Results[0], wk: op.Results[1]}
	if prep {
		r.q, r.qg, r.qk = op.Operands[6], op.Results[2], op.Results[3]
		expG, err := ir.GDNChunkPrepExpG(op.Attrs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
		r.expG = expG
		if r.decay, err = ir.GDNChunkPrepDecay(op.Attrs); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
		if r.rows, err = ir.GDNChunkPrepRows(op.Attrs); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
		if r.betaSeq, err = ir.GDNChunkPrepBetaSeq(op.Attrs); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
		if r.kGroup, err = ir.GDNKGroup(op.Attrs); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
		if r.kGroup > 1 {
			if _, err := ir.GDNKGroupType("kx", r.kx.Type, r.v.Type, r.kGroup); err != nil {
				return nil, fmt.Errorf("%s: %w", op.Name(), err)
			}
			if r.kType, err = ir.GDNKGroupType("k", r.k.Type, r.v.Type, r.kGroup); err != nil {
				return nil, fmt.Errorf("%s: %w", op.Name(), err)
			}
		}
		if r.qGroup, err = ir.GDNChunkPrepQGroup(op.Attrs); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
	}
	if r.kGroup <= 1 {
		r.kGroup, r.kType = 1, r.k.Type
	}
	if r.qGroup > 1 {
		if _, err := ir.GDNChunkPrepQGroupType(r.q.Type, r.kType, r.qGroup); err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name(), err)
		}
	}
	r.qH, r.qN = r.kType.Shape[1], r.kType.Shape[2]
	if err := requireTiles(opValues(op)...); err != nil {
		return nil, err
	}
	for _, v := range opValues(op) {
		if v.Type.DType != ir.FP32 {
			return nil, fmt.Errorf("rule gdn-chunk-wy-dtype: %s is %s; the device inverse takes fp32, so every operand and result must be fp32", v, v.Type.DType)
		}
	}
	ks, vs := r.kType.Shape, r.v.Type.Shape
	if r.rows {
		if ks.Rank() != 5 || !r.eg.Type.Shape.Equal(ir.Shape{ks[0], ks[1], ks[2], ks[3]}) {
			return nil, fmt.Errorf("rule gdn-chunk-prep-rows: %s: eg (g) %s must be [B, H, N, L] (k %s)", op.Name(), r.eg.Type.Shape, ks)
		}
		r.n, r.gRt = ks[2], (ks[2]+ir.TileSize-1)/ir.TileSize
		if r.betaSeq {
			if _, err := ir.GDNChunkPrepBetaSeqType(r.beta.Type, r.kType); err != nil {
				return nil, fmt.Errorf("%s: %w", op.Name(), err)
			}
			r.h, r.bHt = ks[1], (ks[1]+ir.TileSize-1)/ir.TileSize
		}
	} else if r.decay && (ks.Rank() != 5 || !r.gamma.Type.Shape.Equal(ir.Shape{ks[0], ks[1], ks[2], 1, ks[3]})) {
		return nil, fmt.Errorf("rule gdn-chunk-prep-decay: %s: g row %s must be [B, H, N, 1, L] (k %s)", op.Name(), r.gamma.Type.Shape, ks)
	}
	const T = ir.TileSize
	if ks.Rank() != 5 || vs.Rank() != 5 || ks[3] != T || ks[4]%T != 0 || vs[4]%T != 0 {
		return nil, fmt.Errorf("rule gdn-chunk-wy-tiles: want k [B, H, N, %d, Dk] and v [B, H, N, %d, Dv] with Dk, Dv multiples of %d (one tile of tokens, whole head tiles), got %s and %s", T, T, T, ks, vs)
	}
	if _, err := ir.InferTypes(op.Kind, op.Operands, op.Attrs); err != nil {
		return nil, err
	}
	r.kt, r.vt = ks[4]/T, vs[4]/T
	r.shareK = ctx.BufferName(r.kx) == ctx.BufferName(r.k) && r.kx.Type.Shape.Equal(r.k.Type.Shape)
	items := ks[0] * ks[1] * ks[2]
	// The DRAM floor at two thirds of the item's tiles: with the whole
	// floor the split stops at the fewest cores that reach it, and the
	// timing model then finds those cores' reads and writes contending
	// (gdn_chunk_prep at 4,096 tokens, 24 heads: 955 us on 48 cores, 813
	// us on the 74 this gives; gdn_chunk_wy 500 us on 62, 486 on 94).
	tiles := gdnWYItemTiles(r.kt, r.vt, r.shareK, prep)
	if r.rows { // g's one tile for eg and gamma
		tiles--
	}
	floor := items * tiles * ir.FP32.TileBytes() / DRAMBytesPerCycle * 2 / 3
	// Every core's item count coprime with the banks (SpreadBanks): each
	// item reads one page of beta, eg and gamma.
	sp := PlanSplit(items, ctx.Target.NumWorkers(), r.itemCycles(ctx.Fidelity), 0, floor)
	r.splitProgram = startProgram(op, ctx, SpreadBanks(sp, ctx.Target.NumWorkers(), ctx.Target.DRAMBanks))
	r.addCBs()
	rd, cp, wr := r.reader(), r.compute(), r.writer()
	r.plan.SetArgs(r.cores, rd, cp, wr)
	return r.done(r.p)
}

// itemCycles is the cost model's time of one item (gdnWYItemCycles, plus
// gdnDecayItemCycles with decay).
func (r *gdnWY) itemCycles(fid ir.MathFidelity) int {
	n := gdnWYItemCycles(r.kt, r.vt, r.q != nil, r.expG, r.decay, fid)
	if r.decay {
		n += gdnDecayItemCycles()
	}
	return n
}

// addCBs adds the program's CBs: the inputs two items deep, the
// intermediates one item.
func (r *gdnWY) addCBs() {
	f, kt, vt, cbs := ir.FP32, r.kt, r.vt, r.cbs
	c := gdnWYCBs{q: -1, qg: -1, qk: -1, g: -1, mask: -1, gRow: -1, gCol: -1, rows: -1, diff: -1}
	c.k = cbs.Input("k", f, 2*kt)
	c.kx = c.k
	if !r.shareK {
		c.kx = cbs.Input("kx", f, 2*kt)
	}
	c.v, c.beta = cbs.Input("v", f, 2*vt), cbs.Input("beta", f, 2)
	if r.decay {
		// g's tile twice: CB g unpacked to DEST for the exp (exact fp32, as
		// the exp op), CB g_col (the reader's local copy of the one DRAM
		// read) through the FPU for the subtract (as sub).
		c.gRow, c.gCol, c.mask = cbs.Input("g_row", f, 2), cbs.Input("g_col", f, 2), cbs.Input("mask", f, 1)
		c.rows, c.diff, c.gamma = cbs.Scratch("g_rows", f, 1), cbs.Scratch("g_diff", f, 1), cbs.Scratch("gamma", f, 1)
	} else {
		c.gamma = cbs.Input("gamma", f, 2)
	}
	if r.expG {
		c.g, c.eg = cbs.Input("g", f, 2), cbs.Scratch("eg", f, 1)
	} else {
		c.eg = cbs.Input("eg", f, 2)
	}
	c.ident = cbs.Input("identity", f, 1)
	c.strict = cbs.Input("strict_lower", f, 1)
	c.kb, c.prod, c.aFull = cbs.Scratch("kb", f, kt), cbs.Scratch("product", f, 1), cbs.Output("a_full", f, 1)
	c.a, c.a2, c.f, c.p = cbs.Scratch("a", f, 1), cbs.Scratch("a_copy", f, 1), cbs.Scratch("factor", f, 1), cbs.Scratch("inverse_product", f, 1)
	c.t, c.scaled = cbs.Scratch("t", f, 1), cbs.Scratch("scaled", f, 1)
	c.u, c.wk = cbs.Output("u", f, vt), cbs.Output("wk", f, kt)
	if r.q != nil {
		c.q, c.qg, c.qk = cbs.Input("q", f, 2*kt), cbs.Output("qg", f, kt), cbs.Output("qk", f, 1)
	}
	r.cb = c
	r.planned(r.what())
}

// what is the op kind's name.
func (r *gdnWY) what() string {
	if r.q != nil {
		return "gdn_chunk_prep"
	}
	return "gdn_chunk_wy"
}

// reader adds the reader kernel: the identity tile, then per item its
// input tiles under one barrier.
func (r *gdnWY) reader() *kir.Kernel {
	rd := r.splitProgram.reader()
	kAcc, vAcc := r.bind(rd, "k_addr", r.k), r.bind(rd, "v_addr", r.v)
	var kxAcc *blocks.Access
	if !r.shareK {
		kxAcc = r.bind(rd, "kx_addr", r.kx)
	}
	egName, gammaName := "eg_addr", "gamma_addr"
	if r.expG {
		egName = "g_addr"
	}
	if r.decay {
		gammaName = "g_row_addr"
	}
	bAcc, eAcc, gAcc := r.bind(rd, "beta_addr", r.beta), r.bind(rd, egName, r.eg), r.bind(rd, gammaName, r.gamma)
	var qAcc *blocks.Access
	if r.q != nil {
		qAcc = r.bind(rd, "q_addr", r.q)
	}
	start, count := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b, c, kt, vt := rd.Builder(), r.cb, r.kt, r.vt
	if r.err != nil {
		return rd
	}
	b.Comment("identity tile")
	id := blocks.Reserve(b, c.ident, kir.C(1), "id")
	blocks.FillWords(b, id, ir.FP32.TileBytes(), 0)
	b.For("d", kir.C(0), kir.Ci(ir.TileSize), func(d kir.Var) {
		b.L1Write32(kir.Add(id, blocks.FaceOffset(d, d, 4)), kir.C(0x3F800000))
	})
	b.CBPushBack(c.ident, kir.C(1))
	if r.decay {
		b.Comment("mask tile: 0 on and below the diagonal, 2^100 above (Γ's row expansion adds the row to it; exp then zeroes Γ's upper triangle)")
		z := blocks.Reserve(b, c.mask, kir.C(1), "z")
		blocks.FillWords(b, z, ir.FP32.TileBytes(), 0)
		b.For("r", kir.C(0), kir.Ci(ir.TileSize-1), func(rr kir.Var) {
			b.For("c", kir.Add(rr, kir.C(1)), kir.Ci(ir.TileSize), func(cc kir.Var) {
				b.L1Write32(kir.Add(z, blocks.FaceOffset(rr, cc, 4)), kir.C(gdnDecayMask))
			})
		})
		b.CBPushBack(c.mask, kir.C(1))
	}
	type run struct {
		acc *blocks.Access
		cb  int
		n   int
	}
	runs := []run{{kAcc, c.k, kt}}
	if !r.shareK {
		runs = append(runs, run{kxAcc, c.kx, kt})
	}
	egCB, gammaCB := c.eg, c.gamma
	if r.expG {
		egCB = c.g
	}
	if r.decay {
		gammaCB = c.gRow
	}
	runs = append(runs, run{vAcc, c.v, vt})
	if !r.betaSeq {
		runs = append(runs, run{bAcc, c.beta, 1})
	}
	if !r.rows {
		runs = append(runs, run{eAcc, egCB, 1}, run{gAcc, gammaCB, 1})
	}
	if r.q != nil {
		runs = append(runs, run{qAcc, c.q, kt})
	}
	b.For("i", start, kir.Add(start, count), func(i kir.Var) {
		b.Comment("the item's k, kx, v, beta, eg and gamma tiles, all in flight")
		var gL1, gRowL1 kir.Var
		if r.rows {
			gRowL1 = blocks.Reserve(b, c.gRow, kir.C(1), "grow")
			gL1 = blocks.Reserve(b, c.g, kir.C(1), "g")
			pg := kir.Add(kir.Mul(kir.Div(i, kir.Ci(r.n)), kir.Ci(r.gRt)), kir.Div(kir.Mod(i, kir.Ci(r.n)), kir.Ci(ir.TileSize)))
			b.NoCAsyncRead(eAcc.PageAddr(pg), gRowL1, kir.Ci(eAcc.PageSize()))
		}
		var betaL1 kir.Var
		if r.betaSeq {
			betaL1 = blocks.Reserve(b, c.beta, kir.C(1), "beta")
			b.NoCAsyncRead(bAcc.PageAddr(r.betaPage(b, i)), gL1, kir.Ci(bAcc.PageSize()))
		}
		for _, rn := range runs {
			l1 := blocks.Reserve(b, rn.cb, kir.Ci(rn.n), "l1")
			if rn.cb == c.g {
				gL1 = l1
			}
			ps := kir.Ci(rn.acc.PageSize())
			item := kir.Expr(i)
			grp := 1
			switch {
			case rn.cb == c.q:
				grp = r.qGroup
			case rn.cb == c.k || rn.cb == c.kx:
				grp = r.kGroup
			}
			if grp > 1 { // q (or kx and k) per key head: (b*H + h)*N + c -> (b*H/G + h/G)*N + c
				bh := kir.Div(i, kir.Ci(r.qN))
				kh := kir.Add(kir.Mul(kir.Div(bh, kir.Ci(r.qH)), kir.Ci(r.qH/grp)), kir.Div(kir.Mod(bh, kir.Ci(r.qH)), kir.Ci(grp)))
				item = kir.Add(kir.Mul(kh, kir.Ci(r.qN)), kir.Mod(i, kir.Ci(r.qN)))
			}
			base := b.Let("base", kir.Mul(item, kir.Ci(rn.n)))
			b.For("j", kir.C(0), kir.Ci(rn.n), func(j kir.Var) {
				b.NoCAsyncRead(rn.acc.PageAddr(kir.Add(base, j)), kir.Add(l1, kir.Mul(j, ps)), ps)
			})
		}
		b.NoCAsyncReadBarrier()
		if r.betaSeq {
			b.Comment("beta's tokens of the item's chunk and head (a column of the gates' tile, in g's page) as column 0 of a cleared tile")
			hc := b.Let("hcol", kir.Mod(kir.Mod(kir.Div(i, kir.Ci(r.n)), kir.Ci(r.h)), kir.Ci(ir.TileSize)))
			blocks.FillWords(b, betaL1, ir.FP32.TileBytes(), 0)
			b.For("j", kir.C(0), kir.Ci(ir.TileSize), func(j kir.Var) {
				blocks.MoveElem(b, gL1, j, hc, betaL1, j, kir.C(0), 4)
			})
		}
		if r.rows {
			r.rowForms(b, gRowL1, gL1, b.Let("row", kir.Mod(kir.Mod(i, kir.Ci(r.n)), kir.Ci(ir.TileSize))))
		}
		if r.decay {
			b.Comment("g's tile again for the FPU's subtract: a local copy of the one read")
			col := blocks.Reserve(b, c.gCol, kir.C(1), "gcol")
			blocks.LocalCopy(b, gL1, col, eAcc.PageSize())
		}
		for _, rn := range runs {
			b.CBPushBack(rn.cb, kir.Ci(rn.n))
		}
		if r.betaSeq {
			b.CBPushBack(c.beta, kir.C(1))
		}
		if r.rows {
			b.CBPushBack(c.g, kir.C(1))
			b.CBPushBack(c.gRow, kir.C(1))
		}
		if r.decay {
			b.NoCAsyncReadBarrier()
			b.CBPushBack(c.gCol, kir.C(1))
		}
	})
	return rd
}

// betaPage is the page of beta [B, N*L, H] holding item i's tokens of its
// head: item i is (b*H + h)*N + c, its tokens row c of tiles and its head
// tile column h/32, so the page is (b*N + c)*bHt + h/32.
func (r *gdnWY) betaPage(b *kir.Builder, i kir.Expr) kir.Expr {
	bh := b.Let("bh", kir.Div(i, kir.Ci(r.n)))
	row := kir.Add(kir.Mul(kir.Div(bh, kir.Ci(r.h)), kir.Ci(r.n)), kir.Mod(i, kir.Ci(r.n)))
	return kir.Add(kir.Mul(row, kir.Ci(r.bHt)), kir.Div(kir.Mod(bh, kir.Ci(r.h)), kir.Ci(ir.TileSize)))
}

// rowForms emits the reader's column and row forms of g's row `row` (the
// item's chunk), read as a whole tile to grow: its elements to column 0
// of the cleared tile at col, then to row 0 of grow itself (element j
// moves from (row, j) to (0, j), in increasing j: no element is
// overwritten before it moves) and grow's rows 1..31 cleared. The tiles
// then hold what the reshapes to [.., L, 1] and [.., 1, L] wrote.
func (r *gdnWY) rowForms(b *kir.Builder, grow, col kir.Var, row kir.Expr) {
	const T, eb = ir.TileSize, 4
	tb, fb, rb := ir.FP32.TileBytes(), blocks.FaceDim*blocks.FaceDim*eb, blocks.FaceDim*eb
	b.Comment("g's row of the item's chunk as a column (column 0 of a cleared tile) and as a row (row 0, the other rows cleared)")
	blocks.FillWords(b, col, tb, 0)
	b.For("j", kir.C(0), kir.Ci(T), func(j kir.Var) {
		blocks.MoveElem(b, grow, row, j, col, j, kir.C(0), eb)
	})
	b.For("j", kir.C(0), kir.Ci(T), func(j kir.Var) {
		blocks.MoveElem(b, grow, row, j, grow, kir.C(0), j, eb)
	})
	// rows 1..15 of faces 0 and 1, then faces 2 and 3 whole
	blocks.FillWords(b, kir.Add(grow, kir.Ci(rb)), fb-rb, 0)
	blocks.FillWords(b, kir.Add(grow, kir.Ci(fb+rb)), fb-rb, 0)
	blocks.FillWords(b, kir.Add(grow, kir.Ci(2*fb)), tb-2*fb, 0)
}

// compute adds the compute kernel (see the doc above).
func (r *gdnWY) compute() *kir.Kernel {
	one, z0 := kir.C(1), kir.C(0)
	cp, c, ccount := r.rangeCompute("count")
	n, kt, vt := r.cb, r.kt, r.vt
	cb := c.B
	c.MatmulStartup(n.kb, n.k, n.prod)
	cb.CBWaitFront(n.ident, one)
	if r.decay {
		cb.CBWaitFront(n.mask, one)
	}
	// plusI: DEST[0] = I + a[0], packed into out; a is waited for, not popped.
	plusI := func(a, out int) {
		cb.CBWaitFront(a, one)
		c.Acquire()
		c.Binary(kir.EltAdd, blocks.BcastNone, n.ident, a, z0, z0, z0)
		c.PackOut(out, 1)
	}
	// scaledProduct packs r(T r(x[t] * s)) to out (as bmm_scale_b).
	scaledProduct := func(x, s int, t kir.Expr, out int) {
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastCols, x, s, t, z0, z0)
		c.PackOut(n.scaled, 1)
		cb.CBWaitFront(n.scaled, one)
		c.Acquire()
		c.Matmul(n.t, n.scaled, z0, z0, z0, false)
		cb.CBPopFront(n.scaled, one)
		c.PackOut(out, 1)
	}
	// decay packs r(prod * gamma) to out (the FPU multiply of
	// bmm_transpose_b_mul's epilogue, the product first) and pops prod;
	// gamma stays.
	decay := func(out int) {
		cb.CBWaitFront(n.prod, one)
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastNone, n.prod, n.gamma, z0, z0, z0)
		cb.CBPopFront(n.prod, one)
		c.PackOut(out, 1)
	}
	c.For("i", z0, ccount, func(kir.Var) {
		switch {
		case r.decay:
			cb.Comment("eg = r(exp(g)) (as the exp op)")
			c.Unary(n.g, n.eg, []blocks.SFPUStep{{Op: kir.SFPUExp}})
			cb.Comment("Γ = tril(r(exp(r(g - g_row)))) (as sub: the row expanded on the mask, -(rows - bcast_cols(g)); then as exp, which gives 0 above the diagonal)")
			c.BinaryTileKeepA(kir.EltAdd, blocks.BcastRows, n.mask, n.gRow, n.rows)
			c.BinaryTile(kir.EltSub, blocks.BcastCols, n.rows, n.gCol, n.diff, true, nil)
			c.Unary(n.diff, n.gamma, []blocks.SFPUStep{{Op: kir.SFPUExp}})
		case r.expG:
			cb.Comment("eg = r(exp(g)) (as the exp op)")
			c.Unary(n.g, n.eg, []blocks.SFPUStep{{Op: kir.SFPUExp}})
		}
		cb.CBWaitFront(n.k, kir.Ci(kt))
		if !r.shareK {
			cb.CBWaitFront(n.kx, kir.Ci(kt))
		}
		cb.CBWaitFront(n.beta, one)
		cb.Comment("kb = r(kx * beta) per k tile (bcast cols, as mul)")
		c.ForPeeled("kt", kt, func(t kir.Expr) {
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastCols, n.kx, n.beta, t, z0, z0)
			c.PackOut(n.kb, 1)
		})
		cb.Comment("A = r(r(sum_t kb_t k_t^T) * gamma) (as bmm_transpose_b_mul), to the writer")
		cb.CBWaitFront(n.kb, kir.Ci(kt))
		c.Acquire()
		c.ForPeeled("kt", kt, func(t kir.Expr) { c.Matmul(n.kb, n.k, t, t, z0, true) })
		c.PackOut(n.prod, 1)
		cb.CBWaitFront(n.gamma, one)
		decay(n.aFull)

		cb.Comment("T = tril_inverse(A) from its strictly lower part: A' = -L kept twice, P = I + A'")
		cb.CBWaitFront(n.strict, one)
		c.Acquire()
		c.Copy(n.strict, z0, z0)
		c.SFPU(blocks.SFPUStep{Op: kir.SFPUNegative}, z0)
		cb.CBPopFront(n.strict, one)
		c.PackOutTo(n.a, n.a2)
		plusI(n.a2, n.p)
		for s := 0; s < 4; s++ {
			cb.Comment(fmt.Sprintf("A' = A'^2 (A'^%d); P = P (I + A')", 2<<s))
			cb.CBWaitFront(n.a, one)
			c.Acquire()
			c.Matmul(n.a, n.a2, z0, z0, z0, false)
			cb.CBPopFront(n.a, one)
			cb.CBPopFront(n.a2, one)
			c.PackOutTo(n.a, n.a2)
			plusI(n.a2, n.f)
			cb.CBWaitFront(n.p, one)
			cb.CBWaitFront(n.f, one)
			c.Acquire()
			c.Matmul(n.p, n.f, z0, z0, z0, false)
			cb.CBPopFront(n.p, one)
			cb.CBPopFront(n.f, one)
			if s == 3 {
				c.PackOut(n.t, 1)
			} else {
				c.PackOut(n.p, 1)
			}
		}
		cb.CBWaitFront(n.a, one)
		cb.CBPopFront(n.a, one)
		cb.CBPopFront(n.a2, one)

		cb.CBWaitFront(n.t, one)
		cb.CBWaitFront(n.v, kir.Ci(vt))
		cb.Comment("u = r(T r(v * beta)) per value tile (as bmm_scale_b)")
		c.ForPeeled("vt", vt, func(j kir.Expr) { scaledProduct(n.v, n.beta, j, n.u) })
		cb.CBWaitFront(n.eg, one)
		cb.Comment("wk = r(T r(kb * eg)) per k tile (as bmm_scale_b)")
		c.ForPeeled("kt", kt, func(t kir.Expr) { scaledProduct(n.kb, n.eg, t, n.wk) })
		pops := []struct{ cb, n int }{{n.t, 1}, {n.kb, kt}, {n.v, vt}, {n.beta, 1}, {n.k, kt}, {n.eg, 1}, {n.gamma, 1}}
		if r.q != nil {
			cb.CBWaitFront(n.q, kir.Ci(kt))
			cb.Comment("qg = r(q * eg) per k tile (bcast cols, as mul)")
			c.ForPeeled("kt", kt, func(t kir.Expr) {
				c.Acquire()
				c.Binary(kir.EltMul, blocks.BcastCols, n.q, n.eg, t, z0, z0)
				c.PackOut(n.qg, 1)
			})
			cb.Comment("qk = r(r(sum_t q_t k_t^T) * gamma) (as bmm_transpose_b_mul)")
			c.Acquire()
			c.ForPeeled("kt", kt, func(t kir.Expr) { c.Matmul(n.q, n.k, t, t, z0, true) })
			c.PackOut(n.prod, 1)
			decay(n.qk)
			pops = append(pops, struct{ cb, n int }{n.q, kt})
		}
		if !r.shareK {
			pops = append(pops, struct{ cb, n int }{n.kx, kt})
		}
		for _, p := range pops {
			cb.CBPopFront(p.cb, kir.Ci(p.n))
		}
	})
	cb.CBPopFront(n.ident, one)
	if r.decay {
		cb.CBPopFront(n.mask, one)
	}
	return cp
}

// writer adds the writer kernel: per item A's strictly lower part back
// to the compute (see the doc above), then its u and wk tiles.
func (r *gdnWY) writer() *kir.Kernel {
	wr := newWriter(r.p, r.rs)
	uAcc, wkAcc := r.bind(wr, "u_addr", r.u), r.bind(wr, "wk_addr", r.wk)
	var qgAcc, qkAcc *blocks.Access
	if r.q != nil {
		qgAcc, qkAcc = r.bind(wr, "qg_addr", r.qg), r.bind(wr, "qk_addr", r.qk)
	}
	start, count := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	w, c, kt, vt := wr.Builder(), r.cb, r.kt, r.vt
	if r.err != nil {
		return wr
	}
	w.For("i", start, kir.Add(start, count), func(i kir.Var) {
		w.Comment("L = A with its diagonal and upper elements zeroed (tril_inverse's reader)")
		copyZeroUpper(w, c.aFull, c.strict, "a", "l", !r.decay)
		w.Comment("the item's u, wk (qg and qk) tiles, all in flight under one barrier")
		ub := w.Let("ubase", kir.Mul(i, kir.Ci(vt)))
		kb := w.Let("wkbase", kir.Mul(i, kir.Ci(kt)))
		type out struct {
			acc  *blocks.Access
			cb   int
			n    int
			base kir.Expr
		}
		outs := []out{{uAcc, c.u, vt, ub}, {wkAcc, c.wk, kt, kb}}
		if r.q != nil {
			outs = append(outs, out{qgAcc, c.qg, kt, kb}, out{qkAcc, c.qk, 1, i})
		}
		for _, o := range outs {
			l1 := blocks.WaitFront(w, o.cb, kir.C(1), "l1")
			w.For("j", kir.C(0), kir.Ci(o.n), func(j kir.Var) {
				w.CBWaitFront(o.cb, kir.Add(j, kir.C(1)))
				w.NoCAsyncWrite(kir.Add(l1, kir.Mul(j, kir.Ci(o.acc.PageSize()))), o.acc.PageAddr(kir.Add(o.base, j)), kir.Ci(o.acc.PageSize()))
			})
		}
		w.NoCAsyncWriteBarrier()
		for _, o := range outs {
			w.CBPopFront(o.cb, kir.Ci(o.n))
		}
	})
	return wr
}

// copyZeroUpper emits a writer's copy of from's fp32 tile into to with
// its diagonal and the elements above it zeroed by 32-bit L1 stores (only
// the diagonal when !upper: the caller knows the upper triangle is zero
// already); the source and destination pointers are named src and dst.
// It pops from and pushes to one page.
func copyZeroUpper(w *kir.Builder, from, to int, src, dst string, upper bool) {
	s := blocks.WaitFront(w, from, kir.C(1), src)
	l1 := blocks.Reserve(w, to, kir.C(1), dst)
	blocks.LocalCopy(w, s, l1, ir.FP32.TileBytes())
	w.NoCAsyncReadBarrier()
	w.CBPopFront(from, kir.C(1))
	w.For("r", kir.C(0), kir.Ci(ir.TileSize), func(rr kir.Var) {
		if !upper {
			w.L1Write32(kir.Add(l1, blocks.FaceOffset(rr, rr, 4)), kir.C(0))
			return
		}
		w.For("c", rr, kir.Ci(ir.TileSize), func(cc kir.Var) {
			w.L1Write32(kir.Add(l1, blocks.FaceOffset(rr, cc, 4)), kir.C(0))
		})
	})
	w.CBPushBack(to, kir.C(1))
}
