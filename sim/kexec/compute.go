package kexec

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/ir/sfpu"
	"github.com/tcc-dev/tcc/sim/interp"
)

type regPhase uint8

const (
	regsIdle      regPhase = iota // released: math may acquire
	regsAcquired                  // math owns DEST
	regsCommitted                 // handed to pack
	regsWaited                    // pack owns DEST
)

var phaseNames = [...]string{"released", "acquired", "committed", "waited"}

type fpuKind uint8

const (
	fpuNone fpuKind = iota
	fpuCopy
	fpuBinary
	fpuBcast
	fpuMatmul
	fpuMatmulBlock
	fpuReduce
	fpuTranspose
	fpuTransposeDest
)

// fpuMode is what the last FPU init configured.
type fpuMode struct {
	kind      fpuKind
	elt       kir.EltwiseOp
	bcast     kir.BcastDim
	rop       kir.ReduceOp
	rdim      kir.ReduceDim
	transpose bool
	is32      bool // transpose_wh_dest's is_32bit
}

// computeState is the unpack/math/pack state of one compute kernel on one core.
type computeState struct {
	capacity   int
	dest       [][]float32
	reduced    []bool // DEST tile written by a reduce since acquire
	phase      regPhase
	started    bool
	srcA, srcB ir.DType // configured unpacker formats
	// srcADest, srcBDest: the side was configured from a Float32 CB that
	// unpacks straight to DEST (UnpackToDestFp32: its destination format
	// Float32, not tf32), srcACB, srcBCB the CBs it was configured from
	srcADest, srcBDest bool
	srcACB, srcBCB     int
	pack               ir.DType // configured packer format
	fpu                fpuMode
	sfpu               kir.SFPUOp
	sfpuSet            bool
	fid                ir.MathFidelity
	fp32               bool
	// edgeMask is the packer edge mask reduce_init programs: while set
	// (until reduce_uninit) every pack_tile keeps only the elements a
	// reduction of maskDim produces (column 0 for a row reduce, row 0 for a
	// column reduce, element (0,0) for a scalar reduce) and packs zeros
	// elsewhere, as the card's packer does.
	edgeMask bool
	maskDim  kir.ReduceDim
}

func newComputeState(r *run, k *kir.Kernel) *computeState {
	n := r.t.DestTiles(k.Compute.DstFullSyncEn, k.Compute.FP32DestAccEn)
	cs := &computeState{capacity: n, dest: make([][]float32, n), reduced: make([]bool, n), fid: k.Compute.MathFidelity, fp32: k.Compute.FP32DestAccEn}
	for i := range cs.dest {
		cs.dest[i] = make([]float32, numerics.TileElems)
	}
	return cs
}

func (ks *kstate) cbFormat(idx int, call string) (ir.DType, error) {
	c, err := ks.cb(idx, call)
	if err != nil {
		return 0, err
	}
	return c.Config.Format, nil
}

// needStarted checks that compute_kernel_hw_startup ran.
func (ks *kstate) needStarted(call string) error {
	if !ks.comp.started {
		return ks.errf(kir.RuleInit, kir.NoCB, "%s before compute_kernel_hw_startup", call)
	}
	return nil
}

func (ks *kstate) needFPU(call string, want fpuMode, init string) error {
	if err := ks.needStarted(call); err != nil {
		return err
	}
	if ks.comp.fpu != want {
		return ks.errf(kir.RuleInit, kir.NoCB, "%s without its init: call %s first (the last FPU init configured %s)", call, init, ks.comp.fpu.describe())
	}
	return nil
}

func (m fpuMode) describe() string {
	switch m.kind {
	case fpuCopy:
		return "copy_tile"
	case fpuBinary:
		return m.elt.String() + "_tiles"
	case fpuBcast:
		return fmt.Sprintf("%s_tiles_bcast_%s", m.elt, m.bcast)
	case fpuMatmul:
		return "matmul_tiles"
	case fpuMatmulBlock:
		return "matmul_block"
	case fpuReduce:
		return fmt.Sprintf("reduce %s over %s", m.rop, m.rdim)
	case fpuTranspose:
		return "transpose_wh_tile"
	case fpuTransposeDest:
		return "transpose_wh_dest"
	}
	return "nothing"
}

