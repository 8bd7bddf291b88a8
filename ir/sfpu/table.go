package sfpu

import (
	"math"

	"github.com/tcc-dev/tcc/ir/numerics"
)

// The ops, in Table order.
const (
	Exp Op = iota
	Log
	Sigmoid
	SiLU
	Rsqrt
	Sqrt
	Recip
	Square
	Negative
	Abs
	Relu
	Softplus
	AddScalar
	MulScalar
	AddBinary
)

const eltwiseUnary = "compute_kernel_api/eltwise_unary/"

// Softplus's parameters: the op is PyTorch's default softplus, beta 1 and
// threshold 20 (the call also takes 1/beta).
const softplusBeta, softplusThreshold float32 = 1, 20

// Table is indexed by Op: a new unary op is its constant and one entry
// here plus the graph op flagged SFPU in ir/opspec. The declarations were
// checked against the pinned tt-metal release
// (codegen/target.TTMetalRelease).
var Table = [...]Spec{
	{Op: Exp, Name: "exp", Call: "exp_tile", Init: "exp_tile_init", Header: eltwiseUnary + "exp.h",
		Decl: "// exp.h:23,51: fast_and_approx defaults to true (the fast approximation)\n" +
			"template <bool approx = false, bool fast_and_approx = true, uint32_t scale = 0x3F800000>\nvoid exp_tile_init();\n" +
			"template <bool approx = false, bool fast_and_approx = true, bool scale_en = false, bool skip_positive_check = false, int iterations = 8>\n" +
			"void exp_tile(uint32_t idst, int vector_mode = (int)VectorMode::RC, uint16_t scale = 0x3F80);",
		InitTemplate: "false, false", CallTemplate: "false, false",
		Cycles: 128, Eval: func(x, _ float32) float32 { return numerics.Exp(x) }},
	{Op: Log, Name: "log", Call: "log_tile", Init: "log_tile_init", Header: "compute_kernel_api.h",
		Decl:   "template <bool fast_and_approx = false>\nvoid log_tile_init();\ntemplate <bool fast_and_approx = false>\nvoid log_tile(uint32_t idst);",
		Cycles: 160, Eval: func(x, _ float32) float32 { return float32(math.Log(float64(x))) }},
	{Op: Sigmoid, Name: "sigmoid", Call: "sigmoid_tile", Init: "sigmoid_tile_init", Header: "compute_kernel_api.h",
		Decl:   "template <bool fast_and_approx = false>\nvoid sigmoid_tile_init();\ntemplate <int vec_mode = VectorMode::RC, bool fast_and_approx = false>\nvoid sigmoid_tile(uint32_t idst);",
		Cycles: 160, Eval: func(x, _ float32) float32 { return numerics.Sigmoid(x) }},
	{Op: SiLU, Name: "silu", Call: "silu_tile", Init: "silu_tile_init", Header: "compute_kernel_api.h",
		Decl:   "void silu_tile_init();\nvoid silu_tile(uint32_t idst);",
		Cycles: 192, Eval: func(x, _ float32) float32 { return numerics.SiLU(x) }},
	{Op: Rsqrt, Name: "rsqrt", Call: "rsqrt_tile", Init: "rsqrt_tile_init", Header: eltwiseUnary + "rsqrt.h",
		Decl:   "template <bool legacy_compat = false>\nvoid rsqrt_tile_init();\ntemplate <bool legacy_compat = false, bool FAST_APPROX = false>\nvoid rsqrt_tile(uint32_t idst);",
		Cycles: 128, Eval: func(x, _ float32) float32 { return numerics.Rsqrt(x) }},
	{Op: Sqrt, Name: "sqrt", Call: "sqrt_tile", Init: "sqrt_tile_init", Header: eltwiseUnary + "sqrt.h",
		Decl:   "void sqrt_tile_init();\ntemplate <bool FAST_APPROX = false>\nvoid sqrt_tile(uint32_t idst);",
		Cycles: 128, Eval: func(x, _ float32) float32 { return float32(math.Sqrt(float64(x))) }},
	{Op: Recip, Name: "recip", Call: "recip_tile", Init: "recip_tile_init", Header: eltwiseUnary + "recip.h",
		Decl:   "// recip.h:19,37: legacy_compat defaults to true\ntemplate <bool legacy_compat = true>\nvoid recip_tile_init();\ntemplate <bool legacy_compat = true>\nvoid recip_tile(uint32_t idst, int vector_mode = (int)VectorMode::RC);",
		Cycles: 128, Eval: func(x, _ float32) float32 { return numerics.Recip(x) }},
	{Op: Square, Name: "square", Call: "square_tile", Init: "square_tile_init", Header: "compute_kernel_api.h",
		Decl:   "void square_tile_init();\nvoid square_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return x * x }},
	{Op: Negative, Name: "negative", Call: "negative_tile", Init: "negative_tile_init", Header: eltwiseUnary + "negative.h",
		Decl:   "void negative_tile_init();\nvoid negative_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return -x }},
	{Op: Abs, Name: "abs", Call: "abs_tile", Init: "abs_tile_init", Header: "compute_kernel_api.h",
		Decl:   "void abs_tile_init();\nvoid abs_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return float32(math.Abs(float64(x))) }},
	{Op: Relu, Name: "relu", Call: "relu_tile", Init: "relu_tile_init", Header: eltwiseUnary + "relu.h",
		Decl:   "void relu_tile_init();\nvoid relu_tile(uint32_t idst);",
		Cycles: 32, Eval: func(x, _ float32) float32 { return max(x, 0) }},
	{Op: Softplus, Name: "softplus", Call: "softplus_tile", Init: "softplus_tile_init", Header: eltwiseUnary + "softplus.h",
		Decl: "// softplus.h:32,39: beta, 1/beta and threshold as float bits (its approximation is math_approx_mode's, off)\n" +
			"void softplus_tile_init();\nvoid softplus_tile(uint32_t idst, uint32_t beta, uint32_t beta_reciprocal, uint32_t threshold);",
		Consts: []Const{{"beta", softplusBeta}, {"beta_reciprocal", 1 / softplusBeta}, {"threshold", softplusThreshold}},
		Cycles: 256, Eval: func(x, _ float32) float32 { return numerics.Softplus(x, softplusBeta, softplusThreshold) }},
	{Op: AddScalar, Name: "add_scalar", Call: "add_unary_tile", Init: "binop_with_scalar_tile_init", Header: eltwiseUnary + "binop_with_scalar.h",
		Decl:  "// binop_with_scalar.h:28,36,89 (param1: fp32 bits)\nvoid binop_with_scalar_tile_init();\nvoid add_unary_tile(uint32_t idst, uint32_t param1);",
		Param: true, Cycles: 32, Eval: func(x, p float32) float32 { return x + p }},
	{Op: MulScalar, Name: "mul_scalar", Call: "mul_unary_tile", Init: "binop_with_scalar_tile_init", Header: eltwiseUnary + "binop_with_scalar.h",
		Decl:  "void mul_unary_tile(uint32_t idst, uint32_t param1);",
		Param: true, Cycles: 32, Eval: func(x, p float32) float32 { return x * p }},
	{Op: AddBinary, Name: "add_binary", Call: "add_binary_tile", Init: "add_binary_tile_init", Header: "compute_kernel_api/eltwise_binary_sfpu.h",
		Decl:   "// eltwise_binary_sfpu.h:34,61: DEST[odst] = DEST[idst0] + DEST[idst1] (fp32 in an fp32 DEST)\nvoid add_binary_tile_init();\nvoid add_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst);",
		Binary: true, Cycles: 32, Eval: func(x, y float32) float32 { return x + y }},
}
