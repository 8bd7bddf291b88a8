package ir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCommonShapeRules checks the result types of the common families'
// fused ops and that each rule rejects what it should, naming the rule.
func TestCommonShapeRules(t *testing.T) {
	bf := func(dims ...int) TensorType { return T(BF16, dims...) }
	b8 := func(dims ...int) TensorType { return T(BFP8B, dims...) }
	split := func(tt TensorType, axis int) TensorType { tt.Dist = Dist{Axis: axis}; return tt }
	ids := TensorType{Shape: Shape{1}, DType: UInt32, Layout: RowMajorLayout, Mem: DRAM, Dist: Replicated}
	norm := Attrs{"eps": 1e-6, "offset": 1.0}
	tests := []struct {
		name    string
		kind    OpKind
		in      []TensorType
		attrs   Attrs
		want    []TensorType // checked when wantErr is ""
		wantErr string
	}{
		{"matmul4 splits like each weight", OpMatmul4, []TensorType{bf(1, 1, 256), split(b8(256, 320), 1), split(b8(256, 192), 1), b8(256, 6), split(b8(256, 6), 1)}, nil,
			[]TensorType{split(bf(1, 1, 320), 2), split(bf(1, 1, 192), 2), bf(1, 1, 6), split(bf(1, 1, 6), 2)}, ""},
		{"matmul2 inner", OpMatmul2, []TensorType{bf(1, 64), b8(64, 32), b8(32, 32)}, nil, nil, "rule matmul-inner"},
		{"matmul3", OpMatmul3, []TensorType{bf(2, 64), b8(64, 32), b8(64, 64), b8(64, 96)}, nil, []TensorType{bf(2, 32), bf(2, 64), bf(2, 96)}, ""},
		{"matmul_add", OpMatmulAdd, []TensorType{bf(1, 1, 512), b8(512, 256), bf(1, 1, 256)}, nil, []TensorType{bf(1, 1, 256)}, ""},
		{"matmul_add residual shape", OpMatmulAdd, []TensorType{bf(1, 1, 512), b8(512, 256), bf(1, 1, 1)}, nil, nil, "rule matmul-add-residual"},
		{"matmul_add residual dtype", OpMatmulAdd, []TensorType{bf(1, 1, 512), b8(512, 256), T(FP32, 1, 1, 256)}, nil, nil, "rule matmul-add-residual"},
		{"rmsnorm_matmul", OpRMSNormMatmul, []TensorType{bf(1, 1, 256), bf(256), split(b8(256, 1024), 1)}, norm, []TensorType{split(bf(1, 1, 1024), 2)}, ""},
		{"rmsnorm_matmul norm weight", OpRMSNormMatmul, []TensorType{bf(1, 1, 256), bf(128), b8(256, 1024)}, norm, nil, "rule norm-weight"},
		{"matmul_swiglu", OpMatmulSwiGLU, []TensorType{bf(1, 1, 256), split(T(BFP4B, 256, 512), 1), split(T(BFP4B, 256, 512), 1)}, nil, []TensorType{split(bf(1, 1, 512), 2)}, ""},
		{"matmul_swiglu weights differ", OpMatmulSwiGLU, []TensorType{bf(1, 256), b8(256, 512), b8(256, 256)}, nil, nil, "rule swiglu-weights"},
		{"matmul_swiglu splits differ", OpMatmulSwiGLU, []TensorType{bf(1, 256), split(b8(256, 512), 1), b8(256, 512)}, nil, nil, "rule swiglu-weights"},
		{"add_rmsnorm", OpAddRMSNorm, []TensorType{bf(1, 1, 256), bf(1, 1, 256), bf(256)}, norm, []TensorType{bf(1, 1, 256), bf(1, 1, 256)}, ""},
		{"add_rmsnorm broadcast", OpAddRMSNorm, []TensorType{bf(1, 4, 256), bf(256), bf(256)}, norm, nil, "rule add-norm-operands"},
		{"add_rmsnorm weight", OpAddRMSNorm, []TensorType{bf(1, 256), bf(1, 256), bf(255)}, norm, nil, "rule norm-weight"},
		{"all_reduce_add replicated", OpAllReduceAdd, []TensorType{split(bf(1, 1, 256), 2), bf(1, 1, 256)}, Attrs{"devices": 2}, []TensorType{bf(1, 1, 256)}, ""},
		{"all_reduce_add dtype", OpAllReduceAdd, []TensorType{bf(1, 1, 256), T(FP32, 1, 1, 256)}, Attrs{"devices": 2}, nil, "rule all-reduce-add-operands"},
		{"all_reduce_add devices", OpAllReduceAdd, []TensorType{bf(1, 256), bf(1, 256)}, Attrs{"devices": 0}, nil, "rule collective-devices"},
		{"all_reduce_add_rmsnorm", OpAllReduceAddRMSNorm, []TensorType{bf(1, 1, 256), bf(1, 1, 256), bf(256)}, Attrs{"devices": 2, "eps": 1e-6, "offset": 1.0},
			[]TensorType{bf(1, 1, 256), bf(1, 1, 256)}, ""},
		{"all_reduce_add_rmsnorm weight", OpAllReduceAddRMSNorm, []TensorType{bf(1, 1, 256), bf(1, 1, 256), bf(64)}, Attrs{"devices": 2, "eps": 1e-6, "offset": 1.0}, nil, "rule norm-weight"},
		{"eltwise_chain", OpEltwiseChain, []TensorType{split(bf(6), 0)}, Attrs{"ops": "exp,mul_scalar:-1"}, []TensorType{split(bf(6), 0)}, ""},
		{"eltwise_chain unknown op", OpEltwiseChain, []TensorType{bf(6)}, Attrs{"ops": "exp,tanh"}, nil, "rule eltwise-chain-op"},
		{"eltwise_chain one step", OpEltwiseChain, []TensorType{bf(6)}, Attrs{"ops": "exp"}, nil, "rule eltwise-chain-length"},
		{"eltwise_chain missing value", OpEltwiseChain, []TensorType{bf(6)}, Attrs{"ops": "exp,mul_scalar"}, nil, "rule eltwise-chain-value"},
		{"eltwise_chain stray value", OpEltwiseChain, []TensorType{bf(6)}, Attrs{"ops": "exp:2,silu"}, nil, "rule eltwise-chain-value"},
		{"eltwise_chain bad value", OpEltwiseChain, []TensorType{bf(6)}, Attrs{"ops": "exp,add_scalar:x"}, nil, "rule eltwise-chain-value"},
		{"eltwise_chain int operand", OpEltwiseChain, []TensorType{ids}, Attrs{"ops": "exp,silu"}, nil, "rule float-operand"},
		{"embedding_reshape", OpEmbeddingReshape, []TensorType{ids, bf(64, 256)}, Attrs{"shape": []int{1, 1, 256}}, []TensorType{{Shape: Shape{1, 1, 256}, DType: BF16, Layout: TileLayout, Mem: DRAM, Dist: Replicated}}, ""},
		{"embedding_reshape numel", OpEmbeddingReshape, []TensorType{ids, bf(64, 256)}, Attrs{"shape": []int{1, 2, 256}}, nil, "rule reshape-numel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder("t")
			var ops []*Value
			for i, ty := range tc.in {
				ops = append(ops, b.Input(string(rune('a'+i)), ty))
			}
			got, err := InferTypes(tc.kind, ops, tc.attrs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEltwiseChainFormat: FormatEltwiseChain and ParseEltwiseChain are
// inverses, scalar values keep every bit.
func TestEltwiseChainFormat(t *testing.T) {
	steps := []ChainStep{{Op: OpExp}, {Op: OpMulScalar, Value: -1}, {Op: OpAddScalar, Value: 0.1}, {Op: OpSoftplus}, {Op: OpAddScalar, Value: 1e-300}}
	s := FormatEltwiseChain(steps)
	if want := "exp,mul_scalar:-1,add_scalar:0.1,softplus,add_scalar:1e-300"; s != want {
		t.Errorf("FormatEltwiseChain = %q, want %q", s, want)
	}
	got, err := ParseEltwiseChain(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(steps, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, k := range ChainableOps() {
		if _, ok := chainNames[k.String()]; !ok {
			t.Errorf("ChainableOps has %s, which ParseEltwiseChain does not know", k)
		}
	}
	if len(chainNames) != len(ChainableOps()) {
		t.Errorf("chainNames has %d ops, ChainableOps %d", len(chainNames), len(ChainableOps()))
	}
}
