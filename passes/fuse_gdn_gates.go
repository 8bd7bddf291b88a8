package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// FuseGDNPrefillGates (family gdn, registered in fuse_gdn.go): the GDN
// prefill's gates per token, as models/nn.GDNPrefill writes them with an
// fp32 state dtype,
//
//	g    = mul(softplus(add(typecast(a), typecast(dt_bias))), mul_scalar(exp(typecast(a_log)), -1))
//	beta = typecast(sigmoid(b))
//
// become one gdn_prefill_gates(a, b, a_log, dt_bias) {dtype = fp32}
// program (ten programs before: three typecasts, exp and negation of the
// weight-only A_log and dt_bias every step among them; the program
// computes -exp(A_log) once per core from the bf16 weight tile and holds
// it and dt_bias for all its tiles). Every typecast widens to fp32, which
// is exact, so the program reads the operands as stored and the values
// are the composed chain's bit for bit. The decode gates (no typecasts,
// [B, 1, H] reshaped to [B*H, 1]) are FuseGDNConvGates'.
func ruleGDNPrefillGates() *rw.Rule {
	cast := func(p *rw.Pattern, name string) *rw.Pattern { return rw.Op(ir.OpTypecast, p).As(name) }
	negA := rw.Op(ir.OpMulScalar, rw.Op(ir.OpExp, cast(rw.Var("a_log"), "cast_a_log")).As("exp_a")).As("neg_a")
	dt := rw.Op(ir.OpAdd, cast(rw.Var("a"), "cast_a"), cast(rw.Var("dt_bias"), "cast_dt")).As("dt")
	g := rw.Op(ir.OpMul, rw.Op(ir.OpSoftplus, dt).As("softplus"), negA).As("g")
	beta := cast(rw.Op(ir.OpSigmoid, rw.Var("b")).As("sigmoid"), "beta")
	return &rw.Rule{
		Name:    "FuseGDNPrefillGates",
		Rewrite: "mul(softplus(add(typecast(a), typecast(dt_bias))), mul_scalar(exp(typecast(a_log)), -1)), typecast(sigmoid(b)) => gdn_prefill_gates(a, b, a_log, dt_bias) {dtype = fp32}",
		Pattern: g,
		Extra:   []*rw.Pattern{beta},
		Where:   gdnPrefillGatesApplies,
		Build:   gdnEmit(ir.OpGDNPrefillGates, gdnPrefillGatesOperands, func(*rw.Match) ir.Attrs { return ir.Attrs{"dtype": ir.FP32} }),
	}
}

func gdnPrefillGatesOperands(m *rw.Match) []*ir.Value {
	return []*ir.Value{m.Value("a"), m.Value("b"), m.Value("a_log"), m.Value("dt_bias")}
}

// gdnPrefillGatesApplies is FuseGDNPrefillGates' side condition: a and b
// are [B, S, H] and a_log and dt_bias have H elements, all bf16 or fp32;
// every typecast is to fp32; the sigmoid keeps b's dtype; the mul_scalar
// multiplies by -1; every g intermediate is fp32 of its operand's shape
// (a's, or H for the A_log chain); no op sets a math fidelity; and the
// fused op's types equal the roots'.
func gdnPrefillGatesApplies(m *rw.Match) bool {
	a, b, al, dt := m.Value("a"), m.Value("b"), m.Value("a_log"), m.Value("dt_bias")
	for _, v := range []*ir.Value{a, b, al, dt} {
		if !gdnFloatStorage(v.Type.DType) {
			return false
		}
	}
	s := a.Type.Shape
	if s.Rank() != 3 || !b.Type.Shape.Equal(s) || al.Type.Shape.Numel() != s[2] || dt.Type.Shape.Numel() != s[2] {
		return false
	}
	if m.Op("neg_a").Float("value") != -1 {
		return false
	}
	for _, name := range []string{"cast_a_log", "exp_a", "neg_a", "cast_a", "cast_dt", "dt", "softplus", "g", "sigmoid", "beta"} {
		if _, ok := m.Op(name).Attrs[ir.FidelityAttr]; ok {
			return false
		}
	}
	B, S, H := s[0], s[1], s[2]
	f := ir.FP32
	ok := gdnIs(m, "cast_a", f, B, S, H) && gdnIs(m, "dt", f, B, S, H) && gdnIs(m, "softplus", f, B, S, H) && gdnIs(m, "g", f, B, S, H) &&
		gdnIs(m, "sigmoid", b.Type.DType, B, S, H) && gdnIs(m, "beta", f, B, S, H)
	for _, name := range []string{"cast_a_log", "exp_a", "neg_a"} {
		ok = ok && gdnIs(m, name, f, al.Type.Shape...)
	}
	ok = ok && gdnIs(m, "cast_dt", f, dt.Type.Shape...)
	return ok && gdnInfers(m, ir.OpGDNPrefillGates, gdnPrefillGatesOperands(m), ir.Attrs{"dtype": f})
}
