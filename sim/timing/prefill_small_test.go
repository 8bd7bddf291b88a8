package timing

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// predictOp lowers the last op of the one-device graph build makes and
// predicts it.
func predictOp(t *testing.T, build func(b *ir.Builder) *ir.Value) float64 {
	t.Helper()
	tgt := target.Blackhole()
	b := ir.NewBuilder("op")
	b.Output(build(b))
	g, err := b.Finish()
	require.NoError(t, err)
	ops := g.Ops()
	p, err := lower.Lower(ops[len(ops)-1], lower.NewContext(tgt))
	require.NoError(t, err)
	pt, err := Simulate(p, tgt, Default(), Options{})
	require.NoError(t, err)
	return pt.US()
}

// TestPrefillSmallPrograms holds the predictions of GDN prefill programs
// at 4,096 tokens (one card's 24 heads, chunks of 32 tokens) under bounds
// their data allows. tril of the chunks' decay matrices was a row-run
// relayout moving one element per run: 336.2 us predicted for 12.6 MB,
// now a page copy that zeroes the upper triangle in L1. The conv
// state's concat before the tokens moved a face row per run (816.1 us),
// now whole tiles shifted by local copies.
func TestPrefillSmallPrograms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *ir.Builder) *ir.Value
		maxUS float64
	}{
		{"tril [1,24,128,32,32] fp32", func(b *ir.Builder) *ir.Value {
			return b.Tril(b.Input("x", ir.T(ir.FP32, 1, 24, 128, 32, 32)), 0)
		}, 120},
		{"concat [1,3,5120] ++ [1,4096,5120] bf16", func(b *ir.Builder) *ir.Value {
			return b.Concat(b.Input("state", ir.T(ir.BF16, 1, 3, 5120)), b.Input("x", ir.T(ir.BF16, 1, 4096, 5120)), 1)
		}, 450},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := predictOp(t, tc.build)
			t.Logf("%s: %.1f us predicted", tc.name, us)
			if us > tc.maxUS {
				t.Errorf("predicted %.1f us, want at most %.0f", us, tc.maxUS)
			}
		})
	}
}
