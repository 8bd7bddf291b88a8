package kir

import "github.com/tcc-dev/tcc/ir/sfpu"

// SFPUOp is a unary operation the SFPU applies to a tile in DEST: an index
// into SFPUTable, which is ir/sfpu's Table, the one place an SFPU op is
// declared (its semantics and its tt-metal call; it lives below codegen so
// that the reference evaluator reads the semantics without codegen).
type SFPUOp = sfpu.Op

// The SFPU ops the lowerings name.
const (
	SFPUExp       = sfpu.Exp
	SFPULog       = sfpu.Log
	SFPUSigmoid   = sfpu.Sigmoid
	SFPUSiLU      = sfpu.SiLU
	SFPURsqrt     = sfpu.Rsqrt
	SFPUSqrt      = sfpu.Sqrt
	SFPURecip     = sfpu.Recip
	SFPUSquare    = sfpu.Square
	SFPUNegative  = sfpu.Negative
	SFPUAbs       = sfpu.Abs
	SFPURelu      = sfpu.Relu
	SFPUSoftplus  = sfpu.Softplus
	SFPUAddScalar = sfpu.AddScalar
	SFPUMulScalar = sfpu.MulScalar
	SFPUAddBinary = sfpu.AddBinary
	SFPUMulBinary = sfpu.MulBinary
	// SFPUSigmoidBF16 and SFPUSiLUBF16: sigmoid and silu where the result
	// is rounded to bf16 (sfpu.Op.ForBF16Result).
	SFPUSigmoidBF16 = sfpu.SigmoidBF16
	SFPUSiLUBF16    = sfpu.SiLUBF16
	SFPUExpSoftmax  = sfpu.ExpSoftmax
	SFPUMinBinary   = sfpu.MinBinary
)

// SFPUTable is ir/sfpu's Table, indexed by SFPUOp.
var SFPUTable = &sfpu.Table

// SFPUOps lists every SFPUOp in table order.
var SFPUOps = sfpu.Ops

// SFPUByName is the op of kernel-IR name n.
func SFPUByName(n string) (SFPUOp, bool) { return sfpu.ByName(n) }

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

// SFPUDecls is the syntax check's declarations of every op, in table order
// (each declaration once).
func SFPUDecls() string {
	out := "\n// SFPU ops (ir/sfpu Table)\n"
	for _, s := range SFPUTable {
		out += "// " + s.Header + "\n" + s.Decl + "\n"
	}
	return out
}
