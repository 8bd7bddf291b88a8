package qwen27b

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/kernels_gen/gen"
)

// TestFresh fails when table_gen.go differs from a regeneration; refresh
// with `go generate ./kernels_gen/...` and review the diff. Regenerating
// both meshes of the full model costs ~17 CPU-s, so it is a long check
// (.ci/run runs it); kernels_gen/tinymlp's freshness test is quick.
func TestFresh(t *testing.T) {
	longtest.Skip(t, "regenerating the full model's kernels")
	want, err := gen.Source("qwen27b", "qwen27b", nil, []string{"1x1", "1x2"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("table_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Fatal("table_gen.go is stale: run `go generate ./kernels_gen/...` and review the diff")
	}
}

// TestTableMatchesReport checks, per mesh, that the table holds one program
// per op of the report's total_ops, that every program resolves with all
// its kernel sources present, and that layers share signatures.
func TestTableMatchesReport(t *testing.T) {
	for _, mesh := range []string{"1x1", "1x2"} {
		mp, ok := Table.Meshes[mesh]
		if !ok {
			t.Fatalf("no mesh %s", mesh)
		}
		var rep struct {
			TotalOps int `json:"total_ops"`
		}
		if err := json.Unmarshal([]byte(mp.Report), &rep); err != nil {
			t.Fatal(err)
		}
		if len(mp.Programs) != rep.TotalOps {
			t.Errorf("mesh %s: %d programs, report says %d", mesh, len(mp.Programs), rep.TotalOps)
		}
		for i := range mp.Programs {
			cfg, err := Table.Program(mesh, i)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range cfg.Kernels {
				if _, ok := Table.Kernels[k.Source]; !ok {
					t.Fatalf("mesh %s program %d kernel %s: source %s missing", mesh, i, k.Name, k.Source)
				}
			}
		}
	}
	if n := len(Table.Signatures); n > 100 {
		t.Errorf("%d signatures: layers of one kind should share them", n)
	}
}
