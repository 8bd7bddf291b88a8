package lower

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// Context is what a lowering needs besides the op. Create it with
// NewContext; the zero value has no target.
type Context struct {
	// Target is the chip the programs are built for.
	Target *target.Target
	// Fidelity is the math fidelity of matmul and multiply kernels.
	Fidelity ir.MathFidelity
	// Alias maps a value to the value whose buffer it is written into: the
	// new contents of persistent state go straight into the state's buffer
	// (updated in place, at a fixed address).
	Alias map[*ir.Value]*ir.Value
	// Validate, when set, replaces kir.Validate(p, Target) as Lower's final
	// check; it must fail exactly when kir.Validate does (codegen.Compile
	// validates each distinct program once).
	Validate func(p *kir.Program) error
	// Ring, when set, constrains the collectives' adders (the zero value
	// leaves PlanRing's choice).
	Ring RingOptions
	// Blocks places weights in blocks (WeightBlocks): every program
	// declares and addresses such a weight's buffer with its layout.
	Blocks map[*ir.Value]*kir.BlockLayout
	// Names, when set, names the buffers of values that share one
	// (codegen's liveness reuse: intermediates whose live ranges do not
	// overlap): BufferName returns Names[v] for them.
	Names map[*ir.Value]string
	// RowSignal, when set, makes a matmul's writers publish its tile rows
	// to receivers of the same program (MatmulRowSignal); a lowering that
	// runs a matmul beside a part consuming its rows sets it for the
	// matmul. Nil for every plain program.
	RowSignal *MatmulRowSignal
}

// RingOptions constrain the adder cores of a ring collective; the
// timing model's calibration builds the structure of TTNN's measured
// all-reduce with them.
type RingOptions struct {
	// MaxWorkersPerLink bounds the adders per link (0: maxWorkersPerLink).
	MaxWorkersPerLink int
	// WorkersPerLink, when > 0, is exactly the adders per link (at most a
	// packet's tiles): sweeps that check PlanRing's choice against the
	// timing model set it.
	WorkersPerLink int
	// PerTile makes the adders move one tile per read and write barrier
	// even when their CBs could hold all their tiles.
	PerTile bool
	// OneWay keeps a streaming two-card all-reduce on its links' one
	// direction (the ring before RingPlan.Bidirectional; comparisons).
	OneWay bool
}

// NewContext returns a context for t with HiFi4 fidelity.
func NewContext(t *target.Target) *Context {
	return &Context{Target: t, Fidelity: ir.HiFi4}
}

// BufferName is the stable global name of v's device buffer: the checkpoint
// name for weights, the state name for persistent state (so the prefill and
// decode builds of one model share them), "t<ID>" for every other value (inputs, op
// results), or the shared buffer's name Names gives. The runtime allocates
// one buffer per name and resolves kir.BufferAddr(name, ...) arguments with
// it.
func (c *Context) BufferName(v *ir.Value) string {
	if a, ok := c.Alias[v]; ok {
		v = a
	}
	if n, ok := c.Names[v]; ok {
		return n
	}
	if (v.Kind == ir.KindWeight || v.Kind == ir.KindState) && v.Name != "" {
		return v.Name
	}
	return fmt.Sprintf("t%d", v.ID)
}

// lowerFunc builds the program of one op. Errors need not name the op;
// Lower adds op.Where() and the types.
type lowerFunc func(op *ir.Op, ctx *Context) (*kir.Program, error)

