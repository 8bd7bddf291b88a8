package kir_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/tcc-dev/tcc/codegen/internal/insngen"
	"github.com/tcc-dev/tcc/codegen/internal/insnspec"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestStmtGenFresh fails when stmt_gen.go differs from what the generator
// produces from the instruction table; fix with `go generate ./codegen/kir`.
func TestStmtGenFresh(t *testing.T) {
	want, err := insngen.GenerateKIR(insnspec.All())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("stmt_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("stmt_gen.go is stale: run `go generate ./codegen/kir`")
	}
	if !bytes.HasPrefix(got, []byte("// Code generated ")) || !bytes.Contains(got, []byte("DO NOT EDIT.")) {
		t.Fatalf("stmt_gen.go lacks the generated-code header")
	}
}

// TestInstructionsMatchTable checks the generated functions against the
// table: one instruction per entry, in order, each with its call name, its
// kernel class and its init.
func TestInstructionsMatchTable(t *testing.T) {
	specs := insnspec.All()
	insns := kir.Instructions()
	if len(insns) != len(specs) {
		t.Fatalf("%d instructions, %d table entries", len(insns), len(specs))
	}
	for i, s := range insns {
		sp := specs[i]
		t.Run(sp.Go, func(t *testing.T) {
			if sp.Call != "" && kir.APIName(s) != sp.Call {
				t.Errorf("APIName = %q, want %q", kir.APIName(s), sp.Call)
			}
			if got, want := kir.IsComputeOnly(s), sp.Class == insnspec.Compute; got != want {
				t.Errorf("IsComputeOnly = %t, want %t", got, want)
			}
			if got, want := kir.IsDataMovementOnly(s), sp.Class == insnspec.DataMovement || sp.Class == insnspec.Eth; got != want {
				t.Errorf("IsDataMovementOnly = %t, want %t", got, want)
			}
			if got, want := kir.IsEthOnly(s), sp.Class == insnspec.Eth; got != want {
				t.Errorf("IsEthOnly = %t, want %t", got, want)
			}
			init, ok := kir.InitOf(s)
			if ok != (sp.Init != "") {
				t.Fatalf("InitOf ok = %t, table init %q", ok, sp.Init)
			}
			if ok && kir.APIName(init) == "" {
				t.Errorf("InitOf = %#v has no call name", init)
			}
		})
	}
}