func (ks *kstate) needPhase(call string, want regPhase) error {
	if ks.comp.phase != want {
		what := "math ops run between tile_regs_acquire and tile_regs_commit"
		if want == regsWaited {
			what = "pack_tile runs between tile_regs_wait and tile_regs_release"
		}
		return ks.errf(kir.RuleTileRegs, kir.NoCB, "%s while DEST is %s; %s", call, phaseNames[ks.comp.phase], what)
	}
	return nil
}

func (ks *kstate) destIndex(call string, d uint64) (int, error) {
	if d >= uint64(ks.comp.capacity) {
		mode, width := "half-sync", "16-bit"
		if ks.k.Compute.DstFullSyncEn {
			mode = "full-sync"
		}
		if ks.comp.fp32 {
			width = "fp32"
		}
		return 0, ks.errf(kir.RuleDEST, kir.NoCB, "%s addresses DEST tile %d; DEST holds %d tiles in %s mode with %s DEST", call, d, ks.comp.capacity, mode, width)
	}
	return int(d), nil
}

// unpack reads tile i from the front of CB idx through unpacker source
// side ('A' or 'B').
func (ks *kstate) unpack(call string, idx int, i uint64, side byte) ([]float32, ir.DType, error) {
	c, addr, err := ks.frontTileAddr(idx, i, call)
	if err != nil {
		return nil, 0, err
	}
	f := c.Config.Format
	if call != "copy_tile" && ks.k.Compute.UnpacksToDest(idx) {
		return nil, 0, ks.errf(kir.RuleUnpackMode, idx, "%s reads CB c_%d through source %c, but the CB unpacks straight to DEST (UnpackToDestFp32)", call, idx, side)
	}
	conf, confDest, confCB := ks.comp.srcA, ks.comp.srcADest, ks.comp.srcACB
	if side == 'B' {
		conf, confDest, confCB = ks.comp.srcB, ks.comp.srcBDest, ks.comp.srcBCB
	}
	if conf != f {
		return nil, 0, ks.errf(kir.RuleDataFormat, idx, "%s unpacks CB c_%d (%s) through source %c, which is configured for %s; call reconfig_data_format first", call, idx, f, side, conf)
	}
	// A Float32 CB's destination format is Float32 when it unpacks to DEST
	// and tf32 otherwise (tt-metal's get_unpack_dst_formats): the unpacker
	// configured for one mode cannot unpack the other (ttsim stops:
	// "tensix_unpacr: unpack_to_dst=0 in_data_format=0 out_data_format=0").
	if want := ks.toDest(idx) && call == "copy_tile"; f == ir.FP32 && confDest != want {
		mode := "through source " + string(side) + " as tf32"
		if confDest {
			mode = "straight to DEST (UnpackToDestFp32)"
		}
		return nil, 0, ks.errf(kir.RuleDataFormat, idx, "%s unpacks CB c_%d, but source %c is configured from CB c_%d, which unpacks %s; call reconfig_data_format first", call, idx, side, confCB, mode)
	}
	if c.PageSize != f.TileBytes() {
		return nil, 0, ks.errf(kir.RuleCBConfig, idx, "%s unpacks CB c_%d whose page size %d is not one %s tile", call, idx, c.PageSize, f)
	}
	buf := make([]byte, c.PageSize)
	ks.core.mem.read(addr, buf)
	tile, err := numerics.UnpackTile(f, buf)
	if err != nil {
		return nil, 0, ks.errf(kir.RuleDataFormat, idx, "%s: %v", call, err)
	}
	ks.r.stats.TileOps++
	return tile, f, nil
}

// toDest reports whether CB idx unpacks straight to DEST at fp32
// (UnpackToDestFp32, which tt-metal honours with fp32_dest_acc_en only).
func (ks *kstate) toDest(idx int) bool {
	return ks.comp.fp32 && ks.k.Compute.UnpacksToDest(idx)
}

// srcReg is the value an FPU source register holds for x stored as f.
func srcReg(x float32, f ir.DType) float32 {
	if f == ir.FP32 {
		x = numerics.TruncTF32(x)
	}
	if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(x)))
	}
	return x
}

