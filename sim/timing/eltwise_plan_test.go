package timing

import (
	"fmt"
	"testing"

	"github.com/tcc-dev/tcc/codegen/lower"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestEltwiseSplitStreams checks lower's split of the one-tile-at-a-time
// eltwise programs against the timing model, on prefill-sized operands
// (a 256-token activation, an fp32 GDN state): each program is predicted
// within 2.5x of its DRAM bytes at 430 GB/s plus the fixed per-program
// cost. A split by NoC time alone put the SiLU on 6 cores (440 us against
// a 24 us floor): its ~1,000 SFPU cycles and each tile's DRAM round trip
// need the grid.
func TestEltwiseSplitStreams(t *testing.T) {
	tgt := target.Blackhole()
	tests := []struct {
		name  string
		build func(b *ir.Builder) *ir.Value
	}{
		{"silu bf16 [1,256,10240]", func(b *ir.Builder) *ir.Value {
			return b.SiLU(b.Input("x", ir.T(ir.BF16, 1, 256, 10240)))
		}},
		{"exp fp32 [1,24,256,128]", func(b *ir.Builder) *ir.Value {
			return b.Exp(b.Input("x", ir.T(ir.FP32, 1, 24, 256, 128)))
		}},
		{"mul fp32 [1,24,128,128]", func(b *ir.Builder) *ir.Value {
			xt := ir.T(ir.FP32, 1, 24, 128, 128)
			return b.Mul(b.Input("x", xt), b.Input("y", xt))
		}},
		{"typecast bf16->fp32 [1,24,256,128]", func(b *ir.Builder) *ir.Value {
			return b.Typecast(b.Input("x", ir.T(ir.BF16, 1, 24, 256, 128)), ir.FP32)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("eltwise")
			b.Output(tc.build(b))
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			ops := g.Ops()
			op := ops[len(ops)-1]
			p, err := lower.Lower(op, lower.NewContext(tgt))
			if err != nil {
				t.Fatal(err)
			}
			prm := Default()
			pt, err := Simulate(p, tgt, prm, Options{Devices: 1})
			if err != nil {
				t.Fatal(err)
			}
			bytes := 0
			for _, v := range append(append([]*ir.Value(nil), op.Operands...), op.Results...) {
				bytes += v.Type.Shape.Tiles() * v.Type.DType.TileBytes()
			}
			floor := float64(bytes)/430e3 + prm.FixedProgramUS
			msg := fmt.Sprintf("%s: %.2f us predicted; DRAM floor %.2f us (%d bytes at 430 GB/s, fixed cost included)", op.Name(), pt.US(), floor, bytes)
			t.Log(msg)
			if pt.US() > 2.5*floor {
				t.Errorf("%s: more than 2.5x the floor", msg)
			}
		})
	}
}
