package lower

import (
	"cmp"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/lower/multicore"
	"github.com/tcc-dev/tcc/ir"
)

// gdn_recurrence: see the package's GDN doc in fused_gdn.go. The program
// is built in phases: planGDNRecurrence (shapes and work split), addCBs,
// the reader (readItem: one item's inputs), the compute phases of one
// item (normQK, decay, delta, update, outNorm) and the writer.

// gdnStateBatch is the number of state pages the recurrence's reader
// moves per barrier (its state CBs hold two such blocks).
const gdnStateBatch = 4

// gdnRec is one gdn_recurrence program being built: its operands, shapes
// and work split (planGDNRecurrence, the embedded splitProgram) and its
// CBs (addCBs).
type gdnRec struct {
	*splitProgram
	x, beta, g, s, z, nw, out, ns  *ir.Value
	l2Eps, l2Scale, scale, normEps float32
	H, Dk, Dv, G, kw               int
	kt, vt, ctx3, ctz              int // key and value tiles per head; qkv, and z and out, tiles per user row
	vc, groups                     int // value tiles per item; cores per head (items of one head)
	f                              ir.DType
	exact                          bool // fp32 state: the r() of the Doc line are identities
	ebX, ebZ, ebBeta, ebG, ebW     int  // element bytes moved by rows (ebW 0: whole pages)
	zRows, gRows                   int  // rows of a core's packed z (items x vc) and g (items) tiles; 0: read per item (fused_gdn_pack.go)
	cb                             gdnCBs
	xch                            *multicore.Exchange // the output norm's exchange when a head spans cores
	zeroBytes, zeroPages           int                 // the reader's zero tile (and staging pages behind it)
}

// gdnCBs are the recurrence's CBs (-1: not used by this variant).
type gdnCBs struct {
	q, q2, k, k2, v, z, w, beta, g, s, zero, r, qn, kn, kc, eg, sd, d int
	db, ks, outer, ob, round, eye, ed, sf, sdF                        int
	sp, o, o2, on1, on, sz, sout, out, rsOut                          int
	// silu is the op of silu(z), packed as z's dtype (siluFor)
	silu     kir.SFPUOp
	szp, egp int // the packed silu(z) and exp(g) tiles (compute -> writer)
}

// lowerGDNRecurrence builds the gdn_recurrence program phase by phase.
func lowerGDNRecurrence(op *ir.Op, ctx *Context) (*kir.Program, error) {
	r, err := planGDNRecurrence(op, ctx)
	if err != nil {
		return nil, err
	}
	r.addCBs()
	rd, cp, wr := r.reader(), r.compute(), r.writer()
	r.fail(r.setArgs(op.Name(), rd, cp, wr))
	return r.done(r.p)
}

// planGDNRecurrence checks op's operands and attributes and plans the
// work: one item is vc value tiles of one head, the whole head (vc = vt)
// or, while the grid has a core for every value tile of every head and
// the state is fp32, one value tile, a group of vt cores per head that
// exchange the output norm's partial sums (see the GDN doc).
func planGDNRecurrence(op *ir.Op, ctx *Context) (*gdnRec, error) {
	t := ctx.Target
	r := &gdnRec{x: op.Operands[0], beta: op.Operands[1], g: op.Operands[2], s: op.Operands[3], z: op.Operands[4], nw: op.Operands[5],
		out: op.Results[0], ns: op.Results[1]}
	if err := requireTiles(opValues(op)...); err != nil {
		return nil, err
	}
	for _, a := range []struct {
		name string
		v    *float32
	}{{"l2_eps", &r.l2Eps}, {"l2_scale", &r.l2Scale}, {"scale", &r.scale}, {"norm_eps", &r.normEps}} {
		f, ok := op.Attrs[a.name].(float64)
		if !ok {
			return nil, fmt.Errorf("rule attr: %s needs a float attribute %q", op.Name(), a.name)
		}
		*a.v = float32(f)
	}
	ss, xs := r.s.Type.Shape, r.x.Type.Shape
	if ss.Rank() != 4 || xs.Rank() != 3 || xs[0] != ss[0] || xs[1] != 1 {
		return nil, fmt.Errorf("rule gdn-recurrence-shape: want state [B, H, Dk, Dv] and qkv [B, 1, C], got %s and %s", ss, xs)
	}
	B, H, Dk, Dv, C := ss[0], ss[1], ss[2], ss[3], xs[2]
	if Dk%ir.TileSize != 0 || Dv%ir.TileSize != 0 {
		return nil, fmt.Errorf("rule gdn-recurrence-head-dim: key dim %d and value dim %d must be multiples of %d (heads are whole tiles)", Dk, Dv, ir.TileSize)
	}
	kw2 := C - H*Dv
	if kw2 <= 0 || kw2%(2*Dk) != 0 || H%(kw2/(2*Dk)) != 0 {
		return nil, fmt.Errorf("rule gdn-recurrence-heads: qkv has %d channels; want 2*Hk*%d + %d*%d with Hk dividing %d", C, Dk, H, Dv, H)
	}
	r.H, r.Dk, r.Dv, r.kw = H, Dk, Dv, kw2/2
	r.G = H / (r.kw / Dk)
	f := r.s.Type.DType
	if f != ir.BF16 && f != ir.FP32 {
		return nil, fmt.Errorf("rule gdn-recurrence-state-dtype: state %s is %s; the recurrence rounds to the state's dtype element by element, which needs bf16 or fp32", r.s, f)
	}
	if r.ns.Type.DType != f {
		return nil, fmt.Errorf("rule gdn-recurrence-state-dtype: new state is %s but the state is %s", r.ns.Type.DType, f)
	}
	if err := cmp.Or(gdnEB(&r.ebX, "qkv", r.x), gdnEB(&r.ebZ, "z", r.z), gdnEB(&r.ebBeta, "beta", r.beta), gdnEB(&r.ebG, "g", r.g)); err != nil {
		return nil, err
	}
	if r.ebW = blocks.ElemBytes(r.nw.Type.DType); r.ebW != 2 && r.ebW != 4 {
		r.ebW = 0 // read whole pages
	}
	r.f, r.exact = f, !blocks.Rounds(f)
	r.kt, r.vt = Dk/ir.TileSize, Dv/ir.TileSize
	r.ctx3, r.ctz = C/ir.TileSize, H*r.vt
	r.vc = r.vt
	if r.vt > 1 && B*H*r.vt <= t.NumWorkers() && !blocks.Rounds(f) {
		r.vc = 1 // fp32 state only: the exchange's fp32 tiles share the new-state CB
	}
	r.groups = r.vt / r.vc
	items := B * H * r.groups
	// One item is ~4*Kt*vc tile products plus reading and writing its
	// state: far above a core's dispatch cost, so one item per core.
	perItem := 4*r.kt*r.vc*MatmulTileCycles(ctx.Fidelity) + 2*r.kt*r.vc*f.TileBytes()/NoCBytesPerCycle
	plan := PlanSplit(items, t.NumWorkers(), perItem, 0, 0)
	if r.groups > 1 {
		// The cores of a head exchange partial sums once per program:
		// each holds exactly one item.
		plan = Split{Items: items, Cores: items, PerCore: 1}
	}
	if r.groups == 1 {
		// A core's users share tiles for silu(z) and exp(g) (fused_gdn_pack.go).
		if n := plan.PerCore * r.vc; n > 1 {
			r.zRows = n
		}
		if plan.PerCore > 1 {
			r.gRows = plan.PerCore
		}
	}
	r.splitProgram = startProgram(op, ctx, plan)
	return r, nil
}

