package persist_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

// TestEarlyCBsMergedApart: in tiny-mlp's multi-step persistent program
// (whose NCRISCs begin phases early), the merged CB index
// (kir.Persist.CBMap) of every early CB of an early begin is none of the
// merged indices of the CBs of the phase still running on its cores: the
// merged kernels install and fill the early CBs while that phase's
// kernels use their own indices, so a shared index would count the early
// pages on the running phase's CB (on ttsim the writer popped the next
// phase's scaler page as the matmul's output, and the next phase hung).
func TestEarlyCBsMergedApart(t *testing.T) {
	args, err := models.DefaultArgs(tinymlp.Model{}, map[string]string{"device-loop": "true"})
	require.NoError(t, err)
	g, err := tinymlp.Model{}.Build(args, ir.Mesh{Rows: 1, Cols: 1})
	require.NoError(t, err)
	_, err = passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	p, _, err := persist.BuildLoop(b, 2, g.Outputs[1])
	require.NoError(t, err)
	ps := p.Persist
	require.NotEmpty(t, ps.Early, "tiny-mlp's program begins no phase early")
	m, err := ps.CBMap()
	require.NoError(t, err)
	for _, e := range ps.Early {
		for _, c := range e.Cores {
			running := map[int]string{}
			for _, cb := range ps.Phases[e.Prev].CBs {
				if kir.InRanges(cb.Cores, c) {
					running[m[e.Prev][cb.Index]] = cb.Name
				}
			}
			for _, i := range e.CBs {
				if name, ok := running[m[e.Phase][i]]; ok {
					t.Errorf("core %s: phase %d's early CB c_%d has merged index %d, which phase %d's CB %s (still running) has", c, e.Phase, i, m[e.Phase][i], e.Prev, name)
				}
			}
		}
	}
}