// packerBF16 is what the packer makes of an fp32 DEST tile for a bf16 CB
// (numerics.PackerBF16: half away from zero, not to even).
func packerBF16(t []float32) []float32 {
	out := make([]float32, len(t))
	for i, x := range t {
		out[i] = numerics.FromBF16Bits(numerics.PackerBF16(x))
	}
	return out
}

// storeSFPU is what SFPSTORE leaves of SFPU results in DEST: without
// fp32_dest_acc_en the low 16 bits are dropped (truncation toward zero,
// not rounding) and fp32 subnormals become signed zeros.
func (cs *computeState) storeSFPU(t []float32) {
	if cs.fp32 {
		return
	}
	for i, v := range t {
		b := math.Float32bits(v)
		if b&0x7FFFFFFF < 0x800000 {
			b &= 0x80000000
		}
		t[i] = math.Float32frombits(b & 0xFFFF0000)
	}
}

// round applies DEST rounding: bf16 unless fp32_dest_acc_en.
func (cs *computeState) round(t []float32) {
	if cs.fp32 {
		return
	}
	for i, v := range t {
		t[i] = numerics.RoundBF16(v)
	}
}

// transposeDest is DEST tile t after _llk_math_transpose_dest_ (tt-llk,
// llk_math_transpose_dest.h): element (r, c) at (c, r), each face moved
// through SrcB (MOVD2B, TRNSPSRCB, MOVB2D; faces 1 and 2 swap through
// SrcA), the values unchanged. With fp32 DEST the is_32bit moves carry
// each value's high and low 16 bits apart with the zero flag disabled;
// a 16-bit DEST value fits the 19-bit SrcB whole (its zero flag would
// flush a subnormal, which 16-bit DEST never holds: unpack, the FPU and
// SFPSTORE flush them first, srcReg and storeSFPU).
func (cs *computeState) transposeDest(t []float32) []float32 {
	return transposed(t)
}

func transposed(t []float32) []float32 {
	out := make([]float32, len(t))
	for r := 0; r < numerics.TileDim; r++ {
		for c := 0; c < numerics.TileDim; c++ {
			out[numerics.FaceIndex(c, r)] = t[numerics.FaceIndex(r, c)]
		}
	}
	return out
}

// eltwise is the DEST value an FPU eltwise op leaves for a (source A) and
// b (source B) stored as fa and fb, over DEST value dst (mul accumulates
// into DEST, add and sub do not).
func (cs *computeState) eltwise(op kir.EltwiseOp, a, b, dst float32, fa, fb ir.DType) float32 {
	a, b = srcReg(a, fa), srcReg(b, fb)
	switch op {
	case kir.EltAdd:
		return numerics.FPUAdd(a, b, cs.fp32)
	case kir.EltSub:
		return numerics.FPUSub(a, b, cs.fp32)
	}
	return numerics.FPUMul(a, b, dst, cs.fid, cs.fp32)
}

// compute compiles the effect of a compute instruction; v holds its
// operands in kir.StmtExprs order.
func (r *run) compute(c *interp.Compiler[*kstate], s kir.Stmt) (op, error) {
	call := kir.APIName(s)
	// init is the call that must configure the unit first (the table's
	// init pairing), for error messages.
	init := ""
	if in, ok := kir.InitOf(s); ok {
		init = kir.APIName(in)
	}
	switch s := s.(type) {
	case kir.SFPU:
		return sfpuOp(s, call, init), nil
	case kir.PackTile:
		return packOp(s, call), nil
	}
	if o := configOp(s, call); o != nil {
		return o, nil
	}
	if o := mathOp(s, call, init); o != nil {
		return o, nil
	}
	return nil, r.malformed(c.Kernel(), "the simulator does not implement %T", s)
}

