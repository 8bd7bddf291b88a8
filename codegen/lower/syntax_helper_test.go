package lower

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// checkKernelSyntax runs cpp.SyntaxCheck on sources (kernel file ->
// processor) in dir, skipping loudly without g++. Every group g++ rejects
// is an error; so is any warning, except deprecation warnings unless
// strict.
func checkKernelSyntax(t *testing.T, what, dir string, sources map[string]cpp.Source, strict bool) {
	t.Helper()
	outputs, ok, err := cpp.SyntaxCheck(dir, sources)
	if errors.Is(err, cpp.ErrNoCompiler) {
		t.Skipf("!!!!! g++ is not installed: SKIPPING the syntax check of the %s !!!!!", what)
	}
	if err != nil {
		t.Fatal(err)
	}
	for d, out := range outputs {
		switch {
		case !ok[d]:
			t.Errorf("g++ -fsyntax-only -D%s rejected %s:\n%s", d, what, out)
		case strings.Contains(out, "warning:") && (strict || !strings.Contains(out, "deprecated")):
			t.Errorf("g++ -D%s warns about %s:\n%s", d, what, out)
		}
	}
	t.Logf("g++ syntax check: %d %s", len(sources), what)
}

// CheckKernelSyntax exports checkKernelSyntax to the external test package.
var CheckKernelSyntax = checkKernelSyntax

// writeKernels prints every kernel of p into dir as NAME_KERNEL.cpp and
// records each file with its processor and defines in sources, for
// checkKernelSyntax.
func writeKernels(t *testing.T, dir, name string, p *kir.Program, sources map[string]cpp.Source) {
	t.Helper()
	for _, k := range p.Kernels {
		src, err := cpp.PrintKernel(p, k)
		if err != nil {
			t.Fatalf("%s/%s: %v", name, k.Name, err)
		}
		f := filepath.Join(dir, name+"_"+k.Name+".cpp")
		if err := os.WriteFile(f, src, 0o644); err != nil {
			t.Fatal(err)
		}
		sources[f] = cpp.Source{Processor: k.Processor, Defines: k.Defines}
	}
}

// WriteKernels exports writeKernels to the external test package.
var WriteKernels = writeKernels

// lowerValid lowers op for tgt with the state aliases alias and fails the
// test unless the program lowers and passes kir.Validate.
func lowerValid(t *testing.T, tgt *target.Target, op *ir.Op, alias map[*ir.Value]*ir.Value) *kir.Program {
	t.Helper()
	ctx := NewContext(tgt)
	ctx.Alias = alias
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := kir.Validate(p, tgt); err != nil {
		t.Fatal(err)
	}
	return p
}

// LowerValid exports lowerValid to the external test package.
var LowerValid = lowerValid
