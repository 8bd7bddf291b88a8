package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Tolerances of the per-op tests against float64 code written from each
// op's equation (the want functions below share no code with the
// evaluator).
//
//   - StorageFormats off: the evaluator computes in float32 with one final
//     rounding (or float64 accumulation), so PCC >= 1-1e-6 and max relative
//     error <= 1e-6 (about 16 float32 ulps; one rounding is 2^-24 ~ 6e-8).
//   - StorageFormats on: the reference is computed from the inputs rounded
//     through their declared dtypes (numerics.RoundBF16 / QuantizeMatrix,
//     applied here in the test), so the only extra error is the rounding of
//     the result to bf16, at most 2^-9 relative: PCC >= 0.9999 and max
//     relative error <= 2^-8 (2x margin for float32 arithmetic inside the op).
//
// MaxRelErr floors the denominator at 1e-3 of the largest reference
// magnitude, so near-zero results (sub, mean, matmul) are judged on the
// tensor's scale.
const (
	offMinPCC = 1 - 1e-6
	offMaxRel = 1e-6
	onMinPCC  = 0.9999
	onMaxRel  = 0x1p-8
	// normOnMaxRel is onMaxRel for the norms with formats on, which model
	// the device's FPU: its tf32 reading of the fp32 squares and of
	// x * rsqrt (SrcA, up to 2^-9 each), of rsqrt and of w + offset (SrcB,
	// up to 2^-10 each) adds up to 3 * 2^-9 to the bf16 rounding.
	normOnMaxRel = onMaxRel + 3*0x1p-9
	// rowSumOnMaxRel is onMaxRel for the last-dim sums and means with
	// formats on: the row reduction keeps the upper 16 bits of its running
	// sum after every tile (rowSum), each truncation up to 2^-7 of the sum
	// so far, so two tiles whose partial sums are below the result are
	// within 2^-6 before the bf16 rounding of the result. (The error is
	// relative to the partial sums, unbounded against a cancelling result:
	// the cases draw their inputs from [-1, 3], whose 40-term sums stay far
	// from zero.)
	rowSumOnMaxRel = onMaxRel + 0x1p-6
	// matmulOnMaxRel is onMaxRel for matmuls with formats on, which run the
	// FPU datapath (numerics.Matmul): each group of eight products is
	// aligned to its largest with one guard bit, an error of up to 2^-12 of
	// that product per term, which on a sum that cancels to near the 1e-3
	// floor is several percent of it (the PCC bound still holds).
	matmulOnMaxRel = 0.1
	// colSumOnMaxRel is onMaxRel for sums over the second-to-last dim with
	// formats on: reduce_tile's column pool (GAPOOL) is the same mvmul
	// lane as a matmul's, each group of eight terms aligned to its largest
	// with one guard bit, so a sum that cancels is off by a few 2^-12 of
	// its largest term, as matmulOnMaxRel says.
	colSumOnMaxRel = matmulOnMaxRel
	// trilInverseOnMaxRel is onMaxRel for tril_inverse of fp32 matrices
	// with formats on, which follows the device's eight chained tile
	// matmuls and four adds (trilInverseFPU): every fp32 operand is read as
	// tf32 (up to 2^-9 relative per read), so entries that cancel to near
	// the 1e-3 floor are off by a few percent (the PCC bound still holds).
	trilInverseOnMaxRel = 0.1
	// convOnMaxRel is onMaxRel for conv_depthwise with formats on, which
	// models the device's eltwise program: the fp32 products and partial
	// sums are read through tf32 source registers (truncated, up to 2^-10
	// of each, 2K-1 reads per element for K taps), which on a sum that
	// cancels to near the 1e-3 floor is tens of percent of it (the PCC
	// bound still holds; codegen/lower's TestPrefillOpsOnSim checks the
	// model against the simulated device bit for bit).
	convOnMaxRel = 0.25
	// rotaryOnMaxRel is onMaxRel for rotary with formats on, which models
	// the device's FPU (rotaryFPU): the fp32 products x*cos and
	// rotate_half(x)*sin are read back as tf32, each truncated by up to
	// 2^-10 of itself, which on a sum that cancels to near the 1e-3 floor
	// is a few percent of it (the PCC bound still holds).
	rotaryOnMaxRel = 0.05
	// sdpaOnMaxRel is onMaxRel for the attentions with formats on, which
	// model their program: it reads the fp32 scores and probabilities as
	// tf32 (truncated, up to 2^-10 relative), so a weight exp(s) is off by
	// up to |s| * 2^-10 (about 1% at the test data's scores), and outputs
	// that cancel to near the 1e-3 floor are off by a large part of it
	// (the PCC bound still holds).
	sdpaOnMaxRel = 1.0
)