// configOp compiles the calls that configure the unpacker, math and packer
// and hand DEST between them (nil for any other).
func configOp(s kir.Stmt, call string) op {
	switch s := s.(type) {
	case kir.ComputeKernelHWStartup:
		return do(func(ks *kstate, _ []uint64) error {
			a, b := s.ICB0, s.ICB1
			if s.SrcReverse {
				a, b = b, a
			}
			var err error
			cs := ks.comp
			if cs.srcA, err = ks.cbFormat(a, call); err != nil {
				return err
			}
			if cs.srcB, err = ks.cbFormat(b, call); err != nil {
				return err
			}
			cs.srcACB, cs.srcBCB, cs.srcADest, cs.srcBDest = a, b, ks.toDest(a), ks.toDest(b)
			if cs.pack, err = ks.cbFormat(s.OCB, call); err != nil {
				return err
			}
			cs.started = true
			return nil
		})
	case kir.ReconfigDataFormat:
		return do(func(ks *kstate, _ []uint64) error {
			if err := ks.needStarted(call); err != nil {
				return err
			}
			var err error
			if ks.comp.srcA, err = ks.cbFormat(s.SrcA, call); err != nil {
				return err
			}
			cs := ks.comp
			cs.srcACB, cs.srcBCB, cs.srcADest, cs.srcBDest = s.SrcA, s.SrcB, ks.toDest(s.SrcA), ks.toDest(s.SrcB)
			cs.srcB, err = ks.cbFormat(s.SrcB, call)
			return err
		})
	case kir.PackReconfigDataFormat:
		return do(func(ks *kstate, _ []uint64) error {
			if err := ks.needStarted(call); err != nil {
				return err
			}
			var err error
			ks.comp.pack, err = ks.cbFormat(s.CB, call)
			return err
		})
	case kir.TileRegsAcquire, kir.TileRegsCommit, kir.TileRegsWait, kir.TileRegsRelease:
		var from, to regPhase
		switch s.(type) {
		case kir.TileRegsAcquire:
			from, to = regsIdle, regsAcquired
		case kir.TileRegsCommit:
			from, to = regsAcquired, regsCommitted
		case kir.TileRegsWait:
			from, to = regsCommitted, regsWaited
		default:
			from, to = regsWaited, regsIdle
		}
		return do(func(ks *kstate, _ []uint64) error {
			cs := ks.comp
			if cs.phase != from {
				return ks.errf(kir.RuleTileRegs, kir.NoCB, "%s while DEST is %s; the order is tile_regs_acquire, tile_regs_commit, tile_regs_wait, tile_regs_release", call, phaseNames[cs.phase])
			}
			cs.phase = to
			if to == regsAcquired {
				for i := range cs.dest {
					clear(cs.dest[i])
					cs.reduced[i] = false
				}
			}
			return nil
		})
	case kir.CopyTileInit:
		return setFPU(call, fpuMode{kind: fpuCopy}, s.CB)
	case kir.BinaryInit:
		return setFPU(call, fpuMode{kind: fpuBinary, elt: s.Op}, s.ICB0, s.ICB1)
	case kir.BcastInit:
		return setFPU(call, fpuMode{kind: fpuBcast, elt: s.Op, bcast: s.Dim}, s.ICB0, s.ICB1)
	case kir.MatmulInit:
		return setFPU(call, fpuMode{kind: fpuMatmul, transpose: s.Transpose}, s.In0, s.In1)
	case kir.MatmulBlockInit:
		return setFPU(call, fpuMode{kind: fpuMatmulBlock, transpose: s.Transpose}, s.In0, s.In1)
	case kir.ReduceInit:
		set := setFPU(call, fpuMode{kind: fpuReduce, rop: s.Op, rdim: s.Dim}, s.ICB, s.ScalerCB, s.OCB)
		return func(t *thread, v []uint64) (bool, error) {
			_, err := set(t, v)
			if err == nil {
				t.S.comp.edgeMask, t.S.comp.maskDim = true, s.Dim
			}
			return false, err
		}
	case kir.TransposeInit:
		return setFPU(call, fpuMode{kind: fpuTranspose}, s.CB)
	case kir.TransposeDestInit:
		return setFPU(call, fpuMode{kind: fpuTransposeDest, is32: s.Is32})
	case kir.ReduceUninit:
		return do(func(ks *kstate, _ []uint64) error {
			ks.comp.fpu = fpuMode{}
			ks.comp.edgeMask = false
			return nil
		})
	case kir.SFPUInit:
		return do(func(ks *kstate, _ []uint64) error {
			if err := ks.needStarted(call); err != nil {
				return err
			}
			ks.comp.sfpu, ks.comp.sfpuSet = s.Op.InitGroup(), true
			return nil
		})
	}
	return nil
}

