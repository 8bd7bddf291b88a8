package codegen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir/sfpu"
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
	kernels, err = b.renderEach(func(_ int, cfg *hostcfg.ProgramConfig) error {
		configs = append(configs, cfg)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return configs, kernels, nil
}

// renderEach is render handing each program's config to use (with its
// index in b.Programs) as soon as it is complete, so a caller that only
// encodes the configs never holds them all.
func (b *Build) renderEach(use func(i int, cfg *hostcfg.ProgramConfig) error) (kernels map[string][]byte, err error) {
	kernels = map[string][]byte{}
	// names caches each printed source's file name by where the source
	// lies: Compile's sources are interned (memo), so the kernel every
	// layer repeats is hashed once.
	type srcKey struct {
		first *byte
		n     int
		role  kir.Role
	}
	names := map[srcKey]string{}
	for i, p := range b.Programs {
		cfg, err := hostcfg.ConfigValidated(p.Kernel, b.Target) // lower.Lower validated it
		if err != nil {
			return nil, fmt.Errorf("codegen: program %s (%s): %w", p.Kernel.Name, p.Op.Where(), err)
		}
		for _, k := range p.Kernel.Kernels {
			src, ok := b.printed[k]
			var err error
			if !ok {
				src, err = cpp.PrintKernel(p.Kernel, k)
			}
			if err != nil {
				return nil, fmt.Errorf("codegen: program %s kernel %s (%s): %w", p.Kernel.Name, k.Name, p.Op.Where(), err)
			}
			var key srcKey
			if len(src) > 0 {
				key = srcKey{&src[0], len(src), k.Role}
			}
			name, ok := names[key]
			if !ok || key.first == nil {
				sum := sha256.Sum256(src)
				name = fmt.Sprintf("kernels/%s_%s.cpp", k.Role, hex.EncodeToString(sum[:6]))
				names[key] = name
			}
			kernels[name] = src
			cfg.Kernel(k.Name).Source = name
		}
		if err := use(i, cfg); err != nil {
			return nil, err
		}
	}
	return kernels, nil
}

// Configs returns the host config of every program in execution order,
// kernel sources named as in Files.
func (b *Build) Configs() ([]*hostcfg.ProgramConfig, error) {
	cfgs, _, err := b.render()
	return cfgs, err
}

// sfpuInclude is the line of a kernel that runs tcc's own SFPU code.
var sfpuInclude = "#include \"" + sfpu.HeaderName + "\""

// AddSFPUHeader adds kernels/tcc_sfpu.h (ir/sfpu's Header) to files when
// any of them includes it: tcc's SFPU code beside the kernels that run it.
func AddSFPUHeader(files map[string][]byte) {
	for _, src := range files {
		if bytes.Contains(src, []byte(sfpuInclude)) {
			files["kernels/"+sfpu.HeaderName] = []byte(sfpu.Header())
			return
		}
	}
}

// Files renders the build as files relative to a build directory:
// kernels/<role>_<hash>.cpp (one file per distinct kernel source),
// kernels/tcc_sfpu.h when a kernel includes it (ir/sfpu's Header) and
// programs.json (one entry per program per device, in execution order,
// each kernel's "source" pointing into kernels/). The result is
// deterministic: the same build gives byte-identical files.
func (b *Build) Files() (map[string][]byte, error) { return b.FilesWith(nil) }

// FilesWith is Files with the model's HostInfo for the manifest (nil: the
// manifest without input fills and weight sources).
func (b *Build) FilesWith(info hostcfg.HostInfo) (map[string][]byte, error) {
	// The programs array: one entry per line (a 27B build has 1,160 of
	// them, each with every core's runtime arguments; indenting them
	// doubled the build time), each program's config encoded once for all
	// devices, as it is rendered (the configs are never all held).
	var chunks chunkWriter
	var scratch []byte
	cfgJS := make([][]byte, len(b.Programs))
	files, err := b.renderEach(func(i int, cfg *hostcfg.ProgramConfig) error {
		var err error
		// json.Marshal's encoding, without its reflection.
		if scratch, err = hostcfg.AppendJSON(scratch[:0], cfg); err != nil {
			return err
		}
		chunks.Write(scratch)
		cfgJS[i] = chunks.last
		return nil
	})
	if err != nil {
		return nil, err
	}
	man, err := b.Manifest(info)
	if err != nil {
		return nil, err
	}
	nk := len(files)
	AddSFPUHeader(files)
	devices := b.Graph.Mesh.Devices()
	pf := ProgramsFile{Model: b.Graph.Name, Mesh: b.Graph.Mesh.String(), Devices: devices, Kernels: nk, Manifest: man}
	js, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return nil, err
	}
	const null = `"programs": null`
	at := bytes.LastIndex(js, []byte(null))
	if at < 0 {
		return nil, fmt.Errorf("codegen: programs.json: no programs field to fill")
	}
	// The file is written into one slice of its exact size: the configs
	// are most of it (60 MB for a 256-token prefill build), and growing
	// a buffer by doubling cost more than encoding them.
	heads := make([][]byte, 0, devices*len(b.Programs))
	size := len(js) + 2
	for d := 0; d < devices; d++ {
		for i, p := range b.Programs {
			head, err := json.Marshal(ProgramEntry{Device: d, Index: i, Op: p.Op.Name(), Layer: p.Op.Region.Index, Region: string(p.Op.Region.Kind)})
			if err != nil {
				return nil, err
			}
			heads = append(heads, head)
			size += len(head) + len(cfgJS[i]) + 6
		}
	}
	out := make([]byte, 0, size)
	out = append(out, js[:at+len(`"programs": `)]...)
	out = append(out, '[')
	for n, head := range heads {
		cfg := cfgJS[n%len(b.Programs)]
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, "\n    "...)
		out = append(out, head[:len(head)-1]...)
		if len(cfg) > 2 {
			out = append(out, ',')
		}
		out = append(out, cfg[1:]...)
	}
	out = append(out, "\n  ]"...)
	out = append(out, js[at+len(null):]...)
	files["programs.json"] = append(out, '\n')
	return files, nil
}

// chunkWriter keeps each Write in memory taken from chunks of at least
// 4 MB, so many writes that end up in one file neither grow a buffer by
// doubling nor allocate one by one.
type chunkWriter struct {
	free []byte // the rest of the current chunk
	last []byte // the bytes of the last Write
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	if len(p) > cap(w.free) {
		w.free = make([]byte, 0, max(4<<20, len(p)))
	}
	w.last = append(w.free, p...)
	w.free = w.free[len(p):len(p)]
	return len(p), nil
}
