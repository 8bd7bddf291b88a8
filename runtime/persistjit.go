package runtime

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
	"github.com/tcc-dev/tcc/runtime/blackhole"
)

// printedBuilder builds the merged kernels of one persistent program as
// `tcc build --persistent` prints them (persist.Sources: the kernels,
// tcc_persist.h and tcc_sfpu.h written once into a build directory of
// their own, and the program's host config with its persistent section,
// from which the JIT takes each merged kernel's CB formats), each compiled
// by the chip's Builder (the JIT).
type printedBuilder struct {
	b   blackhole.Builder
	p   *kir.Program
	dir string
	cfg *hostcfg.ProgramConfig
}

// persistentBuilder is what builds the merged kernels of persistent
// program p on the executable's chip: the chip's Builder when it builds
// persistent kernels itself (tests), else a printedBuilder over it, whose
// sources are removed by Mesh.Close.
func (e *Executable) persistentBuilder(p *kir.Program) (blackhole.PersistentBuilder, error) {
	if pb, ok := e.Mesh.builder.(blackhole.PersistentBuilder); ok {
		return pb, nil
	}
	if e.Mesh.builder == nil {
		return nil, fmt.Errorf("runtime: backend %s has no kernel builder", e.Mesh.Backend)
	}
	files, cfg, err := persist.Sources(p, e.Build.Target)
	if err != nil {
		return nil, fmt.Errorf("runtime: printing persistent program %s: %w", p.Name, err)
	}
	dir, err := e.Mesh.makeTmpDir("tcc-persist-")
	if err != nil {
		return nil, err
	}
	if err := codegen.WriteDir(dir, files); err != nil {
		return nil, err
	}
	return &printedBuilder{b: e.Mesh.builder, p: p, dir: dir, cfg: cfg}, nil
}

// PersistentKernel implements blackhole.PersistentBuilder for the program
// the builder printed.
func (b *printedBuilder) PersistentKernel(p *kir.Program, k *kir.Kernel) (map[int][]byte, error) {
	if p != b.p {
		return nil, fmt.Errorf("runtime: the sources printed are program %s's, not %s's", b.p.Name, p.Name)
	}
	kc := b.cfg.Kernel(k.Name)
	if kc == nil {
		return nil, fmt.Errorf("runtime: persistent program %s has no printed kernel %s", p.Name, k.Name)
	}
	return b.b.Kernel(b.dir, b.cfg, kc)
}
