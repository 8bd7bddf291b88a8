package kir_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/ir/longtest"
)

// TestNewUnaryOpIsTwoTableLines adds a unary SFPU op, tanh, to a copy of
// the module by editing two files by hand, one line each plus the enum
// constant (ir/sfpu/table.go: Tanh and its Table entry; ir/opspec/core.go:
// the op table entry flagged SFPU), regenerates the op
// table (go generate ./ir) and runs testdata/newop in the copy: the op
// lowers, prints tanh_tile with its header, passes the g++ syntax check,
// runs on the simulator and matches the reference evaluator. Nothing else
// is edited: lowering, the chain rules, the executor, the timing model,
// the printer's headers, the declaration header and the evaluator follow
// from the two tables.
func TestNewUnaryOpIsTwoTableLines(t *testing.T) {
	longtest.Skip(t, "builds a copy of the module (15-60 CPU-s)")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	for _, d := range []string{"go.mod", "go.sum", "ir", "codegen", "sim", "runtime"} {
		if out, err := exec.Command("cp", "-r", filepath.Join(root, d), dst).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v\n%s", d, err, out)
		}
	}
	edit := func(file, after, insert string) {
		t.Helper()
		p := filepath.Join(dst, file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(after)) {
			t.Fatalf("%s has no %q", file, after)
		}
		b = bytes.Replace(b, []byte(after), []byte(after+insert), 1)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("ir/sfpu/table.go", "\tMulScalar\n", "\tTanh\n")
	edit("ir/sfpu/table.go", "{ return x * p }},\n",
		`	{Op: Tanh, Name: "tanh", Call: "tanh_tile", Init: "tanh_tile_init", Header: eltwiseUnary + "tanh.h", Decl: "void tanh_tile_init();\nvoid tanh_tile(uint32_t idst);", Cycles: 128, Eval: func(x, _ float32) float32 { return float32(math.Tanh(float64(x))) }},`+"\n")
	edit("ir/opspec/core.go", "\t// eltwise unary\n",
		`	{Name: "tanh", Go: "Tanh", Doc: "out = tanh(x)", Operands: []string{"x"}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},`+"\n")
	test, err := os.ReadFile("testdata/newop/newop_test.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	test = append(test, []byte("\nfunc writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }\n")...)
	test = bytes.Replace(test, []byte("import (\n"), []byte("import (\n\t\"os\"\n"), 1)
	if err := os.MkdirAll(filepath.Join(dst, "newop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "newop", "newop_test.go"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command("go", args...)
		c.Dir = dst
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("generate", "./ir")
	out := run("test", "-count=1", "-run", "^TestNewOpTanh$", "-v", "./newop")
	if !strings.Contains(out, "--- PASS: TestNewOpTanh") {
		t.Fatalf("TestNewOpTanh did not pass in the copy:\n%s", out)
	}
}