// mathOp compiles the FPU calls that unpack tiles into DEST (nil for any
// other).
func mathOp(s kir.Stmt, call, init string) op {
	switch s := s.(type) {
	case kir.CopyTile:
		return do(func(ks *kstate, v []uint64) error {
			if err := ks.mathPrologue(call, fpuMode{kind: fpuCopy}, init); err != nil {
				return err
			}
			d, err := ks.destIndex(call, v[1])
			if err != nil {
				return err
			}
			a, f, err := ks.unpack(call, s.CB, v[0], 'A')
			if err != nil {
				return err
			}
			dst := ks.comp.dest[d]
			for i, x := range a {
				if f == ir.FP32 && ks.comp.fp32 && ks.k.Compute.UnpacksToDest(s.CB) {
					dst[i] = x // unpack to DEST (UnpackToDestFp32) keeps fp32
				} else {
					dst[i] = srcReg(x, f)
				}
			}
			ks.comp.round(dst)
			return nil
		})
	case kir.BinaryTiles:
		return do(func(ks *kstate, v []uint64) error {
			if err := ks.mathPrologue(call, fpuMode{kind: fpuBinary, elt: s.Op}, init); err != nil {
				return err
			}
			d, a, b, fa, fb, err := ks.twoTiles(call, s.ICB0, s.ICB1, v)
			if err != nil {
				return err
			}
			dst := ks.comp.dest[d]
			for i := range dst {
				dst[i] = ks.comp.eltwise(s.Op, a[i], b[i], dst[i], fa, fb)
			}
			return nil
		})
	case kir.BcastTiles:
		return do(func(ks *kstate, v []uint64) error {
			if err := ks.mathPrologue(call, fpuMode{kind: fpuBcast, elt: s.Op, bcast: s.Dim}, init); err != nil {
				return err
			}
			d, a, b, fa, fb, err := ks.twoTiles(call, s.ICB0, s.ICB1, v)
			if err != nil {
				return err
			}
			dst := ks.comp.dest[d]
			for r := 0; r < numerics.TileDim; r++ {
				for c := 0; c < numerics.TileDim; c++ {
					var bv float32
					switch s.Dim {
					case kir.BcastRows:
						bv = b[numerics.FaceIndex(0, c)]
					case kir.BcastCols:
						bv = b[numerics.FaceIndex(r, 0)]
					default:
						bv = b[0]
					}
					i := numerics.FaceIndex(r, c)
					dst[i] = ks.comp.eltwise(s.Op, a[i], bv, dst[i], fa, fb)
				}
			}
			return nil
		})
	case kir.MatmulTiles:
		return do(func(ks *kstate, v []uint64) error {
			cs := ks.comp
			want := fpuMode{kind: fpuMatmul, transpose: cs.fpu.transpose}
			if err := ks.mathPrologue(call, want, init); err != nil {
				return err
			}
			return ks.matmul(call, s.In0, s.In1, v[0], v[1], v[2])
		})
	case kir.MatmulBlock:
		return do(func(ks *kstate, v []uint64) error {
			if err := ks.mathPrologue(call, fpuMode{kind: fpuMatmulBlock, transpose: s.Transpose}, init); err != nil {
				return err
			}
			t0, t1, d, ct, rt, kt := v[0], v[1], v[2], v[3], v[4], v[5]
			for r := uint64(0); r < rt; r++ {
				for c := uint64(0); c < ct; c++ {
					if err := ks.matmul(call, s.In0, s.In1, t0+r*kt, t1+c, d+r*ct+c); err != nil {
						return err
					}
				}
			}
			return nil
		})
	case kir.ReduceTile:
		return do(func(ks *kstate, v []uint64) error {
			if err := ks.mathPrologue(call, fpuMode{kind: fpuReduce, rop: s.Op, rdim: s.Dim}, init); err != nil {
				return err
			}
			d, a, sc, _, fs, err := ks.twoTiles(call, s.ICB, s.ScalerCB, v)
			if err != nil {
				return err
			}
			ks.reduce(s.Op, s.Dim, d, a, sc[0], fs)
			return nil
		})
	case kir.TransposeTile:
		return do(func(ks *kstate, v []uint64) error {
			if err := ks.mathPrologue(call, fpuMode{kind: fpuTranspose}, init); err != nil {
				return err
			}
			d, err := ks.destIndex(call, v[1])
			if err != nil {
				return err
			}
			a, f, err := ks.unpack(call, s.CB, v[0], 'A')
			if err != nil {
				return err
			}
			t := transposed(a)
			dst := ks.comp.dest[d]
			for i, x := range t {
				dst[i] = srcReg(x, f)
			}
			ks.comp.round(dst)
			return nil
		})
	case kir.TransposeDest:
		return do(func(ks *kstate, v []uint64) error {
			if err := ks.mathPrologue(call, fpuMode{kind: fpuTransposeDest, is32: s.Is32}, init); err != nil {
				return err
			}
			if s.Is32 != ks.comp.fp32 {
				return ks.errf(kir.RuleInit, kir.NoCB, "%s<is_32bit=%t> with fp32 DEST %t: is_32bit must match DEST's mode (the 16-bit moves leave an fp32 value's low half undefined; the 32-bit moves read a 16-bit DEST's halves as two values)", call, s.Is32, ks.comp.fp32)
			}
			d, err := ks.destIndex(call, v[0])
			if err != nil {
				return err
			}
			ks.comp.dest[d] = ks.comp.transposeDest(ks.comp.dest[d])
			return nil
		})
	}
	return nil
}

