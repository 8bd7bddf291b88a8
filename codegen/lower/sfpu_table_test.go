package lower

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// Every graph op the op table flags SFPU lowers to the SFPU table entry of
// its name, with a scalar exactly when it has a value attribute.
func TestSFPUOpsCovered(t *testing.T) {
	if len(ir.ChainableOps()) == 0 {
		t.Fatal("no op is flagged SFPU")
	}
	for _, k := range ir.ChainableOps() {
		op, ok := sfpuOps[k]
		if !ok {
			t.Errorf("op %s is flagged SFPU but kir.SFPUTable has no entry %q", k, k)
			continue
		}
		hasValue := false
		for _, a := range k.Info().Attrs {
			hasValue = hasValue || a.Name == "value"
		}
		if op.HasParam() != hasValue {
			t.Errorf("%s: SFPU param %v, value attribute %v", k, op.HasParam(), hasValue)
		}
	}
	for i, s := range kir.SFPUTable {
		if int(s.Op) != i {
			t.Errorf("SFPUTable[%d] is %s (op %d): the table must be indexed by SFPUOp", i, s.Name, s.Op)
		}
	}
}
