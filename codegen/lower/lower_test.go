package lower

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// graphOp builds a one-region graph with build and returns it and its last op.
func graphOp(t *testing.T, build func(b *ir.Builder) *ir.Value) (*ir.Graph, *ir.Op) {
	t.Helper()
	b := ir.NewBuilder("test")
	b.Region("mlp", 0)
	out := build(b)
	b.Output(out)
	g, err := b.Finish()
	if err != nil {
		t.Fatalf("building the graph: %v", err)
	}
	ops := g.Ops()
	return g, ops[len(ops)-1]
}

func rowMajor(dt ir.DType, dims ...int) ir.TensorType {
	tt := ir.T(dt, dims...)
	tt.Layout = ir.RowMajorLayout
	return tt
}

// opCase is one op to lower, shared by the validation and simulator tests.
type opCase struct {
	name  string
	build func(b *ir.Builder) *ir.Value
}

func unaryCase(name string, dt ir.DType, dims []int, f func(b *ir.Builder, x *ir.Value) *ir.Value) opCase {
	return opCase{name, func(b *ir.Builder) *ir.Value { return f(b, b.Input("x", ir.T(dt, dims...))) }}
}

func binaryCase(name string, da, db ir.DType, sa, sb []int, f func(b *ir.Builder, x, y *ir.Value) *ir.Value) opCase {
	return opCase{name, func(b *ir.Builder) *ir.Value {
		return f(b, b.Input("a", ir.T(da, sa...)), b.Input("b", ir.T(db, sb...)))
	}}
}

func matmulCase(name string, m, k, n int, wdt ir.DType) opCase {
	return opCase{name, func(b *ir.Builder) *ir.Value {
		return b.Matmul(b.Input("a", ir.T(ir.BF16, m, k)), b.Weight("w.weight", ir.T(wdt, k, n)))
	}}
}

func normCase(name string, rows, h int, offset float64) opCase {
	return opCase{name, func(b *ir.Builder) *ir.Value {
		return b.RMSNorm(b.Input("x", ir.T(ir.BF16, rows, h)), b.Weight("norm.weight", ir.T(ir.BF16, h)), 1e-6, offset)
	}}
}

func embeddingCase(name string, tokens, vocab, h int) opCase {
	return opCase{name, func(b *ir.Builder) *ir.Value {
		return b.Embedding(b.Input("ids", rowMajor(ir.UInt32, tokens)), b.Weight("embed.weight", rowMajor(ir.BF16, vocab, h)))
	}}
}

func argmaxCase(name string, rows, n int) opCase {
	return opCase{name, func(b *ir.Builder) *ir.Value { return b.Argmax(b.Input("x", ir.T(ir.BF16, rows, n))) }}
}

