package codegen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// ProgramEntry is one program on one device in programs.json.
type ProgramEntry struct {
	Device int    `json:"device"`
	Index  int    `json:"index"` // position in the device's execution order
	Op     string `json:"op"`
	Layer  int    `json:"layer"` // decoder layer, -1 outside layers
	Region string `json:"region"`
	*hostcfg.ProgramConfig
}

// ProgramsFile is the content of programs.json: the build's host contract
// (Manifest: schema and tcc version, target, buffers, I/O, state, weights,
// ethernet links, mesh programs) and every program per device.
type ProgramsFile struct {
	Model   string `json:"model"`
	Mesh    string `json:"mesh"`
	Devices int    `json:"devices"`
	Kernels int    `json:"kernels"` // distinct kernel sources in kernels/
	*Manifest
	Programs []ProgramEntry `json:"programs"`
}

// render prints every kernel and host config once: configs[i] is program
// i's config with each kernel's Source set to "kernels/<role>_<hash>.cpp",
// and kernels maps those names to the sources (kernels that print
// identically share one file).
func (b *Build) render() (configs []*hostcfg.ProgramConfig, kernels map[string][]byte, err error) {
	kernels = map[string][]byte{}
	for _, p := range b.Programs {
		cfg, err := hostcfg.Config(p.Kernel, b.Target)
		if err != nil {
			return nil, nil, fmt.Errorf("codegen: program %s (%s): %w", p.Kernel.Name, p.Op.Where(), err)
		}
		for _, k := range p.Kernel.Kernels {
			src, err := cpp.PrintKernel(p.Kernel, k)
			if err != nil {
				return nil, nil, fmt.Errorf("codegen: program %s kernel %s (%s): %w", p.Kernel.Name, k.Name, p.Op.Where(), err)
			}
			sum := sha256.Sum256(src)
			name := fmt.Sprintf("kernels/%s_%s.cpp", k.Role, hex.EncodeToString(sum[:6]))
			kernels[name] = src
			cfg.Kernel(k.Name).Source = name
		}
		configs = append(configs, cfg)
	}
	return configs, kernels, nil
}

// Configs returns the host config of every program in execution order,
// kernel sources named as in Files.
func (b *Build) Configs() ([]*hostcfg.ProgramConfig, error) {
	cfgs, _, err := b.render()
	return cfgs, err
}

// Files renders the build as files relative to a build directory:
// kernels/<role>_<hash>.cpp (one file per distinct kernel source) and
// programs.json (one entry per program per device, in execution order,
// each kernel's "source" pointing into kernels/). The result is
// deterministic: the same build gives byte-identical files.
func (b *Build) Files() (map[string][]byte, error) { return b.FilesWith(nil) }

// FilesWith is Files with the model's HostInfo for the manifest (nil: the
// manifest without input fills and weight sources).
func (b *Build) FilesWith(info hostcfg.HostInfo) (map[string][]byte, error) {
	cfgs, files, err := b.render()
	if err != nil {
		return nil, err
	}
	man, err := b.Manifest(info)
	if err != nil {
		return nil, err
	}
	nk := len(files)
	devices := b.Graph.Mesh.Devices()
	var entries []ProgramEntry
	for d := 0; d < devices; d++ {
		for i, p := range b.Programs {
			entries = append(entries, ProgramEntry{Device: d, Index: i, Op: p.Op.Name(), Layer: p.Op.Region.Index, Region: string(p.Op.Region.Kind), ProgramConfig: cfgs[i]})
		}
	}
	pf := ProgramsFile{Model: b.Graph.Name, Mesh: b.Graph.Mesh.String(), Devices: devices, Kernels: nk, Manifest: man, Programs: entries}
	js, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return nil, err
	}
	files["programs.json"] = append(js, '\n')
	return files, nil
}
