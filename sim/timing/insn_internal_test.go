package timing

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestEveryInstructionHasCost fails for an instruction of the table
// (kir.Instructions) that the timing model has no case for: each one, at
// its zero value, must compile to a timed instruction.
func TestEveryInstructionHasCost(t *testing.T) {
	for _, s := range kir.Instructions() {
		name := fmt.Sprintf("%T", s)
		t.Run(name, func(t *testing.T) {
			cc := &compiler{m: &machine{p: Default()}, k: &kir.Kernel{Name: "k"}, slots: map[string]int{}, args: map[string]int{}}
			in, err := cc.call(s)
			if err != nil || in == nil {
				t.Fatalf("the timing model has no cost for %s: %v (add its case to sim/timing/calls.go)", name, err)
			}
		})
	}
}
