package lower_test

import (
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes"
)

func TestZZScratchGDN(t *testing.T) {
	for _, cols := range []int{1, 2} {
		g := smallGraph(t, cols)
		if _, err := passes.Default().Run(g, passes.Options{}); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, op := range g.Ops() {
			if op.Kind == ir.OpGDNConvGates || op.Kind == ir.OpGDNRecurrence {
				n++
				if n > 2 {
					continue
				}
				t.Logf("%s attrs %v", op.Where(), op.Attrs)
				for _, v := range op.Operands {
					t.Logf("  in  %s %s %s %s %s kind=%v name=%q", v, v.Type.Shape, v.Type.DType, v.Type.Layout, v.Type.Mem, v.Kind, v.Name)
				}
				for _, v := range op.Results {
					t.Logf("  out %s %s %s %s %s", v, v.Type.Shape, v.Type.DType, v.Type.Layout, v.Type.Mem)
				}
			}
		}
	}
}
