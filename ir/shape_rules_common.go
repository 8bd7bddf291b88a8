package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape rules of the fused ops produced by the common fusion families
// (passes/fuse_{mlp,matmul,residual,collective,eltwise,layout}.go; op table
// in ir/opspec/fused.go, fusedCommonOps). Each fused op's result types are
// those of the values it replaces: the rules reuse the core and model rules
// (shapeMatmul, shapeNorm, shapeAllReduce, shapeEmbedding) for the pieces
// and add the checks that tie the pieces together (equal shapes and dtypes
// where the decomposition adds or multiplies two values without
// broadcasting).

// sameShapeDType reports operands that a fused eltwise step combines
// without broadcasting: they must agree in shape and dtype.
func sameShapeDType(rule, an, bn string, a, b TensorType) error {
	if !a.Shape.Equal(b.Shape) || a.DType != b.DType {
		return fmt.Errorf("rule %s: %s %s %s and %s %s %s must have one shape and dtype", rule, an, a.Shape, a.DType, bn, b.Shape, b.DType)
	}
	return nil
}

// shapeMatmulMulti: a [.., M, K] and weights w_i [K, N_i] -> one result
// per weight, each typed as matmul(a, w_i) (a's dtype; split on the last
// dim when w_i is split on its columns). With attribute users = B, a must
// be [1, B, K] (2 <= B <= 32) and each result is [B, 1, N_i] instead of
// [1, B, N_i].
func shapeMatmulMulti(in []TensorType, a Attrs) ([]TensorType, error) {
	if len(in) < 3 {
		return nil, fmt.Errorf("rule matmul-multi-arity: want an activation and at least 2 weights, got %d operands", len(in))
	}
	users, err := MatmulUsers(a)
	if err != nil {
		return nil, err
	}
	if s := in[0].Shape; users > 0 && (s.Rank() != 3 || s[0] != 1 || s[1] != users) {
		return nil, fmt.Errorf("rule matmul-users: with users = %d the activation must be the packed rows [1, %d, K], got %s", users, users, s)
	}
	out := make([]TensorType, 0, len(in)-1)
	for i, w := range in[1:] {
		t, err := shapeMatmul([]TensorType{in[0], w}, nil)
		if err != nil {
			return nil, fmt.Errorf("weight %d: %w", i, err)
		}
		if users > 0 {
			t[0].Shape = Shape{users, 1, t[0].Shape[2]}
		}
		out = append(out, t[0])
	}
	return out, nil
}

// MatmulUsers is the users attribute of a sibling matmul (matmul2/3/4): 0
// when absent (the results have the activation's rows), else B in
// 2..32, the users whose packed rows [1, B, K] the activation holds and
// whose per-user rows [B, 1, N] the results hold.
func MatmulUsers(a Attrs) (int, error) {
	v, ok := a["users"]
	if !ok {
		return 0, nil
	}
	n, ok := v.(int)
	if !ok || n < 2 || n > TileSize {
		return 0, fmt.Errorf("rule matmul-users: attribute users must be an int in 2..%d, got %v", TileSize, v)
	}
	return n, nil
}

// shapeMatmulSwiGLU: a [.., M, K], w_gate and w_up [K, N] of one shape and
// split -> [.., M, N] in a's dtype, typed as matmul(a, w_gate).
func shapeMatmulSwiGLU(in []TensorType, _ Attrs) ([]TensorType, error) {
	g, u := in[1], in[2]
	if !g.Shape.Equal(u.Shape) || g.Dist != u.Dist {
		return nil, fmt.Errorf("rule swiglu-weights: w_gate %s %s and w_up %s %s must have one shape and split", g.Shape, g.Dist, u.Shape, u.Dist)
	}
	return shapeMatmul(in[:2], nil)
}

// shapeMatmulAdd: a [.., M, K], w [K, N], residual [.., M, N] -> typed as
// residual (its shape, dtype and split), which must be matmul(a, w)'s
// shape and dtype.
func shapeMatmulAdd(in []TensorType, _ Attrs) ([]TensorType, error) {
	mm, err := shapeMatmul(in[:2], nil)
	if err != nil {
		return nil, err
	}
	if err := sameShapeDType("matmul-add-residual", "matmul(a, w)", "residual", mm[0], in[2]); err != nil {
		return nil, err
	}
	return []TensorType{like(in[2], in[2].Shape.Clone(), in[2].DType)}, nil
}