// addCBs adds the program's CBs (planned: they may not fit L1) and with a
// split head the exchange's semaphores to p.
func (r *gdnRec) addCBs() {
	t, f, kt, vc, cbs := r.ctx.Target, r.f, r.kt, r.vc, r.cbs
	dx, dz := r.x.Type.DType, r.z.Type.DType
	dg := r.g.Type.DType
	c := gdnCBs{db: -1, ks: -1, outer: -1, ob: -1, round: -1, eye: -1, ed: -1, sf: -1, sdF: -1, szp: -1, egp: -1}
	// With several items per core the per-item inputs are double
	// buffered: the reader reads the next item's while compute works.
	nb := 1
	if r.plan.PerCore > 1 {
		nb = 2
	}
	c.q, c.q2 = cbs.Input("q", dx, nb*kt), cbs.Input("q_copy", dx, nb*kt)
	c.k, c.k2 = cbs.Input("k", dx, nb*kt), cbs.Input("k_copy", dx, nb*kt)
	c.v = cbs.Input("v", dx, nb*vc)
	if r.zRows > 0 {
		c.z = cbs.Input("z_packed", dz, gdnPages(r.zRows))
	} else {
		c.z = cbs.Input("z", dz, vc)
	}
	c.w = cbs.Input("norm_w", r.nw.Type.DType, nb*vc)
	c.beta = cbs.Input("beta", r.beta.Type.DType, nb)
	if r.gRows > 0 {
		c.g = cbs.Input("g_packed", dg, gdnPages(r.gRows))
	} else {
		c.g = cbs.Input("g", dg, 1)
	}
	c.s = cbs.Input("state", f, 2*gdnStateBatch)
	r.zeroBytes = max(dx.TileBytes(), dz.TileBytes())
	r.zeroPages = 1
	if r.zRows > 0 || r.gRows > 0 {
		// The packed tiles are cleared from the zeros; their rows are
		// staged behind them.
		r.zeroBytes = max(r.zeroBytes, dg.TileBytes())
		r.zeroPages += (r.stageBytes() + r.zeroBytes - 1) / r.zeroBytes
	}
	c.zero = cbs.Pages(blocks.ScratchCB, "zeros", dx, r.zeroBytes, r.zeroPages)
	c.r = cbs.Scratch("rsqrt", ir.FP32, 1)
	c.qn, c.kn, c.kc = cbs.Scratch("q_normed", f, kt), cbs.Scratch("k_normed", f, kt), cbs.Scratch("k_column", f, kt)
	if r.gRows > 0 {
		// exp(g) of the core's items at once; the writer moves each item's
		// element to (0, 0) of its exp_g page.
		c.egp, c.eg = cbs.Scratch("exp_g_packed", f, gdnPages(r.gRows)), cbs.Input("exp_g", f, 1)
	} else {
		c.eg = cbs.Scratch("exp_g", f, 1)
	}
	c.sd, c.d = cbs.Scratch("state_decayed", f, kt*vc), cbs.Scratch("delta", f, vc)
	if r.exact {
		// The state is copied into DEST exactly (c_state unpacks straight
		// to DEST) and multiplied by the decrement through the FPU: a
		// second CB holds the same tiles for the FPU operand.
		c.sf, c.sdF = cbs.Input("state_fpu", f, 2*gdnStateBatch), cbs.Scratch("state_decayed_fpu", f, kt*vc)
		c.db, c.eye, c.ed = cbs.Scratch("delta_beta", f, vc), cbs.Input("identity", f, 1), cbs.Scratch("decrement_diag", f, 1)
	} else {
		c.ks, c.outer = cbs.Scratch("k_state", f, 1), cbs.Scratch("outer", f, 1)
		c.ob, c.round = cbs.Scratch("outer_beta", f, 1), cbs.Scratch("round", f, 1)
	}
	c.sp, c.o, c.o2 = cbs.Scratch("state_new_column", f, kt), cbs.Scratch("o", f, vc), cbs.Scratch("o_copy", f, vc)
	if vc < r.vt || f == ir.FP32 {
		// One fp32 CB of two pages carries o_scaled and then o_normed (the
		// program's CBs are at the 32 limit with the exchange or the
		// packed tiles).
		c.on1 = cbs.Scratch("o_scaled_normed", ir.FP32, 2)
		c.on = c.on1
	} else {
		c.on1, c.on = cbs.Scratch("o_scaled", ir.FP32, 1), cbs.Scratch("o_normed", f, 1)
	}
	c.silu = siluFor(dz)
	if r.zRows > 0 {
		// silu(z) of the core's items at once; the writer moves each
		// row to row 0 of a silu_z page. Exactly vc pages: the writer
		// clears them once and writes only row 0 of each after.
		c.szp, c.sz = cbs.Scratch("silu_z_packed", dz, gdnPages(r.zRows)), cbs.Input("silu_z", dz, vc)
	} else {
		c.sz = cbs.Scratch("silu_z", dz, 1)
	}
	c.sout = cbs.Output("new_state", f, nb*kt) // a value column of S' (two with nb = 2), written under one barrier
	c.out = cbs.Output("out", r.out.Type.DType, vc)
	// The output norm's exchange between the cores of a head (groups > 1):
	// a multicore.Exchange on groups of vt cores, as the split-row norms
	// do. The partial sum and the leader's rsqrt tile (fp32, compute ->
	// writer) follow the S' tiles through the new-state CB, in that order.
	c.rsOut = c.r
	if r.groups > 1 {
		r.xch = &multicore.Exchange{T: t, Group: r.groups, Cores: r.cores, Ranges: r.rs, Page: ir.FP32.TileBytes(), Bytes: rowSumBytes(1), // o is one row
			PartialName: "partial sums (column 0 of its live rows)", ResultName: "rsqrt tile"}
		r.xch.Result = cbs.Input("rsqrt_out", ir.FP32, 1)
		r.xch.Partial, r.xch.Local = c.sout, c.sout
		r.xch.Gather = cbs.Input("group_partial_sums", ir.FP32, r.groups)
		c.rsOut = r.xch.Result
	}
	r.cb = c
	r.planned(fmt.Sprintf("gdn_recurrence keeps a %dx%d state of %s per head (%d value tiles per core)", r.Dk, r.Dv, f, vc))
	if r.xch != nil {
		r.xch.AddSemaphores(r.p, 0, 1, 2) // one level: 2 unused
	}
}