// lowerings is the op table of the lowering, one entry per supported kind;
// the functions live in one file per family. Every SFPU op (sfpuOps) is
// lowered by lowerUnary (added in init).
var lowerings = map[ir.OpKind]lowerFunc{
	ir.OpAllReduce:               lowerCollective,
	ir.OpReduceScatter:           lowerCollective,
	ir.OpAllGather:               lowerCollective,
	ir.OpTypecast:                lowerTypecast,
	ir.OpAdd:                     lowerBinary,
	ir.OpSub:                     lowerBinary,
	ir.OpMul:                     lowerBinary,
	ir.OpMatmul:                  lowerFusedMatmul,
	ir.OpBMM:                     lowerBMM,
	ir.OpBMMTransposeB:           lowerBMMTransposeB,
	ir.OpBMMTransposeBMul:        lowerBMMTransposeBMul,
	ir.OpBMMScaleB:               lowerBMMScaleB,
	ir.OpUnaryMul:                lowerUnaryMul,
	ir.OpNormLayoutGate:          lowerNormLayoutGate,
	ir.OpRMSNorm:                 lowerRMSNorm,
	ir.OpRMSNormPlain:            lowerRMSNormPlain,
	ir.OpRMSNormPlainChain:       lowerRMSNormPlainChain,
	ir.OpLayoutNormPlainChain:    lowerLayoutNormPlainChain,
	ir.OpSum:                     lowerSum,
	ir.OpMean:                    lowerMean,
	ir.OpEmbedding:               lowerEmbedding,
	ir.OpArgmax:                  lowerArgmax,
	ir.OpArgmaxSharded:           lowerArgmaxSharded,
	ir.OpToMemory:                lowerToMemory,
	ir.OpReshape:                 lowerReshape,
	ir.OpSlice:                   lowerSlice,
	ir.OpConcat:                  lowerConcat,
	ir.OpPad:                     lowerPad,
	ir.OpRepeatInterleave:        lowerRepeatInterleave,
	ir.OpTranspose:               lowerTranspose,
	ir.OpRotary:                  lowerRotary,
	ir.OpUpdateCache:             lowerUpdateCache,
	ir.OpSDPADecode:              lowerSDPADecode,
	ir.OpGDNConvGates:            lowerGDNConvGates,
	ir.OpGDNRecurrence:           lowerGDNRecurrence,
	ir.OpGDNPrefillGates:         lowerGDNPrefillGates,
	ir.OpGDNChunkStep:            lowerGDNChunkStep,
	ir.OpGDNChunkScan:            lowerGDNChunkStep,
	ir.OpGDNChunkWY:              lowerGDNChunkWY,
	ir.OpGDNChunkPrep:            lowerGDNChunkWY,
	ir.OpSDPAPrefill:             lowerSDPAPrefill,
	ir.OpFillCache:               lowerFillCache,
	ir.OpTril:                    lowerTril,
	ir.OpCumsum:                  lowerCumsum,
	ir.OpConvDepthwise:           lowerConvDepthwise,
	ir.OpConvDepthwiseChain:      lowerConvDepthwiseChain,
	ir.OpConvDepthwiseStateChain: lowerConvDepthwiseChain,
	ir.OpTrilInverse:             lowerTrilInverse,
	ir.OpMatmul2:                 lowerFusedMatmul,
	ir.OpMatmul3:                 lowerFusedMatmul,
	ir.OpMatmul4:                 lowerFusedMatmul,
	ir.OpMatmulAdd:               lowerFusedMatmul,
	ir.OpRMSNormMatmul:           lowerFusedMatmul,
	ir.OpMatmulSwiGLU:            lowerFusedMatmul,
	ir.OpAddRMSNorm:              lowerAddRMSNorm,
	ir.OpEltwiseChain:            lowerEltwiseChain,
	ir.OpEmbeddingReshape:        lowerEmbeddingReshape,
	ir.OpLayoutChain:             lowerLayoutChain,

	// fused collectives (fused_collective.go)
	ir.OpAllReduceAdd:        lowerFusedCollective,
	ir.OpAllReduceAddRMSNorm: lowerFusedCollective,

	// Fused attention (fused_attention.go, fused_sdpa.go, fused_prologue_prefill.go).
	ir.OpAttnPrologue:        lowerAttnPrologue,
	ir.OpSDPADecodeGated:     lowerSDPADecodeGated,
	ir.OpAttnProloguePrefill: lowerAttnProloguePrefill,
	ir.OpSDPAPrefillGated:    lowerSDPAPrefillGated,
}

func init() {
	for k := range sfpuOps {
		lowerings[k] = lowerUnary
	}
}

// Supported reports whether Lower has a lowering for op kind k (a
// supported kind may still reject some shapes).
func Supported(k ir.OpKind) bool { _, ok := lowerings[k]; return ok }

// SupportedKinds lists the kinds with a lowering, sorted by name.
func SupportedKinds() []ir.OpKind {
	ks := make([]ir.OpKind, 0, len(lowerings))
	for k := range lowerings {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].String() < ks[j].String() })
	return ks
}

