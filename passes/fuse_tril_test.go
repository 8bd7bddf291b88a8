package passes_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/sim/ref"
)

// TestDropInnerTrilBitExact: DropInnerTril turns the GDN prefill's decays
// tril(exp(tril(d))) into tril(exp(d)) with the same values bit for bit,
// also where exp of a masked element overflows (d up to +200 above the
// diagonal: exp is +Inf there, which the outer tril discards), at storage
// formats and in exact math.
func TestDropInnerTrilBitExact(t *testing.T) {
	build := func() *ir.Graph {
		b := ir.NewBuilder("decay")
		d := b.Input("d", ir.T(ir.FP32, 1, 2, 3, 32, 32))
		b.Region("gdn", 0)
		b.Output(b.Tril(b.Exp(b.Tril(d, 0)), 0))
		g, err := b.Finish()
		require.NoError(t, err)
		return g
	}
	g, orig := build(), build()
	shape := g.Inputs[0].Type.Shape

	var rule *rewrite.Rule
	for _, r := range passes.Rules() {
		if r.Name == "DropInnerTril" {
			rule = r
		}
	}
	require.NotNil(t, rule, "rule DropInnerTril is not registered")
	e, err := rewrite.NewEngine(rule)
	require.NoError(t, err)
	st, err := e.Run(g)
	require.NoError(t, err)
	require.Equal(t, 1, st.Total("DropInnerTril"))
	trils := 0
	for _, op := range g.Ops() {
		if op.Kind == ir.OpTril {
			trils++
		}
	}
	require.Equal(t, 1, trils, "one tril left")

	rng := rand.New(rand.NewPCG(3, 5))
	data := make([]float32, shape.Numel())
	for i := range data {
		r, c := (i/32)%32, i%32
		if c > r {
			data[i] = float32(rng.Float64() * 200) // masked: exp overflows
		} else {
			data[i] = -float32(rng.Float64() * 20)
		}
	}
	for name, opts := range map[string]ref.Options{"storage": ref.DefaultOptions(), "exact": ref.ExactOptions()} {
		t.Run(name, func(t *testing.T) {
			eval := func(g *ir.Graph) []float32 {
				vals, err := ref.Eval(g, map[*ir.Value]ref.Tensor{g.Inputs[0]: {Shape: shape, Data: data}}, opts)
				require.NoError(t, err)
				return vals[g.Outputs[0]].Data
			}
			want, got := eval(orig), eval(g)
			n := 0
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					n++
				}
			}
			if n > 0 {
				t.Errorf("%d of %d elements differ from tril(exp(tril(d)))", n, len(want))
			}
		})
	}
}
