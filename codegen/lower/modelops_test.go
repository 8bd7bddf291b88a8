package lower

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/longtest"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// Placements used by the model-op cases.
var (
	l1Mem = ir.L1
)

func shardedMem(rows, cols int) ir.MemoryConfig {
	return ir.MemoryConfig{Kind: ir.L1HeightSharded, Shard: &ir.ShardSpec{Grid: ir.CoreRange{}, Shape: [2]int{rows, cols}}}
}

// tt is a tile-layout tensor type of dt and dims placed at mem.
func tt(dt ir.DType, mem ir.MemoryConfig, dims ...int) ir.TensorType {
	t := ir.T(dt, dims...)
	t.Mem = mem
	return t
}

var (
	dram = ir.DRAM
	posT = ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated}
)

// mcase is one model op to lower and run on the simulator against the
// reference evaluator.
type mcase struct {
	name  string
	build func(b *ir.Builder) *ir.Value
	// out, when set, places the result.
	out *ir.MemoryConfig
	// gen overrides the N(0, 1) test data of the named inputs.
	gen map[string]func(rng *rand.Rand, n int) []float32
	// inPlace aliases the result to the first operand (a state updated in
	// place, Context.Alias).
	inPlace bool
}

func constGen(v float32) func(*rand.Rand, int) []float32 {
	return func(_ *rand.Rand, n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
}

func positive(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(math.Abs(rng.NormFloat64()) + 0.05)
	}
	return out
}

func in(b *ir.Builder, name string, t ir.TensorType) *ir.Value { return b.Input(name, t) }