// Lower lowers op to one device program. The op's operands and results must
// be placed where programs can address them (Addressable: DRAM interleaved,
// L1 interleaved or L1 sharded). On success the program passes
// kir.Validate(p, ctx.Target), its buffers are named with ctx.BufferName
// and declared with PageLayout, and its name is "<op>_<id>". Errors name
// the op (op.Where()), its operand and result types and the rule broken.
func Lower(op *ir.Op, ctx *Context) (*kir.Program, error) {
	if op == nil {
		return nil, errors.New("lower: op is nil")
	}
	if ctx == nil || ctx.Target == nil {
		return nil, fmt.Errorf("lower: %s: context has no target (use NewContext)", op.Where())
	}
	fn, ok := lowerings[op.Kind]
	if !ok {
		names := make([]string, 0, len(lowerings))
		for _, k := range SupportedKinds() {
			names = append(names, k.String())
		}
		return nil, fmt.Errorf("lower: %s%s: no device lowering for op kind %s: register one in the lowerings table of codegen/lower/lower.go (supported: %s)", op.Where(), signature(op), op.Name(), strings.Join(names, ", "))
	}
	if err := checkOp(op); err != nil {
		return nil, fmt.Errorf("lower: %s%s: %w", op.Where(), signature(op), err)
	}
	// The op's math fidelity (ir.OpFidelity: the weight-format policy).
	f, err := ir.OpFidelity(op, ctx.Fidelity)
	if err != nil {
		return nil, fmt.Errorf("lower: %w", err)
	}
	opCtx := *ctx
	opCtx.Fidelity = f
	p, err := fn(op, &opCtx)
	if err != nil {
		return nil, fmt.Errorf("lower: %s%s: %w", op.Where(), signature(op), err)
	}
	for _, k := range p.Kernels {
		if k.Processor == kir.ComputeProc {
			k.Compute.SFPU = ctx.Target.SFPU
		}
	}
	kir.Finish(p)
	validate := func(p *kir.Program) error { return kir.Validate(p, ctx.Target) }
	if ctx.Validate != nil {
		validate = ctx.Validate
	}
	if err := validate(p); err != nil {
		return nil, fmt.Errorf("lower: %s%s: the generated program breaks a hardware rule: %w", op.Where(), signature(op), err)
	}
	return p, nil
}

// checkOp checks the operand and result counts and every value's page
// layout and placement (so bufferOf and accessOf succeed on them).
func checkOp(op *ir.Op) error {
	info := op.Info()
	n := len(op.Operands)
	if (n != len(info.Operands) && !info.Variadic) || n < len(info.Operands) || len(op.Results) != info.Results {
		more := ""
		if info.Variadic {
			more = " or more"
		}
		return fmt.Errorf("rule arity: has %d operands and %d results, the op table says %d%s and %d", n, len(op.Results), len(info.Operands), more, info.Results)
	}
	for i, v := range opValues(op) {
		if v == nil {
			return fmt.Errorf("rule arity: value %d is nil", i)
		}
		if _, _, err := PageLayout(v.Type); err != nil {
			return fmt.Errorf("value %s: %w", v, err)
		}
		if !Addressable(v.Type.Mem) {
			return fmt.Errorf("rule placement: value %s is placed %s; lowerings read and write DRAM-interleaved, L1-interleaved and L1-sharded tensors", v, v.Type.Mem)
		}
		if v.Type.TilesTransposed && !engineWeight(op, v) {
			return fmt.Errorf("rule transposed-tiles: value %s (%q, %s) is stored in transposed tiles (weights on SrcB); only the weights of the matmul engine's ops (matmul, matmul2/3/4, matmul_add, rmsnorm_matmul, matmul_swiglu) may be", v, v.Name, v.Type)
		}
	}
	return nil
}

// engineWeight reports whether v is a weight of op's parts when op is
// lowered by the matmul engine (fusedMatmul), which reads weights stored in
// transposed tiles (matmul_srcb.go).
func engineWeight(op *ir.Op, v *ir.Value) bool {
	switch op.Kind {
	case ir.OpMatmul, ir.OpMatmul2, ir.OpMatmul3, ir.OpMatmul4, ir.OpMatmulAdd, ir.OpRMSNormMatmul, ir.OpMatmulSwiGLU:
	default:
		return false
	}
	f, err := newFusedMatmul(op)
	if err != nil {
		return false
	}
	for _, p := range f.parts {
		for _, w := range p.weights {
			if w == v {
				return true
			}
		}
	}
	return false
}

// opValues are op's operands, then its results.
func opValues(op *ir.Op) []*ir.Value {
	return append(append([]*ir.Value(nil), op.Operands...), op.Results...)
}

// Addressable reports whether programs can address a tensor placed m:
// DRAM interleaved, L1 interleaved or L1 sharded over a non-empty grid
// (blocks.NewAccess then succeeds).
func Addressable(m ir.MemoryConfig) bool {
	switch m.Kind {
	case ir.DRAMInterleaved, ir.L1Interleaved:
		return true
	case ir.L1HeightSharded, ir.L1WidthSharded, ir.L1BlockSharded:
		return m.Shard != nil && m.Shard.Grid.X0 <= m.Shard.Grid.X1 && m.Shard.Grid.Y0 <= m.Shard.Grid.Y1
	}
	return false
}

// signature formats the op's types for messages: "([1,128] bf16 tile) -> [1,128] bf16 tile".
func signature(op *ir.Op) string { return "(" + typesOf(op.Operands) + ") -> " + typesOf(op.Results) }

// typesOf formats the types of vs as "shape dtype layout", comma
// separated, with "<nil>" for a missing value.
func typesOf(vs []*ir.Value) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = "<nil>"
		if v != nil {
			s[i] = fmt.Sprintf("%s %s %s", v.Type.Shape, v.Type.DType, v.Type.Layout)
		}
	}
	return strings.Join(s, ", ")
}

