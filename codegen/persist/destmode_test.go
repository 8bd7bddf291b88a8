package persist_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
)

// smallBuild compiles the qwen27b small config's decode step on mesh.
func smallBuild(t *testing.T, mesh ir.Mesh) *codegen.Build {
	t.Helper()
	args, err := models.DefaultArgs(qwen27b.Model{}, map[string]string{"config": "../../models/qwen27b/testdata/small.json"})
	require.NoError(t, err)
	g, err := qwen27b.Model{}.Build(args, mesh)
	require.NoError(t, err)
	_, err = passes.Run(g, passes.Options{})
	require.NoError(t, err)
	b, err := codegen.Compile(g, target.Blackhole())
	require.NoError(t, err)
	return b
}

// TestDestModesUnified: at 1x2 the ring all-reduce's adders (16-bit DEST)
// share cores with fp32-DEST phases; in the persistent program every
// merged compute kernel's phases run with one DEST mode (the adders'
// with fp32 DEST, listed in the plan), the per-program build keeps its
// own, and the merged compute configurations are accepted.
func TestDestModesUnified(t *testing.T) {
	b := smallBuild(t, ir.Mesh{Rows: 1, Cols: 2})
	var before []bool
	for _, bp := range b.Programs {
		for _, k := range bp.Kernel.Kernels {
			before = append(before, k.Compute.FP32DestAccEn)
		}
	}
	for _, build := range []struct {
		name string
		f    func(*codegen.Build) (*kir.Program, *persist.Plan, error)
	}{{"BuildWithoutEarlyBegins", persist.BuildWithoutEarlyBegins}} { // Build takes the same path (build)
		t.Run(build.name, func(t *testing.T) {
			p, plan, err := build.f(b)
			require.NoError(t, err)
			if len(plan.FP32Dest) == 0 {
				t.Errorf("no phase kernel was promoted to fp32 DEST")
			}
			for _, pr := range plan.FP32Dest {
				ph := p.Persist.Phases[pr.Phase]
				if pr.Kernel != "compute" || !strings.HasPrefix(ph.Name, "all_reduce_add") {
					t.Errorf("phase %d (%s) kernel %q promoted to fp32 DEST; want only the ring adders' compute", pr.Phase, ph.Name, pr.Kernel)
				}
			}
			for _, k := range p.Kernels {
				if k.Processor != kir.ComputeProc {
					continue
				}
				c0 := kir.CoresOf(k.Cores)[0]
				modes := map[bool][]string{}
				for i := range p.Persist.Phases {
					ph := &p.Persist.Phases[i]
					if pk := ph.KernelOn(c0, kir.ComputeProc); pk != nil && kir.InRanges(k.Cores, c0) {
						modes[pk.Compute.FP32DestAccEn] = append(modes[pk.Compute.FP32DestAccEn], ph.Name)
					}
				}
				if len(modes) > 1 {
					t.Errorf("%s: phases with fp32 DEST %v and without %v", k.Name, modes[true], modes[false])
				}
			}
			if err := persist.MergeComputeConfigs(p); err != nil {
				t.Errorf("MergeComputeConfigs: %.300v", err)
			}
		})
	}
	var after []bool
	for _, bp := range b.Programs {
		for _, k := range bp.Kernel.Kernels {
			after = append(after, k.Compute.FP32DestAccEn)
		}
	}
	require.Equal(t, before, after, "the per-program build's compute configurations changed")
}
