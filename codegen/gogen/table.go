package gogen

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// Table is the generated, committed form of a model's builds.
type Table struct {
	Model string
	// Kernels holds every kernel source once, by its file name in a build
	// directory ("kernels/<role>_<hash>.cpp").
	Kernels map[string]string
	// Signatures are the distinct abstract program configs.
	Signatures []Signature
	// Meshes holds, per mesh ("1x2"), the program list of each device.
	Meshes map[string]MeshPrograms
}

// Signature is one distinct program up to the buffers it touches.
type Signature struct {
	ID     string // content hash of Config
	Op     string // graph op kind the program implements
	Config hostcfg.ProgramConfig
}

// MeshPrograms are the programs of one decode step on a mesh: every device
// runs Programs in order (tensor parallel: same programs, its own shards).
type MeshPrograms struct {
	Devices  int
	Report   string // the op-count report JSON (tcc report ops --stage fused)
	Programs []Instance
}

// Instance is one program of the step: a signature plus what differs
// between layers.
type Instance struct {
	Program string   // program name, e.g. "matmul_57"
	Sig     int      // index into Table.Signatures
	Layer   int      // decoder layer, -1 outside layers
	Buffers []string // buffer names filling the signature's placeholders
}

// Program resolves program i of mesh to its full host config (buffer names
// filled in) — what a runtime does at load time.
func (t *Table) Program(mesh string, i int) (*hostcfg.ProgramConfig, error) {
	mp, ok := t.Meshes[mesh]
	if !ok {
		return nil, fmt.Errorf("gogen: %s has no build for mesh %s", t.Model, mesh)
	}
	if i < 0 || i >= len(mp.Programs) {
		return nil, fmt.Errorf("gogen: %s mesh %s: program %d out of range (%d)", t.Model, mesh, i, len(mp.Programs))
	}
	in := mp.Programs[i]
	if in.Sig < 0 || in.Sig >= len(t.Signatures) {
		return nil, fmt.Errorf("gogen: %s mesh %s: program %d names signature %d of %d", t.Model, mesh, i, in.Sig, len(t.Signatures))
	}
	return Concretize(&t.Signatures[in.Sig].Config, in.Program, in.Buffers)
}

// Ptr returns a pointer to a copy of v (generated literals use it for
// optional scalar fields).
func Ptr[T any](v T) *T { return &v }
