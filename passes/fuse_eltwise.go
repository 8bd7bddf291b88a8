package passes

import (
	"maps"

	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Eltwise family (pass fuse): a chain of unary eltwise ops on one value
// (exp, silu, sigmoid, rsqrt, square, softplus, add_scalar, mul_scalar),
// whose intermediate values nothing else reads, becomes one eltwise_chain
// program: the SFPU applies the steps to each tile in DEST one after the
// other, packing to the storage dtype between steps exactly where the
// composed ops stored (the chain's Doc line), so the values are the
// composed ones. Weight-only chains such as -exp(A_log) = mul_scalar(exp(
// A_log), -1) are chains too.
//
// A rule is anchored at one op kind, so there is one rule per kind of the
// chain's last step (FuseEltwiseChain<Op>: two unary ops, or a unary op
// after a chain) and one that joins a chain after a unary op or another
// chain (FuseEltwiseChainMerge); a chain of n steps takes n-1 firings.
// Chains that start at a reduction's result are left to the norm family
// (see reduced).
//
// FuseNormPlainChain<Op> (MulScalar, Merge): a mul_scalar or a chain of
// unary steps on a weightless norm's result, which nothing else reads,
// runs on the norm's result tiles before they are packed: rms_norm_plain_chain, one program
// (the GDN prefill's l2 norms of q and k times Dk^-1/2, and q's scale: two
// programs fewer per layer, each reading and writing [B,H,S,Dk] fp32).
//
// FuseLayoutNormPlainChain: a weightless norm chain on the values a
// layout_chain moved, which nothing else reads, runs in the chain's
// program: layout_norm_plain_chain, whose reader assembles each tile row
// of the moved values into the norm's CB (the GDN prefill's q and k head
// splits: the fp32 [B,H,S,Dk] split is never written nor read again, one
// program fewer each). FuseNormPlainChain<Op> extends its ops as it does
// rms_norm_plain_chain's.
//
// FuseConvDepthwiseChain<Op> (Silu, Merge): likewise a silu or a chain on
// a depthwise conv's result runs on the conv's summed tiles before they
// are packed: conv_depthwise_chain (the GDN prefill's silu(conv): one
// program fewer per layer, reading and writing [B,S,C] bf16).
//
// FuseConvDepthwiseStateChain: a conv_depthwise_chain over the row concat
// of a K-1-row state and x, which nothing else reads, reads the two
// itself: conv_depthwise_state_chain, whose reader takes the rows before
// x's first from the state (the GDN prefill's conv over conv_state ++
// qkv: one program fewer per layer, the joined [B,K-1+S,C] never written
// nor read; SliceOfConcat moved the state update off the concat).
//
// FuseUnaryMul: a unary SFPU op whose only reader multiplies it by a value
// of its shape (the unary's result first, no broadcast) runs in the
// multiply's program: unary_mul (the GDN prefill's norm gate silu(z) * o:
// one program fewer per layer, the silu's [B,S,Vw] bf16 never written).
//
// FuseNormLayoutGate: a unary_mul whose second operand is a layout_chain
// moving whole tiles (reshapes and transposes only) of an rms_norm's
// result, which nothing else reads, runs as one program: norm_layout_gate,
// which normalises each tile row of x, multiplies it by the gate u(z) at
// the places the chain moves it to and writes only the product (the GDN
// prefill's gated norm silu(z) * norm(o) on the [B,H,S,Dv] to [B,S,H*Dv]
// head merge: two programs fewer per layer, the normed and moved fp32
// values never written nor read).
var _ = registerRules("eltwise", append(eltwiseChainRules(), normPlainChainRule(ir.OpMulScalar), normPlainChainRule(ir.OpEltwiseChain),
	ruleLayoutNormPlainChain, convChainRule(ir.OpSiLU), convChainRule(ir.OpEltwiseChain), ruleConvStateChain, ruleUnaryMul, ruleNormLayoutGate)...)

// ruleLayoutNormPlainChain: rms_norm_plain_chain(layout_chain(x)) => layout_norm_plain_chain(x) {steps, dtype, eps, ops}.
// Every value is in tile layout and the norm has no fidelity override.
func ruleLayoutNormPlainChain() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseLayoutNormPlainChain",
		Rewrite: "rms_norm_plain_chain(layout_chain(x)) => layout_norm_plain_chain(x) {steps and dtype of the layout_chain, eps and ops of the norm}",
		Pattern: rw.Op(ir.OpRMSNormPlainChain, rw.Op(ir.OpLayoutChain, rw.Var("x")).As("layout")),
		Where: func(m *rw.Match) bool {
			for _, v := range []*ir.Value{m.Value("x"), m.Op("layout").Result(), m.Root.Result()} {
				if v.Type.Layout != ir.TileLayout {
					return false
				}
			}
			_, fid := m.Root.Attrs[ir.FidelityAttr]
			return !fid && m.Root.Result().Type.DType.IsFloat()
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			attrs := maps.Clone(m.Op("layout").Attrs)
			attrs["eps"], attrs["ops"] = m.Root.Attrs["eps"], m.Root.Attrs["ops"]
			v, err := b.Emit1(ir.OpLayoutNormPlainChain, []*ir.Value{m.Value("x")}, attrs)
			return []*ir.Value{v}, err
		},
	}
}

