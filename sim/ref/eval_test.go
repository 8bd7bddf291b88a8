package ref

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

func TestEveryOpKindHasEvaluator(t *testing.T) {
	for _, k := range ir.AllOpKinds() {
		if !HasEvaluator(k) {
			t.Errorf("op %s (kind %d) has no reference evaluator: add an entry in the family file's register call", k, int(k))
		}
	}
	if len(evaluators) != len(ir.AllOpKinds()) {
		t.Errorf("%d evaluators for %d op kinds", len(evaluators), len(ir.AllOpKinds()))
	}
}

// oneOp builds a graph x -> op -> output and returns it with its input.
func oneOp(t *testing.T, in ir.TensorType, build func(b *ir.Builder, x *ir.Value) *ir.Value) (*ir.Graph, *ir.Value, *ir.Value) {
	t.Helper()
	b := ir.NewBuilder("one")
	x := b.Input("x", in)
	b.Region("test", 0)
	y := build(b, x)
	b.Output(y)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g, x, y
}

func TestBF16ResultsAreRepresentable(t *testing.T) {
	b := ir.NewBuilder("bf16")
	x := b.Input("x", ir.T(ir.FP32, 3, 50))
	b.Region("test", 0)
	c := b.Typecast(x, ir.BF16)
	e := b.Exp(c)
	s := b.Add(e, c)
	m := b.Mean(s)
	b.Output(m)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]float32, 150)
	for i := range data {
		data[i] = float32(i)/37 - 2 + 1e-4 // not bf16-representable
	}
	env := map[*ir.Value]Tensor{x: {Shape: ir.Shape{3, 50}, Data: data}}
	for _, tc := range []struct {
		opts Options
		want bool
	}{{DefaultOptions(), true}, {ExactOptions(), false}} {
		res, err := Eval(g, env, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []*ir.Value{c, e, s, m} {
			all := true
			for _, f := range res[v].Data {
				all = all && numerics.IsBF16(f)
			}
			if all != tc.want {
				t.Errorf("StorageFormats=%v: %s result all bf16-representable = %v, want %v", tc.opts.StorageFormats, v.Def.Name(), all, tc.want)
			}
		}
	}
}

func TestTypecastHandValues(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name string
		to   ir.DType
		in   []float32
		want []float32
	}{
		// bf16 has 7 stored mantissa bits: ulp(1) = 2^-7. The result is
		// what the packer writes: ties go away from zero, not to even.
		{"bf16 ties away from zero", ir.BF16, []float32{1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1p-9, -(1 + 0x1p-7 + 0x1p-9), -(1 + 0x1p-8)}, []float32{1 + 0x1p-7, 1 + 0x1p-6, 1, -(1 + 0x1p-7), -(1 + 0x1p-7)}},
		{"uint32 round half even, saturate, NaN", ir.UInt32, []float32{2.5, 3.5, -1, 1e10, nan, 7}, []float32{2, 4, 0, 4294967040, 0, 7}},
		{"int32 round half even, saturate", ir.Int32, []float32{-2.5, -3.5, 1e10, -1e10, 0.49}, []float32{-2, -4, 2147483520, -2147483648, 0}},
	}
	for _, tc := range tests {
		for _, opts := range []Options{DefaultOptions(), ExactOptions()} {
			if tc.to == ir.BF16 && !opts.StorageFormats {
				continue // a float typecast is the identity without storage formats
			}
			t.Run(tc.name, func(t *testing.T) {
				n := len(tc.in)
				g, x, y := oneOp(t, ir.T(ir.FP32, 1, n), func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Typecast(x, tc.to) })
				res, err := Eval(g, map[*ir.Value]Tensor{x: {Shape: ir.Shape{1, n}, Data: tc.in}}, opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, res[y].Data); diff != "" {
					t.Errorf("StorageFormats=%v (-want +got):\n%s", opts.StorageFormats, diff)
				}
			})
		}
	}
}

