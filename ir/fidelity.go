package ir

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir/opspec"
)

// FidelityAttr is the attribute every op may carry to set its math
// fidelity (a string: LoFi, HiFi2, HiFi3 or HiFi4).
const FidelityAttr = "fidelity"

// fidelityAttrSpec declares FidelityAttr for the parser.
var fidelityAttrSpec = opspec.Attr{Name: FidelityAttr, Kind: opspec.AttrString}

// Math-fidelity policy: how many multiplier passes an op's FPU products
// use. One function decides it for the lowering (the compute kernels'
// MATH_FIDELITY) and for the reference evaluator (sim/ref), so the two
// always agree.
//
// The policy is the default fidelity (HiFi4) for every op, overridable per
// op by an attribute "fidelity" (LoFi, HiFi2, HiFi3, HiFi4) that a rule
// or a hand-written graph sets. Without the attribute, an op whose only
// fidelity-dependent products are activation x weight (weightMatmuls)
// runs at the cheapest fidelity that gives the default's products for its
// weights' formats (ExactMatmulFidelity): HiFi3 for bfp4_b weights.
//
// Measured, and why a lossy lower fidelity by weight format is not the
// default:
// with LoFi for bfp4_b and HiFi2 for bfp8_b decode matmuls (matmul,
// matmul2/3/4, matmul_add), the 27B decode step at 1x2 is predicted 45.8
// ms instead of 46.1 ms (the matmuls are DRAM-bound), but on the small config (`tcc run qwen27b
// --config models/qwen27b/testdata/small.json --mesh 1x2 --check
// --prefill 8 --steps 16`) the PCC against fp32 math on the stored
// weights falls from >= 0.9997 to 0.9964 at worst, and the same-format
// checks fail (0.996 at decode 13): a product at HiFi2 keeps only the top
// bits of the activation, so the last-bit differences of the ops that are
// not bit-exact upstream (collective sums, the GDN recurrence) become
// whole truncation steps. Single ops at LoFi and HiFi2 match the
// reference bit for bit (codegen/lower TestFidelityOverride).

// Per weight format, the cheapest fidelity whose matmul products equal
// HiFi4's. A matmul feeds its weights (in1) to SrcA, whose multiplier
// slices are the hidden bit + top 4 mantissa bits (phases 0 and 2) and the
// next 5 bits (phases 1 and 3); the activation feeds SrcB (hidden bit +
// top 6 bits in phases 0 and 1, the next 4 in phases 2 and 3). A fidelity
// runs the first 1 (LoFi), 2, 3 or 4 (HiFi4) phases. A weight with at most
// 4 mantissa bits has no low SrcA slice, so phase 3 (A low x B low) adds
// nothing and HiFi3 equals HiFi4; phase 2 (A high x B low) still counts
// for bf16 and fp32 activations, so HiFi2 and LoFi do not.
//
//	format  SrcA mantissa bits          exact at
//	fp32    10 (read as tf32)           HiFi4
//	bf16    7                           HiFi4
//	bfp8_b  at most 6 (7-bit magnitude) HiFi4
//	bfp4_b  at most 2 (3-bit magnitude) HiFi3
//
// Equal means bit for bit in ir/numerics' datapath on random tiles
// (ir/numerics TestExactMatmulFidelity); a phase with no product still aligns DEST to
// its exponent, so a dot product that cancels to below about 2^-12 of its
// largest term can differ (TestExactMatmulFidelityCancellation), where
// both fidelities have already lost that value. srcAHighFractionBits is
// the fraction bits SrcA's high slice holds (after the hidden bit).
const srcAHighFractionBits = 4

// ExactMatmulFidelity is the cheapest math fidelity whose matmul products
// with weights (SrcA) of format w equal HiFi4's (the table above, derived
// from w.FractionBits()): HiFi3 when the weights' fraction bits fit SrcA's
// high slice, else HiFi4 (also for a non-float format).
func ExactMatmulFidelity(w DType) MathFidelity {
	if w.IsFloat() && w.FractionBits() <= srcAHighFractionBits {
		return HiFi3
	}
	return HiFi4
}

// WeightSource is the FPU source register a matmul's weights feed.
type WeightSource int

const (
	// WeightsOnSrcA: the weight is in1 (SrcA), the activation in0 (SrcB):
	// every matmul lowering today (C = X W tile by tile).
	WeightsOnSrcA WeightSource = iota
	// WeightsOnSrcB: the weight is in0 (SrcB), its tiles stored
	// transposed, and the activation in1 (SrcA), transposed on unpack:
	// the product is C^T = W^T X^T, each tile transposed back after.
	WeightsOnSrcB
)

