package lower

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/ir"
)

func TestChainMovesTiles(t *testing.T) {
	cases := []struct {
		name  string
		x     ir.Shape
		steps string
		want  bool
	}{
		{"gdn q head split", ir.Shape{1, 4096, 5120}, "slice:0,0,0:1,4096,1024|reshape:1,4096,8,128|repeat_interleave:3:2|transpose:1:2", true},
		{"gdn v chunks", ir.Shape{1, 4096, 5120}, "slice:0,0,2048:1,4096,5120|reshape:1,4096,24,128|transpose:1:2|reshape:1,24,128,32,128", true},
		{"gdn output merge", ir.Shape{1, 24, 128, 32, 128}, "reshape:1,24,4096,128|transpose:1:2|reshape:1,4096,3072", true},
		{"slice inside a tile", ir.Shape{1, 64, 384}, "slice:0,0,16:1,64,144|reshape:1,64,1,128", false},
		{"rows sliced inside a tile", ir.Shape{1, 4, 64, 128}, "slice:0,0,0,0:1,4,40,128|transpose:1:2|reshape:1,40,512", false},
		{"transpose of the last two dims", ir.Shape{1, 4096, 24}, "transpose:1:2|reshape:1,24,128,32", false},
		{"result of partial tiles", ir.Shape{1, 4096, 24}, "transpose:1:2|reshape:1,24,128,32,1", false},
		{"repeat of the row dim", ir.Shape{1, 64, 128}, "slice:0,0,0:1,64,128|repeat_interleave:2:1", false},
		{"heads merged into rows", ir.Shape{1, 64, 256}, "slice:0,0,0:1,64,256|reshape:1,64,2,128", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := ir.ParseLayoutChain(tc.steps)
			if err != nil {
				t.Fatal(err)
			}
			types, err := ir.LayoutChainTypes(ir.T(ir.BF16, tc.x...), steps)
			if err != nil {
				t.Fatal(err)
			}
			shapes := make([]ir.Shape, len(types))
			for i, tt := range types {
				shapes[i] = tt.Shape
			}
			if got := chainMovesTiles(tc.x, steps, shapes); got != tc.want {
				t.Errorf("chainMovesTiles(%s, %q) = %v, want %v", tc.x, tc.steps, got, tc.want)
			}
		})
	}
}

// TestLayoutChainTilesReadPages: a whole-tile chain's reader reads pages
// straight into its CB (no in-L1 run copies), a chain with runs inside
// tiles keeps the gather.
func TestLayoutChainTilesReadPages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps string
		x     ir.TensorType
		tiles bool
	}{
		{"heads", "slice:0,0,128:1,64,384|reshape:1,64,2,128|repeat_interleave:2:2|transpose:1:2", tt(ir.BF16, dram, 1, 64, 384), true},
		{"heads_to_fp32", "slice:0,0,128:1,64,384|reshape:1,64,2,128|repeat_interleave:2:2|transpose:1:2", tt(ir.BF16, dram, 1, 64, 384), true},
		{"rows_sliced", "slice:0,0,0,0:1,4,40,128|transpose:1:2|reshape:1,40,512", tt(ir.FP32, dram, 1, 4, 64, 128), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, func(b *ir.Builder) *ir.Value {
				if strings.HasSuffix(tc.name, "fp32") {
					return b.LayoutChain(in(b, "x", tc.x), tc.steps, ir.WithDType(ir.FP32))
				}
				return b.LayoutChain(in(b, "x", tc.x), tc.steps)
			})
			p, err := Lower(op, NewContext(smallGrid()))
			if err != nil {
				t.Fatal(err)
			}
			src, err := cpp.PrintKernel(p, p.Kernel("reader"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(src), "src_page"); got != tc.tiles {
				t.Errorf("reader reads whole pages = %v, want %v; reader:\n%s", got, tc.tiles, src)
			}
		})
	}
}
