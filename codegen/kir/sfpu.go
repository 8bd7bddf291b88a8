package kir

import (
	"math"

	"github.com/tcc-dev/tcc/sim/numerics"
)

// SFPUOp is a unary operation the SFPU applies to a tile in DEST. Its
// constants index SFPUTable, the one place an SFPU op is declared.
type SFPUOp uint8

const (
	SFPUExp SFPUOp = iota
	SFPULog
	SFPUSigmoid
	SFPUSiLU
	SFPURsqrt
	SFPUSqrt
	SFPURecip
	SFPUSquare
	SFPUNegative
	SFPUAbs
	SFPURelu
	SFPUSoftplus
	SFPUAddScalar
	SFPUMulScalar
	SFPUAddBinary
)

// SFPUSpec declares one SFPU op; everything else about it is derived from
// here: its kernel-IR name and the graph op it lowers from (Name), the
// tt-metal calls the C++ printer emits and their header (the includes
// follow), the declarations the g++ syntax check compiles against, whether
// it takes a scalar, its cost in the timing model, and its semantics in
// the kernel executor and the reference evaluator.
type SFPUSpec struct {
	Op   SFPUOp
	Name string // kernel-IR name; a graph op of this name flagged SFPU lowers to it
	Call string // tt-metal call on DEST[dst]
	Init string // its init; ops sharing one init share its state
	// Header declares Call and Init; Decl is their declarations for the
	// syntax check (tt-metal's signatures, defaults included).
	Header, Decl string
	// Param: the op takes a float32 scalar (SFPU.Param bits, the graph op's
	// value attribute), passed as the call's second argument.
	Param bool
	// Binary: the op's second operand is the tile DEST[SFPU.Src] (Eval's
	// p), the call is Call(dst, src, dst); no graph op lowers to it.
	Binary bool
	// Cycles is the time of the op on one tile (sim/timing).
	Cycles float64
	// Eval is the op on one DEST value x (p the scalar, or for a Binary op
	// the value of DEST[src] at the same place): float32 results
	// of the float64 formula or float32 arithmetic, math_approx_mode off.
	Eval func(x, p float32) float32
}

const eltwiseUnary = "compute_kernel_api/eltwise_unary/"

// SFPUTable is indexed by SFPUOp.
var SFPUTable = [...]SFPUSpec{
	{SFPUExp, "exp", "exp_tile", "exp_tile_init", eltwiseUnary + "exp.h", "// exp.h:23,51: fast_and_approx defaults to true; tcc passes <false, false> for the accurate exp.\ntemplate <bool approx = false, bool fast_and_approx = true, uint32_t scale = 0x3F800000>\nvoid exp_tile_init();\ntemplate <bool approx = false, bool fast_and_approx = true, bool scale_en = false, bool skip_positive_check = false, int iterations = 8>\nvoid exp_tile(uint32_t idst, int vector_mode = (int)VectorMode::RC, uint16_t scale = 0x3F80);", false, false, 128, func(x, _ float32) float32 { return numerics.Exp(x) }},
	{SFPULog, "log", "log_tile", "log_tile_init", "compute_kernel_api.h", "template <bool fast_and_approx = false>\nvoid log_tile_init();\ntemplate <bool fast_and_approx = false>\nvoid log_tile(uint32_t idst);", false, false, 160, func(x, _ float32) float32 { return float32(math.Log(float64(x))) }},
	{SFPUSigmoid, "sigmoid", "sigmoid_tile", "sigmoid_tile_init", "compute_kernel_api.h", "template <bool fast_and_approx = false>\nvoid sigmoid_tile_init();\ntemplate <int vec_mode = VectorMode::RC, bool fast_and_approx = false>\nvoid sigmoid_tile(uint32_t idst);", false, false, 160, func(x, _ float32) float32 { return numerics.Sigmoid(x) }},
	{SFPUSiLU, "silu", "silu_tile", "silu_tile_init", "compute_kernel_api.h", "void silu_tile_init();\nvoid silu_tile(uint32_t idst);", false, false, 192, func(x, _ float32) float32 { return numerics.SiLU(x) }},
	{SFPURsqrt, "rsqrt", "rsqrt_tile", "rsqrt_tile_init", eltwiseUnary + "rsqrt.h", "template <bool legacy_compat = false>\nvoid rsqrt_tile_init();\ntemplate <bool legacy_compat = false, bool FAST_APPROX = false>\nvoid rsqrt_tile(uint32_t idst);", false, false, 128, func(x, _ float32) float32 { return numerics.Rsqrt(x) }},
	{SFPUSqrt, "sqrt", "sqrt_tile", "sqrt_tile_init", eltwiseUnary + "sqrt.h", "void sqrt_tile_init();\ntemplate <bool FAST_APPROX = false>\nvoid sqrt_tile(uint32_t idst);", false, false, 128, func(x, _ float32) float32 { return float32(math.Sqrt(float64(x))) }},
	{SFPURecip, "recip", "recip_tile", "recip_tile_init", eltwiseUnary + "recip.h", "// recip.h:19,37: legacy_compat defaults to true\ntemplate <bool legacy_compat = true>\nvoid recip_tile_init();\ntemplate <bool legacy_compat = true>\nvoid recip_tile(uint32_t idst, int vector_mode = (int)VectorMode::RC);", false, false, 128, func(x, _ float32) float32 { return numerics.Recip(x) }},
	{SFPUSquare, "square", "square_tile", "square_tile_init", "compute_kernel_api.h", "void square_tile_init();\nvoid square_tile(uint32_t idst);", false, false, 32, func(x, _ float32) float32 { return x * x }},
	{SFPUNegative, "negative", "negative_tile", "negative_tile_init", eltwiseUnary + "negative.h", "void negative_tile_init();\nvoid negative_tile(uint32_t idst);", false, false, 32, func(x, _ float32) float32 { return -x }},
	{SFPUAbs, "abs", "abs_tile", "abs_tile_init", "compute_kernel_api.h", "void abs_tile_init();\nvoid abs_tile(uint32_t idst);", false, false, 32, func(x, _ float32) float32 { return float32(math.Abs(float64(x))) }},
	{SFPURelu, "relu", "relu_tile", "relu_tile_init", eltwiseUnary + "relu.h", "void relu_tile_init();\nvoid relu_tile(uint32_t idst);", false, false, 32, func(x, _ float32) float32 { return max(x, 0) }},
	{SFPUSoftplus, "softplus", "softplus_tile", "softplus_tile_init", eltwiseUnary + "softplus.h", "// softplus.h:32,39: beta, 1/beta and threshold as float bits; tcc passes 1, 1, 20\nvoid softplus_tile_init();\nvoid softplus_tile(uint32_t idst, uint32_t beta, uint32_t beta_reciprocal, uint32_t threshold);", false, false, 256, func(x, _ float32) float32 { return numerics.Softplus(x, 1, 20) }},
	{SFPUAddScalar, "add_scalar", "add_unary_tile", "binop_with_scalar_tile_init", eltwiseUnary + "binop_with_scalar.h", "// binop_with_scalar.h:28,36,89 (param1: fp32 bits)\nvoid binop_with_scalar_tile_init();\nvoid add_unary_tile(uint32_t idst, uint32_t param1);", true, false, 32, func(x, p float32) float32 { return x + p }},
	{SFPUMulScalar, "mul_scalar", "mul_unary_tile", "binop_with_scalar_tile_init", eltwiseUnary + "binop_with_scalar.h", "void mul_unary_tile(uint32_t idst, uint32_t param1);", true, false, 32, func(x, p float32) float32 { return x * p }},
	{SFPUAddBinary, "add_binary", "add_binary_tile", "add_binary_tile_init", "compute_kernel_api/eltwise_binary_sfpu.h", "// eltwise_binary_sfpu.h:34,61: DEST[odst] = DEST[idst0] + DEST[idst1] (fp32 in an fp32 DEST)\nvoid add_binary_tile_init();\nvoid add_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst);", false, true, 32, func(x, y float32) float32 { return x + y }},
}

