package tinymlp

import (
	"bytes"
	"os"
	"testing"

	"github.com/tcc-dev/tcc/kernels_gen/gen"
)

// TestFresh fails when table_gen.go differs from a regeneration; refresh
// with `go generate ./kernels_gen/...`.
func TestFresh(t *testing.T) {
	want, err := gen.Source("tinymlp", "tiny-mlp", nil, []string{"1x1"})
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

// TestTableResolves checks every program of the committed table resolves to
// a config whose kernels exist, and that layers share signatures.
func TestTableResolves(t *testing.T) {
	mp := Table.Meshes["1x1"]
	if len(mp.Programs) == 0 {
		t.Fatal("no programs")
	}
	for i := range mp.Programs {
		cfg, err := Table.Program("1x1", i)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range cfg.Kernels {
			if _, ok := Table.Kernels[k.Source]; !ok {
				t.Errorf("program %d kernel %s: source %s missing", i, k.Name, k.Source)
			}
		}
	}
	if len(Table.Signatures) >= len(mp.Programs) {
		t.Errorf("%d signatures for %d programs: layers should share signatures", len(Table.Signatures), len(mp.Programs))
	}
}
