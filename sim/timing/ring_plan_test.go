package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestRingPlannerMatchesTimingModel checks lower.PlanRing's choice of
// adder cores against the timing model: for the decode
// all_reduce_add_rmsnorm of qwen27b on two cards ([1,1,5120] bf16, the
// most frequent collective of the step), the program the planner builds
// must be predicted within 2% of the best of a sweep of forced adder
// counts, and the sweep must show the count matters (else the test
// checks nothing).
func TestRingPlannerMatchesTimingModel(t *testing.T) {
	tgt := target.Blackhole()
	b := ir.NewBuilder("ring")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	xt := ir.T(ir.BF16, 1, 1, 5120)
	x, r := b.Input("x", xt), b.Input("residual", xt)
	b.Region("ccl", 0)
	b.Output(b.AllReduceAddRMSNorm(x, r, b.Weight("w", ir.T(ir.BF16, 5120)), 2, 1e-6, 1)...)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	ops := g.Ops()
	op := ops[len(ops)-1]
	predict := func(opt lower.RingOptions) (float64, *kir.Program) {
		t.Helper()
		ctx := lower.NewContext(tgt)
		ctx.Ring = opt
		p, err := lower.Lower(op, ctx)
		if err != nil {
			t.Fatalf("%+v: %v", opt, err)
		}
		pt, err := Simulate(p, tgt, Default(), Options{Devices: 2})
		if err != nil {
			t.Fatalf("%+v: %v", opt, err)
		}
		return pt.US(), p
	}
	planned, _ := predict(lower.RingOptions{})
	best, worst, bestM := 0.0, 0.0, 0
	for _, m := range []int{4, 8, 16, 24, 32, 36, 40} {
		us, _ := predict(lower.RingOptions{WorkersPerLink: m})
		t.Logf("%2d adders per link: %.2f us", m, us)
		if bestM == 0 || us < best {
			best, bestM = us, m
		}
		worst = max(worst, us)
	}
	t.Logf("planner's choice: %.2f us; best of the sweep %.2f us at %d adders per link", planned, best, bestM)
	if worst < 1.1*best {
		t.Fatalf("the sweep spans %.2f..%.2f us: the adder count hardly matters, so this test checks nothing", best, worst)
	}
	if planned > 1.02*best {
		t.Errorf("the planner's program is predicted at %.2f us, more than 2%% above the sweep's best %.2f us (%d adders per link)", planned, best, bestM)
	}
}
