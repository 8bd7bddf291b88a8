package timing

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/sim/interp"
)

// TestEveryInstructionHasCost fails for an instruction of the table
// (kir.Instructions) that the timing model has no cost for: each one, at
// its zero value, must compile to a cost (also the CB calls and semaphore
// waits whose books the interpreter core keeps).
func TestEveryInstructionHasCost(t *testing.T) {
	for _, s := range kir.Instructions() {
		name := fmt.Sprintf("%T", s)
		t.Run(name, func(t *testing.T) {
			// A persistent program of one phase, for PhaseBegin and PhaseEnd.
			m := &machine{p: Default(), prog: &kir.Program{Name: "p", Persist: &kir.Persist{Phases: make([]kir.Phase, 1)}}}
			c := interp.NewCompiler(&kir.Kernel{Name: "k"}, &interp.Config{}, interp.Machine[*thread](m))
			o, err := m.Instruction(c, s)
			if err != nil || o == nil {
				t.Fatalf("the timing model has no cost for %s: %v (add its case to sim/timing/calls.go)", name, err)
			}
		})
	}
}