// gdnReads are the reader's accesses.
type gdnReads struct{ x, z, w, beta, g, s *blocks.Access }

// reader adds the reader kernel: the zero tile, then per item readItem.
func (r *gdnRec) reader() *kir.Kernel {
	rd := newReader(r.p, r.rs)
	a := gdnReads{x: r.bind(rd, "qkv_addr", r.x), z: r.bind(rd, "z_addr", r.z), w: r.bind(rd, "norm_w_addr", r.nw),
		beta: r.bind(rd, "beta_addr", r.beta), g: r.bind(rd, "g_addr", r.g), s: r.bind(rd, "state_addr", r.s)}
	rstart, rcount := rd.RuntimeArg("start"), rd.RuntimeArg("count")
	b := rd.Builder()
	zeros := blocks.ScratchPages(b, r.cb.zero, r.zeroPages, "zeros")
	blocks.FillWords(b, zeros, r.zeroBytes, 0)
	b.For("i", rstart, kir.Add(rstart, rcount), func(i kir.Var) { r.readItem(b, a, i, rstart, rcount, zeros) })
	blocks.ReleaseScratchPages(b, r.cb.zero, r.zeroPages)
	return rd
}

// gdnRow is a run of n tiles of one user row the reader moves into CB cb
// (and copies into cb2 when >= 0): their live row only, rows 1..31
// cleared from zeros, unless eb is 0 (whole pages).
type gdnRow struct {
	acc     *blocks.Access
	cb, cb2 int
	first   kir.Expr
	n, eb   int
	l1, l1b kir.Var
	// raw rows are not cleared (rows 1..31 keep what L1 held) and are
	// read under a barrier of their own, copied and pushed before the
	// other rows are read. For q: every use of q reads its row 0 alone (the l2 norm's
	// sum of squares is element (0, 0) of q q^T, o = q^T S' keeps q's rows
	// in its own rows, and the output norm and the writer use o's live
	// row), while k and v must be cleared (k d^T sums over d's rows).
	raw bool
}

