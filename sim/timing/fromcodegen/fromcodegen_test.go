package fromcodegen_test

import (
	"path/filepath"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/sim/timing/fromcodegen"
)

// TestBuild: the timing model's view of the small qwen27b decode build has
// its programs in order and every buffer, a state's buffer also holding
// the state's new value.
func TestBuild(t *testing.T) {
	args := models.Args{"config": filepath.Join("..", "..", "..", "models", "qwen27b", "testdata", "small.json"), "batch": "1", "max-seq": "128", "seq": "32", "mode": "decode"}
	g, err := qwen27b.Model{}.Build(args, ir.Mesh{Rows: 1, Cols: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	tb := fromcodegen.Build(b)
	if tb.Target != b.Target || tb.Mesh != g.Mesh || len(tb.Programs) != len(b.Programs) || len(tb.Buffers) != len(b.Buffers) {
		t.Fatalf("target, mesh, %d programs, %d buffers; want the build's %d and %d", len(tb.Programs), len(tb.Buffers), len(b.Programs), len(b.Buffers))
	}
	for i, p := range tb.Programs {
		if p.Op != b.Programs[i].Op || p.Kernel != b.Programs[i].Kernel {
			t.Fatalf("program %d is not the build's", i)
		}
	}
	updates := 0
	for i, s := range tb.Buffers {
		if s.Value != b.Buffers[i].Value || s.Name != b.Buffers[i].Name || s.PageSize*s.Pages != b.Buffers[i].PageSize*b.Buffers[i].Pages {
			t.Fatalf("buffer %d is not the build's", i)
		}
		if s.Update != nil {
			updates++
			if g.StateUpdates[s.Value] != s.Update {
				t.Errorf("buffer %s holds update %v, not its state's", s.Name, s.Update)
			}
		}
	}
	if updates == 0 || updates != len(g.StateUpdates) {
		t.Errorf("%d buffers hold a state's update; the graph has %d states updated", updates, len(g.StateUpdates))
	}
}