// smallCases are the op signatures of the small config's unfused decode
// graph (models/qwen27b/testdata/small.json), plus a few variants.
var smallCases = []mcase{
	// typecast
	{name: "typecast_bf16_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.Typecast(in(b, "x", tt(ir.BF16, dram, 12, 32)), ir.FP32)
	}},
	{name: "typecast_col_bf16_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.Typecast(in(b, "x", tt(ir.BF16, dram, 12, 1)), ir.FP32)
	}},
	{name: "typecast_fp32_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.Typecast(in(b, "x", tt(ir.FP32, dram, 40, 70)), ir.BF16)
	}},
	{name: "typecast_bf16_bfp8", build: func(b *ir.Builder) *ir.Value {
		return b.Typecast(in(b, "x", tt(ir.BF16, dram, 40, 70)), ir.BFP8B)
	}},
	{name: "typecast_bfp8_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.Typecast(in(b, "x", tt(ir.BFP8B, dram, 64, 64)), ir.BF16)
	}},
	// reshape
	{name: "reshape_view", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.BF16, dram, 1, 256)), []int{1, 1, 256})
	}},
	{name: "reshape_heads", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.BF16, dram, 1, 1, 128)), []int{1, 4, 32})
	}},
	{name: "reshape_col", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.BF16, dram, 1, 1, 12)), []int{12, 1})
	}},
	{name: "reshape_col_batch", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.FP32, dram, 12, 1)), []int{1, 12, 1, 1})
	}},
	{name: "reshape_rows_to_cols", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.FP32, dram, 12, 32)), []int{1, 12, 32, 1})
	}},
	{name: "reshape_flatten", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.FP32, dram, 12, 32)), []int{1, 1, 384})
	}},
	{name: "reshape_batch_rows", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.FP32, dram, 1, 12, 1, 32)), []int{12, 32})
	}},
	{name: "reshape_l1", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.BF16, l1Mem, 1, 8, 64)), []int{1, 1, 512})
	}},
	// slice
	{name: "slice_cols", build: func(b *ir.Builder) *ir.Value {
		return b.Slice(in(b, "x", tt(ir.BF16, dram, 1, 1, 640)), []int{0, 0, 128}, []int{1, 1, 256})
	}},
	{name: "slice_rows", build: func(b *ir.Builder) *ir.Value {
		return b.Slice(in(b, "x", tt(ir.BF16, dram, 1, 4, 640)), []int{0, 1, 0}, []int{1, 4, 640})
	}},
	{name: "slice_l1_rotary_part", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Slice(in(b, "x", tt(ir.BF16, l1Mem, 1, 8, 64)), []int{0, 0, 16}, []int{1, 8, 64})
	}},
	{name: "slice_odd", build: func(b *ir.Builder) *ir.Value {
		return b.Slice(in(b, "x", tt(ir.FP32, dram, 3, 40, 70)), []int{1, 3, 5}, []int{3, 38, 67})
	}},
	// concat
	{name: "concat_rows", build: func(b *ir.Builder) *ir.Value {
		return b.Concat(in(b, "a", tt(ir.BF16, dram, 1, 3, 640)), in(b, "b", tt(ir.BF16, dram, 1, 1, 640)), 1)
	}},
	// a short head before many rows (concatRows: the GDN prefill's conv
	// state before the tokens): a partial last tile row, whole tile rows
	// over two batches in fp32, a head of 31 rows
	{name: "concat_head_rows", build: func(b *ir.Builder) *ir.Value {
		return b.Concat(in(b, "a", tt(ir.BF16, dram, 1, 3, 96)), in(b, "b", tt(ir.BF16, dram, 1, 67, 96)), 1)
	}},
	{name: "concat_head_rows_fp32_batch", build: func(b *ir.Builder) *ir.Value {
		return b.Concat(in(b, "a", tt(ir.FP32, dram, 2, 3, 64)), in(b, "b", tt(ir.FP32, dram, 2, 64, 64)), 1)
	}},
	// units of 8 pages, two column groups walked down their tile rows
	{name: "concat_head_rows_groups", build: func(b *ir.Builder) *ir.Value {
		return b.Concat(in(b, "a", tt(ir.BF16, dram, 1, 3, 512)), in(b, "b", tt(ir.BF16, dram, 1, 100, 512)), 1)
	}},
	{name: "concat_head_rows_31", build: func(b *ir.Builder) *ir.Value {
		return b.Concat(in(b, "a", tt(ir.BF16, dram, 31, 32)), in(b, "b", tt(ir.BF16, dram, 40, 32)), 0)
	}},
	{name: "concat_cols_sharded", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Concat(in(b, "a", tt(ir.BF16, shardedMem(32, 32), 1, 8, 16)), in(b, "b", tt(ir.BF16, shardedMem(32, 64), 1, 8, 48)), 2)
	}},
	{name: "concat_lead", build: func(b *ir.Builder) *ir.Value {
		return b.Concat(in(b, "a", tt(ir.FP32, dram, 2, 5, 40)), in(b, "b", tt(ir.FP32, dram, 1, 5, 40)), 0)
	}},
	{name: "concat_chunks_n_ary", build: func(b *ir.Builder) *ir.Value {
		return b.Emit(ir.OpConcat, []*ir.Value{in(b, "a", tt(ir.FP32, dram, 1, 3, 1, 32, 64)), in(b, "b", tt(ir.FP32, dram, 1, 3, 2, 32, 64)),
			in(b, "c", tt(ir.FP32, dram, 1, 3, 1, 32, 64)), in(b, "d", tt(ir.FP32, dram, 1, 3, 1, 32, 64))}, ir.Attrs{"axis": 2})[0]
	}},
	{name: "concat_mid_batch_tiles", build: func(b *ir.Builder) *ir.Value {
		return b.Emit(ir.OpConcat, []*ir.Value{in(b, "a", tt(ir.BF16, dram, 2, 3, 2, 40, 40)), in(b, "b", tt(ir.BF16, dram, 2, 1, 2, 40, 40)),
			in(b, "c", tt(ir.BF16, dram, 2, 2, 2, 40, 40))}, ir.Attrs{"axis": 1})[0]
	}},
	{name: "concat_cols_n_ary", build: func(b *ir.Builder) *ir.Value {
		return b.Emit(ir.OpConcat, []*ir.Value{in(b, "a", tt(ir.BF16, dram, 1, 5, 16)), in(b, "b", tt(ir.BF16, dram, 1, 5, 48)), in(b, "c", tt(ir.BF16, dram, 1, 5, 8))}, ir.Attrs{"axis": -1})[0]
	}},
	// pad, repeat_interleave, transpose, to_memory
	{name: "pad_heads", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Pad(in(b, "x", tt(ir.BF16, l1Mem, 1, 4, 64)), []int{1, 32, 64}, 0)
	}},
	{name: "pad_value", build: func(b *ir.Builder) *ir.Value {
		return b.Pad(in(b, "x", tt(ir.BF16, dram, 3, 20)), []int{40, 50}, -2.5)
	}},
	{name: "repeat_interleave_heads", build: func(b *ir.Builder) *ir.Value {
		return b.RepeatInterleave(in(b, "x", tt(ir.BF16, dram, 1, 4, 32)), 3, 1)
	}},
	{name: "repeat_interleave_last", build: func(b *ir.Builder) *ir.Value {
		return b.RepeatInterleave(in(b, "x", tt(ir.BF16, dram, 3, 20)), 2, 1)
	}},
	{name: "transpose_heads", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Transpose(in(b, "x", tt(ir.BF16, l1Mem, 1, 8, 16)), 0, 1)
	}},
	{name: "transpose_back", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Transpose(in(b, "x", tt(ir.BF16, l1Mem, 8, 1, 16)), 0, 1)
	}},
	{name: "transpose_last_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.Transpose(in(b, "x", tt(ir.BF16, dram, 2, 40, 70)), 1, 2)
	}},
	{name: "transpose_last_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.Transpose(in(b, "x", tt(ir.FP32, dram, 12, 40)), -1, -2)
	}},
	// layout_chain (passes FuseLayoutChain): the GDN prefill's head split
	// (whole-tile runs), its output path, and a chain with one-element runs
	{name: "layout_chain_heads", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutChain(in(b, "x", tt(ir.BF16, dram, 1, 64, 384)), "slice:0,0,128:1,64,384|reshape:1,64,2,128|repeat_interleave:2:2|transpose:1:2")
	}},
	{name: "layout_chain_out", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutChain(in(b, "x", tt(ir.FP32, dram, 1, 4, 64, 128)), "slice:0,0,0,0:1,4,40,128|transpose:1:2|reshape:1,40,512")
	}},
	// whole-tile chains (chainMovesTiles): the GDN prefill's value split
	// into chunks and its output merge
	{name: "layout_chain_tiles_v", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutChain(in(b, "x", tt(ir.FP32, dram, 1, 64, 384)), "slice:0,0,128:1,64,384|reshape:1,64,2,128|transpose:1:2|reshape:1,2,2,32,128")
	}},
	{name: "layout_chain_tiles_out", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutChain(in(b, "x", tt(ir.FP32, dram, 1, 2, 2, 32, 128)), "reshape:1,2,64,128|transpose:1:2|reshape:1,64,256")
	}},
	{name: "layout_chain_last", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutChain(in(b, "x", tt(ir.FP32, dram, 2, 3, 40, 24)), "transpose:-1:-2|reshape:2,3,960|slice:0,1,0:2,3,900")
	}},
	// layout_chain with dtype fp32 (passes FuseLayoutChainTypecast): the
	// head split of bf16 values stored as fp32, and a chain whose result
	// has partial tiles (filled) and one-element runs
	{name: "layout_chain_heads_to_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutChain(in(b, "x", tt(ir.BF16, dram, 1, 64, 384)), "slice:0,0,128:1,64,384|reshape:1,64,2,128|repeat_interleave:2:2|transpose:1:2", ir.WithDType(ir.FP32))
	}},
	{name: "layout_chain_last_to_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutChain(in(b, "x", tt(ir.BF16, dram, 2, 3, 40, 24)), "transpose:-1:-2|reshape:2,3,960|slice:0,1,0:2,3,900", ir.WithDType(ir.FP32))
	}},
	{name: "to_l1", build: func(b *ir.Builder) *ir.Value {
		return b.ToMemory(in(b, "x", tt(ir.FP32, dram, 1, 12, 32, 32)), "l1_interleaved")
	}},
	{name: "to_dram", build: func(b *ir.Builder) *ir.Value {
		return b.ToMemory(in(b, "x", tt(ir.FP32, l1Mem, 1, 12, 32, 32)), "dram_interleaved")
	}},
	{name: "to_sharded", build: func(b *ir.Builder) *ir.Value {
		return b.ToMemory(in(b, "x", tt(ir.BF16, l1Mem, 1, 32, 64)), "l1_height_sharded", ir.With("grid", []int{0, 0, 0, 0}), ir.With("shard", []int{32, 64}))
	}},
	// eltwise
	{name: "softplus", build: func(b *ir.Builder) *ir.Value { return b.Softplus(in(b, "x", tt(ir.BF16, dram, 1, 1, 12))) }},
	{name: "exp_fp32", build: func(b *ir.Builder) *ir.Value { return b.Exp(in(b, "x", tt(ir.FP32, dram, 1, 12, 1, 1))) }},
	{name: "silu_fp32", build: func(b *ir.Builder) *ir.Value { return b.SiLU(in(b, "x", tt(ir.FP32, dram, 12, 32))) }},
	{name: "sigmoid_l1", out: &l1Mem, build: func(b *ir.Builder) *ir.Value { return b.Sigmoid(in(b, "x", tt(ir.BF16, l1Mem, 1, 1, 512))) }},
	{name: "mul_scalar_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.MulScalar(in(b, "x", tt(ir.FP32, dram, 12, 32)), 0.17677669529663687)
	}},
	{name: "add_row_vector", build: func(b *ir.Builder) *ir.Value {
		return b.Add(in(b, "a", tt(ir.BF16, dram, 1, 1, 12)), in(b, "b", tt(ir.BF16, dram, 12)))
	}},
	{name: "mul_scalar_bcast_l1", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "s", tt(ir.FP32, l1Mem, 1, 12, 32, 32)), in(b, "g", tt(ir.FP32, dram, 1, 12, 1, 1)))
	}},
	{name: "mul_taps", build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "a", tt(ir.BF16, dram, 1, 4, 640)), in(b, "w", tt(ir.BF16, dram, 4, 640)))
	}},
	{name: "mul_mixed_dtypes", build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "a", tt(ir.BF16, dram, 1, 1, 384)), in(b, "b", tt(ir.FP32, dram, 1, 1, 384)))
	}},
	{name: "mul_outer_beta", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "a", tt(ir.FP32, l1Mem, 1, 12, 32, 32)), in(b, "b", tt(ir.FP32, dram, 1, 12, 1, 1)))
	}},
	{name: "sub_rows", build: func(b *ir.Builder) *ir.Value {
		return b.Sub(in(b, "a", tt(ir.FP32, dram, 1, 12, 1, 32)), in(b, "b", tt(ir.FP32, dram, 1, 12, 1, 32)))
	}},
	{name: "sub_bcast_first", build: func(b *ir.Builder) *ir.Value {
		return b.Sub(in(b, "a", tt(ir.BF16, dram, 64)), in(b, "b", tt(ir.BF16, dram, 2, 64)))
	}},
	{name: "add_col_bcast_first", build: func(b *ir.Builder) *ir.Value {
		return b.Add(in(b, "a", tt(ir.BF16, dram, 40, 1)), in(b, "b", tt(ir.BF16, dram, 40, 70)))
	}},
	{name: "sub_outer", build: func(b *ir.Builder) *ir.Value {
		return b.Sub(in(b, "a", tt(ir.FP32, dram, 1, 12, 1, 32, 1)), in(b, "b", tt(ir.FP32, dram, 1, 12, 1, 1, 32)))
	}},
	{name: "mul_fp32_bcast_first", build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "g", tt(ir.FP32, dram, 1, 12, 1, 1)), in(b, "s", tt(ir.FP32, dram, 1, 12, 32, 32)))
	}},
	{name: "sub_fp32_bcast_first", build: func(b *ir.Builder) *ir.Value {
		return b.Sub(in(b, "a", tt(ir.FP32, dram, 40, 1)), in(b, "b", tt(ir.FP32, dram, 40, 70)))
	}},
	{name: "mul_batch_bcast", build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "a", tt(ir.BF16, dram, 3, 1, 40, 64)), in(b, "b", tt(ir.BF16, dram, 2, 40, 1)))
	}},
	{name: "mul_gdn_chunk_column", build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "a", tt(ir.FP32, dram, 1, 2, 3, 32, 128)), in(b, "b", tt(ir.FP32, dram, 1, 2, 3, 32, 1)))
	}},
	{name: "sub_column_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.Sub(in(b, "a", tt(ir.BF16, dram, 70, 100)), in(b, "b", tt(ir.BF16, dram, 70, 1)))
	}},
	{name: "mul_wide_column", build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "a", tt(ir.BF16, dram, 40, 300)), in(b, "b", tt(ir.BF16, dram, 40, 1)))
	}},
	// reductions
	{name: "sum_rows", build: func(b *ir.Builder) *ir.Value { return b.Sum(in(b, "x", tt(ir.BF16, dram, 1, 4, 640)), 1) }},
	{name: "sum_last", build: func(b *ir.Builder) *ir.Value { return b.Sum(in(b, "x", tt(ir.FP32, dram, 40, 70)), -1) }},
	{name: "sum_lead", build: func(b *ir.Builder) *ir.Value { return b.Sum(in(b, "x", tt(ir.BF16, dram, 3, 40, 70)), 0) }},
	{name: "mean", build: func(b *ir.Builder) *ir.Value { return b.Mean(in(b, "x", tt(ir.BF16, dram, 40, 96))) }},
	// norms
	{name: "rms_norm_hidden", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNorm(in(b, "x", tt(ir.BF16, dram, 1, 1, 256)), in(b, "w", tt(ir.BF16, dram, 256)), 1e-6, 1)
	}},
	{name: "rms_norm_heads_l1", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.RMSNorm(in(b, "x", tt(ir.BF16, l1Mem, 1, 8, 64)), in(b, "w", tt(ir.BF16, dram, 64)), 1e-6, 1)
	}},
	{name: "rms_norm_fp32_rows", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNorm(in(b, "x", tt(ir.FP32, dram, 12, 32)), in(b, "w", tt(ir.BF16, dram, 32)), 1e-6, 0)
	}},
	{name: "rms_norm_multi_tile_rows", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNorm(in(b, "x", tt(ir.BF16, dram, 70, 64)), in(b, "w", tt(ir.BF16, dram, 64)), 1e-6, 1)
	}},
	{name: "rms_norm_plain", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNormPlain(in(b, "x", tt(ir.FP32, dram, 12, 32)), 3.125e-08)
	}},
	// bmm
	{name: "bmm_kts", build: func(b *ir.Builder) *ir.Value {
		return b.BMM(in(b, "k", tt(ir.FP32, dram, 1, 12, 1, 32)), in(b, "s", tt(ir.FP32, l1Mem, 1, 12, 32, 32)))
	}},
	{name: "bmm_outer", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.BMM(in(b, "k", tt(ir.FP32, l1Mem, 1, 12, 32, 1)), in(b, "d", tt(ir.FP32, l1Mem, 1, 12, 1, 32)))
	}},
	{name: "bmm_bf16_tiles", build: func(b *ir.Builder) *ir.Value {
		return b.BMM(in(b, "a", tt(ir.BF16, dram, 2, 40, 70)), in(b, "b", tt(ir.BF16, dram, 2, 70, 50)))
	}},
	// bmm_transpose_b: the GDN prefill's k k^T-like products, b unpacked
	// transposed (bit-exact against bmm of the transposed b)
	{name: "bmm_transpose_b_chunks", build: func(b *ir.Builder) *ir.Value {
		return b.BMMTransposeB(in(b, "q", tt(ir.FP32, dram, 1, 3, 2, 32, 64)), in(b, "k", tt(ir.FP32, dram, 1, 3, 2, 32, 64)))
	}},
	{name: "bmm_transpose_b_bf16_pad", build: func(b *ir.Builder) *ir.Value {
		return b.BMMTransposeB(in(b, "a", tt(ir.BF16, dram, 2, 40, 70)), in(b, "b", tt(ir.BF16, dram, 2, 50, 70)))
	}},
	// bmm_transpose_b_mul: the GDN prefill's q k^T times the decays, the
	// product packed to L1 and multiplied there (bit-exact against
	// bmm_transpose_b then mul: the reference computes it so)
	{name: "bmm_transpose_b_mul_chunks", build: func(b *ir.Builder) *ir.Value {
		return b.BMMTransposeBMul(in(b, "q", tt(ir.FP32, dram, 1, 3, 2, 32, 64)), in(b, "k", tt(ir.FP32, dram, 1, 3, 2, 32, 64)), in(b, "g", tt(ir.FP32, dram, 1, 3, 2, 32, 32)))
	}},
	{name: "bmm_transpose_b_mul_bf16_pad", build: func(b *ir.Builder) *ir.Value {
		return b.BMMTransposeBMul(in(b, "a", tt(ir.BF16, dram, 2, 40, 70)), in(b, "b", tt(ir.BF16, dram, 2, 50, 70)), in(b, "c", tt(ir.BF16, dram, 2, 40, 50)))
	}},
	// bmm_scale_b: the GDN prefill's T (beta v), b's rows scaled in L1
	// (bit-exact against mul then bmm: the reference computes it so); K of
	// two tiles: the a tiles wait while both b tiles are scaled
	{name: "bmm_scale_b_chunks", build: func(b *ir.Builder) *ir.Value {
		return b.BMMScaleB(in(b, "t", tt(ir.FP32, dram, 1, 3, 2, 32, 32)), in(b, "v", tt(ir.FP32, dram, 1, 3, 2, 32, 96)), in(b, "beta", tt(ir.FP32, dram, 1, 3, 2, 32, 1)))
	}},
	{name: "bmm_scale_b_k64_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.BMMScaleB(in(b, "a", tt(ir.BF16, dram, 2, 40, 64)), in(b, "b", tt(ir.BF16, dram, 2, 64, 50)), in(b, "c", tt(ir.BF16, dram, 2, 64, 1)))
	}},
	// unary_mul: the GDN prefill's norm gate silu(z) * o (bf16 z, fp32 o),
	// and a unary with a scalar (bit-exact against the unary then mul)
	{name: "unary_mul_silu_gate", build: func(b *ir.Builder) *ir.Value {
		z, o := in(b, "z", tt(ir.BF16, dram, 1, 64, 96)), in(b, "o", tt(ir.FP32, dram, 1, 64, 96))
		return b.UnaryMul(z, o, "silu")
	}},
	{name: "unary_mul_scalar_fp32", build: func(b *ir.Builder) *ir.Value {
		x, y := in(b, "x", tt(ir.FP32, dram, 2, 40, 70)), in(b, "y", tt(ir.FP32, dram, 2, 40, 70))
		return b.UnaryMul(x, y, "mul_scalar", ir.With("value", -0.75))
	}},
	// attention
	{name: "rotary_q", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Rotary(in(b, "x", tt(ir.BF16, l1Mem, 8, 1, 16)), in(b, "cos", tt(ir.BF16, dram, 1, 16)), in(b, "sin", tt(ir.BF16, dram, 1, 16)))
	}},
	{name: "rotary_rows", build: func(b *ir.Builder) *ir.Value {
		return b.Rotary(in(b, "x", tt(ir.BF16, dram, 2, 40, 64)), in(b, "cos", tt(ir.BF16, dram, 64)), in(b, "sin", tt(ir.BF16, dram, 64)))
	}},
	// fp32 data (SrcA reads x as tf32 less its last bit) and a table row
	// per token (no in-tile broadcast, the tables' pages repeat per batch).
	{name: "rotary_fp32_token_tables", build: func(b *ir.Builder) *ir.Value {
		return b.Rotary(in(b, "x", tt(ir.FP32, dram, 2, 40, 64)), in(b, "cos", tt(ir.FP32, dram, 40, 64)), in(b, "sin", tt(ir.FP32, dram, 40, 64)))
	}},
	// a table row per user broadcast over its heads, a rotary width
	// spanning tiles (half = 48: the sign flip covers one and a half
	// tiles), fp32 tables with bf16 data.
	{name: "rotary_user_tables_r96", build: func(b *ir.Builder) *ir.Value {
		return b.Rotary(in(b, "x", tt(ir.BF16, dram, 3, 4, 96)), in(b, "cos", tt(ir.FP32, dram, 3, 1, 96)), in(b, "sin", tt(ir.FP32, dram, 3, 1, 96)))
	}},
	{name: "update_cache", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(37)}, build: func(b *ir.Builder) *ir.Value {
		return b.UpdateCache(in(b, "cache", tt(ir.BF16, dram, 1, 4, 128, 64)), in(b, "new", tt(ir.BF16, shardedMem(32, 64), 1, 32, 64)), in(b, "pos", posT))
	}},
	{name: "update_cache_last", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(127)}, build: func(b *ir.Builder) *ir.Value {
		return b.UpdateCache(in(b, "cache", tt(ir.BF16, dram, 2, 3, 128, 64)), in(b, "new", tt(ir.BF16, dram, 2, 3, 64)), in(b, "pos", posT))
	}},
	{name: "update_cache_in_place", inPlace: true, gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(64)}, build: func(b *ir.Builder) *ir.Value {
		return b.UpdateCache(in(b, "cache", tt(ir.BF16, dram, 1, 4, 128, 64)), in(b, "new", tt(ir.BF16, shardedMem(32, 64), 1, 32, 64)), in(b, "pos", posT))
	}},
	{name: "sdpa_decode", out: &l1Mem, gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(37)}, build: func(b *ir.Builder) *ir.Value {
		return b.SDPADecode(in(b, "q", tt(ir.BF16, l1Mem, 1, 8, 64)), in(b, "k", tt(ir.BF16, dram, 1, 4, 128, 64)),
			in(b, "v", tt(ir.BF16, dram, 1, 4, 128, 64)), in(b, "pos", posT), 0.125)
	}},
	{name: "sdpa_decode_pos0_batch", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(0)}, build: func(b *ir.Builder) *ir.Value {
		return b.SDPADecode(in(b, "q", tt(ir.BF16, dram, 2, 6, 64)), in(b, "k", tt(ir.BF16, dram, 2, 2, 64, 64)),
			in(b, "v", tt(ir.BF16, dram, 2, 2, 64, 64)), in(b, "pos", posT), 0.125)
	}},
	// fp32 operands (read as tf32) and result, pos the last row of a tile.
	{name: "sdpa_decode_fp32", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(31)}, build: func(b *ir.Builder) *ir.Value {
		return b.SDPADecode(in(b, "q", tt(ir.FP32, dram, 1, 8, 64)), in(b, "k", tt(ir.FP32, dram, 1, 2, 64, 64)),
			in(b, "v", tt(ir.FP32, dram, 1, 2, 64, 64)), in(b, "pos", posT), 0.125)
	}},
	// A lower fidelity (the op's attribute) and pos the first row of a tile.
	{name: "sdpa_decode_hifi2", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(64)}, build: func(b *ir.Builder) *ir.Value {
		out := b.SDPADecode(in(b, "q", tt(ir.BF16, dram, 1, 4, 64)), in(b, "k", tt(ir.BF16, dram, 1, 1, 128, 64)),
			in(b, "v", tt(ir.BF16, dram, 1, 1, 128, 64)), in(b, "pos", posT), 0.125)
		out.Def.Attrs[ir.FidelityAttr] = "HiFi2"
		return out
	}},
	// data
	{name: "embedding_tile_table", gen: map[string]func(*rand.Rand, int) []float32{"ids": idsGen(2048)}, build: func(b *ir.Builder) *ir.Value {
		return b.Embedding(in(b, "ids", rowMajor(ir.UInt32, 1)), b.Weight("embed", ir.T(ir.BF16, 2048, 256)))
	}},
	{name: "embedding_tile_table_rows", gen: map[string]func(*rand.Rand, int) []float32{"ids": idsGen(100)}, build: func(b *ir.Builder) *ir.Value {
		return b.Embedding(in(b, "ids", rowMajor(ir.UInt32, 40)), b.Weight("embed", ir.T(ir.FP32, 100, 64)))
	}},
	// More reductions and norms (appended, since a case's seed is its
	// index): fp32 operands, a batch, a lower fidelity, weight + offset.
	{name: "sum_lead_fp32", build: func(b *ir.Builder) *ir.Value { return b.Sum(in(b, "x", tt(ir.FP32, dram, 2, 3, 40, 70)), 1) }},
	{name: "sum_rows_fp32_batch", build: func(b *ir.Builder) *ir.Value { return b.Sum(in(b, "x", tt(ir.FP32, dram, 2, 40, 70)), 1) }},
	{name: "mean_fp32_lofi", build: func(b *ir.Builder) *ir.Value {
		return withFidelity(b.Mean(in(b, "x", tt(ir.FP32, dram, 40, 96))), ir.LoFi)
	}},
	{name: "rms_norm_fp32_offset", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNorm(in(b, "x", tt(ir.FP32, dram, 40, 64)), in(b, "w", tt(ir.BF16, dram, 64)), 1e-6, 1)
	}},
	{name: "rms_norm_fp32_weight_hifi2", build: func(b *ir.Builder) *ir.Value {
		return withFidelity(b.RMSNorm(in(b, "x", tt(ir.FP32, dram, 12, 64)), in(b, "w", tt(ir.FP32, dram, 64)), 1e-6, 0), ir.HiFi2)
	}},
	{name: "rms_norm_plain_rows", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNormPlain(in(b, "x", tt(ir.FP32, dram, 70, 128)), 7.8125e-09)
	}},
}