// ruleNormLayoutGate: unary_mul(z, layout_chain(rms_norm(x, w))) => norm_layout_gate(x, w, z) {eps, offset, steps, op, value}.
// Every value is in tile layout; the norm keeps x's dtype and the chain
// has no dtype; the chain's steps are reshapes and transposes that move
// whole tiles (ir.ChainMovesTiles); x's last dim is a multiple of 32;
// neither the norm nor the unary_mul has a fidelity override.
func ruleNormLayoutGate() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseNormLayoutGate",
		Rewrite: "unary_mul(z, layout_chain(rms_norm(x, w))) => norm_layout_gate(x, w, z) {eps and offset of the norm, steps of the chain, op and value of the unary_mul}",
		Pattern: rw.Op(ir.OpUnaryMul, rw.Var("z"), rw.Op(ir.OpLayoutChain, rw.Op(ir.OpRMSNorm, rw.Var("x"), rw.Var("w")).As("norm")).As("layout")),
		Where: func(m *rw.Match) bool {
			x, norm, layout := m.Value("x"), m.Op("norm"), m.Op("layout")
			for _, v := range []*ir.Value{x, m.Value("z"), norm.Result(), layout.Result(), m.Root.Result()} {
				if v.Type.Layout != ir.TileLayout {
					return false
				}
			}
			if norm.Result().Type.DType != x.Type.DType || layout.Result().Type.DType != x.Type.DType || !x.Type.DType.IsFloat() {
				return false
			}
			if _, ok := layout.Attrs["dtype"]; ok {
				return false
			}
			_, fid1 := m.Root.Attrs[ir.FidelityAttr]
			_, fid2 := norm.Attrs[ir.FidelityAttr]
			if fid1 || fid2 {
				return false
			}
			xs := x.Type.Shape
			if xs.Rank() < 2 || xs[xs.Rank()-1]%ir.TileSize != 0 {
				return false
			}
			steps, err := ir.ParseLayoutChain(layout.Str("steps"))
			if err != nil {
				return false
			}
			for _, st := range steps {
				if st.Op != ir.OpReshape && st.Op != ir.OpTranspose {
					return false
				}
			}
			types, err := ir.LayoutChainTypes(norm.Result().Type, steps)
			if err != nil {
				return false
			}
			shapes := make([]ir.Shape, len(types))
			for i, t := range types {
				shapes[i] = t.Shape
			}
			return ir.ChainMovesTiles(xs, steps, shapes)
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			attrs := ir.Attrs{"eps": m.Op("norm").Attrs["eps"], "offset": m.Op("norm").Attrs["offset"], "steps": m.Op("layout").Attrs["steps"], "op": m.Root.Attrs["op"]}
			if v, ok := m.Root.Attrs["value"]; ok {
				attrs["value"] = v
			}
			v, err := b.Emit1(ir.OpNormLayoutGate, []*ir.Value{m.Value("x"), m.Value("w"), m.Value("z")}, attrs)
			return []*ir.Value{v}, err
		},
	}
}

