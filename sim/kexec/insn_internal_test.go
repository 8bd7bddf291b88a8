package kexec

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// TestEveryInstructionExecutes fails for an instruction of the table
// (kir.Instructions) that the executor has no effect for: each one, at its
// zero value, must compile (an instruction whose books the interpreter
// core keeps may have no effect of its own).
func TestEveryInstructionExecutes(t *testing.T) {
	for _, s := range kir.Instructions() {
		name := fmt.Sprintf("%T", s)
		t.Run(name, func(t *testing.T) {
			role := kir.RoleReader
			if kir.IsComputeOnly(s) {
				role = kir.RoleCompute
			}
			// A persistent program of one phase, for PhaseBegin and PhaseEnd.
			r := &run{p: &kir.Program{Name: "p", Persist: &kir.Persist{Phases: make([]kir.Phase, 1)}}}
			c := interp.NewCompiler(&kir.Kernel{Name: "k", Role: role}, &interp.Config{}, interp.Machine[*kstate](r))
			o, err := r.Instruction(c, s)
			if err != nil || o == nil && !interp.Keeps(s) {
				t.Fatalf("the executor has no effect for %s: %v (add its case to sim/kexec/dataflow.go or compute.go)", name, err)
			}
		})
	}
}