// gdnScalar is the element (head%32, 0) of column tensor acc, moved to
// (0, 0) of CB cb's page for a scalar broadcast.
type gdnScalar struct {
	acc    *blocks.Access
	cb, eb int
	l1, r  kir.Var
}

// readItem emits the reads of item i: one DRAM batch of the small inputs
// (the live row of q, k, v, z and the norm weight, and the 64 bytes of
// the beta and g tiles that hold the item's scalar) all in flight under
// one barrier, the local clears and moves under a second and the copies
// under a third; then the item's state tiles, streamed while compute
// normalises q and k.
func (r *gdnRec) readItem(b *kir.Builder, a gdnReads, i kir.Var, start, count kir.Expr, zeros kir.Var) {
	c, kt, vt, vc := r.cb, r.kt, r.vt, r.vc
	head := b.Let("head", kir.Div(i, kir.Ci(r.groups))) // b*H + h
	v0 := b.Let("v0", kir.Mul(kir.Mod(i, kir.Ci(r.groups)), kir.Ci(vc)))
	u := b.Let("u", kir.Div(head, kir.Ci(r.H)))
	h := b.Let("h", kir.Mod(head, kir.Ci(r.H)))
	xrow := b.Let("xrow", kir.Mul(u, kir.Ci(r.ctx3)))
	qt := b.Let("qt", kir.Add(xrow, kir.Mul(kir.Div(h, kir.Ci(r.G)), kir.Ci(kt))))
	b.Comment("the live row of q and k of key head h/G, v of value head h (tiles of the packed conv output), z and the norm weight; the scalars' 64 bytes; all in flight")
	vt0 := b.Let("vt0", kir.Add(kir.Add(kir.Mul(h, kir.Ci(vt)), kir.Ci(2*r.kw/ir.TileSize)), v0))
	var zt kir.Expr
	if r.zRows == 0 {
		zt = b.Let("zt", kir.Add(kir.Add(kir.Mul(u, kir.Ci(r.ctz)), kir.Mul(h, kir.Ci(vt))), v0))
	}
	ts := []*gdnRow{
		{acc: a.x, cb: c.q, cb2: c.q2, first: qt, n: kt, eb: r.ebX, raw: true},
		{acc: a.x, cb: c.k, cb2: c.k2, first: kir.Add(qt, kir.Ci(r.kw/ir.TileSize)), n: kt, eb: r.ebX},
		{acc: a.x, cb: c.v, cb2: -1, first: kir.Add(xrow, vt0), n: vc, eb: r.ebX},
	}
	if r.zRows == 0 {
		ts = append(ts, &gdnRow{acc: a.z, cb: c.z, cb2: -1, first: zt, n: vc, eb: r.ebZ})
	}
	ts = append(ts, &gdnRow{acc: a.w, cb: c.w, cb2: -1, first: v0, n: vc, eb: r.ebW})
	for _, rt := range ts {
		rt.l1 = blocks.Reserve(b, rt.cb, kir.Ci(rt.n), "row")
		if rt.raw && rt.cb2 >= 0 {
			rt.l1b = blocks.Reserve(b, rt.cb2, kir.Ci(rt.n), "row2")
		}
		for j := 0; j < rt.n; j++ {
			off := kir.Ci(j * rt.acc.PageSize())
			blocks.ReadTileLive(b, rt.acc, kir.Add(rt.first, kir.Ci(j)), kir.Add(rt.l1, off), 1, rt.eb)
		}
		if rt.raw {
			b.NoCAsyncReadBarrier()
			pushRaw(b, rt)
		}
	}
	scs := []*gdnScalar{{acc: a.beta, cb: c.beta, eb: r.ebBeta}}
	if r.gRows == 0 {
		scs = append(scs, &gdnScalar{acc: a.g, cb: c.g, eb: r.ebG})
	}
	for _, sc := range scs {
		sc.l1 = blocks.Reserve(b, sc.cb, kir.C(1), "sc")
		sc.r = b.Let("sr", kir.Mod(head, kir.Ci(ir.TileSize)))
		off := b.Let("soff", kir.And(blocks.FaceOffset(sc.r, kir.C(0), sc.eb), kir.C(^uint32(63))))
		b.NoCAsyncRead(sc.acc.PageAddrAtExpr(kir.Div(head, kir.Ci(ir.TileSize)), off), kir.Add(sc.l1, off), kir.C(64))
	}
	sbase := b.Let("sbase", kir.Add(kir.Mul(head, kir.Ci(kt*vt)), v0))
	page := func(j kir.Expr) kir.Expr {
		if vc == vt {
			return kir.Add(sbase, j)
		}
		return kir.Add(sbase, kir.Add(kir.Mul(kir.Div(j, kir.Ci(vc)), kir.Ci(vt)), kir.Mod(j, kir.Ci(vc))))
	}
	b.NoCAsyncReadBarrier()
	settleRows(b, ts, scs, zeros)
	if r.zRows > 0 || r.gRows > 0 {
		// After the first item's inputs, which compute normalises
		// meanwhile, and before its state, whose decay needs exp(g).
		b.If(kir.Eq(i, start), func() { r.readPacked(b, a, zeros, start, count) })
	}
	b.Comment("the item's state tiles (row j, value tiles v0..), streamed")
	if r.exact {
		blocks.ReadPagesTwiceBatchOf(b, a.s, c.s, c.sf, kir.Ci(kt*vc), gdnStateBatch, page)
	} else {
		blocks.ReadPagesInBatchesOf(b, a.s, c.s, kir.Ci(kt*vc), gdnStateBatch, page)
	}
}

