package codegen_test

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

var update = flag.Bool("update", false, "rewrite the golden build under testdata/golden")

// TestGoldenBuild compares a whole small tiny-mlp build (every kernel and
// programs.json) with the reviewed files in testdata/golden/tiny-mlp.
// Refresh with `go test ./codegen -run TestGoldenBuild -update` and review
// the diff.
func TestGoldenBuild(t *testing.T) {
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 1, Hidden: 64, Intermediate: 96, Vocab: 64, Batch: 2})
	if _, err := passes.Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "golden", "tiny-mlp")
	if *update {
		if err := codegen.WriteDir(dir, files); err != nil {
			t.Fatal(err)
		}
		return
	}
	var onDisk []string
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && info.Name() != codegen.MarkerFile {
			rel, _ := filepath.Rel(dir, p)
			onDisk = append(onDisk, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatalf("%v (run with -update to create the goldens)", err)
	}
	var want []string
	for n := range files {
		want = append(want, n)
	}
	sort.Strings(want)
	sort.Strings(onDisk)
	if diff := cmp.Diff(onDisk, want); diff != "" {
		t.Fatalf("golden file set (-golden +built):\n%s", diff)
	}
	for _, n := range want {
		golden, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(golden), string(files[n])); diff != "" {
			t.Errorf("%s (-golden +built):\n%s", n, diff)
		}
	}
}