// sfpuOp compiles an SFPU op on DEST tiles: the op's element function
// under the kernel's SFPU code (sfpu.Op.Func: tcc's program or the exact
// function) of each element (and the parameter or the second tile's
// element), stored into DEST as SFPSTORE does (storeSFPU).
func sfpuOp(s kir.SFPU, call, init string) op {
	p := math.Float32frombits(s.Param)
	return do(func(ks *kstate, v []uint64) error {
		cs := ks.comp
		if err := ks.needStarted(call); err != nil {
			return err
		}
		if !cs.sfpuSet || cs.sfpu != s.Op.InitGroup() {
			return ks.errf(kir.RuleInit, kir.NoCB, "%s without its init: call %s first", call, init)
		}
		code := ks.k.Compute.SFPU.For(s.Op)
		if ks.k.Compute.MathApproxMode && code == sfpu.CodeLLK {
			// tt-llk's SFPU functions take APPROX (math_approx_mode) as
			// their approximation switch; the simulator models the exact
			// functions of kir.SFPUTable only (tcc's own programs ignore it).
			return ks.errf(kir.RuleInit, kir.NoCB, "%s with math_approx_mode on: the card would run an approximation the simulator does not model (kir.SFPUTable's functions are exact)", call)
		}
		if err := ks.needPhase(call, regsAcquired); err != nil {
			return err
		}
		d, err := ks.destIndex(call, v[0])
		if err != nil {
			return err
		}
		if s.Chain != "" {
			return ks.sfpuChain(s, call, d)
		}
		// tcc's program, executed instruction by instruction, or the
		// exact function tt-metal's call approximates.
		dst, eval := cs.dest[d], s.Op.Func(code)
		// src is a binary op's second operand tile.
		var src []float32
		if s.Op.IsBinary() {
			if len(v) < 2 {
				return ks.errf(kir.RuleMalformed, kir.NoCB, "%s needs a second DEST index", call)
			}
			sd, err := ks.destIndex(call, v[1])
			if err != nil {
				return err
			}
			src = cs.dest[sd]
		}
		for i, x := range dst {
			y := p
			if src != nil {
				y = src[i]
			}
			dst[i] = eval(x, y)
		}
		cs.storeSFPU(dst)
		ks.r.stats.TileOps++
		return nil
	})
}

// sfpuChain runs a chain statement (kir.SFPU's Chain) on DEST[d]: under
// tcc's SFPU code its one program (sfpu.CachedChain, in DEST's mode),
// executed instruction by instruction; under tt-metal's the steps' exact
// functions one after the other, each stored as SFPSTORE does.
func (ks *kstate) sfpuChain(s kir.SFPU, call string, d int) error {
	cs := ks.comp
	dst := cs.dest[d]
	p, steps, err := sfpu.CachedChain(s.Chain, cs.fp32)
	if err != nil {
		return ks.errf(kir.RuleMalformed, kir.NoCB, "%s: %v", call, err)
	}
	tcc := true
	for _, st := range steps {
		tcc = tcc && ks.k.Compute.SFPU.For(st.Op) == sfpu.CodeTCC
	}
	if tcc {
		for i, x := range dst {
			dst[i] = p.EvalDest(x, 0, cs.fp32)
		}
		cs.storeSFPU(dst)
	} else {
		for _, st := range steps {
			eval := st.Op.Func(ks.k.Compute.SFPU)
			for i, x := range dst {
				dst[i] = eval(x, st.Param)
			}
			cs.storeSFPU(dst)
		}
	}
	ks.r.stats.TileOps += int64(len(steps))
	return nil
}