// withFidelity sets v's op's math fidelity attribute (ir.FidelityAttr).
func withFidelity(v *ir.Value, f ir.MathFidelity) *ir.Value {
	v.Def.Attrs[ir.FidelityAttr] = f.String()
	return v
}

// prefillCases are the prefill-only ops at the small config's prefill
// shapes (seq 32), plus variants.
var prefillCases = []mcase{
	{name: "conv_depthwise", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 1, 35, 640)), in(b, "w", tt(ir.BF16, dram, 4, 640)))
	}},
	{name: "conv_depthwise_batch", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 2, 20, 48)), in(b, "w", tt(ir.BF16, dram, 3, 48)))
	}},
	{name: "conv_depthwise_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.FP32, dram, 2, 10, 40)), in(b, "w", tt(ir.FP32, dram, 4, 40)))
	}},
	{name: "conv_depthwise_tile_rows", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 1, 67, 96)), in(b, "w", tt(ir.BF16, dram, 4, 96)))
	}},
	{name: "conv_depthwise_partial_rows", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 50, 64)), in(b, "w", tt(ir.BF16, dram, 3, 64)))
	}},
	{name: "conv_depthwise_fp32_one_batch", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.FP32, dram, 1, 40, 40)), in(b, "w", tt(ir.FP32, dram, 4, 40)))
	}},
	{name: "conv_depthwise_one_tap", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 1, 33, 32)), in(b, "w", tt(ir.BF16, dram, 1, 32)))
	}},
	{name: "conv_depthwise_many_taps", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 1, 40, 32)), in(b, "w", tt(ir.BF16, dram, 9, 32)))
	}},
	{name: "conv_depthwise_lofi", build: func(b *ir.Builder) *ir.Value {
		out := b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 1, 12, 64)), in(b, "w", tt(ir.BF16, dram, 4, 64)))
		out.Def.Attrs[ir.FidelityAttr] = "LoFi"
		return out
	}},
	// conv_depthwise_chain (passes FuseConvDepthwiseChain): the GDN
	// prefill's silu(conv) (whole tiles, bf16: rounded before silu), a
	// gathered conv (two users) with two steps, and fp32
	{name: "conv_depthwise_chain_silu", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwiseChain(in(b, "x", tt(ir.BF16, dram, 1, 67, 96)), in(b, "w", tt(ir.BF16, dram, 4, 96)), "silu")
	}},
	{name: "conv_depthwise_chain_batch", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwiseChain(in(b, "x", tt(ir.BF16, dram, 2, 20, 48)), in(b, "w", tt(ir.BF16, dram, 3, 48)), "silu,mul_scalar:0.5")
	}},
	{name: "conv_depthwise_chain_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwiseChain(in(b, "x", tt(ir.FP32, dram, 1, 40, 40)), in(b, "w", tt(ir.FP32, dram, 4, 40)), "silu")
	}},
	// conv_depthwise_state_chain (passes FuseConvDepthwiseStateChain): the
	// GDN prefill's silu(conv(conv_state ++ qkv)) with the state's K-1 rows
	// read apart (bf16, two tile rows), and fp32 with two taps
	{name: "conv_depthwise_state_chain_silu", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwiseStateChain(in(b, "state", tt(ir.BF16, dram, 1, 3, 64)), in(b, "x", tt(ir.BF16, dram, 1, 35, 64)), in(b, "w", tt(ir.BF16, dram, 4, 64)), "silu")
	}},
	{name: "conv_depthwise_state_chain_fp32", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwiseStateChain(in(b, "state", tt(ir.FP32, dram, 1, 1, 32)), in(b, "x", tt(ir.FP32, dram, 1, 40, 32)), in(b, "w", tt(ir.FP32, dram, 2, 32)), "silu,mul_scalar:0.5")
	}},
	// rms_norm_plain_chain (passes FuseNormPlainChain): the GDN prefill's
	// l2 norms and scales of q and k: many tile rows (a core per row), one
	// tile row (split over a group of cores), bf16 (rounded before each
	// step) and a one-step chain
	{name: "rms_norm_plain_chain_rows", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNormPlainChain(in(b, "x", tt(ir.FP32, dram, 1, 4, 70, 128)), 7.8125e-09, "mul_scalar:0.08838834764831843,mul_scalar:0.08838834764831843")
	}},
	{name: "rms_norm_plain_chain_split", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNormPlainChain(in(b, "x", tt(ir.FP32, dram, 24, 1024)), 7.8125e-09, "mul_scalar:0.03125")
	}},
	// layout_norm_plain_chain (passes FuseLayoutNormPlainChain): the GDN
	// prefill's q head split (whole tiles, bf16 moved, fp32 stored) with
	// its l2 norm and two scales, and a split with a partial tile row (65
	// tokens: gathered, the padding zeros)
	{name: "layout_norm_plain_chain_heads", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutNormPlainChain(in(b, "x", tt(ir.BF16, dram, 1, 64, 384)), "slice:0,0,0:1,64,128|reshape:1,64,1,128|repeat_interleave:3:2|transpose:1:2",
			7.8125e-09, "mul_scalar:0.08838834764831843,mul_scalar:0.08838834764831843", ir.WithDType(ir.FP32))
	}},
	{name: "layout_norm_plain_chain_gather", build: func(b *ir.Builder) *ir.Value {
		return b.LayoutNormPlainChain(in(b, "x", tt(ir.BF16, dram, 1, 65, 320)), "slice:0,0,64:1,65,128|reshape:1,65,2,32|repeat_interleave:3:2|transpose:1:2",
			3.125e-08, "mul_scalar:0.17677669529663687", ir.WithDType(ir.FP32))
	}},
	// norm_layout_gate (passes FuseNormLayoutGate): the GDN prefill's gated
	// norm silu(z) * rms_norm(o, w) on the head merge [1,H,C,32,Dv] ->
	// [1,S,H*Dv] (whole tiles), and an fp32 gate with a scalar unary and an
	// offset weight on a plain transpose of heads
	{name: "norm_layout_gate_heads", build: func(b *ir.Builder) *ir.Value {
		o, w, z := in(b, "o", tt(ir.FP32, dram, 1, 2, 2, 32, 128)), in(b, "w", tt(ir.BF16, dram, 128)), in(b, "z", tt(ir.BF16, dram, 1, 64, 256))
		return b.NormLayoutGate(o, w, z, 1e-6, 0, "reshape:1,2,64,128|transpose:1:2|reshape:1,64,256", "silu")
	}},
	{name: "norm_layout_gate_scalar", build: func(b *ir.Builder) *ir.Value {
		o, w, z := in(b, "o", tt(ir.FP32, dram, 2, 96, 64)), in(b, "w", tt(ir.FP32, dram, 64)), in(b, "z", tt(ir.FP32, dram, 1, 96, 128))
		return b.NormLayoutGate(o, w, z, 1e-5, 1, "transpose:0:1|reshape:1,96,128", "mul_scalar", ir.With("value", -0.75))
	}},
	{name: "rms_norm_plain_chain_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNormPlainChain(in(b, "x", tt(ir.BF16, dram, 40, 64)), 1e-6, "mul_scalar:0.125,exp,mul_scalar:-1")
	}},
	{name: "cumsum_last", build: func(b *ir.Builder) *ir.Value {
		return b.Cumsum(in(b, "x", tt(ir.FP32, dram, 1, 12, 1, 32)), -1)
	}},
	{name: "cumsum_rows", build: func(b *ir.Builder) *ir.Value {
		return b.Cumsum(in(b, "x", tt(ir.FP32, dram, 2, 40, 20)), 1)
	}},
	{name: "cumsum_rows_column", build: func(b *ir.Builder) *ir.Value {
		return b.Cumsum(in(b, "x", tt(ir.FP32, dram, 40, 1)), 0)
	}},
	{name: "cumsum_last_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.Cumsum(in(b, "x", tt(ir.BF16, dram, 3, 70)), -1)
	}},
	{name: "cumsum_last_hifi2", build: func(b *ir.Builder) *ir.Value {
		out := b.Cumsum(in(b, "x", tt(ir.FP32, dram, 70, 40)), 1)
		out.Def.Attrs[ir.FidelityAttr] = "HiFi2"
		return out
	}},
	{name: "tril", build: func(b *ir.Builder) *ir.Value {
		return b.Tril(in(b, "x", tt(ir.FP32, dram, 1, 12, 1, 32, 32)), 0)
	}},
	// whole-tile matrices (trilTiles): several tiles a matrix, the
	// diagonal inside a tile, below one and past one
	{name: "tril_tiles", build: func(b *ir.Builder) *ir.Value {
		return b.Tril(in(b, "x", tt(ir.FP32, dram, 2, 64, 96)), 0)
	}},
	{name: "tril_tiles_strict_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.Tril(in(b, "x", tt(ir.BF16, dram, 64, 64)), -33)
	}},
	{name: "tril_tiles_upper_bf16", build: func(b *ir.Builder) *ir.Value {
		return b.Tril(in(b, "x", tt(ir.BF16, dram, 1, 96, 64)), 40)
	}},
	{name: "tril_strict", build: func(b *ir.Builder) *ir.Value {
		return b.Tril(in(b, "x", tt(ir.BF16, dram, 40, 50)), -1)
	}},
	{name: "tril_upper_band", build: func(b *ir.Builder) *ir.Value {
		return b.Tril(in(b, "x", tt(ir.BF16, dram, 2, 20, 30)), 2)
	}},
	{name: "tril_inverse", gen: map[string]func(*rand.Rand, int) []float32{"x": scaledGen(0.2)}, build: func(b *ir.Builder) *ir.Value {
		return b.TrilInverse(in(b, "x", tt(ir.FP32, dram, 1, 12, 1, 32, 32)))
	}},
	{name: "tril_inverse_small", gen: map[string]func(*rand.Rand, int) []float32{"x": scaledGen(0.3)}, build: func(b *ir.Builder) *ir.Value {
		return b.TrilInverse(in(b, "x", tt(ir.FP32, dram, 3, 20, 20)))
	}},
	{name: "tril_inverse_lofi", gen: map[string]func(*rand.Rand, int) []float32{"x": scaledGen(0.2)}, build: func(b *ir.Builder) *ir.Value {
		out := b.TrilInverse(in(b, "x", tt(ir.FP32, dram, 5, 32, 32)))
		out.Def.Attrs[ir.FidelityAttr] = "LoFi"
		return out
	}},
	{name: "fill_cache", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(40)}, build: func(b *ir.Builder) *ir.Value {
		return b.FillCache(in(b, "cache", tt(ir.BF16, dram, 1, 4, 128, 64)), in(b, "new", tt(ir.BF16, dram, 1, 4, 32, 64)), in(b, "pos", posT))
	}},
	{name: "fill_cache_in_place", inPlace: true, gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(90)}, build: func(b *ir.Builder) *ir.Value {
		return b.FillCache(in(b, "cache", tt(ir.BF16, dram, 1, 4, 128, 64)), in(b, "new", tt(ir.BF16, dram, 1, 4, 20, 64)), in(b, "pos", posT))
	}},
	{name: "sdpa_prefill", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(40)}, build: func(b *ir.Builder) *ir.Value {
		return b.SDPAPrefill(in(b, "q", tt(ir.BF16, dram, 1, 8, 32, 64)), in(b, "k", tt(ir.BF16, dram, 1, 4, 128, 64)),
			in(b, "v", tt(ir.BF16, dram, 1, 4, 128, 64)), in(b, "pos", posT), 0.125)
	}},
	{name: "sdpa_prefill_rows", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(5)}, build: func(b *ir.Builder) *ir.Value {
		return b.SDPAPrefill(in(b, "q", tt(ir.BF16, dram, 2, 4, 40, 64)), in(b, "k", tt(ir.BF16, dram, 2, 2, 64, 64)),
			in(b, "v", tt(ir.BF16, dram, 2, 2, 64, 64)), in(b, "pos", posT), 0.125)
	}},
	// GQA with groups of 3, a second tile row of one token, an fp32 q
	// (read as tf32) and LoFi products.
	{name: "sdpa_prefill_fp32_lofi", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(70)}, build: func(b *ir.Builder) *ir.Value {
		out := b.SDPAPrefill(in(b, "q", tt(ir.FP32, dram, 1, 6, 33, 64)), in(b, "k", tt(ir.BF16, dram, 1, 2, 128, 64)),
			in(b, "v", tt(ir.BF16, dram, 1, 2, 128, 64)), in(b, "pos", posT), 0.125)
		out.Def.Attrs[ir.FidelityAttr] = "LoFi"
		return out
	}},
	// whole-tile convs whose products fill two DEST sections (6 taps, 4
	// fp32 tiles a section), two taps (one sum) and a chain of two steps
	{name: "conv_depthwise_chain_six_taps", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwiseChain(in(b, "x", tt(ir.BF16, dram, 1, 69, 64)), in(b, "w", tt(ir.BF16, dram, 6, 64)), "silu,mul_scalar:0.5")
	}},
	{name: "conv_depthwise_two_taps", build: func(b *ir.Builder) *ir.Value {
		return b.ConvDepthwise(in(b, "x", tt(ir.BF16, dram, 1, 41, 64)), in(b, "w", tt(ir.BF16, dram, 2, 64)))
	}},
}

