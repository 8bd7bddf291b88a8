package blocks

import (
	"math"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// Bcast says which part of the second operand of a binary tile op is
// broadcast (BcastNone: none; the others map to kir.BcastDim).
type Bcast uint8

const (
	BcastNone Bcast = iota
	// BcastRows broadcasts row 0 of the second operand down all rows.
	BcastRows
	// BcastCols broadcasts column 0 of the second operand across all columns.
	BcastCols
	// BcastScalar broadcasts element (0, 0) of the second operand.
	BcastScalar
)

func (b Bcast) dim() kir.BcastDim {
	switch b {
	case BcastRows:
		return kir.BcastRows
	case BcastCols:
		return kir.BcastCols
	}
	return kir.BcastScalar
}

// SFPUStep is one SFPU operation of a chain; Param is the scalar of
// add_scalar / mul_scalar.
type SFPUStep struct {
	Op    kir.SFPUOp
	Param float32
}

type fpuKind uint8

const (
	fpuNone fpuKind = iota
	fpuCopy
	fpuBinary
	fpuBcast
	fpuReduce
	fpuMatmul
	fpuTranspose
	fpuMatmulBlock // configured by MatmulBlockConfig only
	fpuTransposeDest
)

type fpuMode struct {
	kind      fpuKind
	elt       kir.EltwiseOp
	bcast     Bcast
	rop       kir.ReduceOp
	rdim      kir.ReduceDim
	a, b, out int
	transpose bool
}

// srcKey is what one source side of the unpacker is configured for: the
// CB format, and for a Float32 CB configured for copy_tile the CB
// (copyOf; -1 otherwise). A Float32 CB that only copy_tile reads unpacks
// straight to DEST (kir.Kernel.ChooseUnpackModes: destination format
// Float32), every other one through the source register as tf32, and the
// unpacker configured for one cannot unpack the other (tt-llk programs
// the destination format from the CB it is configured from; ttsim stops
// on an fp32 CB unpacked through SrcA as Float32). Which CBs unpack to
// DEST is only known when the kernel is finished, so the key keeps a
// copy of a Float32 CB apart from every FPU read of one and from a copy
// of another Float32 CB: between them the unpacker is reconfigured.
type srcKey struct {
	dt     ir.DType
	copyOf int
}

// cstate is what the unpacker, packer, FPU and SFPU are configured for.
type cstate struct {
	srcKnown       bool
	srcA, srcB     srcKey
	srcACB, srcBCB int
	packKnown      bool
	pack           ir.DType
	packCB         int
	fpuKnown       bool
	fpu            fpuMode
	sfpuKnown      bool
	sfpu           kir.SFPUOp // init group
	// masked: the packer edge mask of a reduce_init may be set (no
	// reduce_uninit since); every non-reduce FPU init clears it first.
	masked bool
}

func (s cstate) equal(o cstate) bool {
	if s.srcKnown != o.srcKnown || s.packKnown != o.packKnown || s.fpuKnown != o.fpuKnown || s.sfpuKnown != o.sfpuKnown {
		return false
	}
	if s.srcKnown && (s.srcA != o.srcA || s.srcB != o.srcB) {
		return false
	}
	if s.packKnown && s.pack != o.pack {
		return false
	}
	if s.fpuKnown && s.fpu != o.fpu {
		return false
	}
	if s.masked != o.masked {
		return false
	}
	return !s.sfpuKnown || s.sfpu == o.sfpu
}

// meet keeps what both states agree on.
func meet(x, y cstate) cstate {
	out := x
	if !y.srcKnown || x.srcA != y.srcA || x.srcB != y.srcB {
		out.srcKnown = false
	}
	if !y.packKnown || x.pack != y.pack {
		out.packKnown = false
	}
	if !y.fpuKnown || x.fpu != y.fpu {
		out.fpuKnown = false
	}
	if !y.sfpuKnown || x.sfpu != y.sfpu {
		out.sfpuKnown = false
	}
	out.masked = x.masked || y.masked
	return out
}

// Compute emits a compute kernel's body through B while tracking the
// configuration of the unpacker (source A/B formats), the packer, the FPU
// op and the SFPU op, so that every tile op is preceded by exactly the
// reconfig_data_format, pack_reconfig_data_format and init calls it needs.
//
// Loops and conditionals must be built with Compute.For / ForStep / If
// (not B.For): at the end of a loop body Compute re-emits whatever
// configuration the body changed, so every iteration starts as the first
// did, and after an If it keeps only what both branches agree on.
type Compute struct {
	B     *kir.Builder
	p     *kir.Program
	state cstate
	// Chains lets SFPUSteps emit a chain of steps as one statement (set
	// when the kernel runs tcc's SFPU code, whose programs fuse).
	Chains bool
}

// NewCompute returns a tracker for compute kernel k of program p (CB
// formats are looked up in p).
func NewCompute(p *kir.Program, k *kir.Kernel) *Compute {
	return &Compute{B: k.Builder(), p: p}
}

func (c *Compute) format(cb int) ir.DType { return cbFormat(c.p, cb) }

// Startup emits compute_kernel_hw_startup(a, b, out): source A for CB a,
// source B for CB b, the packer for CB out.
func (c *Compute) Startup(a, b, out int) {
	c.B.HWStartup(a, b, out)
	c.state = cstate{srcKnown: true, srcA: c.fpuKey(a), srcB: c.fpuKey(b), srcACB: a, srcBCB: b,
		packKnown: true, pack: c.format(out), packCB: out}
}

// MatmulStartup emits compute_kernel_hw_startup<SrcOrder::Reverse>(in0,
// in1, out): source A for in1, source B for in0.
func (c *Compute) MatmulStartup(in0, in1, out int) {
	c.B.MatmulHWStartup(in0, in1, out)
	c.state = cstate{srcKnown: true, srcA: c.fpuKey(in1), srcB: c.fpuKey(in0), srcACB: in1, srcBCB: in0,
		packKnown: true, pack: c.format(out), packCB: out}
}

// fpuKey is the source key of CB cb read by an FPU op (or a transpose).
func (c *Compute) fpuKey(cb int) srcKey { return srcKey{dt: c.format(cb), copyOf: -1} }

// copyKey is the source key of CB cb read by copy_tile (see srcKey).
func (c *Compute) copyKey(cb int) srcKey {
	k := c.fpuKey(cb)
	if k.dt == ir.FP32 {
		k.copyOf = cb
	}
	return k
}

// unpack configures source A for CB a and source B for CB b, both FPU
// operands, when they differ from the configured ones.
func (c *Compute) unpack(a, b int) { c.unpackKeys(a, c.fpuKey(a), b, c.fpuKey(b)) }

// unpackKeys configures source A for CB a as ka and source B for CB b as
// kb when either differs from the configured ones.
func (c *Compute) unpackKeys(a int, ka srcKey, b int, kb srcKey) {
	s := &c.state
	if s.srcKnown && s.srcA == ka && s.srcB == kb {
		return
	}
	c.B.ReconfigDataFormat(a, b)
	s.srcKnown, s.srcA, s.srcB, s.srcACB, s.srcBCB = true, ka, kb, a, b
}

// unpackA configures source A for CB a as ka, keeping source B when
// known.
func (c *Compute) unpackA(a int, ka srcKey) {
	s := &c.state
	if s.srcKnown && s.srcA == ka {
		return
	}
	b, kb := a, c.fpuKey(a)
	if s.srcKnown {
		b, kb = s.srcBCB, s.srcB
	}
	c.unpackKeys(a, ka, b, kb)
}

func (c *Compute) packTo(cb int) {
	s := &c.state
	if s.packKnown && s.pack == c.format(cb) {
		return
	}
	c.B.PackReconfigDataFormat(cb)
	s.packKnown, s.pack, s.packCB = true, c.format(cb), cb
}

func (c *Compute) setFPU(m fpuMode) {
	s := &c.state
	if s.fpuKnown && s.fpu == m && (m.kind == fpuReduce || !s.masked) {
		return
	}
	if s.masked && m.kind != fpuReduce {
		// reduce_init's packer edge mask would zero all but the reduced
		// row or column of every later pack.
		c.B.ReduceUninit()
		s.masked = false
	}
	if m.kind == fpuReduce {
		s.masked = true
	}
	switch m.kind {
	case fpuCopy:
		c.B.CopyTileInit(m.a)
	case fpuBinary:
		c.B.BinaryInit(m.elt, m.a, m.b)
	case fpuBcast:
		c.B.BcastInit(m.elt, m.bcast.dim(), m.a, m.b)
	case fpuReduce:
		c.B.ReduceInit(m.rop, m.rdim, m.a, m.b, m.out)
	case fpuMatmul:
		c.B.MatmulInit(m.a, m.b, m.transpose)
	case fpuTranspose:
		c.B.TransposeInit(m.a)
	case fpuTransposeDest:
		c.B.TransposeDestInit(m.transpose)
	}
	s.fpuKnown, s.fpu = true, m
}

func (c *Compute) setSFPU(op kir.SFPUOp) {
	s := &c.state
	g := op.InitGroup()
	if s.sfpuKnown && s.sfpu == g {
		return
	}
	c.B.SFPUInit(op)
	s.sfpuKnown, s.sfpu = true, g
}

// restore re-emits the configuration s (the parts it knows).
func (c *Compute) restore(s cstate) {
	if s.srcKnown {
		c.unpackKeys(s.srcACB, s.srcA, s.srcBCB, s.srcB)
	}
	if s.packKnown {
		c.packTo(s.packCB)
	}
	if s.fpuKnown {
		c.setFPU(s.fpu)
	}
	if s.sfpuKnown && (!c.state.sfpuKnown || c.state.sfpu != s.sfpu) {
		c.B.SFPUInit(s.sfpu)
		c.state.sfpuKnown, c.state.sfpu = true, s.sfpu
	}
	if !s.masked && c.state.masked {
		c.B.ReduceUninit()
		c.state.masked = false
	}
}

// For is ForStep with step 1.
func (c *Compute) For(name string, start, end kir.Expr, body func(i kir.Var)) {
	c.ForStep(name, start, end, nil, body)
}

// ForStep emits a loop whose body is built by body. Before the loop it
// establishes the configuration the body ends in (found by building the
// body once and discarding it, kir.Builder.Discard), so a body that leaves the
// configuration as it found it re-initialises nothing per iteration;
// configuration the body still changes is re-established at the end of
// the body. The state after the loop is the state its iterations start
// in.
func (c *Compute) ForStep(name string, start, end, step kir.Expr, body func(i kir.Var)) {
	entry := c.state
	c.B.Discard(func() { body(kir.Var{Name: name, Type: kir.U32T}) })
	steady := c.state
	c.state = entry
	c.restore(steady)
	entry = c.state
	c.B.ForStep(name, start, end, step, func(i kir.Var) {
		body(i)
		if !c.state.equal(entry) {
			c.restore(entry)
		}
		c.state = entry
	})
	c.state = entry
}

// If emits `if (cond) { then } else { els }` (els may be nil); afterwards
// only the configuration both branches agree on is known.
func (c *Compute) If(cond kir.Expr, then, els func()) {
	entry := c.state
	var st cstate
	var se cstate
	c.B.IfElse(cond, func() {
		then()
		st = c.state
		c.state = entry
	}, func() {
		if els != nil {
			els()
		}
		se = c.state
		c.state = entry
	})
	c.state = meet(st, se)
}

// IfKeep emits `if (cond) { then }` whose branch ends by re-establishing
// the configuration it was entered with (the parts known there), so
// afterwards that configuration stands as before the If: a rarely taken
// branch re-initialises at its own end rather than every path after it.
func (c *Compute) IfKeep(cond kir.Expr, then func()) {
	entry := c.state
	c.B.IfElse(cond, func() {
		then()
		c.restore(entry)
	}, func() {})
	c.state = entry
}

// Acquire, Commit, Wait and Release are the DEST hand-over calls.
func (c *Compute) Acquire() { c.B.TileRegsAcquire() }

// Commit is tile_regs_commit.
func (c *Compute) Commit() { c.B.TileRegsCommit() }

// Wait is tile_regs_wait.
func (c *Compute) Wait() { c.B.TileRegsWait() }

// Release is tile_regs_release.
func (c *Compute) Release() { c.B.TileRegsRelease() }

// Copy unpacks tile `tile` of CB cb into DEST[dst] (copy_tile).
func (c *Compute) Copy(cb int, tile, dst kir.Expr) {
	c.unpackA(cb, c.copyKey(cb))
	c.setFPU(fpuMode{kind: fpuCopy, a: cb})
	c.B.CopyTile(cb, tile, dst)
}

// CopyShared is Copy, keeping a copy_tile configuration made for another
// CB of cb's data format: copy_tile_to_dst_init_short(cb) configures only
// the CB's format and (32x32) tile shape (tt-metal tile_move_copy.h:
// llk_unpack_A_init, llk_math_eltwise_unary_datacopy_init). Not for fp32
// CBs, whose unpack-to-DEST mode is the CB's own (copyKey).
// an init per CB => one per format
func (c *Compute) CopyShared(cb int, tile, dst kir.Expr) {
	s := &c.state
	k := c.copyKey(cb)
	if k.copyOf < 0 && s.fpuKnown && s.fpu.kind == fpuCopy && !s.masked && s.srcKnown && s.srcA == k && c.copyKey(s.fpu.a) == k {
		c.B.CopyTile(cb, tile, dst)
		return
	}
	c.Copy(cb, tile, dst)
}

// SFPUSteps applies steps to DEST[dst] in order: with Chains set and
// two steps or more, all one-operand ops, as one chain statement (one
// pass over DEST: sfpu.ChainProgram), else one statement per step.
func (c *Compute) SFPUSteps(steps []SFPUStep, dst kir.Expr) {
	if c.Chains && len(steps) >= 2 {
		ss := make([]sfpu.Step, len(steps))
		ok := true
		for i, st := range steps {
			ss[i] = sfpu.Step{Op: st.Op, Param: st.Param}
			ok = ok && !st.Op.IsBinary() && st.Op.HasProgram()
		}
		if ok {
			c.setSFPU(steps[0].Op)
			c.B.Emit(kir.SFPU{Op: steps[0].Op, Dst: dst, Chain: sfpu.FormatChain(ss)})
			return
		}
	}
	for _, st := range steps {
		c.SFPU(st, dst)
	}
}

// SFPU applies step to DEST[dst].
func (c *Compute) SFPU(step SFPUStep, dst kir.Expr) {
	c.setSFPU(step.Op)
	if step.Op.HasParam() {
		c.B.Emit(kir.SFPU{Op: step.Op, Dst: dst, Param: math.Float32bits(step.Param)})
		return
	}
	c.B.SFPU(step.Op, dst)
}

// SFPUBinary is DEST[dst] = DEST[dst] op DEST[src] on the SFPU (op
// IsBinary; fp32 exact in an fp32 DEST, unlike the FPU, which reads its
// operands as tf32).
func (c *Compute) SFPUBinary(op kir.SFPUOp, dst, src kir.Expr) {
	c.setSFPU(op)
	c.B.SFPUBinary(op, dst, src)
}

// Binary is DEST[dst] = a[ta] op b[tb], with b broadcast as bc says.
func (c *Compute) Binary(op kir.EltwiseOp, bc Bcast, a, b int, ta, tb, dst kir.Expr) {
	c.unpack(a, b)
	if bc == BcastNone {
		c.setFPU(fpuMode{kind: fpuBinary, elt: op, a: a, b: b})
		c.B.BinaryTiles(op, a, b, ta, tb, dst)
		return
	}
	c.setFPU(fpuMode{kind: fpuBcast, elt: op, bcast: bc, a: a, b: b})
	c.B.BcastTiles(op, bc.dim(), a, b, ta, tb, dst)
}

// Reduce folds in[tile] (scaled by the first element of scaler[scalerTile])
// into DEST[dst]: sums accumulate, maxima take the maximum; ReduceRow
// leaves one value per row in column 0, ReduceCol one per column in row 0.
// out is the CB the result will be packed to (reduce_init configures it).
func (c *Compute) Reduce(op kir.ReduceOp, dim kir.ReduceDim, in, scaler, out int, tile, scalerTile, dst kir.Expr) {
	c.unpack(in, scaler)
	c.setFPU(fpuMode{kind: fpuReduce, rop: op, rdim: dim, a: in, b: scaler, out: out})
	c.B.ReduceTile(op, dim, in, scaler, tile, scalerTile, dst)
}

// Matmul accumulates DEST[dst] += in0[t0] x in1[t1] (in1 transposed first
// when transpose is set).
func (c *Compute) Matmul(in0, in1 int, t0, t1, dst kir.Expr, transpose bool) {
	c.unpack(in1, in0)
	c.setFPU(fpuMode{kind: fpuMatmul, a: in0, b: in1, transpose: transpose})
	c.B.MatmulTiles(in0, in1, t0, t1, dst)
}

// Transpose unpacks cb[tile] transposed (rows become columns) into DEST[dst].
func (c *Compute) Transpose(cb int, tile, dst kir.Expr) {
	c.unpackA(cb, c.fpuKey(cb))
	c.setFPU(fpuMode{kind: fpuTranspose, a: cb})
	c.B.TransposeTile(cb, tile, dst)
}

// TransposeDest transposes DEST[dst] in place (transpose_wh_dest<is32>,
// after its init when the FPU is configured for something else; is32 must
// be the kernel's fp32 DEST mode). Its init replaces the FPU's: the next
// FPU op initialises again.
func (c *Compute) TransposeDest(dst kir.Expr, is32 bool) {
	c.setFPU(fpuMode{kind: fpuTransposeDest, transpose: is32})
	c.B.TransposeDest(is32, dst)
}

// Pack packs DEST[dst] into the next reserved page of cb (between Wait and
// Release), reconfiguring the packer when cb's format differs.
func (c *Compute) Pack(dst kir.Expr, cb int) {
	c.packTo(cb)
	c.B.PackTile(dst, cb)
}

// PackOut ends a math section: commit, reserve n pages of cb, wait, pack
// DEST[0..n-1] into them, release, push. Produces n pages of cb.
func (c *Compute) PackOut(cb, n int) {
	c.Commit()
	c.packTo(cb)
	c.B.CBReserveBack(cb, kir.Ci(n))
	c.Wait()
	for i := 0; i < n; i++ {
		c.B.PackTile(kir.Ci(i), cb)
	}
	c.Release()
	c.B.CBPushBack(cb, kir.Ci(n))
}

// Unary streams one tile through the SFPU: wait for one page of in, copy it
// to DEST[0], apply steps in order, pop in, pack to one page of out.
// Consumes one page of in, produces one page of out.
func (c *Compute) Unary(in, out int, steps []SFPUStep) {
	c.B.CBWaitFront(in, kir.C(1))
	c.Acquire()
	c.Copy(in, kir.C(0), kir.C(0))
	c.SFPUSteps(steps, kir.C(0))
	c.B.CBPopFront(in, kir.C(1))
	c.PackOut(out, 1)
}

// BinaryTile streams one tile pair through the FPU: wait for one page of a
// and of b, DEST[0] = a op b (b broadcast as bc says; when negate is set
// the SFPU negates the result, which turns b - a into a - b), then steps
// on the SFPU, pop both, pack to one page of out. Consumes one page of a
// and of b, produces one page of out.
func (c *Compute) BinaryTile(op kir.EltwiseOp, bc Bcast, a, b, out int, negate bool, steps []SFPUStep) {
	if negate {
		steps = append([]SFPUStep{{Op: kir.SFPUNegative}}, steps...)
	}
	c.binaryDest(op, bc, a, b, steps)
	c.PackOut(out, 1)
}

// binaryDest is BinaryTile up to the pack: it leaves the math section
// open with the result in DEST[0], one page of a and of b consumed.
func (c *Compute) binaryDest(op kir.EltwiseOp, bc Bcast, a, b int, steps []SFPUStep) {
	c.B.CBWaitFront(a, kir.C(1))
	c.B.CBWaitFront(b, kir.C(1))
	c.Acquire()
	c.Binary(op, bc, a, b, kir.C(0), kir.C(0), kir.C(0))
	c.SFPUSteps(steps, kir.C(0))
	c.B.CBPopFront(a, kir.C(1))
	c.B.CBPopFront(b, kir.C(1))
}