// TestBlockFloatWeightQuantization checks hand-computed bfp8_b and bfp4_b
// values. A face row of 16 values shares the largest exponent; a value
// decodes as round_half_even(v * 2^(6-e)) * 2^(e-6) for bfp8_b (e the shared
// unbiased exponent) and with 2 instead of 6 for bfp4_b, saturated at 127 / 7.
func TestBlockFloatWeightQuantization(t *testing.T) {
	row0 := map[int]float32{0: 1.0, 1: 0.01, 2: 0.3, 3: -0.7, 16: 100, 17: 0.5, 18: 1.5, 19: -3}
	tests := []struct {
		dt   ir.DType
		want map[int]float32
	}{
		// cols 0-15: e = 0, step 1/64; cols 16-31: e = 6 (100 = 1.5625*2^6), step 1.
		{ir.BFP8B, map[int]float32{0: 1, 1: 1.0 / 64, 2: 19.0 / 64, 3: -45.0 / 64, 16: 100, 17: 0, 18: 2, 19: -3}},
		// cols 0-15: e = 0, step 1/4; cols 16-31: step 16 and 100/16 = 6.25 -> 6.
		{ir.BFP4B, map[int]float32{0: 1, 1: 0, 2: 0.25, 3: -0.75, 16: 96, 17: 0, 18: 0, 19: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.dt.String(), func(t *testing.T) {
			b := ir.NewBuilder("q")
			x := b.Input("x", ir.T(ir.BF16, 1, 32))
			w := b.Weight("w", ir.T(tc.dt, 32, 32))
			b.Region("test", 0)
			y := b.Matmul(x, w)
			b.Output(y)
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			wd := make([]float32, 32*32)
			for c, v := range row0 {
				wd[c] = v
			}
			for i := 32; i < len(wd); i++ {
				wd[i] = 0.125 // other rows: not read by the one-hot row
			}
			onehot := make([]float32, 32)
			onehot[0] = 1
			env := map[*ir.Value]Tensor{x: {Shape: ir.Shape{1, 32}, Data: onehot}, w: {Shape: ir.Shape{32, 32}, Data: wd}}
			want := make([]float32, 32)
			for c, v := range tc.want {
				want[c] = v
			}
			res, err := Eval(g, env, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, res[w].Data[:32]); diff != "" {
				t.Errorf("stored weight row 0 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, res[y].Data); diff != "" {
				t.Errorf("one-hot matmul reads the quantized weight (-want +got):\n%s", diff)
			}
			if wd[1] != 0.01 {
				t.Errorf("Eval modified the caller's weight data")
			}
			res, err = Eval(g, env, ExactOptions())
			if err != nil {
				t.Fatal(err)
			}
			if res[y].Data[1] != 0.01 || res[y].Data[17] != 0.5 {
				t.Errorf("without storage formats the weight must stay unquantized, got row 0 %v", res[y].Data[:20])
			}
		})
	}
}

// TestBlockFloatResultRounding checks that a result declared bfp8_b is the
// fp32 result packed into bfp8_b tiles over its flattened 2-D view as the
// device's packer packs an fp32 DEST (numerics.QuantizeMatrixDevice), not
// the exact rounding host-stored values get.
func TestBlockFloatResultRounding(t *testing.T) {
	build := func(dt ir.DType) (*ir.Graph, *ir.Value, *ir.Value, *ir.Value) {
		b := ir.NewBuilder("bfp")
		x := b.Input("x", ir.T(ir.BF16, 2, 5, 40))
		w := b.Weight("w", ir.T(ir.BF16, 40, 48))
		b.Region("test", 0)
		y := b.Matmul(x, w, ir.WithDType(dt))
		b.Output(y)
		g, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		return g, x, w, y
	}
	xd, wd := make([]float32, 400), make([]float32, 40*48)
	for i := range xd {
		xd[i] = float32(math.Sin(float64(i)))
	}
	for i := range wd {
		wd[i] = float32(math.Cos(float64(i)*0.37)) * float32(1+i%7)
	}
	run := func(dt ir.DType) []float32 {
		g, x, w, y := build(dt)
		res, err := Eval(g, map[*ir.Value]Tensor{x: {Shape: ir.Shape{2, 5, 40}, Data: xd}, w: {Shape: ir.Shape{40, 48}, Data: wd}}, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return res[y].Data
	}
	fp32 := run(ir.FP32)
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		got := run(dt)
		want := numerics.QuantizeMatrixDevice(dt, fp32, 10, 48, true)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s result (-want +got):\n%s", dt, diff)
		}
		if cmp.Equal(numerics.QuantizeMatrix(dt, fp32, 10, 48), got) {
			t.Errorf("%s result equals the exactly rounded one: the device packer's rounding not applied", dt)
		}
		if cmp.Equal(fp32, got) {
			t.Errorf("%s result equals the fp32 result: no rounding applied", dt)
		}
	}
}

func TestMatmulFidelity(t *testing.T) {
	b := ir.NewBuilder("fid")
	x := b.Input("x", ir.T(ir.FP32, 8, 64))
	w := b.Weight("w", ir.T(ir.BF16, 64, 16))
	b.Region("test", 0)
	y := b.Matmul(x, w)
	b.Output(y)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	xd, wd := make([]float32, 8*64), make([]float32, 64*16)
	for i := range xd {
		xd[i] = float32(math.Sin(float64(i)*1.3)) * 1.2345
	}
	for i := range wd {
		wd[i] = numerics.RoundBF16(float32(math.Cos(float64(i) * 0.71)))
	}
	env := map[*ir.Value]Tensor{x: {Shape: ir.Shape{8, 64}, Data: xd}, w: {Shape: ir.Shape{64, 16}, Data: wd}}
	exact, err := Eval(g, env, ExactOptions())
	if err != nil {
		t.Fatal(err)
	}
	byFid := map[ir.MathFidelity][]float32{}
	for _, f := range []ir.MathFidelity{ir.LoFi, ir.HiFi2, ir.HiFi3, ir.HiFi4} {
		res, err := Eval(g, env, Options{StorageFormats: true, Fidelity: f})
		if err != nil {
			t.Fatal(err)
		}
		got := res[y].Data
		byFid[f] = got
		// fp32 in, fp32 out: the result is exactly the FPU model's product.
		if diff := cmp.Diff(numerics.Matmul(xd, wd, 8, 64, 16, f), got); diff != "" {
			t.Errorf("%s: result differs from numerics.Matmul (-want +got):\n%s", f, diff)
		}
		if pcc := numerics.PCC(exact[y].Data, got); pcc < 0.99 {
			t.Errorf("%s: PCC vs exact %.6f, want >= 0.99", f, pcc)
		}
	}
	if cmp.Equal(byFid[ir.LoFi], byFid[ir.HiFi4]) {
		t.Errorf("LoFi and HiFi4 give identical results: fidelity not applied")
	}
	if _, err := Eval(g, env, Options{StorageFormats: true, Fidelity: 7}); err == nil || !strings.Contains(err.Error(), "fidelity") {
		t.Errorf("fidelity 7: got %v, want an unknown-fidelity error", err)
	}
}

func TestArgmaxAndEmbeddingHandValues(t *testing.T) {
	nan := float32(math.NaN())
	g, x, y := oneOp(t, ir.T(ir.FP32, 3, 4), func(b *ir.Builder, x *ir.Value) *ir.Value { return b.Argmax(x) })
	res, err := Eval(g, map[*ir.Value]Tensor{x: {Shape: ir.Shape{3, 4}, Data: []float32{1, 3, 3, 2, 5, -1, 5, 0, 1, nan, 9, nan}}}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{1, 0, 1}, res[y].Data); diff != "" {
		t.Errorf("argmax (first maximum, NaN wins) (-want +got):\n%s", diff)
	}

	b := ir.NewBuilder("emb")
	ids := b.Input("ids", ir.T(ir.UInt32, 1, 3))
	tab := b.Weight("tab", ir.T(ir.BF16, 3, 2))
	b.Region("embed", -1)
	e := b.Embedding(ids, tab)
	b.Output(e)
	g, err = b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	env := map[*ir.Value]Tensor{ids: {Shape: ir.Shape{1, 3}, Data: []float32{2, 0, 2}}, tab: {Shape: ir.Shape{3, 2}, Data: []float32{1, 2, 3, 4, 5, 6}}}
	res, err = Eval(g, env, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Tensor{Shape: ir.Shape{1, 3, 2}, Data: []float32{5, 6, 1, 2, 5, 6}}, res[e]); diff != "" {
		t.Errorf("embedding (-want +got):\n%s", diff)
	}
}

func TestStoreIsIdempotent(t *testing.T) {
	x := Tensor{Shape: ir.Shape{3, 5, 40}, Data: make([]float32, 600)}
	for i := range x.Data {
		x.Data[i] = float32(math.Sin(float64(i)*0.9)) * float32(1+i%13) * 0.37
	}
	for _, dt := range []ir.DType{ir.FP32, ir.BF16, ir.BFP8B, ir.BFP4B} {
		once, err := Store(dt, x)
		if err != nil {
			t.Fatal(err)
		}
		twice, err := Store(dt, once)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(once, twice); diff != "" {
			t.Errorf("%s: Store is not idempotent (-once +twice):\n%s", dt, diff)
		}
		if dt != ir.FP32 && cmp.Equal(once.Data, x.Data) {
			t.Errorf("%s: Store changed nothing", dt)
		}
	}
	if _, err := Store(ir.UInt32, Tensor{Shape: ir.Shape{2}, Data: []float32{1, 2.5}}); err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("Store(uint32, 2.5): got %v, want an error naming element 1", err)
	}
	if _, err := Store(ir.InvalidDType, x); err == nil {
		t.Errorf("Store(invalid dtype) succeeded")
	}
}