// packOp compiles pack_tile: the DEST tile into the output CB's next (or
// given) reserved page, in the CB's format.
func packOp(s kir.PackTile, call string) op {
	return do(func(ks *kstate, v []uint64) error {
		if err := ks.needStarted(call); err != nil {
			return err
		}
		if err := ks.needPhase(call, regsWaited); err != nil {
			return err
		}
		d, err := ks.destIndex(call, v[0])
		if err != nil {
			return err
		}
		c, err := ks.cb(s.CB, call)
		if err != nil {
			return err
		}
		f := c.Config.Format
		if ks.comp.pack != f {
			return ks.errf(kir.RuleDataFormat, s.CB, "%s packs into CB c_%d (%s) but the packer is configured for %s; call pack_reconfig_data_format first", call, s.CB, f, ks.comp.pack)
		}
		off := uint64(c.Packed)
		if len(v) > 1 {
			off = v[1]
		}
		if off >= uint64(c.Reserved) {
			return ks.errf(kir.RuleCBFlow, s.CB, "%s writes page %d of CB c_%d past the %d reserved pages (cb_reserve_back)", call, off, s.CB, c.Reserved)
		}
		if uint64(c.WrPos)+off >= uint64(c.Pages) {
			return ks.errf(kir.RuleCBFlow, s.CB, "%s writes page %d from ring page %d of %d: past the end of the ring", call, off, c.WrPos, c.Pages)
		}
		if c.PageSize != f.TileBytes() {
			return ks.errf(kir.RuleCBConfig, s.CB, "%s packs into CB c_%d whose page size %d is not one %s tile", call, s.CB, c.PageSize, f)
		}
		tile := ks.comp.dest[d]
		if ks.comp.edgeMask {
			tile = edgeMasked(tile, ks.comp.maskDim)
		}
		if f == ir.BF16 && ks.comp.fp32 {
			tile = packerBF16(tile)
		}
		data, err := numerics.PackTileDevice(f, tile, ks.comp.fp32)
		if err != nil {
			return ks.errf(kir.RuleDataFormat, s.CB, "%s: %v", call, err)
		}
		ks.core.mem.write(c.Base+(uint64(c.WrPos)+off)*uint64(c.PageSize), data)
		if len(v) == 1 {
			c.Packed++
		}
		ks.r.stats.TileOps++
		return nil
	})
}

// setFPU compiles an FPU init: it records the mode after checking the CBs exist.
func setFPU(call string, m fpuMode, cbs ...int) op {
	return do(func(ks *kstate, _ []uint64) error {
		if err := ks.needStarted(call); err != nil {
			return err
		}
		for _, idx := range cbs {
			if _, err := ks.cb(idx, call); err != nil {
				return err
			}
		}
		ks.comp.fpu = m
		return nil
	})
}

func (ks *kstate) mathPrologue(call string, m fpuMode, init string) error {
	if err := ks.needFPU(call, m, init); err != nil {
		return err
	}
	return ks.needPhase(call, regsAcquired)
}

// twoTiles unpacks in0 (source A) and in1 (source B) for v = tile0, tile1,
// dst and checks the DEST index.
func (ks *kstate) twoTiles(call string, icb0, icb1 int, v []uint64) (int, []float32, []float32, ir.DType, ir.DType, error) {
	d, err := ks.destIndex(call, v[2])
	if err != nil {
		return 0, nil, nil, 0, 0, err
	}
	a, fa, err := ks.unpack(call, icb0, v[0], 'A')
	if err != nil {
		return 0, nil, nil, 0, 0, err
	}
	b, fb, err := ks.unpack(call, icb1, v[1], 'B')
	if err != nil {
		return 0, nil, nil, 0, 0, err
	}
	return d, a, b, fa, fb, nil
}

