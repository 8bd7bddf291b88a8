package kexec

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
)

// TestEveryInstructionExecutes fails for an instruction of the table
// (kir.Instructions) that the executor has no case for: each one, at its
// zero value, must compile to an instruction.
func TestEveryInstructionExecutes(t *testing.T) {
	for _, s := range kir.Instructions() {
		name := fmt.Sprintf("%T", s)
		t.Run(name, func(t *testing.T) {
			role := kir.RoleReader
			if kir.IsComputeOnly(s) {
				role = kir.RoleCompute
			}
			k := &kir.Kernel{Name: "k", Role: role}
			cc := &compiler{r: &run{p: &kir.Program{Name: "p"}}, k: k, slots: map[string]int{}, types: map[string]kir.Type{}, args: map[string]int{}, defs: map[string]kir.Expr{}}
			in, err := cc.call(s)
			if err != nil || in == nil {
				t.Fatalf("the executor does not compile %s: %v (add its case to sim/kexec/dataflow.go or compute.go)", name, err)
			}
		})
	}
}
