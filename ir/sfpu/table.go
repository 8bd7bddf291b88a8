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
	MulBinary
	SigmoidBF16
	SiLUBF16
	// ExpSoftmax is exp for the flash softmax's arguments (exp_softmax.go):
	// no graph op lowers to it.
	ExpSoftmax
	// MinBinary is the smaller of two DEST tiles' elements (SFPSWAP's
	// order: sign and magnitude): the flash prefill softmax's new shift
	// -max(m, c) = min(nm, -c). No graph op lowers to it.
	MinBinary
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
		Cycles: tileCycles(0, ldst+expF32),
		CyclesSource: "llk_sfpu/ckernel_sfpu_exp.h:316-338 (calculate_exponential; approx false, fp32 DEST: _sfpu_exp_improved_<true> :311-314): " +
			"per iteration 3 (load, store, incrwc) + _sfpu_exp_f32_accurate_ :199-299 63 (cycles.go expF32) = 66",
		Eval: func(x, _ float32) float32 { return numerics.Exp(x) }},
	{Op: Log, Name: "log", Call: "log_tile", Init: "log_tile_init", Header: "compute_kernel_api.h",
		Decl:   "template <bool fast_and_approx = false>\nvoid log_tile_init();\ntemplate <bool fast_and_approx = false>\nvoid log_tile(uint32_t idst);",
		Cycles: tileCycles(0, ldst+1+5+9+4+(1+1+7+2+1+recip2+1+2+16+4+6+1+1)+3),
		CyclesSource: "llk_sfpu/ckernel_sfpu_log.h:183-196 (calculate_log; fp32 DEST: calculate_log_f32_body :85-175): per iteration 3 (load, store, incrwc) + " +
			"exexp 1 + v_if in == inf (push, load, iadd, setcc) and result 5 + v_elseif exp == 128 || in < 0 (compc, push, iadd, setcc, setcc, || 3) and result 9 + " +
			"v_elseif in == 0 (compc, push, setcc) and result 4 + v_else 52 (compc 1, setexp 1, v_if m >= sqrt2 (push, sub, NOP, setcc, muli, iadd, pop) 7, m-1 and m+1 2, " +
			"NOP and sfpu/ckernel_sfpu_recip.h:18-56 _sfpu_reciprocal_<2> 1+9, z 1, z*z after its NOP 2, degree-5 Horner (5+3+3+3+2) 16, " +
			"2*(z*p) (NOP, mul, load, mul) 4, v_if exp < 0 (push, setcc, not, iadd, setsgn, pop) 6, int32_to_float 1, mad 1) + 3 pops = 77",
		Eval: func(x, _ float32) float32 { return float32(math.Log(float64(x))) }},
	{Op: Sigmoid, Name: "sigmoid", Call: "sigmoid_tile", Init: "sigmoid_tile_init", Header: "compute_kernel_api.h",
		Decl:   "template <bool fast_and_approx = false>\nvoid sigmoid_tile_init();\ntemplate <int vec_mode = VectorMode::RC, bool fast_and_approx = false>\nvoid sigmoid_tile(uint32_t idst);",
		Cycles: tileCycles(0, ldst+1+expF32+2+recip2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_sigmoid.h:59-76 (calculate_sigmoid; approx false, fp32 DEST: _sfpu_sigmoid_<true> :16-39): per iteration 3 (load, store, incrwc) + " +
			"negate 1 + _sfpu_exp_f32_accurate_ (ckernel_sfpu_exp.h:199-299) 63 + 1 + exp (SFPADD and its NOP) 2 + sfpu/ckernel_sfpu_recip.h:18-56 _sfpu_reciprocal_<2> 9 = 78",
		Eval: func(x, _ float32) float32 { return numerics.Sigmoid(x) }},
	{Op: SiLU, Name: "silu", Call: "silu_tile", Init: "silu_tile_init", Header: "compute_kernel_api.h",
		Decl:   "void silu_tile_init();\nvoid silu_tile(uint32_t idst);",
		Cycles: tileCycles(0, ldst+1+expF32+2+recip2+2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_silu.h:11-28 (calculate_silu; fp32 DEST): per iteration 3 (load, store, incrwc) + _sfpu_sigmoid_<true> " +
			"(ckernel_sfpu_sigmoid.h:16-39: negate 1, exp 63, add and NOP 2, reciprocal 9) 75 + x * sigmoid (SFPMUL and its NOP before the store) 2 = 80",
		Eval: func(x, _ float32) float32 { return numerics.SiLU(x) }},
	{Op: Rsqrt, Name: "rsqrt", Call: "rsqrt_tile", Init: "rsqrt_tile_init", Header: eltwiseUnary + "rsqrt.h",
		Decl:   "template <bool legacy_compat = false>\nvoid rsqrt_tile_init();\ntemplate <bool legacy_compat = false, bool FAST_APPROX = false>\nvoid rsqrt_tile(uint32_t idst);",
		Cycles: tileCycles(0, ldst+16+(1+2+3+1+2+1+4)),
		CyclesSource: "sfpu/ckernel_sfpu_rsqrt.h:17-28 (legacy_compat false) -> sfpu/ckernel_sfpu_sqrt.h:117-134 (_calculate_sqrt_internal_; RECIPROCAL true, FAST_APPROX false) " +
			"with _calculate_sqrt_body_ :22-115: per iteration 3 (load, store, incrwc) + SQRT_23-bits common part 16 (x >> 1 as mov and shft 2, magic - i 1, x*y 1, -y 1, " +
			"-y*xy 1, load inf 1, y*(P1 + c*(P2 + c)) with two NOPs 5, NOP and x*y 2, -y 1, 1 - y*xy 1) + reciprocal tail 14 (addexp 1, inf - x as mov and iadd 2, " +
			"v_if != 0 && != 0 (push, setcc, setcc) 3, mad 1, v_else (compc, mov) 2, pop 1, v_if x < 0 (push, setcc, load NaN, pop) 4) = 33",
		Eval: func(x, _ float32) float32 { return numerics.Rsqrt(x) }},
	{Op: Sqrt, Name: "sqrt", Call: "sqrt_tile", Init: "sqrt_tile_init", Header: eltwiseUnary + "sqrt.h",
		Decl:   "void sqrt_tile_init();\ntemplate <bool FAST_APPROX = false>\nvoid sqrt_tile(uint32_t idst);",
		Cycles: tileCycles(0, ldst+16+(2+3+1+1+4)),
		CyclesSource: "sfpu/ckernel_sfpu_sqrt.h:136-147 (_calculate_sqrt_; legacy_compat false) -> :117-134 (_calculate_sqrt_internal_; RECIPROCAL false, FAST_APPROX false) " +
			"with _calculate_sqrt_body_ :22-115: per iteration 3 (load, store, incrwc) + SQRT_23-bits common part 16 (as rsqrt) + square-root tail 11 " +
			"(0.5*xy as load and mul 2, v_if bits(x) < inf (mov, iadd, push) 3, mad 1, pop 1, v_if x < 0 (push, setcc, load NaN, pop) 4) = 30",
		Eval: func(x, _ float32) float32 { return float32(math.Sqrt(float64(x))) }},
	{Op: Recip, Name: "recip", Call: "recip_tile", Init: "recip_tile_init", Header: eltwiseUnary + "recip.h",
		Decl:   "// recip.h:19,37: legacy_compat defaults to true\ntemplate <bool legacy_compat = true>\nvoid recip_tile_init();\ntemplate <bool legacy_compat = true>\nvoid recip_tile(uint32_t idst, int vector_mode = (int)VectorMode::RC);",
		Cycles: tileCycles(0, ldst+2+3+3+2*4+2+2+5+1+4),
		CyclesSource: "sfpu/ckernel_sfpu_rsqrt_compat.h:137-160 (_calculate_reciprocal_compat_; legacy_compat true) with _reciprocal_compat_<3> :60-98: per iteration " +
			"3 (load, store, incrwc) + setsgn and setexp 2 + loads of 1.442695 and 2.0 3 + first estimate (mad, NOP, mul) 3 + two Newton steps (NOP, mad, NOP, mul) 8 + " +
			"two exexp 2 + two iadd 2 + v_if new_exp < 0 (push, setcc, two loads, pop) 5 + setexp 1 + v_if in < 0 (push, setcc, negate, pop) 4 = 33",
		Eval: func(x, _ float32) float32 { return numerics.Recip(x) }},
	{Op: Square, Name: "square", Call: "square_tile", Init: "square_tile_init", Header: "compute_kernel_api.h",
		Decl:         "void square_tile_init();\nvoid square_tile(uint32_t idst);",
		Cycles:       tileCycles(0, ldst+2),
		CyclesSource: "sfpu/ckernel_sfpu_square.h:14-28 (_calculate_square_): per iteration SFPLOAD, SFPMUL, its NOP (the SFPSTORE reads it), SFPSTORE, INCRWC = 5",
		Eval:         func(x, _ float32) float32 { return x * x }},
	{Op: Negative, Name: "negative", Call: "negative_tile", Init: "negative_tile_init", Header: eltwiseUnary + "negative.h",
		Decl:         "void negative_tile_init();\nvoid negative_tile(uint32_t idst);",
		Cycles:       tileCycles(0, ldst+1),
		CyclesSource: "sfpu/ckernel_sfpu_negative.h:14-24 (_calculate_negative_): per iteration SFPLOAD, SFPMOV (negate), SFPSTORE, INCRWC = 4",
		Eval:         func(x, _ float32) float32 { return -x }},
	{Op: Abs, Name: "abs", Call: "abs_tile", Init: "abs_tile_init", Header: "compute_kernel_api.h",
		Decl:         "void abs_tile_init();\nvoid abs_tile(uint32_t idst);",
		Cycles:       tileCycles(0, ldst+1),
		CyclesSource: "llk_sfpu/ckernel_sfpu_abs.h:15-23 (calculate_abs): per iteration SFPLOAD, SFPABS, SFPSTORE, INCRWC = 4",
		Eval:         func(x, _ float32) float32 { return float32(math.Abs(float64(x))) }},
	{Op: Relu, Name: "relu", Call: "relu_tile", Init: "relu_tile_init", Header: eltwiseUnary + "relu.h",
		Decl:   "void relu_tile_init();\nvoid relu_tile(uint32_t idst);",
		Cycles: tileCycles(1, ldst+5),
		CyclesSource: "sfpu/ckernel_sfpu_relu.h:119-146 (_relu_min_<vFloat>, threshold 0) and :103-116: per face the threshold's SFPLOADI 1; per iteration " +
			"3 (load, store under the mask, incrwc) + v_if a < threshold, a vector compare (push, sub, NOP, setcc, pop) 5 = 8",
		Eval: func(x, _ float32) float32 { return max(x, 0) }},
	{Op: Softplus, Name: "softplus", Call: "softplus_tile", Init: "softplus_tile_init", Header: eltwiseUnary + "softplus.h",
		Decl: "// softplus.h:32,39: beta, 1/beta and threshold as float bits (its approximation is math_approx_mode's, off)\n" +
			"void softplus_tile_init();\nvoid softplus_tile(uint32_t idst, uint32_t beta, uint32_t beta_reciprocal, uint32_t threshold);",
		Consts: []Const{{"beta", softplusBeta}, {"beta_reciprocal", 1 / softplusBeta}, {"threshold", softplusThreshold}},
		Cycles: tileCycles(0, ldst+3+6+(1+5+exp21f+1+6+26+2)+4+1),
		CyclesSource: "llk_sfpu/ckernel_sfpu_softplus.h:106-115 (calculate_softplus) with calculate_softplus_body :99-104 and softplus<false> :73-97: per iteration " +
			"3 (load, store, incrwc) + beta * x (2 loads of the runtime float, mul) 3 + v_if x < threshold (push, 2 loads, sub, NOP, setcc) 6 + softplus 68 " +
			"(result = x 1, v_if x < -5 (push, load, sub, NOP, setcc) 5, _sfpu_exp_21f_<false> ckernel_sfpu_exp.h:50-103 27 (cycles.go exp21f), move 1, " +
			"v_elseif x < 4 (compc, push, load, sub, NOP, setcc) 6, degree-8 Horner (2+2+1 + 7 x (2+1)) 26, 2 pops) + beta_reciprocal * (2 loads, mul, NOP) 4 + pop 1 = 85",
		Eval: func(x, _ float32) float32 { return numerics.Softplus(x, softplusBeta, softplusThreshold) }},
	{Op: AddScalar, Name: "add_scalar", Call: "add_unary_tile", Init: "binop_with_scalar_tile_init", Header: eltwiseUnary + "binop_with_scalar.h",
		Decl:  "// binop_with_scalar.h:28,36,89 (param1: fp32 bits)\nvoid binop_with_scalar_tile_init();\nvoid add_unary_tile(uint32_t idst, uint32_t param1);",
		Param: true, Cycles: tileCycles(2, ldst+2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_binop_with_unary.h:24-48 (calculate_binop_with_scalar, ADD): per face the scalar's two SFPLOADI 2; per iteration " +
			"SFPLOAD, SFPADD, its NOP, SFPSTORE, INCRWC = 5",
		Eval: func(x, p float32) float32 { return x + p }},
	{Op: MulScalar, Name: "mul_scalar", Call: "mul_unary_tile", Init: "binop_with_scalar_tile_init", Header: eltwiseUnary + "binop_with_scalar.h",
		Decl:  "void mul_unary_tile(uint32_t idst, uint32_t param1);",
		Param: true, Cycles: tileCycles(2, ldst+2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_binop_with_unary.h:24-48 (calculate_binop_with_scalar, MUL): per face the scalar's two SFPLOADI 2; per iteration " +
			"SFPLOAD, SFPMUL, its NOP, SFPSTORE, INCRWC = 5",
		Eval: func(x, p float32) float32 { return x * p }},
	{Op: AddBinary, Name: "add_binary", Call: "add_binary_tile", Init: "add_binary_tile_init", Header: "compute_kernel_api/eltwise_binary_sfpu.h",
		Decl:   "// eltwise_binary_sfpu.h:34,61: DEST[odst] = DEST[idst0] + DEST[idst1] (fp32 in an fp32 DEST)\nvoid add_binary_tile_init();\nvoid add_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst);",
		Binary: true, Cycles: tileCycles(0, ldst+1+2),
		CyclesSource: "sfpu/ckernel_sfpu_binary.h:100-115 (_calculate_sfpu_binary_, ADD; faces as ../../llk_lib/llk_math_eltwise_binary_sfpu_params.h:11-64): " +
			"per iteration two SFPLOADs, SFPADD, its NOP, SFPSTORE, INCRWC = 6",
		Eval: func(x, y float32) float32 { return x + y }},
	{Op: MulBinary, Name: "mul_binary", Call: "mul_binary_tile", Init: "mul_binary_tile_init", Header: "compute_kernel_api/eltwise_binary_sfpu.h",
		Decl:   "// eltwise_binary_sfpu.h:42,65: DEST[odst] = DEST[idst0] * DEST[idst1] (an fp32 product in an fp32 DEST)\nvoid mul_binary_tile_init();\nvoid mul_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst);",
		Binary: true, Cycles: tileCycles(0, ldst+1+2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_binary.h:45-67 (calculate_sfpu_binary_mul with an fp32 DEST: no software rounding; faces as ../../llk_lib/llk_math_eltwise_binary_sfpu_params.h:11-64): " +
			"per iteration two SFPLOADs, SFPMUL, its NOP, SFPSTORE, INCRWC = 6",
		Eval: func(x, y float32) float32 { return x * y }},
	// sigmoid_bf16 and silu_bf16: sigmoid and silu where the result is
	// rounded to bf16; tcc's programs are bf16.go's cheaper ones, and
	// tt-metal has no such variant (its call is the accurate one's).
	{Op: SigmoidBF16, Name: "sigmoid_bf16", Call: "sigmoid_tile", Init: "sigmoid_tile_init", Header: "compute_kernel_api.h",
		Decl:   "// sigmoid_tile_init and sigmoid_tile: declared by sigmoid",
		Cycles: tileCycles(0, ldst+1+expF32+2+recip2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_sigmoid.h:59-76 (as sigmoid): per iteration 3 (load, store, incrwc) + " +
			"negate 1 + _sfpu_exp_f32_accurate_ (ckernel_sfpu_exp.h:199-299) 63 + 1 + exp (SFPADD and its NOP) 2 + sfpu/ckernel_sfpu_recip.h:18-56 _sfpu_reciprocal_<2> 9 = 78",
		Eval: func(x, _ float32) float32 { return numerics.Sigmoid(x) }},
	{Op: SiLUBF16, Name: "silu_bf16", Call: "silu_tile", Init: "silu_tile_init", Header: "compute_kernel_api.h",
		Decl:   "// silu_tile_init and silu_tile: declared by silu",
		Cycles: tileCycles(0, ldst+1+expF32+2+recip2+2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_silu.h:11-28 (as silu): per iteration 3 (load, store, incrwc) + _sfpu_sigmoid_<true> " +
			"(ckernel_sfpu_sigmoid.h:16-39: negate 1, exp 63, add and NOP 2, reciprocal 9) 75 + x * sigmoid (SFPMUL and its NOP before the store) 2 = 80",
		Eval: func(x, _ float32) float32 { return numerics.SiLU(x) }},
	{Op: ExpSoftmax, Name: "exp_softmax", Call: "exp_tile", Init: "exp_tile_init", Header: eltwiseUnary + "exp.h",
		// tt-metal's call is exp's (declared with it)
		Decl:         "// exp.h: exp_tile_init and exp_tile, as exp's",
		InitTemplate: "false, false", CallTemplate: "false, false",
		Cycles: tileCycles(0, ldst+expF32),
		CyclesSource: "tt-metal's call is exp's (tcc's own program: exp_softmax.go); llk_sfpu/ckernel_sfpu_exp.h:316-338 (calculate_exponential; approx false, fp32 DEST: _sfpu_exp_improved_<true> :311-314): " +
			"per iteration 3 (load, store, incrwc) + _sfpu_exp_f32_accurate_ :199-299 63 (cycles.go expF32) = 66",
		Eval: func(x, _ float32) float32 { return numerics.Exp(x) }},
	{Op: MinBinary, Name: "min_binary", Call: "binary_min_tile", Init: "binary_min_tile_init", Header: "compute_kernel_api/binary_max_min.h",
		Decl:   "// binary_max_min.h:108,116: DEST[odst] = min(DEST[idst0], DEST[idst1])\nvoid binary_min_tile_init();\nvoid binary_min_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, int vector_mode = (int)VectorMode::RC);",
		Binary: true, Cycles: tileCycles(0, ldst+1+2),
		CyclesSource: "llk_sfpu/ckernel_sfpu_binary_max_min.h:16-51 (calculate_binary_max_min, IS_MAX_OP false; faces as ../../llk_lib/llk_math_eltwise_binary_sfpu_params.h:11-64): " +
			"per iteration two SFPLOADs, SFPSWAP (vec_min_max, 2), SFPSTORE, INCRWC = 6",
		Eval: func(x, y float32) float32 { return minSignMagnitude(x, y) }},
}

// minSignMagnitude is the smaller of x and y in SFPSWAP's order (sign and
// magnitude: -0 below +0); with a NaN, x.
func minSignMagnitude(x, y float32) float32 {
	if y < x || y == x && math.Signbit(float64(y)) {
		return y
	}
	return x
}