// matmul accumulates DEST[d] += in0[t0] x in1[t1]; in1 feeds source A.
func (ks *kstate) matmul(call string, in0, in1 int, t0, t1, d uint64) error {
	di, err := ks.destIndex(call, d)
	if err != nil {
		return err
	}
	b, fb, err := ks.unpack(call, in1, t1, 'A')
	if err != nil {
		return err
	}
	a, fa, err := ks.unpack(call, in0, t0, 'B')
	if err != nil {
		return err
	}
	if ks.comp.fpu.transpose {
		b = transposed(b)
	}
	for i := range a {
		a[i], b[i] = srcReg(a[i], fa), srcReg(b[i], fb)
	}
	numerics.MatmulTile(ks.comp.dest[di], a, b, ks.comp.fid, ks.comp.fp32)
	return nil
}

// reduce folds tile a scaled by s (the scaler tile, stored as sf) into
// DEST[d]. Row and column sums are GAPOOLs (numerics.PoolTile: an mvmul
// lane per face, not a float32 running sum); a row reduction's results
// (and the running row a next tile accumulates onto) then pass through
// SrcB in sf's format (numerics.ReduceRowOut).
func (ks *kstate) reduce(op kir.ReduceOp, dim kir.ReduceDim, d int, a []float32, s float32, sf ir.DType) {
	cs := ks.comp
	dst := cs.dest[d]
	first := !cs.reduced[d]
	cs.reduced[d] = true
	fold := func(acc float32, x float32, start bool) float32 {
		p := numerics.FidelityMul(x, s, cs.fid)
		if op == kir.ReduceMax {
			if start || p > acc {
				return p
			}
			return acc
		}
		return acc + p
	}
	put := func(i int, vals func(yield func(float32))) {
		acc := dst[i]
		start := op == kir.ReduceMax && first
		vals(func(x float32) {
			acc = fold(acc, x, start)
			start = false
		})
		dst[i] = acc
	}
	n := numerics.TileDim
	switch dim {
	case kir.ReduceRow:
		line := make([]float32, n)
		for r := 0; r < n; r++ {
			i := numerics.FaceIndex(r, 0)
			if op == kir.ReduceSum {
				for c := range line {
					line[c] = a[numerics.FaceIndex(r, c)]
				}
				dst[i] = numerics.PoolTile(dst[i], line, s, cs.fid, cs.fp32)
			} else {
				put(i, func(yield func(float32)) {
					for c := 0; c < n; c++ {
						yield(a[numerics.FaceIndex(r, c)])
					}
				})
			}
			dst[i] = numerics.ReduceRowOut(dst[i], sf, cs.fp32)
		}
	case kir.ReduceCol:
		if op == kir.ReduceSum {
			// GAPOOL without the unpacker's transpose: each face's 16 rows
			// of a column pool as one mvmul lane into DEST row 0, rows
			// 16..31 (faces 2 and 3) onto what rows 0..15 left; the sum
			// stays in DEST (no trip through SrcB as REDUCE_ROW's).
			line := make([]float32, n)
			for c := 0; c < n; c++ {
				for r := range line {
					line[r] = a[numerics.FaceIndex(r, c)]
				}
				i := numerics.FaceIndex(0, c)
				dst[i] = numerics.PoolTile(dst[i], line, s, cs.fid, cs.fp32)
			}
			break
		}
		for c := 0; c < n; c++ {
			put(numerics.FaceIndex(0, c), func(yield func(float32)) {
				for r := 0; r < n; r++ {
					yield(a[numerics.FaceIndex(r, c)])
				}
			})
		}
	default:
		put(0, func(yield func(float32)) {
			for _, x := range a {
				yield(x)
			}
		})
	}
	cs.round(dst)
}

// edgeMasked is tile as the packer writes it under a reduce's edge mask:
// the elements outside what a reduction of dim produces are zero.
func edgeMasked(tile []float32, dim kir.ReduceDim) []float32 {
	out := make([]float32, len(tile))
	for r := 0; r < numerics.TileDim; r++ {
		for c := 0; c < numerics.TileDim; c++ {
			keep := false
			switch dim {
			case kir.ReduceRow:
				keep = c == 0
			case kir.ReduceCol:
				keep = r == 0
			default:
				keep = r == 0 && c == 0
			}
			if keep {
				i := numerics.FaceIndex(r, c)
				out[i] = tile[i]
			}
		}
	}
	return out
}