func scaledGen(s float64) func(*rand.Rand, int) []float32 {
	return func(rng *rand.Rand, n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * s)
		}
		return out
	}
}

func idsGen(vocab int) func(*rand.Rand, int) []float32 {
	return func(rng *rand.Rand, n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.IntN(vocab))
		}
		return out
	}
}

// bigCases are per-device shapes of the 27B decode graph at TP=2.
var bigCases = []mcase{
	{name: "27b_reshape_heads", build: func(b *ir.Builder) *ir.Value {
		return b.Reshape(in(b, "x", tt(ir.BF16, dram, 1, 1, 3072)), []int{1, 24, 128})
	}},
	{name: "27b_slice_v", build: func(b *ir.Builder) *ir.Value {
		return b.Slice(in(b, "x", tt(ir.BF16, dram, 1, 1, 5120)), []int{0, 0, 2048}, []int{1, 1, 5120})
	}},
	{name: "27b_repeat_interleave", build: func(b *ir.Builder) *ir.Value {
		return b.RepeatInterleave(in(b, "x", tt(ir.BF16, dram, 1, 8, 128)), 3, 1)
	}},
	{name: "27b_typecast", build: func(b *ir.Builder) *ir.Value {
		return b.Typecast(in(b, "x", tt(ir.BF16, dram, 24, 128)), ir.FP32)
	}},
	{name: "27b_rms_norm", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNorm(in(b, "x", tt(ir.BF16, dram, 1, 1, 5120)), in(b, "w", tt(ir.BF16, dram, 5120)), 1e-6, 1)
	}},
	{name: "27b_rms_norm_plain", build: func(b *ir.Builder) *ir.Value {
		return b.RMSNormPlain(in(b, "x", tt(ir.FP32, dram, 24, 128)), 7.8125e-09)
	}},
	{name: "27b_sum_conv", build: func(b *ir.Builder) *ir.Value { return b.Sum(in(b, "x", tt(ir.BF16, dram, 1, 4, 5120)), 1) }},
	{name: "27b_bmm_kts", build: func(b *ir.Builder) *ir.Value {
		return b.BMM(in(b, "k", tt(ir.FP32, dram, 1, 24, 1, 128)), in(b, "s", tt(ir.FP32, l1Mem, 1, 24, 128, 128)))
	}},
	{name: "27b_bmm_outer", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.BMM(in(b, "k", tt(ir.FP32, l1Mem, 1, 24, 128, 1)), in(b, "d", tt(ir.FP32, l1Mem, 1, 24, 1, 128)))
	}},
	{name: "27b_decay", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Mul(in(b, "s", tt(ir.FP32, l1Mem, 1, 24, 128, 128)), in(b, "g", tt(ir.FP32, dram, 1, 24, 1, 1)))
	}},
	{name: "27b_rotary", out: &l1Mem, build: func(b *ir.Builder) *ir.Value {
		return b.Rotary(in(b, "x", tt(ir.BF16, l1Mem, 12, 1, 64)), in(b, "cos", tt(ir.BF16, dram, 1, 64)), in(b, "sin", tt(ir.BF16, dram, 1, 64)))
	}},
	{name: "27b_update_cache", gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(77)}, build: func(b *ir.Builder) *ir.Value {
		return b.UpdateCache(in(b, "cache", tt(ir.BF16, dram, 1, 2, 128, 256)), in(b, "new", tt(ir.BF16, shardedMem(32, 256), 1, 32, 256)), in(b, "pos", posT))
	}},
	{name: "27b_sdpa_decode", out: &l1Mem, gen: map[string]func(*rand.Rand, int) []float32{"pos": constGen(77)}, build: func(b *ir.Builder) *ir.Value {
		return b.SDPADecode(in(b, "q", tt(ir.BF16, l1Mem, 1, 12, 256)), in(b, "k", tt(ir.BF16, dram, 1, 2, 128, 256)),
			in(b, "v", tt(ir.BF16, dram, 1, 2, 128, 256)), in(b, "pos", posT), 0.0625)
	}},
}