// pushRaw pushes raw row rt's pages (and its copy's) as they landed:
// compute normalises q while the other rows travel and settle.
func pushRaw(b *kir.Builder, rt *gdnRow) {
	b.Comment("q as read, under its own barrier: compute normalises it while the other rows travel and settle")
	if rt.cb2 >= 0 {
		blocks.LocalCopy(b, rt.l1, rt.l1b, rt.n*rt.acc.PageSize())
		b.NoCAsyncReadBarrier()
		b.CBPushBack(rt.cb2, kir.Ci(rt.n))
	}
	b.CBPushBack(rt.cb, kir.Ci(rt.n))
}

// settleRows emits, after the reads of ts and scs landed, the clearing
// of rows 1..31 of the row tiles, the scalars' moves to (0, 0) and the
// copies of the cleared rows (each step under its own barrier), then
// pushes every page; raw rows are skipped (pushed by the caller).
func settleRows(b *kir.Builder, ts []*gdnRow, scs []*gdnScalar, zeros kir.Var) {
	var settled []*gdnRow
	for _, rt := range ts {
		if !rt.raw {
			settled = append(settled, rt)
		}
	}
	ts = settled
	for _, rt := range ts {
		for j := 0; j < rt.n && rt.eb != 0; j++ {
			blocks.ClearRows(b, kir.Add(rt.l1, kir.Ci(j*rt.acc.PageSize())), zeros, 1, rt.eb)
		}
	}
	for _, rt := range ts {
		if rt.cb2 >= 0 {
			rt.l1b = blocks.Reserve(b, rt.cb2, kir.Ci(rt.n), "row2")
		}
	}
	for _, sc := range scs {
		b.If(kir.Ne(sc.r, kir.C(0)), func() { blocks.MoveElem(b, sc.l1, sc.r, kir.C(0), sc.l1, kir.C(0), kir.C(0), sc.eb) })
	}
	b.NoCAsyncReadBarrier()
	// The copies after the clears: they copy the cleared tiles.
	for _, rt := range ts {
		if rt.cb2 >= 0 {
			blocks.LocalCopy(b, rt.l1, rt.l1b, rt.n*rt.acc.PageSize())
		}
	}
	b.NoCAsyncReadBarrier()
	for _, rt := range ts {
		if rt.cb2 >= 0 {
			b.CBPushBack(rt.cb2, kir.Ci(rt.n))
		}
		b.CBPushBack(rt.cb, kir.Ci(rt.n))
	}
	for _, sc := range scs {
		b.CBPushBack(sc.cb, kir.C(1))
	}
}

// gdnCompute emits the recurrence's compute kernel: per item the phases
// normQK, decay, delta, update and outNorm, each consuming what the
// previous ones produced (CBs of gdnCBs).
type gdnCompute struct {
	*gdnRec
	c *blocks.Compute
}

// compute adds the compute kernel.
func (r *gdnRec) compute() *kir.Kernel {
	one, z0 := kir.C(1), kir.C(0)
	cp, c, ccount := r.rangeCompute("count")
	var cleader kir.ArgRef
	if r.xch != nil {
		cleader = cp.RuntimeArg("leader")
	}
	k := gdnCompute{r, c}
	k.c.Startup(r.cb.q, r.cb.q2, r.cb.r)
	k.c.For("i", z0, ccount, func(i kir.Var) {
		k.normQK()
		if k.zRows > 0 || k.gRows > 0 {
			k.c.If(kir.Eq(i, z0), k.computePacked, nil)
		}
		if r.exact {
			// The writer's identity tile, first read by decay: the q and k
			// norms do not wait for it (a wait for a page already there
			// returns at once).
			k.c.B.CBWaitFront(r.cb.eye, one)
		}
		k.decay()
		k.delta()
		k.update()
		k.outNorm(cleader)
	})
	if r.exact {
		k.c.B.CBPopFront(r.cb.eye, one)
	}
	return cp
}

// sfpu applies op (with param) to DEST[0].
func (k gdnCompute) sfpu(op kir.SFPUOp, param float32) {
	k.c.SFPU(blocks.SFPUStep{Op: op, Param: param}, kir.C(0))
}

// roundTo rounds DEST[0] to the state's dtype (a bf16 state only).
func (k gdnCompute) roundTo() {
	if !k.exact {
		k.c.RoundThrough(k.cb.round)
	}
}

// repack packs DEST[0] into the one-page CB mid (rounding it to mid's
// format), then in a fresh DEST runs f, which reads mid's tile, and pops
// it.
func (k gdnCompute) repack(mid int, f func()) {
	k.c.PackOut(mid, 1)
	k.c.B.CBWaitFront(mid, kir.C(1))
	k.c.Acquire()
	f()
	k.c.B.CBPopFront(mid, kir.C(1))
}