// opCases covers every lowering.
var opCases = []opCase{
	unaryCase("silu", ir.BF16, []int{1, 128}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.SiLU(x) }),
	unaryCase("sigmoid", ir.BF16, []int{3, 64}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Sigmoid(x) }),
	unaryCase("exp", ir.BF16, []int{2, 40, 70}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Exp(x) }),
	unaryCase("rsqrt", ir.BF16, []int{1, 96}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Rsqrt(x) }),
	unaryCase("square", ir.BFP8B, []int{1, 256}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Square(x) }),
	unaryCase("add_scalar", ir.BF16, []int{1, 128}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.AddScalar(x, 1.5) }),
	unaryCase("mul_scalar", ir.FP32, []int{1, 64}, func(b *ir.Builder, x *ir.Value) *ir.Value { return b.MulScalar(x, -0.25) }),
	binaryCase("add", ir.BF16, ir.BF16, []int{1, 128}, []int{1, 128}, func(b *ir.Builder, x, y *ir.Value) *ir.Value { return b.Add(x, y) }),
	binaryCase("sub", ir.BF16, ir.BFP8B, []int{40, 64}, []int{40, 64}, func(b *ir.Builder, x, y *ir.Value) *ir.Value { return b.Sub(x, y) }),
	binaryCase("mul", ir.BF16, ir.BF16, []int{1, 256}, []int{1, 256}, func(b *ir.Builder, x, y *ir.Value) *ir.Value { return b.Mul(x, y) }),
	{"mul_same_operand", func(b *ir.Builder) *ir.Value { x := b.Input("x", ir.T(ir.BF16, 1, 64)); return b.Mul(x, x) }},
	binaryCase("mul_row_bcast", ir.BF16, ir.BF16, []int{40, 96}, []int{96}, func(b *ir.Builder, x, y *ir.Value) *ir.Value { return b.Mul(x, y) }),
	binaryCase("add_row_bcast_first", ir.BF16, ir.BF16, []int{64}, []int{3, 64}, func(b *ir.Builder, x, y *ir.Value) *ir.Value { return b.Add(x, y) }),
	binaryCase("sub_row_bcast", ir.BF16, ir.BF16, []int{2, 64}, []int{1, 64}, func(b *ir.Builder, x, y *ir.Value) *ir.Value { return b.Sub(x, y) }),
	matmulCase("matmul_bf16", 1, 128, 256, ir.BF16),
	matmulCase("matmul_bfp8", 4, 256, 96, ir.BFP8B),
	matmulCase("matmul_bfp4", 32, 64, 800, ir.BFP4B),
	// 40 output tiles of one product each: 8 cores of 5 tiles, so sub-blocks of 4 and 1.
	matmulCase("matmul_subblocks", 3, 32, 1280, ir.BF16),
	// 64 rows: two tile rows, the weights streamed once per row.
	matmulCase("matmul_tile_rows", 64, 64, 96, ir.BF16),
	{"matmul_users", func(b *ir.Builder) *ir.Value {
		return b.Matmul(b.Input("a", ir.T(ir.BF16, 4, 1, 128)), b.Weight("w.weight", ir.T(ir.BFP8B, 128, 96)))
	}},
	normCase("rms_norm_offset", 1, 128, 1),
	normCase("rms_norm", 5, 256, 0),
	normCase("rms_norm_rows", 70, 64, 1),
	embeddingCase("embedding", 3, 64, 128),
	embeddingCase("embedding_full_tile", 32, 40, 64),
	embeddingCase("embedding_tile_rows", 70, 100, 64),
	// Prefill of B = 3 users of 5 tokens from a tile-layout table: one
	// tile row per user.
	{"embedding_users", func(b *ir.Builder) *ir.Value {
		return b.Embedding(b.Input("ids", rowMajor(ir.UInt32, 3, 5)), b.Weight("embed.weight", ir.T(ir.BF16, 100, 64)))
	}},
	// The device loop's RoPE rows: a tile table narrower than a tile
	// (rotary dim 16), gathered by position.
	{"embedding_narrow_table", func(b *ir.Builder) *ir.Value {
		return b.Embedding(b.Input("ids", rowMajor(ir.UInt32, 3)), b.Weight("rope.cos_table", ir.T(ir.BF16, 40, 16)))
	}},
	// The device loop's tokens: the argmax's [B,1,1], one page per user.
	{"embedding_ids_users", func(b *ir.Builder) *ir.Value {
		return b.Embedding(b.Input("ids", rowMajor(ir.UInt32, 3, 1, 1)), b.Weight("embed.weight", ir.T(ir.BF16, 100, 64)))
	}},
	// The device loop's position advancing: an integer add, in place.
	{"add_scalar_uint32", func(b *ir.Builder) *ir.Value { return b.AddScalar(b.Input("pos", rowMajor(ir.UInt32, 5)), 1) }},
	{"add_scalar_uint32_pages", func(b *ir.Builder) *ir.Value { return b.AddScalar(b.Input("pos", rowMajor(ir.UInt32, 3, 1)), 7) }},
	// pack-rows' reshapes of users' rows ([B,1,X] <-> [1,B,X]).
	{"reshape_pack_users", func(b *ir.Builder) *ir.Value {
		return b.Reshape(b.Input("x", ir.T(ir.BF16, 5, 1, 96)), []int{1, 5, 96})
	}},
	{"reshape_unpack_users", func(b *ir.Builder) *ir.Value {
		return b.Reshape(b.Input("x", ir.T(ir.FP32, 1, 19, 64)), []int{19, 1, 64})
	}},
	argmaxCase("argmax", 2, 100),
	argmaxCase("argmax_one_row", 1, 512),
	// B = 3 users' logits: three tile rows of one live row.
	{"argmax_users", func(b *ir.Builder) *ir.Value { return b.Argmax(b.Input("x", ir.T(ir.BF16, 3, 1, 1100))) }},
}

