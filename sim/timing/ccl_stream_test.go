package timing

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// predictPrefillAllReduce lowers the two-card all-reduce of qwen27b's
// prefill activation [1, rows, 5120] bf16 (with norm: the fused
// all_reduce_add_rmsnorm the step runs 127 times) and predicts it.
func predictPrefillAllReduce(t *testing.T, rows int, norm bool) (us float64, slots string) {
	t.Helper()
	tgt := target.Blackhole()
	b := ir.NewBuilder("ring")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	xt := ir.T(ir.BF16, 1, rows, 5120)
	x, r := b.Input("x", xt), b.Input("residual", xt)
	b.Region("ccl", 0)
	if norm {
		b.Output(b.AllReduceAddRMSNorm(x, r, b.Weight("w", ir.T(ir.BF16, 5120)), 2, 1e-6, 1)...)
	} else {
		b.Output(b.AllReduce(x, 2))
	}
	g, err := b.Finish()
	require.NoError(t, err)
	ops := g.Ops()
	p, err := lower.Lower(ops[len(ops)-1], lower.NewContext(tgt))
	require.NoError(t, err)
	pt, err := Simulate(p, tgt, Default(), Options{Devices: 2})
	require.NoError(t, err)
	es := p.Kernel("eth_sender")
	require.NotNil(t, es, "the two-card all-reduce has an ethernet sender")
	return pt.US(), es.Defines["CCL_STAGING_SLOTS"]
}

// TestPrefillAllReduceStreams checks that the two-card all-reduce of a
// prefill activation streams: two staging slots, and a prediction near
// the link floor, the card's bytes over its outgoing ring links at the
// fitted link rate. At 256 tokens (2.6 MB a card) the one-slot ring
// (read, send, add, one packet after another) was predicted at 1.78x the
// floor (98.2 us) and 2.47x with the norm (136.0 us). At 4,096 tokens
// (128 tile rows, more than the tail's cores) the norm tail waited for
// the whole ring and then normed its rows: 1,693.8 us, 1.92x the floor;
// with the adders counting each row on its tail core (the row stream of
// codegen/lower) the norm runs under the ring.
func TestPrefillAllReduceStreams(t *testing.T) {
	tgt, prm := target.Blackhole(), Default()
	links := len(tgt.Eth.RingEast)
	for _, tc := range []struct {
		name     string
		rows     int
		norm     bool
		maxRatio float64
	}{
		{"all_reduce", 256, false, 1.4},
		{"all_reduce_add_rmsnorm", 256, true, 1.8},
		{"all_reduce_add_rmsnorm 4096 rows", 4096, true, 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bytes := tc.rows * 5120 * 2
			floor := prm.cyclesToUS(float64(bytes) / float64(links) / prm.EthBytesPerCycle)
			t.Logf("link floor: %d B a card over %d links at %.1f B/cycle: %.1f us (over both directions of the %d cables: %.1f us)",
				bytes, links, prm.EthBytesPerCycle, floor, 2*links, floor/2)
			us, slots := predictPrefillAllReduce(t, tc.rows, tc.norm)
			t.Logf("%s [1,%d,5120] bf16 on 1x2: %.2f us predicted, %.2fx the link floor", tc.name, tc.rows, us, us/floor)
			if slots != "2" {
				t.Errorf("CCL_STAGING_SLOTS = %q, want 2 (a streaming ring)", slots)
			}
			if us > tc.maxRatio*floor {
				t.Errorf("predicted %.2f us, %.2fx the link floor %.2f us: want at most %.1fx", us, us/floor, floor, tc.maxRatio)
			}
		})
	}
}