// rsqrtOf: DEST[0](0,0) = sum over the n tiles of a of a^2 (a times the
// transpose of its copy a2), then rsqrt(sum * inv + eps) packed to CB r
// and waited for. a and a2 stay at the front.
func (k gdnCompute) rsqrtOf(a, a2, n int, inv, eps float32) {
	c := k.c
	c.B.CBWaitFront(a, kir.Ci(n))
	c.B.CBWaitFront(a2, kir.Ci(n))
	c.Acquire()
	c.ForPeeled("t", n, func(j kir.Expr) { c.Matmul(a, a2, j, j, kir.C(0), true) })
	k.sfpu(kir.SFPUMulScalar, inv)
	k.sfpu(kir.SFPUAddScalar, eps)
	k.sfpu(kir.SFPURsqrt, 0)
	c.PackOut(k.cb.r, 1)
	c.B.CBWaitFront(k.cb.r, kir.C(1))
}

// normQK is the l2 norms of q and k: pops q, k and their copies, pushes
// kt tiles each of qn, kn and kc (k as column tiles).
func (k gdnCompute) normQK() {
	n, kt := k.cb, k.kt
	k.l2Norm("q = r(r(r(q * rsqrt(mean(q^2) + l2_eps)) * l2_scale) * scale)", n.q, n.q2, n.qn, true)
	k.l2Norm("k = r(r(k * rsqrt(mean(k^2) + l2_eps)) * l2_scale), and k as column tiles", n.k, n.k2, n.kn, false)
	k.c.B.CBWaitFront(n.kn, kir.Ci(kt))
	k.c.ForPeeled("kt", kt, func(j kir.Expr) {
		k.c.Acquire()
		k.c.Transpose(n.kn, j, kir.C(0))
		k.c.PackOut(n.kc, 1)
	})
}

// l2Norm emits r(r(a * rsqrt(mean(a^2) + l2_eps)) * l2_scale) (then, when
// scaled, r() of that times scale) of the kt tiles of a into out, after
// comment: pops a and its copy a2.
func (k gdnCompute) l2Norm(comment string, a, a2, out int, scaled bool) {
	c, kt := k.c, k.kt
	c.B.Comment(comment)
	k.rsqrtOf(a, a2, kt, 1/float32(k.Dk), k.l2Eps)
	c.ForPeeled("kt", kt, func(j kir.Expr) {
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastScalar, a, k.cb.r, j, kir.C(0), kir.C(0))
		k.roundTo()
		k.sfpu(kir.SFPUMulScalar, k.l2Scale)
		if scaled {
			k.roundTo()
			k.sfpu(kir.SFPUMulScalar, k.scale)
		}
		c.PackOut(out, 1)
	})
	c.B.CBPopFront(k.cb.r, kir.C(1))
	c.B.CBPopFront(a, kir.Ci(kt))
	c.B.CBPopFront(a2, kir.Ci(kt))
}

// decay is S = r(state * r(exp(g))): pops g and the kt*vc state tiles,
// pushes them decayed to sd (and with an fp32 state to sdF).
func (k gdnCompute) decay() {
	one, z0 := kir.C(1), kir.C(0)
	c, cb, n := k.c, k.c.B, k.cb
	cb.Comment("S = r(state * r(exp(g)))")
	if !k.exact {
		if k.gRows == 0 {
			c.Unary(n.g, n.eg, []blocks.SFPUStep{{Op: kir.SFPUExp}})
		}
		cb.CBWaitFront(n.eg, one)
		c.ForPeeled("t", k.kt*k.vc, func(kir.Expr) {
			cb.CBWaitFront(n.s, one)
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastScalar, n.s, n.eg, z0, z0, z0)
			cb.CBPopFront(n.s, one)
			c.PackOut(n.sd, 1)
		})
		cb.CBPopFront(n.eg, one)
		return
	}
	// S + S x diag(exp(g) - 1): the fp32 state's decay of the GDN doc.
	if k.gRows == 0 {
		c.Unary(n.g, n.eg, []blocks.SFPUStep{{Op: kir.SFPUExp}, {Op: kir.SFPUAddScalar, Param: -1}})
	}
	c.BinaryTileKeepA(kir.EltMul, blocks.BcastScalar, n.eye, n.eg, n.ed)
	cb.CBWaitFront(n.ed, one)
	c.ForPeeled("t", k.kt*k.vc, func(kir.Expr) {
		cb.CBWaitFront(n.s, one)
		cb.CBWaitFront(n.sf, one)
		c.Acquire()
		c.Copy(n.s, z0, z0)
		c.Matmul(n.sf, n.ed, z0, z0, z0, false)
		cb.CBPopFront(n.s, one)
		cb.CBPopFront(n.sf, one)
		c.PackOutTo(n.sd, n.sdF) // copied exactly below; read by the FPU in k^T S
	})
	cb.CBPopFront(n.ed, one)
}

// sdM is the decayed state as an FPU operand.
func (k gdnCompute) sdM() int {
	if k.exact {
		return k.cb.sdF
	}
	return k.cb.sd
}