func TestLowerValidates(t *testing.T) {
	ctx := NewContext(target.Blackhole())
	for _, tc := range opCases {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, tc.build)
			p, err := Lower(op, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := kir.Validate(p, ctx.Target); err != nil {
				t.Fatal(err)
			}
			// Every operand and result has a buffer named by BufferName.
			for _, v := range opValues(op) {
				if p.Buffer(ctx.BufferName(v)) == nil {
					t.Errorf("program has no buffer %q for %s", ctx.BufferName(v), v)
				}
			}
		})
	}
}

func TestBufferName(t *testing.T) {
	ctx := NewContext(target.Blackhole())
	_, op := graphOp(t, func(b *ir.Builder) *ir.Value {
		return b.Matmul(b.Input("a", ir.T(ir.BF16, 1, 64)), b.Weight("model.w", ir.T(ir.BF16, 64, 64)))
	})
	got := []string{ctx.BufferName(op.Operands[0]), ctx.BufferName(op.Operands[1]), ctx.BufferName(op.Result())}
	want := []string{"t0", "model.w", "t3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("buffer names (-want +got):\n%s", diff)
	}
}

func TestPageLayout(t *testing.T) {
	tests := []struct {
		name        string
		tt          ir.TensorType
		size, pages int
		err         string
	}{
		{"tile bf16", ir.T(ir.BF16, 3, 40, 70), 2048, 3 * 2 * 3, ""},
		{"tile bfp8", ir.T(ir.BFP8B, 64, 64), 1088, 4, ""},
		{"vector", ir.T(ir.BF16, 100), 2048, 4, ""},
		{"row-major ids", rowMajor(ir.UInt32, 5), 20, 1, ""},
		{"row-major table", rowMajor(ir.BF16, 10, 64), 128, 10, ""},
		{"row-major block float", rowMajor(ir.BFP8B, 10, 64), 0, 0, "no row-major form"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size, pages, err := PageLayout(tc.tt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || size != tc.size || pages != tc.pages {
				t.Errorf("PageLayout = %d, %d, %v; want %d, %d", size, pages, err, tc.size, tc.pages)
			}
		})
	}
}