// PageLayout is the page size and page count of a tensor of type t in an
// interleaved buffer: tile layout has one tile of t.DType per page and
// t.Shape.Tiles() pages; row-major layout has one row of the last
// dimension per page (Cols2D elements) and Rows2D pages. Block floats have
// no row-major form.
func PageLayout(t ir.TensorType) (pageSize, pages int, err error) { return t.PageLayout() }

// bufferOf declares v's buffer.
func bufferOf(ctx *Context, v *ir.Value) (kir.Buffer, error) {
	ps, n, err := PageLayout(v.Type)
	if err != nil {
		return kir.Buffer{}, fmt.Errorf("value %s: %w", v, err)
	}
	return kir.Buffer{Name: ctx.BufferName(v), Mem: v.Type.Mem, DType: v.Type.DType, Layout: v.Type.Layout, PageSize: ps, Pages: n, Blocks: ctx.Blocks[v]}, nil
}

// newProgram starts the program of op with the buffers of its operands and
// results declared (each name once, in operand then result order). On an
// error (checkOp rules it out) the program holds the buffers before it.
func newProgram(op *ir.Op, ctx *Context) (*kir.Program, error) {
	p := kir.NewProgram(fmt.Sprintf("%s_%d", op.Name(), op.ID))
	seen := map[string]bool{}
	for _, v := range opValues(op) {
		b, err := bufferOf(ctx, v)
		if err != nil {
			return p, err
		}
		if seen[b.Name] {
			continue
		}
		seen[b.Name] = true
		p.AddBuffer(b)
	}
	return p, nil
}

// CB indices: inputs from c_0, outputs from c_16, intermediates from c_24
// (tt-metal's convention).
const (
	cbIn0 = 0
	cbIn1 = 1
	cbIn2 = 2
	cbOut = 16
	cbIm0 = 24
)

// firstCores returns the first n cores of the worker grid (blocks.FirstCores).
func firstCores(t *target.Target, n int) ([]kir.Core, []ir.CoreRange) { return blocks.FirstCores(t, n) }

// accessOf declares v's buffer address as the common runtime arg `arg` of
// data-movement kernel k and returns its page addressing.
func accessOf(ctx *Context, k *kir.Kernel, arg string, v *ir.Value) (*blocks.Access, error) {
	buf, err := bufferOf(ctx, v)
	if err != nil {
		return nil, err
	}
	return blocks.NewAccess(k, ctx.Target, arg, buf)
}

// accessBinder declares operand buffers as runtime args of kernels
// (accessOf) and keeps the first error of a program under construction
// (fail), so its builders emit straight on and report err once at the end.
// A nil value binds to nil, declaring nothing (an optional operand).
type accessBinder struct {
	ctx *Context
	err error
}

// bind returns accessOf(ctx, k, arg, v), also after an earlier error.
// When it fails it keeps the error (fail) and returns nil; it does not
// fail for an operand or result of an op that passed checkOp (which checks
// their page layouts and placements).
func (ab *accessBinder) bind(k *kir.Kernel, arg string, v *ir.Value) *blocks.Access {
	if v == nil {
		return nil
	}
	a, err := accessOf(ab.ctx, k, arg, v)
	ab.fail(err)
	return a
}

// fail keeps err as the error of the program unless one is kept already.
func (ab *accessBinder) fail(err error) {
	if ab.err == nil {
		ab.err = err
	}
}

// done returns p, or no program and the error kept.
func (ab *accessBinder) done(p *kir.Program) (*kir.Program, error) {
	if ab.err != nil {
		return nil, ab.err
	}
	return p, nil
}

// newReader and newWriter add the reader and the writer kernel of a
// program on rs.
func newReader(p *kir.Program, rs []ir.CoreRange) *kir.Kernel { return blocks.NewReaderKernel(p, rs) }

func newWriter(p *kir.Program, rs []ir.CoreRange) *kir.Kernel { return blocks.NewWriterKernel(p, rs) }

// requireTile fails unless v is in tile layout or nil (an absent optional
// operand).
func requireTile(what string, v *ir.Value) error {
	if v != nil && v.Type.Layout != ir.TileLayout {
		return fmt.Errorf("rule tile-layout: %s %s is %s; this lowering reads tile-layout tensors", what, v, v.Type.Layout)
	}
	return nil
}

// requireTiles is requireTile of each value of vs, the first failure.
func requireTiles(vs ...*ir.Value) error {
	for _, v := range vs {
		if err := requireTile("value", v); err != nil {
			return err
		}
	}
	return nil
}

// tilesWide is the number of tile columns of a shape's last dimension.
func tilesWide(s ir.Shape) int { return ir.RoundUpTile(s.Cols2D()) / ir.TileSize }
