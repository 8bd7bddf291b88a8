package fromcodegen

import (
	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/sim/timing"
)

// Build is b as the timing model sees it: b's target and mesh, its
// programs in order and its buffers (a state's buffer also holding the
// state's new value).
func Build(b *codegen.Build) *timing.Build {
	tb := &timing.Build{Target: b.Target, Mesh: b.Graph.Mesh}
	for _, p := range b.Programs {
		tb.Programs = append(tb.Programs, timing.Program(*p))
	}
	for _, s := range b.Buffers {
		tb.Buffers = append(tb.Buffers, timing.Buffer{Name: s.Name, Value: s.Value, Update: b.Graph.StateUpdates[s.Value],
			Mem: s.Mem, PageSize: s.PageSize, Pages: s.Pages})
	}
	return tb
}