// arr is a float64 test tensor: row-major values and their shape.
type arr struct {
	shape []int
	v     []float64
}

// inSpec describes one graph input of an op test and how to fill it.
type inSpec struct {
	dt     ir.DType
	shape  []int
	weight bool    // declare as a weight rather than an input
	lo, hi float64 // uniform range
	ints   bool    // uniform integers in [lo, hi)
}

type opCase struct {
	name  string
	in    []inSpec
	build func(b *ir.Builder, in []*ir.Value) *ir.Value
	want  func(in []arr) []float64
	exact bool // integer result: must match exactly in both modes
	// onMaxRel overrides onMaxRel with formats on when not 0.
	onMaxRel float64
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// bcast64 is numpy broadcasting written from its definition: align shapes
// at the last dimension; an output index i_d reads index 0 of a size-1 dim.
func bcast64(a, b arr, f func(x, y float64) float64) []float64 {
	n := max(len(a.shape), len(b.shape))
	dim := func(s []int, d int) int { // size of s at output dim d, 1 if absent
		if j := d - (n - len(s)); j >= 0 {
			return s[j]
		}
		return 1
	}
	out := make([]int, n)
	for d := range out {
		out[d] = max(dim(a.shape, d), dim(b.shape, d))
	}
	flat := func(s []int, idx []int) int {
		off := 0
		for d := 0; d < n; d++ {
			sz := dim(s, d)
			i := idx[d]
			if sz == 1 {
				i = 0
			}
			off = off*sz + i
		}
		return off
	}
	res := make([]float64, numel(out))
	idx := make([]int, n)
	for o := range res {
		r := o
		for d := n - 1; d >= 0; d-- {
			idx[d] = r % out[d]
			r /= out[d]
		}
		res[o] = f(a.v[flat(a.shape, idx)], b.v[flat(b.shape, idx)])
	}
	return res
}

func map64(a arr, f func(float64) float64) []float64 {
	out := make([]float64, len(a.v))
	for i, x := range a.v {
		out[i] = f(x)
	}
	return out
}

// rows64 splits a into its last-dimension rows.
func rows64(a arr) [][]float64 {
	n := a.shape[len(a.shape)-1]
	var rows [][]float64
	for i := 0; i < len(a.v); i += n {
		rows = append(rows, a.v[i:i+n])
	}
	return rows
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func rmsnorm64(x, w arr, eps, offset float64) []float64 {
	var out []float64
	for _, row := range rows64(x) {
		var ss float64
		for _, v := range row {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(len(row))+eps)
		for i, v := range row {
			out = append(out, v*r*(w.v[i]+offset))
		}
	}
	return out
}

func matmul64(a, w arr) []float64 {
	k, n := w.shape[0], w.shape[1]
	m := len(a.v) / k
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += a.v[i*k+p] * w.v[p*n+j]
			}
			out[i*n+j] = s
		}
	}
	return out
}

var bf16x = inSpec{dt: ir.BF16, shape: []int{2, 3, 40}, lo: -3, hi: 3}