// runCase lowers the case's op, checks it against the hardware rules,
// runs it on a fresh simulated device with random inputs and compares the
// result with ref.EvalOp.
func runCase(t *testing.T, tgt *target.Target, tc mcase, seed uint64) {
	t.Helper()
	_, op := graphOp(t, tc.build)
	if tc.out != nil {
		op.Result().Type.Mem = *tc.out
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	args := make([][]float32, len(op.Operands))
	targs := make([]ref.Tensor, len(op.Operands))
	for i, v := range op.Operands {
		n := v.Type.Shape.Numel()
		switch g := tc.gen[v.Name]; {
		case g != nil:
			args[i] = g(rng, n)
		case op.Kind == ir.OpRsqrt:
			args[i] = positive(rng, n)
		default:
			args[i] = make([]float32, n)
			for j := range args[i] {
				args[i][j] = float32(rng.NormFloat64())
			}
		}
		targs[i] = ref.Tensor{Shape: v.Type.Shape, Data: args[i]}
	}
	ctx := NewContext(tgt)
	if tc.inPlace {
		ctx.Alias = map[*ir.Value]*ir.Value{op.Result(): op.Operands[0]}
	}
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.EvalOp(op, targs, refOptions(op, p))
	if err != nil {
		t.Fatal(err)
	}
	if err := kir.Validate(p, tgt); err != nil {
		t.Fatal(err)
	}
	for _, k := range p.Kernels {
		if _, err := cpp.PrintKernel(p, k); err != nil {
			t.Fatalf("printing kernel %s: %v", k.Name, err)
		}
	}
	d := kexec.NewDevice(tgt)
	for _, b := range p.Buffers {
		if _, err := d.Alloc(b); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range op.Operands {
		if err := upload(d, ctx.BufferName(v), v, args[i]); err != nil {
			t.Fatal(err)
		}
	}
	st, err := d.Run(p, kexec.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got, err := download(d, ctx.BufferName(op.Result()), op.Result())
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, op, want[0].Data, got, fmt.Sprintf("%d cores, %d steps", len(p.Cores()), st.Steps))
}

// checkResult compares bit for bit: the same-formats reference models
// every lowering's data path (tf32 reads of fp32 data, accumulation order,
// packer rounding), so a correct program reproduces it exactly, zeros
// by sign too (the FPU writes +0, the SFPU's sign flip -0).
func checkResult(t *testing.T, op *ir.Op, want, got []float32, info string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("element %d: got %v, want %v (exact); %s", i, got[i], want[i], info)
		}
	}
	t.Logf("%s: exact; %s", op.Name(), info)
}

