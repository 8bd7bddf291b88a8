package cpp

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp/samples"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// gxx returns the path of g++, or skips the test loudly.
func gxx(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("!!!!! g++ is not installed: SKIPPING the C++ syntax check of the generated kernels. " +
			"Install g++ to run it (CI does). !!!!!")
	}
	return path
}

// syntaxCheck is SyntaxCheck for tests: it skips loudly without g++.
func syntaxCheck(t *testing.T, dir string, sources map[string]Source) (outputs map[string]string, ok map[string]bool) {
	t.Helper()
	gxx(t)
	outputs, ok, err := SyntaxCheck(dir, sources)
	if err != nil {
		t.Fatal(err)
	}
	return outputs, ok
}

// TestKernelsCompile checks that every kernel of every sample program is
// valid C++17 against the declarations of the tt-metal API subset tcc
// prints (testdata/tt_api.h).
func TestKernelsCompile(t *testing.T) {
	gxx(t)
	dir := t.TempDir()
	sources := map[string]Source{}
	for _, s := range samples.All() {
		for _, k := range s.Program.Kernels {
			src, err := PrintKernel(s.Program, k)
			if err != nil {
				t.Fatalf("sample %s: %v", s.Name, err)
			}
			f := filepath.Join(dir, s.Program.Name+"."+k.Name+".cpp")
			if err := os.WriteFile(f, src, 0o644); err != nil {
				t.Fatal(err)
			}
			sources[f] = Source{Processor: k.Processor, Defines: k.Defines}
		}
	}
	outputs, ok := syntaxCheck(t, dir, sources)
	deprecated := map[string]string{}
	for d, out := range outputs {
		if !ok[d] {
			t.Errorf("g++ -fsyntax-only -D%s rejected generated kernels:\n%s", d, out)
			continue
		}
		// Deprecation warnings name the kir API spellings tt-metal is
		// retiring: reported, not fatal. Any other warning is an error.
		for _, l := range strings.Split(out, "\n") {
			if !strings.Contains(l, "warning:") {
				continue
			}
			if m := deprecatedRE.FindStringSubmatch(l); m != nil {
				deprecated[m[1]] = m[2]
				continue
			}
			t.Errorf("g++ -D%s warns about a generated kernel:\n%s", d, out)
			break
		}
	}
	names := make([]string, 0, len(deprecated))
	for n := range deprecated {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("deprecated tt-metal call printed (its spelling lives in kir/api.go): %s: %s", n, deprecated[n])
	}
}

// deprecatedRE matches a g++ deprecation warning and captures the function
// name and the deprecation message.
var deprecatedRE = regexp.MustCompile(`warning: .(?:void )?(?:ckernel::)?(\w+)\(.*is deprecated: (.*) \[-Wdeprecated-declarations\]`)

// TestCompileCheckCatchesErrors shows the syntax check can fail: a kernel
// with a misspelled call and one with a wrong argument count are rejected.
func TestCompileCheckCatchesErrors(t *testing.T) {
	gxx(t)
	p := samples.EltwiseAdd()
	src, err := PrintKernel(p, p.Kernel("reader"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new string
	}{
		{"misspelled call", "noc_async_read_barrier()", "noc_async_reed_barrier()"},
		{"missing argument", "cb_push_back(0, 1)", "cb_push_back(0)"},
		{"compute call in a reader", "noc_async_read_barrier();", "tile_regs_acquire();"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(src), tc.old, tc.new, 1)
			if bad == string(src) {
				t.Fatalf("%q not found in the printed reader", tc.old)
			}
			dir := t.TempDir()
			f := filepath.Join(dir, "bad.cpp")
			if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			outputs, ok := syntaxCheck(t, dir, map[string]Source{f: {Processor: kir.RISCV1}})
			if ok["COMPILE_FOR_NCRISC"] {
				t.Errorf("g++ accepted a broken kernel; output:\n%s", outputs["COMPILE_FOR_NCRISC"])
			}
		})
	}
}
