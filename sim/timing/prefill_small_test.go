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
// then whole tiles shifted by local copies, each tail tile read for the
// two result tiles it spans (255.6 us), now read once: the reader walks
// down the tile rows and keeps the tiles the unit above read. The prefill attention
// prologue at 1,024 tokens of the 27B model was 1,087.4 us: its gate
// items read 12 qg tiles per gate tile (now kept from token to token of
// a tile row), and its items were split evenly by count, so the cores
// with k items (rows and tables gathered run by run) took three times
// the average (now split by their runs' weight). The GDN conv with its
// silu multiplied and summed its taps one at a time, a DEST section, a
// pack and its inits per product and per sum (722.6 us); its products now
// go into DEST together (codegen/lower convCompute).
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
		}, 200},
		{"conv_depthwise_chain silu [1,4099,5120] taps [4,5120] bf16", func(b *ir.Builder) *ir.Value {
			return b.ConvDepthwiseChain(b.Input("x", ir.T(ir.BF16, 1, 4099, 5120)), b.Weight("w", ir.T(ir.BF16, 4, 5120)), "silu")
		}, 650},
		{"attn_prologue_prefill 1,024 tokens", func(b *ir.Builder) *ir.Value {
			const S, H, Hkv, D, R, L = 1024, 12, 2, 256, 64, 1024
			pos := b.Input("pos", ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated})
			kc, vc := b.State("k_cache", ir.T(ir.BF16, 1, Hkv, L, D)), b.State("v_cache", ir.T(ir.BF16, 1, Hkv, L, D))
			res := b.AttnProloguePrefill(b.Input("qg", ir.T(ir.BF16, 1, S, H*2*D)), b.Input("k", ir.T(ir.BF16, 1, S, Hkv*D)), b.Input("v", ir.T(ir.BF16, 1, S, Hkv*D)),
				b.Weight("q_norm.weight", ir.T(ir.BF16, D)), b.Weight("k_norm.weight", ir.T(ir.BF16, D)),
				b.Input("rope.cos", ir.T(ir.BF16, S, 1, R)), b.Input("rope.sin", ir.T(ir.BF16, S, 1, R)), kc, vc, pos, 1e-6, 1)
			b.UpdateState(kc, res[2])
			b.UpdateState(vc, res[3])
			b.Output(res[1])
			return res[0]
		}, 700},
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
