package lower

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestWeightBlocksOnSim runs matmul engine ops with their weights placed
// in blocks (WeightBlocks) on the simulator, bit for bit against the
// reference: decode ops whose cores follow the layout's plan move whole
// blocks (the reader reads runs of a block, not tiles); readers that do
// not (here: a layout made for runs of another width, as a prefill plan
// reading the decode build's layout) read each tile at its place.
func TestWeightBlocksOnSim(t *testing.T) {
	cases := []struct {
		name   string
		blocks bool // the reader moves blocks
		period int  // when > 0, the layout's run width instead of the op's plan's
		build  func(b *ir.Builder) []*ir.Value
	}{
		{"matmul_bfp8", true, 0, func(b *ir.Builder) []*ir.Value {
			return one(b.Matmul(fcIn(b, "a", ir.BF16, 1, 1, 640), fcW(b, "w", ir.BFP8B, 640, 1312)))
		}},
		{"swiglu_bfp4", true, 0, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 1, 512), fcW(b, "gate", ir.BFP4B, 512, 608), fcW(b, "up", ir.BFP4B, 512, 608)))
		}},
		{"matmul4_parts", true, 0, func(b *ir.Builder) []*ir.Value {
			return b.Matmul4(fcIn(b, "a", ir.BF16, 1, 1, 512), fcW(b, "w0", ir.BFP8B, 512, 640), fcW(b, "w1", ir.BFP8B, 512, 384),
				fcW(b, "w2", ir.BFP8B, 512, 24), fcW(b, "w3", ir.BFP8B, 512, 24))
		}},
		{"matmul_add_rows", true, 0, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 70, 256), fcW(b, "w", ir.BFP8B, 256, 320), fcIn(b, "r", ir.BF16, 70, 320)))
		}},
		{"matmul_add_rows_other_layout", false, 3, func(b *ir.Builder) []*ir.Value {
			return one(b.MatmulAdd(fcIn(b, "a", ir.BF16, 70, 256), fcW(b, "w", ir.BFP8B, 256, 328), fcIn(b, "r", ir.BF16, 70, 328)))
		}},
		{"matmul3_other_layout", false, 5, func(b *ir.Builder) []*ir.Value {
			return b.Matmul3(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "w0", ir.BFP8B, 256, 352), fcW(b, "w1", ir.BFP4B, 256, 96), fcW(b, "w2", ir.BFP8B, 256, 40))
		}},
	}
	for i, tc := range cases {
		// the 2-core grid gives each core many columns (groups of 4 and
		// narrower ones); the full grid one column or a few a core
		tgt := smallGrid()
		if i%2 == 0 {
			tgt = target.Blackhole()
		}
		t.Run(fmt.Sprintf("%s/%dx%d", tc.name, tgt.GridX, tgt.GridY), func(t *testing.T) {
			runWeightBlocks(t, tgt, tc.blocks, tc.period, fcBuild(t, tc.build), uint64(i)+700)
		})
	}
}

// runWeightBlocks is one case of TestWeightBlocksOnSim: op lowered with
// its weights in blocks (runs of period columns when period > 0), the
// reader moving whole blocks exactly when blocks, bit for bit.
func runWeightBlocks(t *testing.T, tgt *target.Target, blocks bool, period int, op *ir.Op, seed uint64) {
	ctx := NewContext(tgt)
	ctx.Blocks = map[*ir.Value]*kir.BlockLayout{}
	for _, v := range op.Operands {
		if l := WeightBlocks(tgt, v, []*ir.Op{op}, ctx.Fidelity); l != nil {
			if period > 0 {
				l.Period = period
			}
			ctx.Blocks[v] = l
		}
	}
	if len(ctx.Blocks) == 0 {
		t.Fatal("no weight of the op is placed in blocks")
	}
	args := fcArgs(op, seed)
	want := refEval(t, op, args)
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	reader := ""
	for _, k := range p.Kernels {
		if k.Role == kir.RoleReader {
			src, err := cpp.PrintKernel(p, k)
			if err != nil {
				t.Fatal(err)
			}
			reader = string(src)
		}
	}
	if got := strings.Contains(reader, "block_addr"); got != blocks {
		t.Errorf("the reader moves whole blocks: %v, want %v", got, blocks)
	}
	got, info := fcExec(t, ctx, op, p, args, nil)
	for j, r := range op.Results {
		fcCompare(t, fmt.Sprintf("%s result %d %s", op.Name(), j, r.Type.Shape), want[j].Data, got[j], info)
	}
}
