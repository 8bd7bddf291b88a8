package gen

import (
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// BenchmarkBuildQwen27B measures `tcc build qwen27b --mesh 1x2` without the
// disk writes: graph, pass pipeline, lowering of every program, C++ and host
// configs for every program.
func BenchmarkBuildQwen27B(b *testing.B) {
	for i := 0; i < b.N; i++ {
		bld, _, err := Compile("qwen27b", nil, ir.Mesh{Rows: 1, Cols: 2})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bld.Files(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCompileQwen27BPrograms checks the build's program count equals the
// fused report's total_ops at mesh 1x2.
func TestCompileQwen27BPrograms(t *testing.T) {
	bld, rep, err := Compile("qwen27b", nil, ir.Mesh{Rows: 1, Cols: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(bld.Programs) != bld.Graph.NumOps() || len(rep) == 0 {
		t.Errorf("%d programs for %d ops", len(bld.Programs), bld.Graph.NumOps())
	}
	if len(bld.Programs) > 700 {
		t.Errorf("%d programs per device; the fused decode step should be <= 700", len(bld.Programs))
	}
}
