package example

import (
	"math"

	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Family names this package's rules in `tcc passes`, reports and
// --disable. Without it the family would be the package name, "example".
const Family = "scalar"

// Rules returns the package's rules in the order they are tried at each op.
// It is the entry point tcc looks for: exactly func Rules() []*rewrite.Rule.
func Rules() []*rw.Rule {
	return []*rw.Rule{FoldMulScalar()}
}

// FoldMulScalar folds two scalar multiplications into one:
// mul_scalar(mul_scalar(x, a), b) becomes mul_scalar(x, a*b), saving one
// device program per firing.
//
// It applies only when a, b and a*b are finite and within float32 range, and
// a*b is not zero unless a or b is: then the folded op overflows or flushes
// to zero exactly when the pair would. The fold rounds once where the pair
// rounds twice; for powers of two the result is bit-identical. The inner
// product must not be read elsewhere (the engine's default), so no work is
// duplicated.
func FoldMulScalar() *rw.Rule {
	return &rw.Rule{
		Name:    "FoldMulScalar",
		Rewrite: "mul_scalar(mul_scalar(x, a), b) => mul_scalar(x, a*b)",
		Pattern: rw.Op(ir.OpMulScalar, rw.Op(ir.OpMulScalar, rw.Var("x")).As("inner")).As("outer"),
		Where: func(m *rw.Match) bool {
			a, b := m.Op("inner").Float("value"), m.Op("outer").Float("value")
			return foldable(a, b)
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			ab := m.Op("inner").Float("value") * m.Op("outer").Float("value")
			v, err := b.Emit1(ir.OpMulScalar, []*ir.Value{m.Value("x")}, ir.Attrs{"value": ab})
			return []*ir.Value{v}, err
		},
	}
}

// foldable reports whether a*b may replace multiplying by a then by b.
func foldable(a, b float64) bool {
	ab := a * b
	for _, v := range []float64{a, b, ab} {
		if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
			return false
		}
	}
	return ab != 0 || a == 0 || b == 0
}