func TestModelOpsOnSim(t *testing.T) {
	for i, tc := range smallCases {
		t.Run(tc.name, func(t *testing.T) { runCase(t, target.Blackhole(), tc, uint64(i)+1) })
	}
}

func TestPrefillOpsOnSim(t *testing.T) {
	for i, tc := range prefillCases {
		t.Run(tc.name, func(t *testing.T) { runCase(t, target.Blackhole(), tc, uint64(i)+500) })
		t.Run(tc.name+"/2x1", func(t *testing.T) {
			if strings.HasPrefix(tc.name, "sdpa_prefill") {
				longtest.Skip(t, "the prefill attention on 2 cores (~0.3 CPU-s each; TestSDPAPrefillGatedOnSim runs it on a 2-core grid by default)")
			}
			runCase(t, smallGrid(), tc, uint64(i)+600)
		})
	}
}

func TestModelOpsSmallGrid(t *testing.T) {
	// Two cores: every lowering gives several work items to one core.
	for i, tc := range smallCases {
		if tc.out != nil && tc.out.Kind != ir.DRAMInterleaved {
			continue // L1 placements spread over the whole grid
		}
		t.Run(tc.name, func(t *testing.T) { runCase(t, smallGrid(), tc, uint64(i)+100) })
	}
}

func TestModelOps27B(t *testing.T) {
	if testing.Short() {
		t.Skip("27B shapes in -short mode")
	}
	for i, tc := range bigCases {
		t.Run(tc.name, func(t *testing.T) { runCase(t, target.Blackhole(), tc, uint64(i)+1000) })
	}
}
