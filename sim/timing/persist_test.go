package timing_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	model "github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/sim/timing"
	"github.com/tcc-dev/tcc/sim/timing/fromcodegen"
)

// TestEarlyBeginQwenLayers: the first four decoder layers of the full-size
// 27B (three GDN layers, one attention layer, then the norm, lm_head and
// argmax) at 1x2, B=1, as one persistent program: with the early begins
// (codegen/persist/early.go: the matmuls' weight readers begin while the
// GDN recurrence and the norms still run on their cores) the predicted
// step is shorter than the same program's without them, and the GDN
// layer (in-projection end to the next one's) takes at least 5 us less.
func TestEarlyBeginQwenLayers(t *testing.T) {
	longtest.Skip(t, "four full-size qwen27b layers as a persistent program, predicted twice (~10 CPU-s)")
	o := model.DefaultOptions()
	o.Config.NumHiddenLayers = 4
	o.Config.Layers = o.Config.Layers[:4]
	g, _, err := model.BuildGraph(o, ir.Mesh{Rows: 1, Cols: 2})
	require.NoError(t, err)
	_, err = passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	tb, err := fromcodegen.BuildAt(b, timing.Step{Pos: 127, Tokens: 1})
	require.NoError(t, err)
	meta := timing.Meta{Model: "qwen27b", Stage: "fused", Mode: "decode", Batch: 1, MaxSeq: 128}
	prog, _, err := persist.Build(b)
	require.NoError(t, err)
	require.NotEmpty(t, prog.Persist.Early)
	with, err := timing.PredictPersistent(tb, prog, timing.Default(), meta)
	require.NoError(t, err)
	ps := *prog.Persist
	ps.Early = nil
	late := *prog
	late.Persist = &ps
	without, err := timing.PredictPersistent(tb, &late, timing.Default(), meta)
	require.NoError(t, err)
	// Phases 10 and 18 are the second and third GDN layers' in-projections.
	period := func(r *timing.Report) float64 {
		end := func(i int) float64 { return r.Programs[i].StartUS + r.Programs[i].US }
		require.Contains(t, r.Programs[10].Op, "matmul")
		require.Contains(t, r.Programs[18].Op, "matmul")
		return end(18) - end(10)
	}
	pw, pwo := period(with), period(without)
	t.Logf("step %.1f us with early begins, %.1f us without; GDN layer %.1f us, %.1f us", with.StepUS, without.StepUS, pw, pwo)
	if with.StepUS >= without.StepUS {
		t.Errorf("step %.1f us with early begins, %.1f us without: want shorter", with.StepUS, without.StepUS)
	}
	if pw > pwo-5 {
		t.Errorf("GDN layer %.1f us with early begins, %.1f us without: want at least 5 us less", pw, pwo)
	}
}