// shapeRMSNormMatmul: x [.., M, K], norm weight wn with K elements, w [K, N]
// -> typed as matmul(x, w).
func shapeRMSNormMatmul(in []TensorType, _ Attrs) ([]TensorType, error) {
	if _, err := shapeNorm(in[:2], nil); err != nil {
		return nil, err
	}
	return shapeMatmul([]TensorType{in[0], in[2]}, nil)
}

// shapeAddRMSNorm: a and b of one shape and float dtype, w with as many
// elements as their last dim -> (h, normed h), both typed as a.
func shapeAddRMSNorm(in []TensorType, _ Attrs) ([]TensorType, error) {
	if err := sameShapeDType("add-norm-operands", "a", "b", in[0], in[1]); err != nil {
		return nil, err
	}
	n, err := shapeNorm([]TensorType{in[0], in[2]}, nil)
	if err != nil {
		return nil, err
	}
	return []TensorType{n[0], n[0]}, nil
}

// shapeAllReduceAdd: x (the per-device partial) and residual of one shape
// and dtype -> typed as residual, replicated.
func shapeAllReduceAdd(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := shapeAllReduce(in[:1], a); err != nil {
		return nil, err
	}
	if err := sameShapeDType("all-reduce-add-operands", "x", "residual", in[0], in[1]); err != nil {
		return nil, err
	}
	t := like(in[1], in[1].Shape.Clone(), in[1].DType)
	t.Dist = Replicated
	return []TensorType{t}, nil
}

// shapeArgmaxSharded: typed as argmax(all_gather(x, axis -1)): the last
// dim becomes 1, uint32 row-major, replicated.
func shapeArgmaxSharded(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := checkDevices(a); err != nil {
		return nil, err
	}
	out, err := shapeArgmax(in, a)
	if err != nil {
		return nil, err
	}
	out[0].Dist = Replicated
	return out, nil
}

// shapeAllReduceAddRMSNorm: as shapeAllReduceAdd, plus a norm weight over
// the last dim -> (h, normed h), both typed as residual, replicated.
func shapeAllReduceAddRMSNorm(in []TensorType, a Attrs) ([]TensorType, error) {
	h, err := shapeAllReduceAdd(in[:2], a)
	if err != nil {
		return nil, err
	}
	if _, err := shapeNorm([]TensorType{in[1], in[2]}, nil); err != nil {
		return nil, err
	}
	return []TensorType{h[0], h[0]}, nil
}

// shapeEltwiseChain: the ops attribute parses (ParseEltwiseChain); out like x.
func shapeEltwiseChain(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := ParseEltwiseChain(a["ops"].(string)); err != nil {
		return nil, err
	}
	return shapeSame(in, a)
}

// shapeConvDepthwiseChain: ops names one chain step or more
// (ParseChainSteps); the result is conv_depthwise's.
func shapeConvDepthwiseChain(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := ParseChainSteps(a["ops"].(string)); err != nil {
		return nil, err
	}
	return shapeConvDepthwise(in, nil)
}

// shapeConvDepthwiseStateChain: state [.., K-1, C] and x [.., T, C] of
// one dtype and equal leading dims, taps w [K, C], ops one chain step or
// more; the result is conv_depthwise_chain's of their row concat: like x.
func shapeConvDepthwiseStateChain(in []TensorType, a Attrs) ([]TensorType, error) {
	st, x, w := in[0].Shape, in[1].Shape, in[2].Shape
	r := x.Rank()
	if r < 2 || st.Rank() != r || w.Rank() != 2 || w[0] < 1 || st[r-2] != w[0]-1 || in[0].DType != in[1].DType {
		return nil, fmt.Errorf("rule conv-state-shape: want state [.., K-1, C] and x [.., T, C] of one dtype and taps w [K, C], got %s %s, %s %s and %s", st, in[0].DType, x, in[1].DType, w)
	}
	for d := range r {
		if d != r-2 && st[d] != x[d] {
			return nil, fmt.Errorf("rule conv-state-shape: state %s and x %s differ in dim %d", st, x, d)
		}
	}
	joined := in[1]
	joined.Shape = x.Clone()
	joined.Shape[r-2] += st[r-2]
	return shapeConvDepthwiseChain([]TensorType{joined, in[2]}, a)
}