func (o SFPUOp) String() string {
	if int(o) < len(SFPUTable) {
		return SFPUTable[o].Name
	}
	return "sfpu?"
}

// sfpuInitName and sfpuCallName are the tt-metal names of an SFPU
// statement ("" for an op outside the table).
func sfpuInitName(s SFPUInit) string {
	if int(s.Op) < len(SFPUTable) {
		return SFPUTable[s.Op].Init
	}
	return ""
}

func sfpuCallName(s SFPU) string {
	if int(s.Op) < len(SFPUTable) {
		return SFPUTable[s.Op].Call
	}
	return ""
}

// Spec is the op's table entry; it panics on an op outside the table.
func (o SFPUOp) Spec() *SFPUSpec { return &SFPUTable[o] }

// HasParam reports whether the op takes a scalar parameter.
func (o SFPUOp) HasParam() bool { return int(o) < len(SFPUTable) && SFPUTable[o].Param }

// IsBinary reports whether the op reads a second DEST tile (SFPU.Src).
func (o SFPUOp) IsBinary() bool { return int(o) < len(SFPUTable) && SFPUTable[o].Binary }

// InitGroup is the first op sharing o's init call (binop_with_scalar_tile_init
// serves add_scalar and mul_scalar): after its init, any op of the group
// may run.
func (o SFPUOp) InitGroup() SFPUOp {
	for _, s := range SFPUTable {
		if s.Init == SFPUTable[o].Init {
			return s.Op
		}
	}
	return o
}

// SFPUOps lists every SFPUOp in table order.
var SFPUOps = func() []SFPUOp {
	ops := make([]SFPUOp, len(SFPUTable))
	for i := range SFPUTable {
		ops[i] = SFPUTable[i].Op
	}
	return ops
}()

// SFPUByName is the op of kernel-IR name n.
func SFPUByName(n string) (SFPUOp, bool) {
	for _, s := range SFPUTable {
		if s.Name == n {
			return s.Op, true
		}
	}
	return 0, false
}

// SFPUDecls is the syntax check's declarations of every op, in table order
// (each declaration once).
func SFPUDecls() string {
	out := "\n// SFPU ops (codegen/kir/sfpu.go SFPUTable)\n"
	for _, s := range SFPUTable {
		out += "// " + s.Header + "\n" + s.Decl + "\n"
	}
	return out
}