// TestStoreMemoFollowsTheData checks Store's block-float memo (quantized):
// a tensor changed in place, or a result the caller changed, must not
// bring back a stale quantization.
func TestStoreMemoFollowsTheData(t *testing.T) {
	x := Tensor{Shape: ir.Shape{2, 32, 64}, Data: make([]float32, 4096)}
	for i := range x.Data {
		x.Data[i] = float32(math.Cos(float64(i)*0.7)) * float32(1+i%7)
	}
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		for range 2 { // a miss, then a hit: the caller owns either result
			r, err := Store(dt, x)
			if err != nil {
				t.Fatal(err)
			}
			r.Data[0] = 12345
		}
		if again, _ := Store(dt, x); again.Data[0] == 12345 {
			t.Errorf("%s: a change to one result reached the next", dt)
		}
		x.Data[5] *= 64 // a new exponent for face row 0
		got, _ := Store(dt, x)
		want := numerics.QuantizeMatrix(dt, x.Data, 64, 64)
		if diff := cmp.Diff(want, got.Data); diff != "" {
			t.Errorf("%s: Store after an in-place change (-want +got):\n%s", dt, diff)
		}
	}
}

func TestEvalIsDeterministicAndDoesNotAlias(t *testing.T) {
	g, x, y := oneOp(t, ir.T(ir.BF16, 4, 33), func(b *ir.Builder, x *ir.Value) *ir.Value { return b.SiLU(b.Reshape(x, []int{2, 66})) })
	data := make([]float32, 132)
	for i := range data {
		data[i] = float32(i)*0.05 - 3
	}
	env := map[*ir.Value]Tensor{x: {Shape: ir.Shape{4, 33}, Data: data}}
	a, err := Eval(g, env, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Eval(g, env, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a[y], b[y]); diff != "" {
		t.Errorf("two runs differ (-first +second):\n%s", diff)
	}
	a[x].Data[0] = 99
	if data[0] == 99 {
		t.Errorf("the returned input tensor shares memory with env")
	}
	if len(a) != 3 {
		t.Errorf("result map has %d values, want 3 (the input and two op results)", len(a))
	}
}
