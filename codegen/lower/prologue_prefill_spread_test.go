package lower_test

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/sim/timing"
)

// TestProloguePrefillSpreadsKV: the 27B prefill prologue of 256 tokens
// (mesh 1x2 per device: 12 q heads, 2 kv heads of dim 256) spreads each
// kv head's k and v rows over the grid, one cache tile row per item, so
// no core norms a kv head's 8 token tile rows in a row while the others
// wait: the timing model's time stays under 500 us at an unaligned and
// an aligned position (1,119 us when one core took every token tile row
// of a kv head). And the reader builds each gate tile with its address
// math out of the head loop (gatePage): under 190 us (predicted 204.4
// and 198.6 us when every gate row went through the generic gather),
// and a token's Dt gate tiles have their reads and copies in flight
// together (gateTiles): under 130 us (173.6 and 171.8 us with two
// barriers per tile); the q items' cos and sin tiles take tablePage: the
// kernels run under 2.4M kernel-IR statements (2.81M with the generic
// table gather).
func TestProloguePrefillSpreadsKV(t *testing.T) {
	tgt := target.Blackhole()
	for _, pos := range []int{0, 3853} {
		g, _, op := attnPrefillGraph(t, 1, 256, 12, 2, 256, 64, 4096)
		ctx := lower.NewContext(tgt)
		ctx.Alias = attnStateAlias(g) // the caches updated in place, as a step does
		p, err := lower.Lower(op, ctx)
		if err != nil {
			t.Fatal(err)
		}
		readerAtPos(p, pos) // (the reader did not read pos when the caches were updated in place)
		pt, err := timing.Simulate(p, tgt, timing.Default(), timing.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("position %d: %d cores, %.1f us, %d steps", pos, len(p.Cores()), pt.US(), pt.Steps)
		if us := pt.US(); us > 130 {
			t.Errorf("position %d: %.1f us predicted, want under 130", pos, us)
		}
		if pt.Steps > 2_400_000 {
			t.Errorf("position %d: %d kernel-IR statements, want under 2,400,000", pos, pt.Steps)
		}
	}
}