// delta is d = r(v - r(k^T S)) per value tile: pops v, pushes vc tiles
// of d; the decayed state stays at the front.
func (k gdnCompute) delta() {
	z0 := kir.C(0)
	c, cb, n, vc := k.c, k.c.B, k.cb, k.vc
	cb.Comment("d = r(v - r(k^T S)) per value tile")
	cb.CBWaitFront(n.sd, kir.Ci(k.kt*vc))
	if k.exact {
		cb.CBWaitFront(n.sdF, kir.Ci(k.kt*vc))
	}
	cb.CBWaitFront(n.v, kir.Ci(vc))
	// kS accumulates k^T S for value tile v into DEST[0].
	kS := func(v kir.Expr) {
		c.ForPeeled("kt", k.kt, func(j kir.Expr) {
			c.Matmul(n.kn, k.sdM(), j, kir.Add(kir.Mul(j, kir.Ci(vc)), v), z0, false)
		})
	}
	c.ForPeeled("vt", vc, func(v kir.Expr) {
		c.Acquire()
		if k.exact {
			// -(-v + k^T S): no fp32 value is read back through the tf32
			// source registers.
			c.Copy(n.v, v, z0)
			k.sfpu(kir.SFPUNegative, 0)
			kS(v)
			k.sfpu(kir.SFPUNegative, 0)
			c.PackOut(n.d, 1)
			return
		}
		kS(v)
		k.repack(n.ks, func() { c.Binary(kir.EltSub, blocks.BcastNone, n.v, n.ks, v, z0, z0) })
		c.PackOut(n.d, 1)
	})
	cb.CBPopFront(n.v, kir.Ci(vc))
}

// update is S' = r(S + r(r(k d^T) * beta)) and o = r(q^T S'), column by
// column: pushes the S' tiles to the writer (sout) and vc tiles of o (and
// its copy o2); pops d, beta, kc, qn, kn and the decayed state.
func (k gdnCompute) update() {
	one, z0 := kir.C(1), kir.C(0)
	c, cb, n, kt, vc := k.c, k.c.B, k.cb, k.kt, k.vc
	cb.Comment("S' = r(S + r(r(k d^T) * beta)), o = r(q^T S'), column by column")
	cb.CBWaitFront(n.d, kir.Ci(vc))
	cb.CBWaitFront(n.beta, one)
	cb.CBWaitFront(n.kc, kir.Ci(kt))
	cb.CBWaitFront(n.qn, kir.Ci(kt))
	if k.exact {
		c.ForPeeled("vt", vc, func(v kir.Expr) {
			c.Acquire()
			c.Binary(kir.EltMul, blocks.BcastScalar, n.d, n.beta, v, z0, z0)
			c.PackOut(n.db, 1)
		})
		cb.CBWaitFront(n.db, kir.Ci(vc))
	}
	c.For("vt", z0, kir.Ci(vc), func(v kir.Var) {
		c.ForPeeled("kt", kt, func(j kir.Expr) {
			sd := kir.Add(kir.Mul(j, kir.Ci(vc)), v)
			c.Acquire()
			if k.exact {
				// S + k (x) (d * beta), accumulated onto S in DEST.
				c.Copy(n.sd, sd, z0)
				c.Matmul(n.kc, n.db, j, v, z0, false)
			} else {
				c.Matmul(n.kc, n.d, j, v, z0, false)
				k.repack(n.outer, func() { c.Binary(kir.EltMul, blocks.BcastScalar, n.outer, n.beta, z0, z0, z0) })
				k.repack(n.ob, func() { c.Binary(kir.EltAdd, blocks.BcastNone, n.sd, n.ob, sd, z0, z0) })
			}
			c.PackOutTo(n.sout, n.sp)
		})
		cb.CBWaitFront(n.sp, kir.Ci(kt))
		c.Acquire()
		c.ForPeeled("kt", kt, func(j kir.Expr) { c.Matmul(n.qn, n.sp, j, j, z0, false) })
		cb.CBPopFront(n.sp, kir.Ci(kt))
		c.PackOutTo(n.o, n.o2)
	})
	if k.exact {
		cb.CBPopFront(n.db, kir.Ci(vc))
	}
	for _, p := range []struct{ cb, n int }{{n.d, vc}, {n.beta, 1}, {n.kc, kt}, {n.qn, kt}, {n.kn, kt}, {n.sd, kt * vc}} {
		cb.CBPopFront(p.cb, kir.Ci(p.n))
	}
	if k.exact {
		cb.CBPopFront(n.sdF, kir.Ci(kt*vc))
	}
}

