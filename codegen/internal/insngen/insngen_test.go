package insngen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/internal/insnspec"
)

func TestCheckRejects(t *testing.T) {
	ok := insnspec.Insn{Go: "X", Doc: "X is x().", Call: "x"}
	cases := []struct {
		name string
		edit func(in *insnspec.Insn)
		want string
	}{
		{"empty name", func(in *insnspec.Insn) { in.Go = "" }, "empty or duplicated"},
		{"doc", func(in *insnspec.Insn) { in.Doc = "does x" }, "doc must start"},
		{"two names", func(in *insnspec.Insn) { in.NameFunc = "f" }, "one of Call"},
		{"missing arg", func(in *insnspec.Insn) { in.Args = []string{"A"} }, "not a field"},
		{"plain arg", func(in *insnspec.Insn) {
			in.Fields = []insnspec.Field{{Name: "A", Kind: insnspec.Plain, Type: "EltwiseOp"}}
			in.Args = []string{"A"}
		}, "needs a Printer"},
		{"fpu expr", func(in *insnspec.Insn) { in.Fields = []insnspec.Field{{Name: "A", Kind: insnspec.Expr, FPU: true}} }, "FPU reads"},
		{"init", func(in *insnspec.Insn) { in.Init = "Nope" }, "not an instruction"},
		{"compute header", func(in *insnspec.Insn) { in.Class = insnspec.Compute }, "needs its Header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := ok
			c.edit(&in)
			err := check([]insnspec.Insn{in})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("check = %v, want an error containing %q", err, c.want)
			}
		})
	}
	if err := check(insnspec.All()); err != nil {
		t.Fatalf("the table: %v", err)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	for name, gen := range map[string]func([]insnspec.Insn) ([]byte, error){"kir": GenerateKIR, "cpp": GenerateCPP} {
		t.Run(name, func(t *testing.T) {
			a, err := gen(insnspec.All())
			if err != nil {
				t.Fatal(err)
			}
			b, err := gen(insnspec.All())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatal("two runs differ")
			}
		})
	}
}

func TestDeclsWrapStubOnly(t *testing.T) {
	insns := []insnspec.Insn{
		{Go: "A", Class: insnspec.Compute, Header: "h.h", ComputeDecl: "void a();"},
		{Go: "B", Class: insnspec.Compute, Header: "r.h", StubOnly: true, ComputeDecl: "void b();"},
		{Go: "C", Class: insnspec.Compute, Header: "r.h", StubOnly: true, ComputeDecl: "void c();"},
		{Go: "D", Class: insnspec.AnyKernel, Header: "h.h", DMDecl: "void d(int);", ComputeDecl: "void d();"},
		{Go: "E", Class: insnspec.Eth, DMDecl: "void e();"},
	}
	want := map[string]string{
		SectionCompute:  "void a();\n// tcc-header-begin r.h\nvoid b();\nvoid c();\n// tcc-header-end\nvoid d();\n",
		SectionDataflow: "void d(int);\n",
		SectionEth:      "void e();\n",
	}
	if diff := cmp.Diff(want, Decls(insns)); diff != "" {
		t.Errorf("Decls (-want +got):\n%s", diff)
	}
}
