package timing

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestFastForwardMatchesSimulation: positionProgram's loops (a tile read
// per position, 100 spins per position on two cores) grow with the
// position word. With a budget that the simulation at P exceeds, the
// Predictor fast-forwards the program from two full simulations at
// smaller positions of P's residue modulo extrapolatePeriod; the result
// agrees with the full simulation at P within 0.1% (the iterations are
// identical: a steady state; observed error below 0.01%) on every
// device time and kernel finish, and the byte counts exactly. Under the
// budget, or with a negative one, the program is simulated at P.
func TestFastForwardMatchesSimulation(t *testing.T) {
	tg := target.Blackhole()
	p := positionProgram(tg, true)
	prog := Program{Kernel: p}
	sig := Signature(p)
	full := func(pos int) *ProgramTime {
		t.Helper()
		pt, err := Simulate(p, tg, Default(), Options{Contents: map[string][]uint32{"pos": {uint32(pos)}}})
		require.NoError(t, err)
		return pt
	}
	probe := full(2 * extrapolatePeriod).Steps
	for _, pos := range []int{6 * extrapolatePeriod, 9*extrapolatePeriod + 37} {
		t.Run(fmt.Sprint(pos), func(t *testing.T) {
			if pos%extrapolatePeriod == 0 {
				longtest.Skip(t, "a residue-0 position (~1 CPU-s; the other position's residue 37 runs by default)")
			}
			want := full(pos)
			pr := NewPredictor(nil)
			// A budget past the probes but short of pos.
			pr.SetBudget(probe * 2)
			_, got, err := pr.timeProgram(prog, tg, 1, sig, map[string][]uint32{"pos": {uint32(pos)}}, &Step{Pos: pos, Tokens: 1})
			require.NoError(t, err)
			if got.From == nil || pr.Extrapolated() != 1 {
				t.Fatalf("position %d with budget %d: not fast-forwarded (from %v, %d extrapolated)", pos, probe*2, got.From, pr.Extrapolated())
			}
			r := pos % extrapolatePeriod
			for _, q := range got.From {
				if q%extrapolatePeriod != r || q >= pos {
					t.Errorf("simulated at %d: want positions below %d of residue %d", q, pos, r)
				}
			}
			rel := func(a, b float64) float64 { return math.Abs(a-b) / b }
			w, g := want.Devices[0], got.Devices[0]
			t.Logf("position %d from %v: %.3f us fast-forwarded, %.3f us simulated (%.5f%%)", pos, got.From, g.US, w.US, 100*rel(g.US, w.US))
			if rel(g.US, w.US) > 1e-3 {
				t.Errorf("time %.3f us fast-forwarded, %.3f us simulated", g.US, w.US)
			}
			for i, k := range w.Kernels {
				if rel(g.Kernels[i].FinishUS, k.FinishUS) > 1e-3 {
					t.Errorf("kernel %s finishes at %.3f us fast-forwarded, %.3f us simulated", k.Kernel, g.Kernels[i].FinishUS, k.FinishUS)
				}
			}
			type bytes struct{ Read, Written, DRAM int64 }
			if diff := cmp.Diff(bytes{w.BytesRead, w.BytesWritten, w.DRAMRead}, bytes{g.BytesRead, g.BytesWritten, g.DRAMRead}); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
			if est := float64(got.Steps); math.Abs(est-float64(want.Steps)) > 1e-3*float64(want.Steps) {
				t.Errorf("estimated %d instructions, the simulation ran %d", got.Steps, want.Steps)
			}
		})
	}
	for _, budget := range []int64{0, -1} {
		pr := NewPredictor(nil)
		pr.SetBudget(budget)
		pos := 6 * extrapolatePeriod
		_, got, err := pr.timeProgram(prog, tg, 1, sig, map[string][]uint32{"pos": {uint32(pos)}}, &Step{Pos: pos, Tokens: 1})
		require.NoError(t, err)
		if want := full(pos); got.From != nil || got.Devices[0].US != want.Devices[0].US {
			t.Errorf("budget %d: from %v, %.3f us; want the simulation's %.3f us", budget, got.From, got.Devices[0].US, want.Devices[0].US)
		}
	}
}
