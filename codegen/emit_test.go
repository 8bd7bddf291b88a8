package codegen_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/models/tinymlp"
	"github.com/tcc-dev/tcc/passes"
)

func tinyBuild(t *testing.T) *codegen.Build {
	t.Helper()
	g := tinymlp.BuildGraph(tinymlp.Sizes{Layers: 2, Hidden: 128, Intermediate: 256, Vocab: 512, Batch: 3})
	if _, err := passes.Run(g, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFilesDeterministic builds tiny-mlp twice from scratch and requires
// byte-identical files.
func TestFilesDeterministic(t *testing.T) {
	a, err := tinyBuild(t).Files()
	if err != nil {
		t.Fatal(err)
	}
	b, err := tinyBuild(t).Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d vs %d files", len(a), len(b))
	}
	for n, d := range a {
		if !bytes.Equal(d, b[n]) {
			t.Errorf("%s differs between builds", n)
		}
	}
	if _, ok := a["programs.json"]; !ok {
		t.Error("no programs.json")
	}
}

// TestEmittedKernelsCompile runs the g++ syntax check on every kernel of a
// fused tiny-mlp build (matmul, eltwise, rms_norm, embedding, argmax).
func TestEmittedKernelsCompile(t *testing.T) {
	b := tinyBuild(t)
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	procs := map[string]cpp.Source{}
	for _, p := range b.Programs {
		for _, k := range p.Kernel.Kernels {
			src, _ := cpp.PrintKernel(p.Kernel, k)
			for n, d := range files {
				if bytes.Equal(d, src) {
					procs[n] = cpp.Source{Processor: k.Processor, Defines: k.Defines}
				}
			}
		}
	}
	dir := t.TempDir()
	sources := map[string]cpp.Source{}
	for n, p := range procs {
		f := filepath.Join(dir, filepath.Base(n))
		if err := os.WriteFile(f, files[n], 0o644); err != nil {
			t.Fatal(err)
		}
		sources[f] = p
	}
	outputs, ok, err := cpp.SyntaxCheck(dir, sources)
	if errors.Is(err, cpp.ErrNoCompiler) {
		t.Skip("!!!!! g++ is not installed: SKIPPING the syntax check of emitted kernels (CI installs it) !!!!!")
	}
	if err != nil {
		t.Fatal(err)
	}
	for d, out := range outputs {
		if !ok[d] || strings.Contains(out, "warning:") {
			t.Errorf("g++ -D%s on emitted kernels:\n%s", d, out)
		}
	}
	if len(sources) < 10 {
		t.Errorf("only %d distinct kernels checked", len(sources))
	}
}

func TestWriteDirAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := codegen.WriteDir(dir, map[string][]byte{"programs.json": []byte("{}\n"), "kernels/a.cpp": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := codegen.WriteDir(dir, map[string][]byte{"programs.json": []byte("{}\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kernels/a.cpp")); !os.IsNotExist(err) {
		t.Errorf("stale file survived a rebuild: %v", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := codegen.WriteDir(other, map[string][]byte{"programs.json": nil}); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("replaced a non-build directory: %v", err)
	}
}
