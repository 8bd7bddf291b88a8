package lower

import (
	"strconv"
	"testing"

	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestLowerModelSizes lowers ops at the sizes of a 27B decode step at TP=2
// (hidden 5120, intermediate 8704 per card, vocab 75968 per card): they
// must fit L1 and pass validation without running.
func TestLowerModelSizes(t *testing.T) {
	ctx := NewContext(target.Blackhole())
	cases := []opCase{
		matmulCase("gate_proj", 1, 5120, 8704, ir.BFP8B),
		matmulCase("down_proj", 1, 8704, 5120, ir.BFP8B),
		matmulCase("lm_head", 1, 5120, 75968, ir.BFP8B),
		matmulCase("qkv_bfp4", 32, 5120, 1024, ir.BFP4B),
		normCase("input_layernorm", 1, 5120, 1),
		embeddingCase("embed_tokens", 1, 151936, 5120),
		argmaxCase("argmax", 1, 75968),
		unaryCase("silu", ir.BF16, []int{1, 8704}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.SiLU(x) }),
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, tc.build)
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d cores", tc.name, len(p.Cores()))
			if op.Kind != ir.OpMatmul {
				return
			}
			// The recorded plan is the split the program runs.
			if got, want := p.Kernel("compute").Defines["MM_CORES"], strconv.Itoa(len(p.Cores())); got != want {
				t.Errorf("MM_CORES = %s, program runs on %s cores", got, want)
			}
		})
	}
}
