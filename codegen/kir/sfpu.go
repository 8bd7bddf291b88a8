package kir

import (
	"math"

	"github.com/tcc-dev/tcc/ir/numerics"
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
// tt-metal calls the C++ printer emits, their template arguments and
// constant arguments, and their header (the includes follow), the
// declarations the g++ syntax check compiles against, whether it takes a
// scalar, its cost in the timing model, and its semantics in the kernel
// executor and the reference evaluator. The printer has no case of its
// own for any op.
type SFPUSpec struct {
	Op   SFPUOp
	Name string // kernel-IR name; a graph op of this name flagged SFPU lowers to it
	Call string // tt-metal call on DEST[dst]
	Init string // its init; ops sharing one init share its state
	// Header declares Call and Init; Decl is their declarations for the
	// syntax check (tt-metal's signatures, defaults included), with the
	// file and line they were read from in a comment.
	Header, Decl string
	// InitTemplate and CallTemplate are the template arguments the printer
	// passes to Init and Call, in declaration order ("" passes none, so
	// every template parameter takes its default). Eval is the exact
	// function, so every approximation switch of the declaration (a bool
	// parameter named *approx* or *fast*) must end up false: an entry
	// whose declaration defaults one to true sets it here
	// (TestSFPUApproxSwitchesOff).
	InitTemplate, CallTemplate string
	// Param: the op takes a float32 scalar (SFPU.Param bits, the graph op's
	// value attribute), passed as the call's second argument.
	Param bool
	// Binary: the op's second operand is the tile DEST[SFPU.Src] (Eval's
	// p), the call is Call(dst, src, dst); no graph op lowers to it.
	Binary bool
	// Consts are constant arguments the call takes after dst, printed as
	// float32 bits with their names in a comment (softplus's beta, 1/beta
	// and threshold); Eval computes with the same values.
	Consts []SFPUConst
	// Cycles is the time of the op on one tile (sim/timing).
	Cycles float64
	// Eval is the op on one DEST value x (p the scalar, or for a Binary op
	// the value of DEST[src] at the same place): float32 results
	// of the float64 formula or float32 arithmetic, math_approx_mode off.
	Eval func(x, p float32) float32
}

// SFPUConst is one constant float32 argument of an SFPU call.
type SFPUConst struct {
	Name  string // the declaration's parameter name, for the printed comment
	Value float32
}

const eltwiseUnary = "compute_kernel_api/eltwise_unary/"

// Softplus's parameters: kir's softplus is PyTorch's default, beta 1 and
// threshold 20 (the call also takes 1/beta).
const softplusBeta, softplusThreshold float32 = 1, 20

// SFPUTable is indexed by SFPUOp. The declarations were checked against
// the pinned tt-metal release (codegen/target.TTMetalRelease).
var SFPUTable = [...]SFPUSpec{
	{Op: SFPUExp, Name: "exp", Call: "exp_tile", Init: "exp_tile_init", Header: eltwiseUnary + "exp.h",
		Decl: "// exp.h:23,51: fast_and_approx defaults to true (the fast approximation)\n" +
			"template <bool approx = false, bool fast_and_approx = true, uint32_t scale = 0x3F800000>\nvoid exp_tile_init();\n" +
			"template <bool approx = false, bool fast_and_approx = true, bool scale_en = false, bool skip_positive_check = false, int iterations = 8>\n" +
			"void exp_tile(uint32_t idst, int vector_mode = (int)VectorMode::RC, uint16_t scale = 0x3F80);",
		InitTemplate: "false, false", CallTemplate: "false, false",
		Cycles: 128, Eval: func(x, _ float32) float32 { return numerics.Exp(x) }},
	{Op: SFPULog, Name: "log", Call: "log_tile", Init: "log_tile_init", Header: "compute_kernel_api.h",
		Decl:   "template <bool fast_and_approx = false>\nvoid log_tile_init();\ntemplate <bool fast_and_approx = false>\nvoid log_tile(uint32_t idst);",
		Cycles: 160, Eval: func(x, _ float32) float32 { return float32(math.Log(float64(x))) }},
	{Op: SFPUSigmoid, Name: "sigmoid", Call: "sigmoid_tile", Init: "sigmoid_tile_init", Header: "compute_kernel_api.h",
		Decl:   "template <bool fast_and_approx = false>\nvoid sigmoid_tile_init();\ntemplate <int vec_mode = VectorMode::RC, bool fast_and_approx = false>\nvoid sigmoid_tile(uint32_t idst);",
		Cycles: 160, Eval: func(x, _ float32) float32 { return numerics.Sigmoid(x) }},
	{Op: SFPUSiLU, Name: "silu", Call: "silu_tile", Init: "silu_tile_init", Header: "compute_kernel_api.h",
		Decl:   "void silu_tile_init();\nvoid silu_tile(uint32_t idst);",
		Cycles: 192, Eval: func(x, _ float32) float32 { return numerics.SiLU(x) }},
	{Op: SFPURsqrt, Name: "rsqrt", Call: "rsqrt_tile", Init: "rsqrt_tile_init", Header: eltwiseUnary + "rsqrt.h",
		Decl:   "template <bool legacy_compat = false>\nvoid rsqrt_tile_init();\ntemplate <bool legacy_compat = false, bool FAST_APPROX = false>\nvoid rsqrt_tile(uint32_t idst);",
		Cycles: 128, Eval: func(x, _ float32) float32 { return numerics.Rsqrt(x) }},
	{Op: SFPUSqrt, Name: "sqrt", Call: "sqrt_tile", Init: "sqrt_tile_init", Header: eltwiseUnary + "sqrt.h",
		Decl:   "void sqrt_tile_init();\ntemplate <bool FAST_APPROX = false>\nvoid sqrt_tile(uint32_t idst);",
		Cycles: 128, Eval: func(x, _ float32) float32 { return float32(math.Sqrt(float64(x))) }},
	{Op: SFPURecip, Name: "recip", Call: "recip_tile", Init: "recip_tile_init", Header: eltwiseUnary + "recip.h",
		Decl:   "// recip.h:19,37: legacy_compat defaults to true\ntemplate <bool legacy_compat = true>\nvoid recip_tile_init();\ntemplate <bool legacy_compat = true>\nvoid recip_tile(uint32_t idst, int vector_mode = (int)VectorMode::RC);",
		Cycles: 128, Eval: func(x, _ float32) float32 { return numerics.Recip(x) }},
	{Op: SFPUSquare, Name: "square", Call: "square_tile", Init: "square_tile_init", Header: "compute_kernel_api.h",
		Decl:   "void square_tile_init();\nvoid square_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return x * x }},
	{Op: SFPUNegative, Name: "negative", Call: "negative_tile", Init: "negative_tile_init", Header: eltwiseUnary + "negative.h",
		Decl:   "void negative_tile_init();\nvoid negative_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return -x }},
	{Op: SFPUAbs, Name: "abs", Call: "abs_tile", Init: "abs_tile_init", Header: "compute_kernel_api.h",
		Decl:   "void abs_tile_init();\nvoid abs_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return float32(math.Abs(float64(x))) }},
	{Op: SFPURelu, Name: "relu", Call: "relu_tile", Init: "relu_tile_init", Header: eltwiseUnary + "relu.h",
		Decl:   "void relu_tile_init();\nvoid relu_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return max(x, 0) }},
	{Op: SFPUSoftplus, Name: "softplus", Call: "softplus_tile", Init: "softplus_tile_init", Header: eltwiseUnary + "softplus.h",
		Decl: "// softplus.h:32,39: beta, 1/beta and threshold as float bits (its approximation is math_approx_mode's, off)\n" +
			"void softplus_tile_init();\nvoid softplus_tile(uint32_t idst, uint32_t beta, uint32_t beta_reciprocal, uint32_t threshold);",
		Consts: []SFPUConst{{"beta", softplusBeta}, {"beta_reciprocal", 1 / softplusBeta}, {"threshold", softplusThreshold}},
		Cycles: 256, Eval: func(x, _ float32) float32 { return numerics.Softplus(x, softplusBeta, softplusThreshold) }},
	{Op: SFPUAddScalar, Name: "add_scalar", Call: "add_unary_tile", Init: "binop_with_scalar_tile_init", Header: eltwiseUnary + "binop_with_scalar.h",
		Decl:  "// binop_with_scalar.h:28,36,89 (param1: fp32 bits)\nvoid binop_with_scalar_tile_init();\nvoid add_unary_tile(uint32_t idst, uint32_t param1);",
		Param: true, Cycles: 32, Eval: func(x, p float32) float32 { return x + p }},
	{Op: SFPUMulScalar, Name: "mul_scalar", Call: "mul_unary_tile", Init: "binop_with_scalar_tile_init", Header: eltwiseUnary + "binop_with_scalar.h",
		Decl:  "void mul_unary_tile(uint32_t idst, uint32_t param1);",
		Param: true, Cycles: 32, Eval: func(x, p float32) float32 { return x * p }},
	{Op: SFPUAddBinary, Name: "add_binary", Call: "add_binary_tile", Init: "add_binary_tile_init", Header: "compute_kernel_api/eltwise_binary_sfpu.h",
		Decl:   "// eltwise_binary_sfpu.h:34,61: DEST[odst] = DEST[idst0] + DEST[idst1] (fp32 in an fp32 DEST)\nvoid add_binary_tile_init();\nvoid add_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst);",
		Binary: true, Cycles: 32, Eval: func(x, y float32) float32 { return x + y }},
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