// ruleUnaryMul: mul(u(x), y) with u a unary SFPU op => unary_mul(x, y) {op = u, value}.
// u keeps x's dtype (bf16 or fp32) and the product does too; x, y and the
// product have one shape; neither op has a fidelity override.
func ruleUnaryMul() *rw.Rule {
	var alts []*rw.Pattern
	for _, k := range ir.ChainableOps() {
		alts = append(alts, rw.Op(k, rw.Var("x")).As("u"))
	}
	return &rw.Rule{Name: "FuseUnaryMul", After: "unary_mul(x, y) {op = u, value = u's}",
		Pattern: rw.Op(ir.OpMul, rw.OneOf(alts...), rw.Var("y")),
		Where: func(m *rw.Match) bool {
			u, x, y := m.Op("u"), m.Value("x"), m.Value("y")
			if m.Root.Operands[0] != u.Result() || len(u.Results) != 1 || reduced(x) {
				return false // mul is tried both ways round; the FPU's product is not symmetric in its sources
			}
			for _, op := range []*ir.Op{u, m.Root} {
				if _, ok := op.Attrs[ir.FidelityAttr]; ok {
					return false
				}
			}
			dt := x.Type.DType
			return gdnFloatStorage(dt) && y.Type.DType.IsFloat() && sameDType(dt, u, m.Root) &&
				x.Type.Shape.Equal(y.Type.Shape) && x.Type.Shape.Equal(m.Root.Result().Type.Shape)
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			u := m.Op("u")
			attrs := ir.Attrs{"op": u.Kind.String()}
			if v, ok := u.Attrs["value"]; ok {
				attrs["value"] = v
			}
			v, err := b.Emit1(ir.OpUnaryMul, []*ir.Value{m.Value("x"), m.Value("y")}, attrs)
			return []*ir.Value{v}, err
		},
	}
}

// convChainRule returns the constructor of FuseConvDepthwiseChain's rule
// rooted at kind (see the family doc); a conv that already has a chain
// takes the next steps too.
func convChainRule(kind ir.OpKind) func() *rw.Rule {
	name := "FuseConvDepthwiseChain" + goName(kind)
	if kind == ir.OpEltwiseChain {
		name = "FuseConvDepthwiseChainMerge"
	}
	return func() *rw.Rule {
		conv := rw.OneOf(rw.Op(ir.OpConvDepthwise, rw.Var("x"), rw.Var("w")).As("conv"), rw.Op(ir.OpConvDepthwiseChain, rw.Var("x"), rw.Var("w")).As("conv"))
		return &rw.Rule{
			Name:    name,
			Rewrite: kind.String() + "(c(x, w)) with c conv_depthwise or conv_depthwise_chain => conv_depthwise_chain(x, w) {ops = steps of c, then of " + kind.String() + "}",
			Pattern: rw.Op(kind, conv),
			Where: func(m *rw.Match) bool {
				x, conv := m.Value("x"), m.Op("conv")
				if !gdnFloatStorage(x.Type.DType) || !sameDType(x.Type.DType, conv, m.Root) {
					return false
				}
				for _, op := range []*ir.Op{conv, m.Root} {
					if _, ok := op.Attrs[ir.FidelityAttr]; ok {
						return false
					}
				}
				_, ok1 := opChainSteps(conv, ir.OpConvDepthwise)
				_, ok2 := chainStepsOf(m.Root)
				return ok1 && ok2
			},
			Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
				first, _ := opChainSteps(m.Op("conv"), ir.OpConvDepthwise)
				last, _ := chainStepsOf(m.Root)
				steps := append(append([]ir.ChainStep(nil), first...), last...)
				v, err := b.Emit1(ir.OpConvDepthwiseChain, []*ir.Value{m.Value("x"), m.Value("w")}, ir.Attrs{"ops": ir.FormatEltwiseChain(steps)})
				return []*ir.Value{v}, err
			},
		}
	}
}

// convStateMaxTaps is the most taps conv_depthwise_state_chain's lowering
// takes (codegen/lower maxWholeTileTaps: its reader builds the shifted
// tiles from whole tiles).
const convStateMaxTaps = 8

