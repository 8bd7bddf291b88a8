package fromcodegen_test

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/sim/timing"
	"github.com/tcc-dev/tcc/sim/timing/fromcodegen"
)

// TestPredictPersistent: the small config's decode step at 1x2 as one
// persistent program: one launch (one launch gap), every phase timed, a
// phase ending only after the phases it depends on ended on its device
// (the dependency waits), matmul phases starting before their dependencies
// end (their weight readers stream the first blocks while the producers
// run: the waits follow the weight reads, codegen/persist/lazy.go), and a
// step shorter than the per-program build's,
// which pays a fixed cost and a launch gap per program.
func TestPredictPersistent(t *testing.T) {
	b := smallBuild(t, 128)
	tb, err := fromcodegen.BuildAt(b, timing.Step{Pos: 127, Tokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	meta := timing.Meta{Model: "qwen27b", Stage: "fused", Mode: "decode", Batch: 1, MaxSeq: 128}
	prm := timing.Default()
	per, err := timing.Predict(tb, prm, meta)
	if err != nil {
		t.Fatal(err)
	}
	prog, plan, err := persist.Build(b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := timing.PredictPersistent(tb, prog, prm, meta)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Persistent || rep.Phases != len(b.Programs) || len(rep.Programs) != rep.Devices*len(b.Programs) {
		t.Fatalf("report: persistent %v, %d phases, %d rows; want true, %d, %d", rep.Persistent, rep.Phases, len(rep.Programs), len(b.Programs), rep.Devices*len(b.Programs))
	}
	if rep.LaunchUSTotal != prm.LaunchGapUS {
		t.Errorf("launch gaps %.3f us, want one (%.3f us)", rep.LaunchUSTotal, prm.LaunchGapUS)
	}
	if rep.StepUS >= per.StepUS {
		t.Errorf("persistent step %.1f us, per-program step %.1f us: want the persistent one shorter", rep.StepUS, per.StepUS)
	}
	const eps = 0.002 // the rows' rounding
	early := 0        // matmul phases started before a dependency ended
	for d := 0; d < rep.Devices; d++ {
		rows := rep.Programs[d*len(b.Programs) : (d+1)*len(b.Programs)]
		for p, ph := range plan.Phases {
			end := rows[p].StartUS + rows[p].US
			if end > rep.DeviceStepUS[d]+eps {
				t.Errorf("device %d: phase %d ends at %.3f us, after the step (%.3f us)", d, p, end, rep.DeviceStepUS[d])
			}
			for _, q := range ph.Deps {
				qEnd := rows[q].StartUS + rows[q].US
				if end < qEnd-eps {
					t.Errorf("device %d: phase %d (%s) ends at %.3f us, before phase %d it depends on ends (%.3f us)", d, p, ph.Op, end, q, qEnd)
				}
				if strings.Contains(ph.Op, "matmul") && rows[p].StartUS < qEnd-eps {
					early++
				}
			}
		}
	}
	if early == 0 {
		t.Error("no matmul phase starts before a phase it depends on ends: no weights are read ahead")
	}
}