// WeightSourceOf is the source register a matmul feeds weight w to:
// WeightsOnSrcB for a weight stored in transposed tiles
// (TensorType.TilesTransposed), else WeightsOnSrcA.
func WeightSourceOf(w *Value) WeightSource {
	if w.Type.TilesTransposed {
		return WeightsOnSrcB
	}
	return WeightsOnSrcA
}

// srcBHighFractionBits is the fraction bits SrcB's high slice holds (after
// the hidden bit).
const srcBHighFractionBits = 6

// ExactMatmulFidelityOn is the cheapest math fidelity whose matmul
// products with weights of format w on source src equal HiFi4's.
// WeightsOnSrcA is ExactMatmulFidelity. On SrcB a weight whose fraction
// bits fit SrcB's high slice (bfp8_b: 6, bfp4_b: 2) has no low slice, so
// phases 2 and 3 add nothing, and the activation on SrcA (bf16: 4 + 3
// bits; tf32: 4 + 5) is whole in phases 0 and 1: HiFi2. A bf16 or fp32
// weight keeps HiFi4 (its low SrcB bits meet the activation's low SrcA
// bits only in phase 3).
//
//	format  on SrcA  on SrcB
//	fp32    HiFi4    HiFi4
//	bf16    HiFi4    HiFi4
//	bfp8_b  HiFi4    HiFi2
//	bfp4_b  HiFi3    HiFi2
//
// Equal means bit for bit in ir/numerics' datapath with fp32 DEST
// (TestExactMatmulFidelityOnSrcB), with the cancellation limit of
// ExactMatmulFidelity. The two placements do not give each other's
// results bit for bit: the same products fall into different phases,
// whose sums are aligned and added to DEST apart (TestSwappedMatmulAccuracy:
// HiFi2 on SrcB is the more accurate of the two on random tiles).
func ExactMatmulFidelityOn(w DType, src WeightSource) MathFidelity {
	if src != WeightsOnSrcB {
		return ExactMatmulFidelity(w)
	}
	if w.IsFloat() && w.FractionBits() <= srcBHighFractionBits {
		return HiFi2
	}
	return HiFi4
}

// weightMatmuls are the ops whose only fidelity-dependent products are
// operand 0 (the activation, SrcB) times the listed operands (weights,
// SrcA): the matmul family lowered without a norm prologue (a residual add
// does not depend on fidelity; matmul_swiglu's epilogue multiplies its two
// bf16 products on the SFPU, whose fp32 product of bf16 values is exact,
// when its result is bf16: swigluSFPU).
var weightMatmuls = map[OpKind][]int{
	OpMatmul:       {1},
	OpMatmul2:      {1, 2},
	OpMatmul3:      {1, 2, 3},
	OpMatmul4:      {1, 2, 3, 4},
	OpMatmulAdd:    {1},
	OpMatmulSwiGLU: {1, 2},
}

// WeightMatmulOperands reports the weight operands (SrcA) of an op whose
// only fidelity-dependent products are its activation (operand 0) times
// those weights, and whether k is such an op (weightMatmuls).
func WeightMatmulOperands(op *Op) ([]int, bool) {
	ws, ok := weightMatmuls[op.Kind]
	if !ok || len(op.Operands) <= ws[len(ws)-1] || op.Kind == OpMatmulSwiGLU && !swigluSFPU(op) {
		return nil, false
	}
	return ws, true
}

// swigluSFPU reports whether op, a matmul_swiglu, multiplies its gate and
// up products on the SFPU (a bf16 result; else on the FPU, at the op's
// fidelity).
func swigluSFPU(op *Op) bool { return op.Results[0].Type.DType == BF16 }

// OpFidelity is the math fidelity of op's FPU multiplies: its "fidelity"
// attribute when set; else, for an op of weightMatmuls, the cheaper of def
// and the ExactMatmulFidelityOn of its weights' formats and sources
// (WeightSourceOf; the most demanding weight decides), which gives def's
// products; else def. An unparsable
// attribute is an error naming the op.
func OpFidelity(op *Op, def MathFidelity) (MathFidelity, error) {
	s, ok := op.Attrs[FidelityAttr].(string)
	if !ok {
		if ws, ok := WeightMatmulOperands(op); ok {
			exact := LoFi
			for _, i := range ws {
				exact = max(exact, ExactMatmulFidelityOn(op.Operands[i].Type.DType, WeightSourceOf(op.Operands[i])))
			}
			return min(def, exact), nil
		}
		return def, nil
	}
	f, err := ParseMathFidelity(s)
	if err != nil {
		return def, fmt.Errorf("%s: attribute fidelity: %w", op.Where(), err)
	}
	return f, nil
}