// ruleConvStateChain: conv_depthwise_chain(concat(state, x) {axis rows}, w) => conv_depthwise_state_chain(state, x, w) {ops}.
// One batch, state of K-1 rows (2 <= K <= convStateMaxTaps), every value
// bf16 or fp32 of one dtype in tile layout, no fidelity override, and a
// state whose in-place update (if any) comes after the conv.
func ruleConvStateChain() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseConvDepthwiseStateChain",
		Rewrite: "conv_depthwise_chain(concat(state, x) {axis rows}, w) with state K-1 rows, one batch => conv_depthwise_state_chain(state, x, w) {ops}",
		Pattern: rw.Op(ir.OpConvDepthwiseChain, rw.Op(ir.OpConcat, rw.Var("state"), rw.Var("x")).As("cat"), rw.Var("w")),
		Where: func(m *rw.Match) bool {
			st, x, w, out := m.Value("state"), m.Value("x"), m.Value("w"), m.Root.Result()
			xs, ws := x.Type.Shape, w.Type.Shape
			r := xs.Rank()
			axis := m.Op("cat").Int("axis")
			if axis < 0 {
				axis += r
			}
			if r < 2 || axis != r-2 || ws.Rank() != 2 || ws[0] < 2 || ws[0] > convStateMaxTaps || st.Type.Shape.Rank() != r || st.Type.Shape[r-2] != ws[0]-1 {
				return false
			}
			for d := range r - 2 {
				if xs[d] != 1 {
					return false
				}
			}
			if _, ok := m.Root.Attrs[ir.FidelityAttr]; ok || !gdnFloatStorage(x.Type.DType) || stateWrittenBefore(m.Graph, st, m.Root) {
				return false
			}
			for _, v := range []*ir.Value{st, x, w, out} {
				if v.Type.DType != x.Type.DType || v.Type.Layout != ir.TileLayout {
					return false
				}
			}
			return true
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpConvDepthwiseStateChain, []*ir.Value{m.Value("state"), m.Value("x"), m.Value("w")}, ir.Attrs{"ops": m.Root.Attrs["ops"]})
			return []*ir.Value{v}, err
		},
	}
}

// stateWrittenBefore reports whether v is a persistent state whose new
// contents an op before root computes: updated in place, so root would
// read the new contents, not the old the matched ops read.
func stateWrittenBefore(g *ir.Graph, v *ir.Value, root *ir.Op) bool {
	nv, ok := g.StateUpdates[v]
	if !ok || nv == v || nv.Def == nil {
		return false
	}
	for _, op := range g.Ops() {
		switch op {
		case nv.Def:
			return true
		case root:
			return false
		}
	}
	return false
}

// normPlainChainRule returns the constructor of FuseNormPlainChain's rule
// rooted at kind (see the family doc): a mul_scalar or an eltwise_chain
// (other unary ops after a norm join it once the eltwise rules made them a
// chain). A norm that already has a chain (rms_norm_plain_chain) takes the
// next steps too.
func normPlainChainRule(kind ir.OpKind) func() *rw.Rule {
	name := "FuseNormPlainChain" + goName(kind)
	if kind == ir.OpEltwiseChain {
		name = "FuseNormPlainChainMerge"
	}
	return func() *rw.Rule {
		norm := rw.OneOf(rw.Op(ir.OpRMSNormPlain, rw.Var("x")).As("norm"), rw.Op(ir.OpRMSNormPlainChain, rw.Var("x")).As("norm"),
			rw.Op(ir.OpLayoutNormPlainChain, rw.Var("x")).As("norm"))
		return &rw.Rule{
			Name:    name,
			Rewrite: kind.String() + "(n(x)) with n rms_norm_plain, rms_norm_plain_chain or layout_norm_plain_chain => n's chain kind(x) {n's attributes, ops = steps of n, then of " + kind.String() + "}",
			Pattern: rw.Op(kind, norm),
			Where: func(m *rw.Match) bool {
				norm := m.Op("norm")
				if !norm.Result().Type.DType.IsFloat() || !sameDType(norm.Result().Type.DType, norm, m.Root) {
					return false
				}
				for _, op := range []*ir.Op{norm, m.Root} {
					if _, ok := op.Attrs[ir.FidelityAttr]; ok {
						return false
					}
				}
				_, ok1 := normChainSteps(norm)
				_, ok2 := chainStepsOf(m.Root)
				return ok1 && ok2
			},
			Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
				first, _ := normChainSteps(m.Op("norm"))
				last, _ := chainStepsOf(m.Root)
				steps := append(append([]ir.ChainStep(nil), first...), last...)
				norm := m.Op("norm")
				if norm.Kind == ir.OpLayoutNormPlainChain {
					attrs := maps.Clone(norm.Attrs)
					attrs["ops"] = ir.FormatEltwiseChain(steps)
					v, err := b.Emit1(ir.OpLayoutNormPlainChain, []*ir.Value{m.Value("x")}, attrs)
					return []*ir.Value{v}, err
				}
				v, err := b.Emit1(ir.OpRMSNormPlainChain, []*ir.Value{m.Value("x")}, ir.Attrs{"eps": norm.Float("eps"), "ops": ir.FormatEltwiseChain(steps)})
				return []*ir.Value{v}, err
			},
		}
	}
}