func opCases() []opCase {
	eps := 1e-6
	return []opCase{
		{name: "add same shape", in: []inSpec{bf16x, bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Add(in[0], in[1]) },
			want: func(in []arr) []float64 {
				return bcast64(in[0], in[1], func(x, y float64) float64 { return x + y })
			}},
		{name: "add broadcast column", in: []inSpec{bf16x, {dt: ir.BF16, shape: []int{3, 1}, lo: -3, hi: 3}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Add(in[0], in[1]) },
			want: func(in []arr) []float64 {
				return bcast64(in[0], in[1], func(x, y float64) float64 { return x + y })
			}},
		{name: "sub broadcast row, first operand broadcast", in: []inSpec{{dt: ir.BF16, shape: []int{40}, lo: -3, hi: 3}, bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Sub(in[0], in[1]) },
			want: func(in []arr) []float64 {
				return bcast64(in[0], in[1], func(x, y float64) float64 { return x - y })
			}},
		{name: "mul broadcast both", in: []inSpec{{dt: ir.BF16, shape: []int{2, 1, 40}, lo: -3, hi: 3}, {dt: ir.BF16, shape: []int{3, 1}, lo: -3, hi: 3}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Mul(in[0], in[1]) },
			want: func(in []arr) []float64 {
				return bcast64(in[0], in[1], func(x, y float64) float64 { return x * y })
			}},
		{name: "add_scalar", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.AddScalar(in[0], 0.75) },
			want:  func(in []arr) []float64 { return map64(in[0], func(x float64) float64 { return x + 0.75 }) }},
		{name: "mul_scalar", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.MulScalar(in[0], -1.5) },
			want:  func(in []arr) []float64 { return map64(in[0], func(x float64) float64 { return x * -1.5 }) }},
		{name: "silu", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.SiLU(in[0]) },
			want:  func(in []arr) []float64 { return map64(in[0], func(x float64) float64 { return x * sigmoid64(x) }) }},
		{name: "sigmoid", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Sigmoid(in[0]) },
			want:  func(in []arr) []float64 { return map64(in[0], sigmoid64) }},
		{name: "exp", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Exp(in[0]) },
			want:  func(in []arr) []float64 { return map64(in[0], math.Exp) }},
		{name: "rsqrt", in: []inSpec{{dt: ir.BF16, shape: []int{2, 3, 40}, lo: 0.01, hi: 10}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Rsqrt(in[0]) },
			want:  func(in []arr) []float64 { return map64(in[0], func(x float64) float64 { return 1 / math.Sqrt(x) }) }},
		{name: "square", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Square(in[0]) },
			want:  func(in []arr) []float64 { return map64(in[0], func(x float64) float64 { return x * x }) }},
		{name: "mean", in: []inSpec{{dt: ir.BF16, shape: []int{4, 16, 40}, lo: -1, hi: 3}}, onMaxRel: rowSumOnMaxRel,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Mean(in[0]) },
			want: func(in []arr) []float64 {
				var out []float64
				for _, row := range rows64(in[0]) {
					s := 0.0
					for _, v := range row {
						s += v
					}
					out = append(out, s/float64(len(row)))
				}
				return out
			}},
		{name: "argmax", in: []inSpec{{dt: ir.BF16, shape: []int{4, 7, 50}, lo: -3, hi: 3}}, exact: true,
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Argmax(in[0]) },
			want: func(in []arr) []float64 {
				var out []float64
				for _, row := range rows64(in[0]) {
					best := 0
					for i := range row {
						if row[i] > row[best] {
							best = i
						}
					}
					out = append(out, float64(best))
				}
				return out
			}},
		{name: "matmul bf16 x bfp8_b", in: []inSpec{{dt: ir.BF16, shape: []int{2, 5, 70}, lo: -1, hi: 1}, {dt: ir.BFP8B, shape: []int{70, 48}, weight: true, lo: -1, hi: 1}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Matmul(in[0], in[1]) },
			want:     func(in []arr) []float64 { return matmul64(in[0], in[1]) },
			onMaxRel: matmulOnMaxRel},
		{name: "matmul bf16 x bf16 to fp32", in: []inSpec{{dt: ir.BF16, shape: []int{37, 64}, lo: -1, hi: 1}, {dt: ir.BF16, shape: []int{64, 33}, weight: true, lo: -1, hi: 1}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Matmul(in[0], in[1], ir.WithDType(ir.FP32)) },
			want:     func(in []arr) []float64 { return matmul64(in[0], in[1]) },
			onMaxRel: matmulOnMaxRel},
		{name: "rms_norm offset 0", in: []inSpec{{dt: ir.BF16, shape: []int{2, 3, 64}, lo: -3, hi: 3}, {dt: ir.BF16, shape: []int{64}, weight: true, lo: 0.5, hi: 1.5}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.RMSNorm(in[0], in[1], eps, 0) },
			want:     func(in []arr) []float64 { return rmsnorm64(in[0], in[1], eps, 0) },
			onMaxRel: normOnMaxRel},
		{name: "rms_norm offset 1, [1,96] weight", in: []inSpec{{dt: ir.BF16, shape: []int{5, 96}, lo: -3, hi: 3}, {dt: ir.BF16, shape: []int{1, 96}, weight: true, lo: -0.5, hi: 0.5}},
			build:    func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.RMSNorm(in[0], in[1], eps, 1) },
			want:     func(in []arr) []float64 { return rmsnorm64(in[0], in[1], eps, 1) },
			onMaxRel: normOnMaxRel},
		{name: "embedding", in: []inSpec{{dt: ir.UInt32, shape: []int{2, 3}, lo: 0, hi: 50, ints: true}, {dt: ir.BF16, shape: []int{50, 40}, weight: true, lo: -1, hi: 1}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Embedding(in[0], in[1]) },
			want: func(in []arr) []float64 {
				var out []float64
				h := in[1].shape[1]
				for _, id := range in[0].v {
					out = append(out, in[1].v[int(id)*h:int(id)*h+h]...)
				}
				return out
			}},
		{name: "typecast fp32 to bf16", in: []inSpec{{dt: ir.FP32, shape: []int{3, 50}, lo: -3, hi: 3}},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Typecast(in[0], ir.BF16) },
			want:  func(in []arr) []float64 { return in[0].v }},
		{name: "typecast bf16 to fp32", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Typecast(in[0], ir.FP32) },
			want:  func(in []arr) []float64 { return in[0].v }},
		{name: "reshape", in: []inSpec{bf16x},
			build: func(b *ir.Builder, in []*ir.Value) *ir.Value { return b.Reshape(in[0], []int{8, 30}) },
			want:  func(in []arr) []float64 { return in[0].v }},
	}
}