// shapeRMSNormPlainChain: ops names one chain step or more
// (ParseChainSteps); one result of x's type.
func shapeRMSNormPlainChain(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := ParseChainSteps(a["ops"].(string)); err != nil {
		return nil, err
	}
	return shapeSame(in, a)
}

// shapeEmbeddingReshape: typed as reshape(embedding(ids, table), shape).
func shapeEmbeddingReshape(in []TensorType, a Attrs) ([]TensorType, error) {
	e, err := shapeEmbedding(in, nil)
	if err != nil {
		return nil, err
	}
	return shapeReshape(e, a)
}

// ChainStep is one unary op of an eltwise_chain: an op kind from
// ChainableOps and, for add_scalar and mul_scalar, its value.
type ChainStep struct {
	Op    OpKind
	Value float64 // add_scalar / mul_scalar only
}

// chainNames maps the op names an eltwise_chain may hold to their kinds.
// It is spelled out (not derived with OpKind.String) because the shape
// rule uses it and the op table refers to the shape rule.
var chainNames = map[string]OpKind{
	"exp": OpExp, "silu": OpSiLU, "sigmoid": OpSigmoid, "rsqrt": OpRsqrt, "square": OpSquare,
	"softplus": OpSoftplus, "add_scalar": OpAddScalar, "mul_scalar": OpMulScalar,
}

// ChainableOps are the unary eltwise op kinds an eltwise_chain may hold
// (the ops the op table flags SFPU), in OpKind order: float to float in the
// operand's dtype, one element in, one out.
func ChainableOps() []OpKind {
	var ks []OpKind
	for k := OpKind(1); int(k) < len(opInfos); k++ {
		if k.Info().SFPU {
			ks = append(ks, k)
		}
	}
	return ks
}

// HasScalar reports whether the step's op takes a value attribute.
func (s ChainStep) HasScalar() bool { return s.Op == OpAddScalar || s.Op == OpMulScalar }

// String is the step's form in the ops attribute: "exp" or "mul_scalar:-1".
func (s ChainStep) String() string {
	if s.HasScalar() {
		return s.Op.String() + ":" + strconv.FormatFloat(s.Value, 'g', -1, 64)
	}
	return s.Op.String()
}

// FormatEltwiseChain is the ops attribute of an eltwise_chain: the steps'
// String forms joined by commas, first applied first.
func FormatEltwiseChain(steps []ChainStep) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// ParseEltwiseChain parses an eltwise_chain ops attribute: at least two
// comma-separated steps, each a ChainableOps name, add_scalar and
// mul_scalar with ":value". It is the inverse of FormatEltwiseChain.
func ParseEltwiseChain(s string) ([]ChainStep, error) {
	if parts := strings.Split(s, ","); len(parts) < 2 {
		return nil, fmt.Errorf("rule eltwise-chain-length: ops %q names %d step(s); a chain has at least 2", s, len(parts))
	}
	return ParseChainSteps(s)
}

// ParseChainSteps parses the steps of an ops attribute as
// ParseEltwiseChain does, one step or more (rms_norm_plain_chain's ops
// may name one).
func ParseChainSteps(s string) ([]ChainStep, error) {
	const names = "exp, silu, sigmoid, rsqrt, square, softplus, add_scalar, mul_scalar"
	parts := strings.Split(s, ",")
	steps := make([]ChainStep, 0, len(parts))
	for i, p := range parts {
		name, val, hasVal := strings.Cut(p, ":")
		k, ok := chainNames[name]
		if !ok {
			return nil, fmt.Errorf("rule eltwise-chain-op: step %d %q of %q is not one of %s", i, name, s, names)
		}
		st := ChainStep{Op: k}
		if st.HasScalar() != hasVal {
			return nil, fmt.Errorf("rule eltwise-chain-value: step %d %q of %q: add_scalar and mul_scalar take \":value\", the others none", i, p, s)
		}
		if hasVal {
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return nil, fmt.Errorf("rule eltwise-chain-value: step %d %q of %q: %v", i, p, s, err)
			}
			st.Value = v
		}
		steps = append(steps, st)
	}
	return steps, nil
}
