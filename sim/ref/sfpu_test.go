package ref

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// An SFPU op follows the options: with StorageFormats the device's SFPU
// code (tcc's program by default, the exact function for sfpu.CodeLLK),
// without it the exact function. The fp32 inputs make the two differ
// (checked), so a swap would show.
func TestSFPUFollowsOptions(t *testing.T) {
	g := ir.NewGraph("t")
	const n = 4096
	x := g.NewValue(ir.KindInput, "x", ir.T(ir.FP32, n))
	y := g.NewValue(ir.KindResult, "y", ir.T(ir.FP32, n))
	op := &ir.Op{Kind: ir.OpExp, Operands: []*ir.Value{x}, Results: []*ir.Value{y}}
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i-n/2) / 256 // [-8, 8)
	}
	exact, prog := make([]float32, n), make([]float32, n)
	for i, v := range in {
		exact[i], prog[i] = numerics.Exp(v), sfpu.Programs[sfpu.Exp].Eval(v, 0)
	}
	if cmp.Equal(exact, prog) {
		t.Fatal("tcc's exp equals the exact one on every input: the test cannot tell them apart")
	}
	llk := DefaultOptions()
	llk.SFPU = sfpu.CodeLLK
	for _, c := range []struct {
		name string
		opts Options
		want []float32
	}{
		{"same formats, tcc", DefaultOptions(), prog},
		{"same formats, llk", llk, exact},
		{"exact", ExactOptions(), exact},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := EvalOpData(op, [][]float32{in}, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, v := range out[0].Data {
				if math.Float32bits(v) != math.Float32bits(c.want[i]) {
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d elements differ from the expected SFPU function", bad, n)
			}
		})
	}
}