// normChainSteps are the chain steps a weightless norm already applies:
// none for rms_norm_plain, its ops for rms_norm_plain_chain.
func normChainSteps(op *ir.Op) ([]ir.ChainStep, bool) { return opChainSteps(op, ir.OpRMSNormPlain) }

// opChainSteps are the chain steps op applies after its base op: none
// when op is of kind base, else its ops attribute (one step or more).
func opChainSteps(op *ir.Op, base ir.OpKind) ([]ir.ChainStep, bool) {
	if op.Kind == base {
		return nil, true
	}
	s, err := ir.ParseChainSteps(op.Str("ops"))
	return s, err == nil
}

func eltwiseChainRules() []func() *rw.Rule {
	var rules []func() *rw.Rule
	for _, k := range ir.ChainableOps() {
		rules = append(rules, eltwiseChainRule(k))
	}
	return append(rules, eltwiseChainRule(ir.OpEltwiseChain))
}

// chainStepsOf returns the chain steps op stands for: its ops attribute
// for an eltwise_chain, else the single step.
func chainStepsOf(op *ir.Op) ([]ir.ChainStep, bool) {
	if op.Kind == ir.OpEltwiseChain {
		s, err := ir.ParseEltwiseChain(op.Str("ops"))
		return s, err == nil
	}
	st := ir.ChainStep{Op: op.Kind}
	if st.HasScalar() {
		st.Value = op.Float("value")
	}
	return []ir.ChainStep{st}, true
}

// chainInner matches the value a chain step reads when it is itself a
// chain step (any chainable op or an eltwise_chain), named "inner".
func chainInner() *rw.Pattern {
	var alts []*rw.Pattern
	for _, k := range append(ir.ChainableOps(), ir.OpEltwiseChain) {
		alts = append(alts, rw.Op(k, rw.Var("x")).As("inner"))
	}
	return rw.OneOf(alts...)
}

// eltwiseChainRule returns the constructor of the rule rooted at kind.
func eltwiseChainRule(kind ir.OpKind) func() *rw.Rule {
	name := "FuseEltwiseChain" + goName(kind)
	if kind == ir.OpEltwiseChain {
		name = "FuseEltwiseChainMerge"
	}
	return func() *rw.Rule {
		return &rw.Rule{
			Name:    name,
			Rewrite: kind.String() + "(f(x)) with f unary or a chain => eltwise_chain(x) {ops = steps of f, then of " + kind.String() + "}",
			Pattern: rw.Op(kind, chainInner()),
			Where: func(m *rw.Match) bool {
				x := m.Value("x")
				if !x.Type.DType.IsFloat() || !sameDType(x.Type.DType, m.Op("inner"), m.Root) || reduced(x) {
					return false
				}
				_, ok1 := chainStepsOf(m.Op("inner"))
				_, ok2 := chainStepsOf(m.Root)
				return ok1 && ok2
			},
			Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
				first, _ := chainStepsOf(m.Op("inner"))
				last, _ := chainStepsOf(m.Root)
				steps := append(append([]ir.ChainStep(nil), first...), last...)
				v, err := b.Emit1(ir.OpEltwiseChain, []*ir.Value{m.Value("x")}, ir.Attrs{"ops": ir.FormatEltwiseChain(steps)})
				return []*ir.Value{v}, err
			},
		}
	}
}

// reduced reports whether x is a reduction's result (mean, sum). A unary
// chain right after a reduction is that reduction's epilogue — in a
// written-out RMSNorm, rsqrt(add_scalar(mean(x^2), eps)) — which the norm
// family fuses as a whole in the same pass; chaining it first would hide
// the norm from its pattern.
func reduced(x *ir.Value) bool {
	return x.Def != nil && (x.Def.Kind == ir.OpMean || x.Def.Kind == ir.OpSum)
}

// goName is the CamelCase form of an op name (mul_scalar -> MulScalar).
func goName(k ir.OpKind) string {
	var out []byte
	up := true
	for _, c := range []byte(k.String()) {
		switch {
		case c == '_':
			up = true
		case up && c >= 'a' && c <= 'z':
			out = append(out, c-'a'+'A')
			up = false
		default:
			out = append(out, c)
			up = false
		}
	}
	return string(out)
}