func TestSpreadBanks(t *testing.T) {
	tests := []struct {
		name            string
		in              Split
		maxCores, banks int
		want            Split
	}{
		// 40 items a core start every core on one of 8 banks; 79 cores
		// take 39 each (78 would leave the last core none: 40 again).
		{"even per core: more cores", Split{Items: 3072, Cores: 77, PerCore: 40, Cost: 5}, 110, 8,
			Split{Items: 3072, Cores: 79, PerCore: 39, Cost: 5}},
		{"coprime already", Split{Items: 3072, Cores: 84, PerCore: 37, Cost: 5}, 110, 8,
			Split{Items: 3072, Cores: 84, PerCore: 37, Cost: 5}},
		// 4 cores (the most) take 2 each: 3 take 3.
		{"none above: fewer cores", Split{Items: 8, Cores: 4, PerCore: 2}, 4, 8,
			Split{Items: 8, Cores: 3, PerCore: 3}},
		// 7 to 11 cores leave 2 a core or a core idle: 12 take 1.
		{"4 banks: one a core", Split{Items: 12, Cores: 6, PerCore: 2}, 110, 4,
			Split{Items: 12, Cores: 12, PerCore: 1}},
		{"balanced bounds kept", Split{Items: 8, Cores: 2, PerCore: 4, Bounds: []int{0, 3, 8}}, 110, 8,
			Split{Items: 8, Cores: 2, PerCore: 4, Bounds: []int{0, 3, 8}}},
		{"one bank", Split{Items: 8, Cores: 2, PerCore: 4}, 110, 1, Split{Items: 8, Cores: 2, PerCore: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SpreadBanks(tc.in, tc.maxCores, tc.banks)); diff != "" {
				t.Errorf("SpreadBanks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanSplit(t *testing.T) {
	tests := []struct {
		name                               string
		items, maxCores, item, core, floor int
		want                               Split
	}{
		// Work dominates dispatch: one item per core.
		{"spread", 8, 110, 256, 0, 0, Split{Items: 8, Cores: 8, PerCore: 1, Cost: 8*60 + 256}},
		// Cheap items: dispatch dominates, one core.
		{"one core", 4, 110, 10, 0, 0, Split{Items: 4, Cores: 1, PerCore: 4, Cost: 60 + 40}},
		// 10 items, cost 100 each: n=5 (2 each) costs 300+200=500, n=10 costs 600+100=700, n=4 (3 each) 240+300=540.
		{"balanced", 10, 110, 100, 0, 0, Split{Items: 10, Cores: 5, PerCore: 2, Cost: 500}},
		// A DRAM floor of 1000 makes more than 2 cores useless.
		{"floor", 10, 110, 200, 0, 1000, Split{Items: 10, Cores: 2, PerCore: 5, Cost: 1120}},
		// 300 items of 1000 cycles: 3 per core (100 cores) costs 6000+3000,
		// 4 per core (75 cores) 4500+4000, 5 per core (60 cores) 3600+5000.
		{"grid", 300, 110, 1000, 0, 0, Split{Items: 300, Cores: 75, PerCore: 4, Cost: 8500}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanSplit(tc.items, tc.maxCores, tc.item, tc.core, tc.floor)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PlanSplit (-want +got):\n%s", diff)
			}
			total := 0
			for i := 0; i < got.Cores; i++ {
				s, n := got.Range(i)
				if s != total || n < 1 {
					t.Errorf("core %d range (%d, %d) after %d items", i, s, n, total)
				}
				total += n
			}
			if total != tc.items {
				t.Errorf("ranges cover %d items, want %d", total, tc.items)
			}
		})
	}
}

func TestMatmulRecordsPlan(t *testing.T) {
	ctx := NewContext(target.Blackhole())
	_, op := graphOp(t, matmulCase("mm", 1, 128, 256, ir.BFP8B).build)
	p, err := Lower(op, ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan := PlanMatmul(4, 8, 110, ir.BFP8B, ir.BF16, ir.HiFi4)
	// Per output tile 4 products of 64 cycles = 256 > dispatch: one tile per core.
	if plan.Cores != 8 || plan.PerCore != 1 {
		t.Errorf("plan = %+v, want 8 cores of 1 tile", plan)
	}
	got := p.Kernel("compute").Defines
	want := map[string]string{"MM_CORES": "8", "MM_TILES_PER_CORE": "1", "MM_SUBBLOCK": "4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defines (-want +got):\n%s", diff)
	}
	if n := len(kir.CoresOf(p.Kernel("reader").Cores)); n != 8 {
		t.Errorf("reader runs on %d cores, want 8", n)
	}
}

// TestLowerUnsupported takes mean out of the lowering table to check the
// error for an op kind without a lowering.
func TestLowerUnsupported(t *testing.T) {
	saved := lowerings[ir.OpMean]
	delete(lowerings, ir.OpMean)
	t.Cleanup(func() { lowerings[ir.OpMean] = saved })
	_, op := graphOp(t, func(b *ir.Builder) *ir.Value { return b.Mean(b.Input("x", ir.T(ir.BF16, 1, 64))) })
	_, err := Lower(op, NewContext(target.Blackhole()))
	if err == nil {
		t.Fatal("Lower succeeded, want an error")
	}
	for _, w := range []string{"op mean", "layer 0 (mlp)", "[1,64] bf16 tile", "no device lowering", "codegen/lower/lower.go", "supported: add"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if Supported(ir.OpMean) {
		t.Error("Supported(mean) after removing it")
	}
}

func TestLowerErrors(t *testing.T) {
	ctx := NewContext(target.Blackhole())
	tests := []struct {
		name  string
		build func(b *ir.Builder) *ir.Value
		want  []string
	}{
		{"matmul k", matmulCase("", 1, 48, 64, ir.BF16).build,
			[]string{"rule matmul-k", "K = 48"}},
		{"block-float table", func(b *ir.Builder) *ir.Value {
			return b.Embedding(b.Input("ids", rowMajor(ir.UInt32, 2)), b.Weight("emb", ir.T(ir.BFP8B, 64, 64)))
		}, []string{"op embedding", "rule embedding-table-layout", "bfp8_b"}},
		{"norm hidden", normCase("", 1, 80, 0).build, []string{"op rms_norm", "rule rmsnorm-hidden", "80"}},
		{"norm too wide", normCase("", 60*32, 32*400, 1).build, []string{"op rms_norm", "rule l1-budget"}}, // 60 tile rows: one core per row
		{"argmax rows", argmaxCase("", 40, 64).build, []string{"op argmax", "rule argmax-rows"}},
		{"argmax dtype", func(b *ir.Builder) *ir.Value { return b.Argmax(b.Input("x", ir.T(ir.FP32, 1, 64))) },
			[]string{"rule argmax-input", "fp32"}},
		{"placement", func(b *ir.Builder) *ir.Value {
			x := ir.T(ir.BF16, 1, 64)
			x.Mem = ir.MemoryConfig{Kind: ir.DRAMWidthSharded, Shard: &ir.ShardSpec{Grid: ir.CoreRange{X1: 7}, Shape: [2]int{32, 32}}}
			return b.SiLU(b.Input("x", x))
		}, []string{"op silu", "rule placement", "dram_width_sharded"}},
		// only the matmul engine's weights may be stored in transposed tiles
		{"transposed tiles", func(b *ir.Builder) *ir.Value {
			r := ir.T(ir.BF16, 32, 64)
			r.TilesTransposed = true
			return b.MatmulAdd(b.Input("x", ir.T(ir.BF16, 32, 64)), b.Weight("w", ir.T(ir.BFP8B, 64, 64)), b.Weight("r", r))
		}, []string{"op matmul_add", "rule transposed-tiles", `"r"`, "tile_t"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, op := graphOp(t, tc.build)
			_, err := Lower(op, ctx)
			if err == nil {
				t.Fatal("Lower succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// loweringExempt lists the op kinds of the op table that never reach
// codegen, each with the reason. It is empty: every kind can reach codegen
// (a model writes it, or a fusion rule or a sharding pass emits it).
var loweringExempt = map[ir.OpKind]string{}

// TestEveryOpKindHasALowering: a kind added to the op table (a new fused
// op, say) without a lowering fails here, not only at tcc run.
func TestEveryOpKindHasALowering(t *testing.T) {
	for _, k := range ir.AllOpKinds() {
		_, exempt := loweringExempt[k]
		switch {
		case exempt && Supported(k):
			t.Errorf("op kind %s is exempt but has a lowering: drop it from loweringExempt", k)
		case !exempt && !Supported(k):
			t.Errorf("op kind %s has no lowering: register one in the lowerings table of codegen/lower/lower.go (or exempt it in loweringExempt with the reason it never reaches codegen)", k)
		}
	}
}
