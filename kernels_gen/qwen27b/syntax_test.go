package qwen27b

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestEveryKernelCompiles runs the g++ syntax check on every kernel source
// of the committed 1x1 and 1x2 builds (each signature's kernels, with the
// processor its config gives).
func TestEveryKernelCompiles(t *testing.T) {
	longtest.Skip(t, "the g++ syntax check of every committed qwen27b kernel (~10 CPU-s in g++; the codegen tests check a sample of each kind)")
	procs := map[string]cpp.Source{}
	for _, sig := range Table.Signatures {
		for _, k := range sig.Config.Kernels {
			p := kir.ComputeProc
			switch k.Processor {
			case "RISCV_0":
				p = kir.RISCV0
			case "RISCV_1":
				p = kir.RISCV1
			}
			procs[k.Source] = cpp.Source{Processor: p, Defines: k.Defines}
		}
	}
	// The table holds the kernel sources and the headers written beside
	// them (kernels/tcc_sfpu.h: tcc's SFPU code, which the syntax check
	// supplies itself).
	sources := 0
	for n := range Table.Kernels {
		if strings.HasSuffix(n, ".cpp") {
			sources++
		}
	}
	if len(procs) != sources {
		t.Errorf("%d kernel sources referenced, %d in the table", len(procs), sources)
	}
	dir := t.TempDir()
	srcs := map[string]cpp.Source{}
	names := make([]string, 0, len(procs))
	for n := range procs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := filepath.Join(dir, filepath.Base(n))
		if err := os.WriteFile(f, []byte(Table.Kernels[n]), 0o644); err != nil {
			t.Fatal(err)
		}
		srcs[f] = procs[n]
	}
	outputs, ok, err := cpp.SyntaxCheck(dir, srcs)
	if errors.Is(err, cpp.ErrNoCompiler) {
		t.Skip("!!!!! g++ is not installed: SKIPPING the syntax check of the qwen27b kernels (CI installs it) !!!!!")
	}
	if err != nil {
		t.Fatal(err)
	}
	for d, out := range outputs {
		if !ok[d] || strings.Contains(out, "error") {
			t.Errorf("g++ -D%s:\n%s", d, out)
		}
	}
	t.Logf("%d kernel sources pass g++ -fsyntax-only", len(srcs))
}