// outNorm is out = r_z(r_z(silu(z)) * r(rmsnorm(o) * norm_w)): the sum
// of o^2 over the head (through the exchange when the head spans cores:
// leader is the compute's leader flag), then per value tile the norm,
// the weight and the gate. Pushes vc tiles of out; pops o, o2, w and z.
func (k gdnCompute) outNorm(leader kir.ArgRef) {
	one, z0 := kir.C(1), kir.C(0)
	c, cb, n, vc := k.c, k.c.B, k.cb, k.vc
	cb.Comment("out = r_z(r_z(silu(z)) * r(rmsnorm(o) * norm_w))")
	if k.xch == nil {
		k.rsqrtOf(n.o, n.o2, vc, 1/float32(k.Dv), k.normEps)
	} else {
		cb.Comment("the head's sum(o^2) over its cores: this core's partial to the writer, the leader adds them (SFPU, fp32) and the writer broadcasts rsqrt")
		cb.CBWaitFront(n.o, kir.Ci(vc))
		cb.CBWaitFront(n.o2, kir.Ci(vc))
		c.Acquire()
		c.ForPeeled("t", vc, func(j kir.Expr) { c.Matmul(n.o, n.o2, j, j, z0, true) })
		c.PackOut(k.xch.Partial, 1)
		k.xch.Combine(c, leader, "", func() {
			k.sfpu(kir.SFPUMulScalar, 1/float32(k.Dv))
			k.sfpu(kir.SFPUAddScalar, k.normEps)
			k.sfpu(kir.SFPURsqrt, 0)
		}, nil)
		cb.CBWaitFront(n.rsOut, one)
	}
	cb.CBWaitFront(n.w, kir.Ci(vc))
	if k.zRows == 0 {
		cb.CBWaitFront(n.z, kir.Ci(vc))
	}
	c.ForPeeled("vt", vc, func(v kir.Expr) {
		c.Acquire()
		c.Binary(kir.EltMul, blocks.BcastScalar, n.o, n.rsOut, v, z0, z0)
		k.repack(n.on1, func() { c.Binary(kir.EltMul, blocks.BcastRows, n.on1, n.w, z0, v, z0) })
		c.PackOut(n.on, 1)
		if k.zRows == 0 {
			c.Acquire()
			c.Copy(n.z, v, z0)
			k.sfpu(n.silu, 0)
			c.PackOut(n.sz, 1)
		} // else the writer's row of the packed silu(z)
		c.BinaryTile(kir.EltMul, blocks.BcastNone, n.sz, n.on, n.out, false, nil)
	})
	pops := []struct{ cb, n int }{{n.rsOut, 1}, {n.o, vc}, {n.o2, vc}, {n.w, vc}}
	if k.zRows == 0 {
		pops = append(pops, struct{ cb, n int }{n.z, vc})
	}
	for _, p := range pops {
		cb.CBPopFront(p.cb, kir.Ci(p.n))
	}
}

// writer adds the writer kernel: with an fp32 state first the identity
// tile; per item the S' tiles into the new state, a value column (kt
// tiles) per barrier, the exchange when a head spans cores, then the
// item's output tiles.
func (r *gdnRec) writer() *kir.Kernel {
	wr := newWriter(r.p, r.rs)
	nsAcc, oAcc := r.bind(wr, "new_state_addr", r.ns), r.bind(wr, "out_addr", r.out)
	wstart, wcount := wr.RuntimeArg("start"), wr.RuntimeArg("count")
	var ea multicore.ExchangeArgs
	if r.xch != nil {
		ea = r.xch.Declare(wr)
	}
	w, kt, vt, vc := wr.Builder(), r.kt, r.vt, r.vc
	if r.exact {
		// The writer is idle until the first new state tile, so it builds
		// the identity while the reader's first reads are in flight.
		w.Comment("the identity tile (fp32)")
		eye := blocks.Reserve(w, r.cb.eye, kir.C(1), "eye")
		blocks.FillWords(w, eye, r.f.TileBytes(), 0)
		w.For("d", kir.C(0), kir.Ci(ir.TileSize), func(d kir.Var) {
			w.L1Write32(kir.Add(eye, blocks.FaceOffset(d, d, 4)), kir.C(blocks.FillWord(ir.FP32, 1)))
		})
		w.CBPushBack(r.cb.eye, kir.C(1))
	}
	pk := r.writerPackedStart(w)
	w.For("i", wstart, kir.Add(wstart, wcount), func(i kir.Var) {
		r.writerPackedItem(w, pk, kir.Sub(i, wstart))
		head := w.Let("head", kir.Div(i, kir.Ci(r.groups)))
		v0 := w.Let("v0", kir.Mul(kir.Mod(i, kir.Ci(r.groups)), kir.Ci(vc)))
		base := w.Let("sbase", kir.Add(kir.Mul(head, kir.Ci(kt*vt)), v0))
		w.For("vt", kir.C(0), kir.Ci(vc), func(v kir.Var) {
			blocks.WritePagesBatch(w, nsAcc, r.cb.sout, kir.Ci(kt), func(j kir.Expr) kir.Expr { return kir.Add(base, kir.Add(kir.Mul(j, kir.Ci(vt)), v)) })
		})
		if r.xch != nil {
			r.xch.Emit(w, ea)
		}
		ot := w.Let("ot", kir.Add(kir.Add(kir.Mul(kir.Div(head, kir.Ci(r.H)), kir.Ci(r.ctz)), kir.Mul(kir.Mod(head, kir.Ci(r.H)), kir.Ci(vt))), v0))
		blocks.WritePagesBatch(w, oAcc, r.cb.out, kir.Ci(vc), func(j kir.Expr) kir.Expr { return kir.Add(ot, j) })
	})
	r.writerPackedEnd(w)
	return wr
}

// setArgs sets the per-core runtime arguments: each core's item range,
// and with a split head the exchange's arguments (the leader flag to
// compute too). name is the op's, for errors.
func (r *gdnRec) setArgs(name string, rd, cp, wr *kir.Kernel) error {
	for i, core := range r.cores {
		st, n := r.plan.Range(i)
		rd.SetRuntimeArgs(core, kir.U32(uint32(st)), kir.U32(uint32(n)))
		wv := []kir.ArgValue{kir.U32(uint32(st)), kir.U32(uint32(n))}
		if r.xch == nil {
			cp.SetRuntimeArgs(core, kir.U32(uint32(n)))
		} else {
			ex, err := r.xch.Values(i, wr.NoC)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			cp.SetRuntimeArgs(core, kir.U32(uint32(n)), ex[0]) // ex[0]: leader
			wv = append(wv, ex...)
		}
		wr.SetRuntimeArgs(core, wv...)
	}
	return nil
}
