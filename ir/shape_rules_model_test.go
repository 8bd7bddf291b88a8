package ir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestModelShapeRules checks the result types of the model ops and that
// each rule rejects what it should, with the rule's name in the error.
func TestModelShapeRules(t *testing.T) {
	bf := func(dims ...int) TensorType { return T(BF16, dims...) }
	split := func(tt TensorType, axis int) TensorType { tt.Dist = Dist{Axis: axis}; return tt }
	pos := TensorType{Shape: Shape{1}, DType: UInt32, Layout: RowMajorLayout, Mem: DRAM, Dist: Replicated}
	sharded := bf(2, 8, 64)
	sharded.Mem = MemoryConfig{Kind: L1HeightSharded, Shard: &ShardSpec{Grid: CoreRange{0, 0, 1, 0}, Shape: [2]int{32, 64}}}
	tests := []struct {
		name  string
		kind  OpKind
		in    []TensorType
		attrs Attrs
		want  TensorType // checked when wantErr is ""
		// wantErr is a substring of the expected error.
		wantErr string
	}{
		{"slice", OpSlice, []TensorType{split(bf(2, 1, 96), 2)}, Attrs{"begin": []int{0, 0, 32}, "end": []int{2, 1, 96}}, split(bf(2, 1, 64), 2), ""},
		{"slice bounds", OpSlice, []TensorType{bf(2, 1, 96)}, Attrs{"begin": []int{0, 0, 64}, "end": []int{2, 1, 97}}, TensorType{}, "rule slice-bounds"},
		{"slice empty", OpSlice, []TensorType{bf(2, 1, 96)}, Attrs{"begin": []int{0, 0, 5}, "end": []int{2, 1, 5}}, TensorType{}, "rule slice-bounds"},
		{"slice rank", OpSlice, []TensorType{bf(2, 1, 96)}, Attrs{"begin": []int{0, 0}, "end": []int{2, 1}}, TensorType{}, "rule slice-rank"},
		{"slice of sharded goes interleaved", OpSlice, []TensorType{sharded}, Attrs{"begin": []int{0, 0, 0}, "end": []int{2, 8, 32}}, func() TensorType { x := bf(2, 8, 32); x.Mem = L1; return x }(), ""},
		{"concat", OpConcat, []TensorType{bf(2, 3, 10), bf(2, 1, 10)}, Attrs{"axis": 1}, bf(2, 4, 10), ""},
		{"concat negative axis", OpConcat, []TensorType{bf(2, 3, 10), bf(2, 3, 6)}, Attrs{"axis": -1}, bf(2, 3, 16), ""},
		{"concat three", OpConcat, []TensorType{bf(2, 3, 10), bf(2, 1, 10), bf(2, 5, 10)}, Attrs{"axis": 1}, bf(2, 9, 10), ""},
		{"concat third dims", OpConcat, []TensorType{bf(2, 3, 10), bf(2, 1, 10), bf(2, 5, 11)}, Attrs{"axis": 1}, TensorType{}, "rule concat-dims"},
		{"concat dims", OpConcat, []TensorType{bf(2, 3, 10), bf(2, 1, 11)}, Attrs{"axis": 1}, TensorType{}, "rule concat-dims"},
		{"concat dtype", OpConcat, []TensorType{bf(2, 3), T(FP32, 2, 3)}, Attrs{"axis": 1}, TensorType{}, "rule concat-dtype"},
		{"concat axis", OpConcat, []TensorType{bf(2, 3), bf(2, 3)}, Attrs{"axis": 2}, TensorType{}, "rule axis"},
		{"pad", OpPad, []TensorType{bf(1, 2, 256)}, Attrs{"shape": []int{1, 32, 256}, "value": 0.0}, bf(1, 32, 256), ""},
		{"pad shrink", OpPad, []TensorType{bf(1, 2, 256)}, Attrs{"shape": []int{1, 1, 256}, "value": 0.0}, TensorType{}, "rule pad-grow"},
		{"repeat_interleave", OpRepeatInterleave, []TensorType{split(bf(1, 8, 128), 1)}, Attrs{"repeats": 3, "axis": 1}, split(bf(1, 24, 128), 1), ""},
		{"repeat_interleave zero", OpRepeatInterleave, []TensorType{bf(1, 8, 128)}, Attrs{"repeats": 0, "axis": 1}, TensorType{}, "rule repeats"},
		{"transpose moves split", OpTranspose, []TensorType{split(bf(1, 12, 64), 1)}, Attrs{"dim0": 0, "dim1": 1}, split(bf(12, 1, 64), 0), ""},
		{"transpose same dim", OpTranspose, []TensorType{bf(1, 12, 64)}, Attrs{"dim0": 1, "dim1": -2}, TensorType{}, "rule transpose-dims"},
		{"to_memory l1", OpToMemory, []TensorType{bf(1, 1, 64)}, Attrs{"mem": "l1_interleaved"}, func() TensorType { x := bf(1, 1, 64); x.Mem = L1; return x }(), ""},
		{"to_memory sharded", OpToMemory, []TensorType{bf(2, 8, 64)}, Attrs{"mem": "l1_height_sharded", "grid": []int{0, 0, 1, 0}, "shard": []int{32, 64}}, sharded, ""},
		{"to_memory uncovered", OpToMemory, []TensorType{bf(3, 8, 64)}, Attrs{"mem": "l1_height_sharded", "grid": []int{0, 0, 1, 0}, "shard": []int{32, 64}}, TensorType{}, "rule to-memory-cover"},
		{"to_memory missing spec", OpToMemory, []TensorType{bf(2, 8, 64)}, Attrs{"mem": "l1_width_sharded"}, TensorType{}, "rule to-memory-shard"},
		{"to_memory spec on interleaved", OpToMemory, []TensorType{bf(2, 8, 64)}, Attrs{"mem": "dram_interleaved", "grid": []int{0, 0, 0, 0}}, TensorType{}, "rule to-memory-shard"},
		{"to_memory kind", OpToMemory, []TensorType{bf(2, 8, 64)}, Attrs{"mem": "sram"}, TensorType{}, "rule to-memory-kind"},
		{"softplus", OpSoftplus, []TensorType{bf(1, 1, 24)}, nil, bf(1, 1, 24), ""},
		{"sum", OpSum, []TensorType{bf(2, 4, 96)}, Attrs{"axis": 1}, bf(2, 1, 96), ""},
		{"rms_norm", OpRMSNorm, []TensorType{bf(1, 12, 256), bf(256)}, Attrs{"eps": 1e-6, "offset": 1.0}, bf(1, 12, 256), ""},
		{"rms_norm weight", OpRMSNorm, []TensorType{bf(1, 12, 256), bf(128)}, Attrs{"eps": 1e-6, "offset": 1.0}, TensorType{}, "rule norm-weight"},
		{"rms_norm_plain", OpRMSNormPlain, []TensorType{T(FP32, 24, 128)}, Attrs{"eps": 1e-6}, T(FP32, 24, 128), ""},
		{"bmm", OpBMM, []TensorType{T(FP32, 1, 24, 1, 128), T(FP32, 1, 24, 128, 128)}, nil, T(FP32, 1, 24, 1, 128), ""},
		{"bmm outer", OpBMM, []TensorType{T(FP32, 1, 24, 128, 1), T(FP32, 1, 24, 1, 128)}, Attrs{"dtype": BF16}, T(BF16, 1, 24, 128, 128), ""},
		{"bmm batch", OpBMM, []TensorType{T(FP32, 1, 24, 1, 128), T(FP32, 1, 12, 128, 128)}, nil, TensorType{}, "rule bmm-batch"},
		{"bmm inner", OpBMM, []TensorType{T(FP32, 1, 24, 1, 64), T(FP32, 1, 24, 128, 128)}, nil, TensorType{}, "rule bmm-inner"},
		{"bmm rank", OpBMM, []TensorType{T(FP32, 24, 1, 128), T(FP32, 1, 24, 128, 128)}, nil, TensorType{}, "rule bmm-rank"},
		{"rotary", OpRotary, []TensorType{bf(12, 2, 64), bf(2, 64), bf(2, 64)}, nil, bf(12, 2, 64), ""},
		{"rotary table dim", OpRotary, []TensorType{bf(12, 2, 64), bf(2, 32), bf(2, 64)}, nil, TensorType{}, "rule rotary-table"},
		{"rotary widen", OpRotary, []TensorType{bf(12, 1, 64), bf(2, 64), bf(2, 64)}, nil, TensorType{}, "rule rotary-broadcast"},
		{"rotary odd", OpRotary, []TensorType{bf(12, 2, 63), bf(2, 63), bf(2, 63)}, nil, TensorType{}, "rule rotary-even"},
		{"update_cache", OpUpdateCache, []TensorType{bf(2, 2, 128, 256), bf(2, 32, 256), pos}, nil, bf(2, 2, 128, 256), ""},
		{"update_cache heads", OpUpdateCache, []TensorType{bf(2, 2, 128, 256), bf(2, 1, 256), pos}, nil, TensorType{}, "rule cache-shape"},
		{"update_cache pos", OpUpdateCache, []TensorType{bf(2, 2, 128, 256), bf(2, 2, 256), T(FP32, 1)}, nil, TensorType{}, "rule decode-pos"},
		{"sdpa_decode", OpSDPADecode, []TensorType{bf(2, 12, 256), bf(2, 2, 128, 256), bf(2, 2, 128, 256), pos}, Attrs{"scale": 0.0625}, bf(2, 12, 256), ""},
		{"sdpa_decode groups", OpSDPADecode, []TensorType{bf(2, 12, 256), bf(2, 5, 128, 256), bf(2, 5, 128, 256), pos}, Attrs{"scale": 0.0625}, TensorType{}, "rule sdpa-shape"},
		{"cumsum", OpCumsum, []TensorType{T(FP32, 1, 4, 2, 64)}, Attrs{"axis": -1}, T(FP32, 1, 4, 2, 64), ""},
		{"cumsum axis", OpCumsum, []TensorType{T(FP32, 1, 4)}, Attrs{"axis": 2}, TensorType{}, "rule axis"},
		{"tril", OpTril, []TensorType{T(FP32, 2, 64, 64)}, Attrs{"diagonal": -1}, T(FP32, 2, 64, 64), ""},
		{"tril rank", OpTril, []TensorType{T(FP32, 64)}, Attrs{"diagonal": 0}, TensorType{}, "rule matrix-rank"},
		{"tril_inverse", OpTrilInverse, []TensorType{T(FP32, 2, 64, 64)}, nil, T(FP32, 2, 64, 64), ""},
		{"tril_inverse square", OpTrilInverse, []TensorType{T(FP32, 2, 64, 32)}, nil, TensorType{}, "rule square-matrix"},
		{"conv_depthwise", OpConvDepthwise, []TensorType{bf(2, 19, 96), bf(4, 96)}, nil, bf(2, 16, 96), ""},
		{"conv_depthwise channels", OpConvDepthwise, []TensorType{bf(2, 19, 96), bf(4, 64)}, nil, TensorType{}, "rule conv-shape"},
		{"fill_cache", OpFillCache, []TensorType{bf(2, 2, 128, 256), bf(2, 2, 16, 256), pos}, nil, bf(2, 2, 128, 256), ""},
		{"fill_cache long", OpFillCache, []TensorType{bf(2, 2, 128, 256), bf(2, 2, 129, 256), pos}, nil, TensorType{}, "rule cache-shape"},
		{"sdpa_prefill", OpSDPAPrefill, []TensorType{bf(2, 12, 16, 256), bf(2, 2, 128, 256), bf(2, 2, 128, 256), pos}, Attrs{"scale": 0.0625}, bf(2, 12, 16, 256), ""},
		{"sdpa_prefill long", OpSDPAPrefill, []TensorType{bf(2, 12, 256, 256), bf(2, 2, 128, 256), bf(2, 2, 128, 256), pos}, Attrs{"scale": 0.0625}, TensorType{}, "rule sdpa-shape"},
		{"all_reduce", OpAllReduce, []TensorType{split(bf(1, 1, 5120), 2)}, Attrs{"devices": 2}, bf(1, 1, 5120), ""},
		{"reduce_scatter", OpReduceScatter, []TensorType{bf(1, 1, 5120)}, Attrs{"axis": -1, "devices": 2}, split(bf(1, 1, 2560), 2), ""},
		{"reduce_scatter split", OpReduceScatter, []TensorType{bf(1, 1, 100)}, Attrs{"axis": 2, "devices": 8}, TensorType{}, "rule reduce-scatter-split"},
		{"all_gather", OpAllGather, []TensorType{split(bf(1, 1, 2560), 2)}, Attrs{"axis": 2, "devices": 2}, bf(1, 1, 5120), ""},
		{"all_gather devices", OpAllGather, []TensorType{bf(1, 1, 2560)}, Attrs{"axis": 2, "devices": 0}, TensorType{}, "rule collective-devices"},
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
			if diff := cmp.Diff([]TensorType{tc.want}, got); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
		})
	}
}
