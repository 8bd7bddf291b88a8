package cpp

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/internal/insngen"
	"github.com/tcc-dev/tcc/codegen/internal/insnspec"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestInsnGenFresh fails when insn_gen.go differs from what the generator
// produces from the instruction table; fix with `go generate ./codegen/kir`.
func TestInsnGenFresh(t *testing.T) {
	want, err := insngen.GenerateCPP(insnspec.All())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("insn_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("insn_gen.go is stale: run `go generate ./codegen/kir`")
	}
	if !bytes.HasPrefix(got, []byte("// Code generated ")) || !bytes.Contains(got, []byte("DO NOT EDIT.")) {
		t.Fatalf("insn_gen.go lacks the generated-code header")
	}
}

// TestDeclSections checks that tt_api.h has exactly one marker line per
// generated section, that fullHeader replaces them all, and that every
// instruction call (and every SFPU op's call and init) is declared.
func TestDeclSections(t *testing.T) {
	for sec := range insnDecls {
		t.Run(sec, func(t *testing.T) {
			if n := bytes.Count(apiHeader, []byte(declMarker+sec+"\n")); n != 1 {
				t.Errorf("tt_api.h has %d marker lines for section %s, want 1", n, sec)
			}
		})
	}
	full := string(fullHeader())
	if strings.Contains(full, declMarker) {
		t.Errorf("a %q line is left after splicing (unknown section?)", declMarker)
	}
	if !strings.Contains(full, sfpuMarker) {
		t.Errorf("the SFPU marker line is missing from the spliced header")
	}
	full = strings.Replace(full, sfpuMarker, kir.SFPUDecls(), 1)
	for _, in := range insnspec.All() {
		for _, c := range in.AllCalls() {
			if !strings.Contains(full, " "+c+"(") {
				t.Errorf("%s: %s is not declared", in.Go, c)
			}
		}
	}
	for _, sp := range kir.SFPUTable {
		for _, c := range []string{sp.Call, sp.Init} {
			if !strings.Contains(full, " "+c+"(") {
				t.Errorf("SFPU op %s: %s is not declared", sp.Name, c)
			}
		}
	}
}
