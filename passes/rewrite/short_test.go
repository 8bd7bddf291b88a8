package rewrite

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/ir"
)

func TestDescribe(t *testing.T) {
	p := Op(ir.OpAdd, Var("r"), OneOf(Op(ir.OpMatmul, Var("a"), Var("w")).As("mm"), Op(ir.OpExp, Any())))
	assert.Equal(t, "add(r, matmul(a, w) | exp(_))", Describe(p))
	r := &Rule{Name: "R", After: "matmul_add(a, w, r)", Pattern: p, Build: Emit(ir.OpSub, nil, "r", "r")}
	assert.Equal(t, "add(r, matmul(a, w) | exp(_)) => matmul_add(a, w, r)", r.Summary())
	require.NoError(t, r.Validate())
	r.After = ""
	assert.ErrorContains(t, r.Validate(), "or set After")
}

// The short form: Emit builds the replacement from bound variables, and the
// replacement keeps the split of the value it replaces unless the rule says
// NewDist.
func TestEmitKeepsDist(t *testing.T) {
	for _, newDist := range []bool{false, true} {
		var x, y *ir.Value
		g := build(t, func(b *ir.Builder) {
			x = b.Input("x", ir.T(ir.FP32, 4, 8))
			y = b.Exp(b.Exp(x))
			y.Type.Dist = ir.Dist{Axis: 1} // as a sharding pass would have set it
			b.Output(y)
		})
		r := &Rule{Name: "ExpExpToSquare", After: "square(x)", NewDist: newDist,
			Pattern: Op(ir.OpExp, Op(ir.OpExp, Var("x"))), Build: Emit(ir.OpSquare, nil, "x")}
		_, err := mustEngine(t, r).Run(g)
		require.NoError(t, err)
		out := g.Outputs[0]
		require.Equal(t, ir.OpSquare, out.Def.Kind, "the rule fired")
		want := ir.Dist{Axis: 1}
		if newDist {
			want = ir.Replicated // what the shape rule gives an unsplit input
		}
		assert.Equal(t, want, out.Type.Dist, "NewDist=%v", newDist)
	}
}

func TestAttrsOf(t *testing.T) {
	g := build(t, func(b *ir.Builder) {
		x := b.Input("x", ir.T(ir.FP32, 4, 8))
		b.Output(b.Exp(b.AddScalar(x, 2.5)))
	})
	r := &Rule{Name: "AddExp", After: "mul_scalar(x) {value}",
		Pattern: Op(ir.OpExp, Op(ir.OpAddScalar, Var("x")).As("add")),
		Build:   Emit(ir.OpMulScalar, AttrsOf("add", "value"), "x")}
	_, err := mustEngine(t, r).Run(g)
	require.NoError(t, err)
	out := g.Outputs[0].Def
	require.Equal(t, ir.OpMulScalar, out.Kind)
	assert.Equal(t, 2.5, out.Float("value"))
}
