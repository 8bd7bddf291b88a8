package timing

import (
	"testing"

	"github.com/tcc-dev/tcc/ir"
)

// TestTileProducts checks the compute floor's count of 32x32x32 tile
// products, worked by hand for each case.
func TestTileProducts(t *testing.T) {
	posT := ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM}
	tests := []struct {
		name  string
		build func(b *ir.Builder) *ir.Value
		step  *Step
		want  int64
	}{
		// 1 batch x 2 row tiles x 8 K tiles x 16 column tiles.
		{"matmul", func(b *ir.Builder) *ir.Value {
			return b.Matmul(b.Input("a", ir.T(ir.BF16, 1, 64, 256)), b.Weight("w", ir.T(ir.BF16, 256, 512)))
		}, nil, 256},
		// 6 batches x 1 x 2 x 3.
		{"bmm", func(b *ir.Builder) *ir.Value {
			return b.BMM(b.Input("a", ir.T(ir.FP32, 2, 3, 32, 64)), b.Input("b", ir.T(ir.FP32, 2, 3, 64, 96)))
		}, nil, 36},
		// 4 heads x 2 (q k^T, p v) x key tiles (query rows 0..31 see 1
		// tile, 32..63 see 2) x 4 D tiles.
		{"sdpa_prefill at 0", sdpaPrefillCase(posT), &Step{Pos: 0, Tokens: 64}, 4 * 2 * 3 * 4},
		// At 40: rows 0..31 see 0..71 (3 tiles), 32..63 see 0..103 (4).
		{"sdpa_prefill at 40", sdpaPrefillCase(posT), &Step{Pos: 40, Tokens: 64}, 4 * 2 * 7 * 4},
		// 2 users x 4 heads x 2 x 2 key tiles (0..40) x 4.
		{"sdpa_decode at 40", func(b *ir.Builder) *ir.Value {
			kv := ir.T(ir.BF16, 2, 2, 1024, 128)
			return b.SDPADecode(b.Input("q", ir.T(ir.BF16, 2, 4, 128)), b.Input("k", kv), b.Input("v", kv), b.Input("pos", posT), 0.1)
		}, &Step{Pos: 40, Tokens: 1}, 2 * 4 * 2 * 2 * 4},
		// Not a contraction.
		{"exp", func(b *ir.Builder) *ir.Value { return b.Exp(b.Input("x", ir.T(ir.BF16, 64, 64))) }, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("floor")
			b.Output(tc.build(b))
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			ops := g.Ops()
			if got := tileProducts(ops[len(ops)-1], tc.step); got != tc.want {
				t.Errorf("tileProducts = %d, want %d", got, tc.want)
			}
		})
	}
	// A fused op counts the decomposition it stands for.
	b := ir.NewBuilder("fused")
	a := b.Input("a", ir.T(ir.BF16, 1, 64, 256))
	m1 := b.Matmul(a, b.Weight("w1", ir.T(ir.BF16, 256, 512)))
	m2 := b.Matmul(a, b.Weight("w2", ir.T(ir.BF16, 256, 64)))
	b.Output(m1, m2)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	fused := &ir.Op{Kind: ir.OpMatmul2, Decomp: &ir.Decomposition{Ops: g.Ops()}}
	if got, want := tileProducts(fused, nil), int64(256+2*8*2); got != want {
		t.Errorf("fused tileProducts = %d, want %d", got, want)
	}
}

func sdpaPrefillCase(posT ir.TensorType) func(b *ir.Builder) *ir.Value {
	return func(b *ir.Builder) *ir.Value {
		kv := ir.T(ir.BF16, 1, 2, 1024, 128)
		return b.SDPAPrefill(b.Input("q", ir.T(ir.BF16, 1, 4, 64, 128)), b.Input("k", kv), b.Input("v", kv), b.Input("pos", posT), 0.1)
	}
}
