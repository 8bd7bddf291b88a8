// Package gen compiles a registered model for several meshes and renders
// the kernels_gen Go package for it (used by `tcc gen-go` and by the
// freshness tests of kernels_gen/*).
package gen

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/gogen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/srcbtable"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/passes/report"

	// The reference models.
	_ "github.com/tcc-dev/tcc/models/qwen27b"
	_ "github.com/tcc-dev/tcc/models/tinymlp"
)

// Compile builds model at its default parameters (overridden by set) on
// mesh through the default pipeline, stores the model's weights-on-SrcB
// table in transposed tiles (srcbtable, as tcc build does by default) and
// lowers it, returning the build and its op-count report JSON.
func Compile(model string, set map[string]string, mesh ir.Mesh) (*codegen.Build, []byte, error) {
	m, err := models.Lookup(model)
	if err != nil {
		return nil, nil, err
	}
	args, err := models.DefaultArgs(m, set)
	if err != nil {
		return nil, nil, err
	}
	g, err := m.Build(args, mesh)
	if err != nil {
		return nil, nil, err
	}
	res, err := passes.Run(g, passes.Options{})
	if err != nil {
		return nil, nil, err
	}
	names, err := srcbtable.Names(m, args, mesh, passes.Options{})
	if err != nil {
		return nil, nil, err
	}
	if err := srcbtable.Store(g, names, srcbtable.StepName(args)); err != nil {
		return nil, nil, err
	}
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		return nil, nil, err
	}
	rep, err := report.FromPipeline(model, "fused", g, res).JSON()
	return b, rep, err
}

// Source compiles model for every mesh and renders package pkg's source.
func Source(pkg, model string, set map[string]string, meshes []string) ([]byte, error) {
	builds := map[string]gogen.MeshBuild{}
	for _, ms := range meshes {
		mesh, err := ir.ParseMesh(ms)
		if err != nil {
			return nil, err
		}
		b, rep, err := Compile(model, set, mesh)
		if err != nil {
			return nil, fmt.Errorf("%s mesh %s: %w", model, ms, err)
		}
		builds[mesh.String()] = gogen.MeshBuild{Build: b, Report: rep}
	}
	t, err := gogen.Collect(model, builds)
	if err != nil {
		return nil, err
	}
	return gogen.Generate(pkg, t)
}
