package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// prefillAllReduce lowers qwen27b's prefill all_reduce_add_rmsnorm of
// [1, rows, 5120] bf16 over two cards and predicts it.
func prefillAllReduce(t *testing.T, rows int, norm bool) (*ProgramTime, *kir.Program) {
	t.Helper()
	tgt := target.Blackhole()
	b := ir.NewBuilder("ring")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
	xt := ir.T(ir.BF16, 1, rows, 5120)
	x, r := b.Input("x", xt), b.Input("residual", xt)
	b.Region("ccl", 0)
	if norm {
		b.Output(b.AllReduceAddRMSNorm(x, r, b.Weight("w", ir.T(ir.BF16, 5120)), 2, 1e-6, 1)...)
	} else {
		b.Output(b.AllReduce(x, 2))
	}
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	ops := g.Ops()
	p, err := lower.Lower(ops[len(ops)-1], lower.NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := Simulate(p, tgt, Default(), Options{Devices: 2})
	if err != nil {
		t.Fatal(err)
	}
	return pt, p
}

func TestPrefillAllReduceStreams(t *testing.T) {
	for _, norm := range []bool{false, true} {
		pt, p := prefillAllReduce(t, 256, norm)
		t.Logf("norm %v: %.2f us; sender defines %v", norm, pt.US(), p.Kernels[0].Defines)
	}
}
