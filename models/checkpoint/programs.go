package checkpoint

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// Programs returns the weight contract of a compiled build as
// programs.json states it (model, mesh, devices and the manifest with
// every buffer and weight source); info is the model's HostInfo.
func Programs(model string, b *codegen.Build, info hostcfg.HostInfo) (*codegen.ProgramsFile, error) {
	if info == nil {
		return nil, fmt.Errorf("checkpoint: model %s does not describe its checkpoint tensors (no HostInfo)", model)
	}
	man, err := b.Manifest(info)
	if err != nil {
		return nil, err
	}
	g := b.Graph
	return &codegen.ProgramsFile{Model: model, Mesh: g.Mesh.String(), Devices: g.Mesh.Devices(), Manifest: man}, nil
}
