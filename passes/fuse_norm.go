package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Norm family: RMSNorm written out by a model becomes one rms_norm op, the
// op a model may also write directly (so the rules downstream of it match
// one kind). rms_norm is not a fused op: the rewrite is checked on the
// whole graph, as rules that emit model ops are. The (1+w) variant is
// tried first so it wins over the plain rule.
var _ = registerRules("norm", ruleRMSNormOffset, ruleRMSNorm)

// rmsNormed matches x * rsqrt(mean(x^2) + eps), the normalised x before the
// weight, with x^2 written as square(x) or mul(x, x). It binds $x and
// names the add_scalar holding eps "eps".
func rmsNormed() *rw.Pattern {
	x := rw.Var("x")
	sq := rw.OneOf(rw.Op(ir.OpSquare, x), rw.Op(ir.OpMul, x, x))
	return rw.Op(ir.OpMul, x, rw.Op(ir.OpRsqrt, rw.Op(ir.OpAddScalar, rw.Op(ir.OpMean, sq)).As("eps")))
}

// rmsNormApplies is the side condition shared by the RMSNorm rules: w is a
// weight with as many elements as x's last dimension, and the product has
// x's shape and dtype (so the weight only broadcasts over rows and does not
// change the result dtype).
func rmsNormApplies(m *rw.Match, w *ir.Value) bool {
	x := m.Value("x")
	if w.Kind != ir.KindWeight || x.Type.Shape.Rank() == 0 {
		return false
	}
	out := m.Root.Result().Type
	return w.Type.Shape.Numel() == x.Type.Shape.Cols2D() && out.Shape.Equal(x.Type.Shape) && out.DType == x.Type.DType
}

func buildRMSNorm(b *rw.Builder, m *rw.Match, offset float64) ([]*ir.Value, error) {
	eps := m.Op("eps").Float("value")
	v, err := b.Emit1(ir.OpRMSNorm, []*ir.Value{m.Value("x"), m.Value("w")}, ir.Attrs{"eps": eps, "offset": offset})
	return []*ir.Value{v}, err
}

func ruleRMSNorm() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseRMSNorm",
		Rewrite: "mul(mul(x, rsqrt(add_scalar(mean(square(x)), eps))), w) => rms_norm(x, w) {eps, offset = 0}",
		Pattern: rw.Op(ir.OpMul, rmsNormed(), rw.Var("w")),
		Where:   func(m *rw.Match) bool { return rmsNormApplies(m, m.Value("w")) },
		Build:   func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) { return buildRMSNorm(b, m, 0) },
	}
}

func ruleRMSNormOffset() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseRMSNormOffset",
		Rewrite: "mul(mul(x, rsqrt(add_scalar(mean(square(x)), eps))), add_scalar(w, 1.0)) => rms_norm(x, w) {eps, offset = 1}",
		Pattern: rw.Op(ir.OpMul, rmsNormed(), rw.Op(ir.OpAddScalar, rw.Var("w")).As("one")),
		Where: func(m *rw.Match) bool {
			return m.Op("one").Float("value") == 1 && rmsNormApplies(m, m.Value("w"))
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) { return buildRMSNorm(b, m, 1) },
	}
}