// fill draws the values of one input.
func fill(rng *rand.Rand, s inSpec) []float32 {
	out := make([]float32, numel(s.shape))
	for i := range out {
		if s.ints {
			out[i] = float32(int(s.lo) + rng.IntN(int(s.hi-s.lo)))
		} else {
			out[i] = float32(s.lo + (s.hi-s.lo)*rng.Float64())
		}
	}
	return out
}

// storeInTest rounds data through dt as the device stores it, written with
// numerics directly (not the evaluator's Store).
func storeInTest(dt ir.DType, shape []int, data []float32) []float32 {
	switch dt {
	case ir.BF16:
		out := make([]float32, len(data))
		for i, v := range data {
			out[i] = numerics.RoundBF16(v)
		}
		return out
	case ir.BFP8B, ir.BFP4B:
		cols := shape[len(shape)-1]
		return numerics.QuantizeMatrix(dt, data, len(data)/cols, cols)
	}
	return data
}

func to64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func TestOpsAgainstFloat64(t *testing.T) {
	for ci, c := range opCases() {
		t.Run(c.name, func(t *testing.T) { checkOpCase(t, uint64(ci), c) })
	}
}

// checkOpCase builds c's one-op graph, fills its inputs from a generator
// seeded with seed and compares the evaluator with c.want in both modes at
// the tolerances above.
func checkOpCase(t *testing.T, seed uint64, c opCase) {
	t.Helper()
	b := ir.NewBuilder("op")
	vals := make([]*ir.Value, len(c.in))
	for i, s := range c.in {
		typ := ir.T(s.dt, s.shape...)
		name := fmt.Sprintf("in%d", i)
		if s.weight {
			vals[i] = b.Weight(name, typ)
		} else {
			vals[i] = b.Input(name, typ)
		}
	}
	b.Region("test", 0)
	out := c.build(b, vals)
	b.Output(out)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(20260, seed))
	env := map[*ir.Value]Tensor{}
	raw := make([][]float32, len(c.in))
	for i, s := range c.in {
		raw[i] = fill(rng, s)
		env[vals[i]] = Tensor{Shape: ir.Shape(s.shape), Data: raw[i]}
	}
	for _, mode := range []struct {
		name           string
		opts           Options
		minPCC, maxRel float64
	}{
		{"formats off", ExactOptions(), offMinPCC, offMaxRel},
		{"formats on", DefaultOptions(), onMinPCC, max(c.onMaxRel, onMaxRel)},
	} {
		res, err := Eval(g, env, mode.opts)
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		ins := make([]arr, len(c.in))
		for i, s := range c.in {
			stored := raw[i]
			if mode.opts.StorageFormats {
				stored = storeInTest(s.dt, s.shape, raw[i])
			}
			if got := res[vals[i]].Data; numerics.MaxRelErr(stored, got) != 0 || numerics.PCC(stored, got) != 1 {
				t.Errorf("%s: input %d as evaluated differs from the input stored as %s", mode.name, i, s.dt)
			}
			ins[i] = arr{shape: s.shape, v: to64(stored)}
		}
		got := res[out]
		if !got.Shape.Equal(out.Type.Shape) {
			t.Fatalf("%s: result shape %s, want %s", mode.name, got.Shape, out.Type.Shape)
		}
		want := to32(c.want(ins))
		if len(want) != len(got.Data) {
			t.Fatalf("%s: result has %d values, want %d", mode.name, len(got.Data), len(want))
		}
		pcc, rel := numerics.PCC(want, got.Data), numerics.MaxRelErr(want, got.Data)
		if c.exact {
			if rel != 0 {
				t.Errorf("%s: integer result differs from the reference (max rel err %g)\nwant %v\ngot  %v", mode.name, rel, want, got.Data)
			}
			continue
		}
		if pcc < mode.minPCC || rel > mode.maxRel {
			t.Errorf("%s: PCC %.9f (want >= %.9f), max rel err %.3g (want <= %.3g)", mode.name, pcc, mode.minPCC, rel, mode.maxRel)
		}
	}
}
