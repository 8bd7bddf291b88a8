package passes_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/sim/ref"
)

// fuzzBytes reads the fuzz input as a stream of choices; past the end
// every choice is 0, so any input (even empty) describes a graph.
type fuzzBytes struct {
	data []byte
	pos  int
}

func (f *fuzzBytes) next() int {
	if f.pos >= len(f.data) {
		return 0
	}
	f.pos++
	return int(f.data[f.pos-1])
}

// pick returns a choice in [0, n).
func (f *fuzzBytes) pick(n int) int { return f.next() % n }

// fuzzGraph builds a random small graph from data: a mesh of 1x1 or 1x2,
// one or two activations [1, 32, C] (C in 32, 64, 96) and up to 24 steps,
// each one of
//
//	binary add/sub/mul of two pool values (equal shapes, or a [1, 32, 1]
//	row statistic broadcast against [1, 32, C]); add_scalar/mul_scalar;
//	silu, sigmoid, square; exp of a sigmoid; a positive rsqrt
//	(rsqrt(add_scalar(square(x), 1))); mean; a matmul with a new bf16 or
//	bfp8_b [C, N] weight; two sibling matmuls of one activation; a SwiGLU
//	(silu(x W_g) * (x W_u)) W_d; an fp32 island (typecast, silu, typecast
//	back); a reshape to rank 2 and back; a decomposed RMSNorm (square or
//	mul(x, x), plain or (1 + w) weight, weight on either side); a
//	tensor-parallel residual add(x, all_reduce(a W)), then maybe
//	rms_norm or a decomposed RMSNorm; a reduce_scatter / all_gather pair;
//	a new decoder region
//
// and 1 to 3 outputs (the last value and random others). Every value stays
// in the pool, so the graph is a DAG with shared values and values reused
// across regions. Values are kept bounded (exp only of sigmoids, rsqrt of
// values >= 1) so the reference stays finite for all but extreme chains.
func fuzzGraph(data []byte) (*ir.Graph, error) {
	f := &fuzzBytes{data: data}
	b := ir.NewBuilder("fuzz")
	devices := 1 + f.pick(2)
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: devices}
	cols := []int{32, 64, 96}
	var pool []*ir.Value
	for i := range 1 + f.pick(2) {
		pool = append(pool, b.Input(fmt.Sprintf("x%d", i), ir.T(ir.BF16, 1, 32, cols[f.pick(3)])))
	}
	layer := 0
	b.Region("mlp", layer)
	weights := 0
	weight := func(shape ...int) *ir.Value {
		dt := ir.BF16
		if len(shape) == 2 && f.pick(2) == 1 {
			dt = ir.BFP8B
		}
		name := fmt.Sprintf("model.layers.%d.w%d.weight", layer, weights)
		if len(shape) == 1 {
			name = fmt.Sprintf("model.layers.%d.norm%d.weight", layer, weights)
		}
		weights++
		return b.Weight(name, ir.T(dt, shape...))
	}
	// any returns a random pool value; full a random one of rank 3 with
	// 32 rows and more than one column (an activation).
	anyv := func() *ir.Value { return pool[f.pick(len(pool))] }
	full := func() *ir.Value {
		var cands []*ir.Value
		for _, v := range pool {
			if s := v.Type.Shape; s.Rank() == 3 && s[2] > 1 && v.Type.DType == ir.BF16 {
				cands = append(cands, v)
			}
		}
		if len(cands) == 0 {
			return b.Reshape(pool[0], []int{1, 32, pool[0].Type.Shape.Numel() / 32})
		}
		return cands[f.pick(len(cands))]
	}
	partner := func(a *ir.Value) *ir.Value {
		var cands []*ir.Value
		for _, v := range pool {
			s, t := v.Type.Shape, a.Type.Shape
			if v.Type.DType != a.Type.DType || s.Rank() != t.Rank() {
				continue
			}
			if s.Equal(t) || (s.Rank() == 3 && s[1] == t[1] && (s[2] == 1 || t[2] == 1)) {
				cands = append(cands, v)
			}
		}
		return cands[f.pick(len(cands))] // a itself is always a candidate
	}
	scalars := []float64{1, -0.5, 2, 1e-6, 0.125}
	rmsnorm := func(x *ir.Value) *ir.Value {
		var sq *ir.Value
		if f.pick(2) == 0 {
			sq = b.Square(x)
		} else {
			sq = b.Mul(x, x)
		}
		normed := b.Mul(x, b.Rsqrt(b.AddScalar(b.Mean(sq), 1e-6)))
		w := weight(x.Type.Shape[x.Type.Shape.Rank()-1])
		if f.pick(2) == 0 {
			w = b.AddScalar(w, 1)
		}
		if f.pick(3) == 0 {
			return b.Mul(w, normed)
		}
		return b.Mul(normed, w)
	}
	steps := 2 + f.pick(23)
	for range steps {
		var v *ir.Value
		switch f.pick(19) {
		case 0, 1, 2:
			a := anyv()
			if a.Type.DType != ir.BF16 {
				a = full()
			}
			c := partner(a)
			if f.pick(2) == 1 {
				a, c = c, a
			}
			v = b.Emit([]ir.OpKind{ir.OpAdd, ir.OpSub, ir.OpMul}[f.pick(3)], []*ir.Value{a, c}, nil)[0]
		case 3:
			x := full()
			if f.pick(2) == 0 {
				v = b.AddScalar(x, scalars[f.pick(len(scalars))])
			} else {
				v = b.MulScalar(x, scalars[f.pick(len(scalars))])
			}
		case 4:
			v = b.SiLU(full())
		case 5:
			v = b.Sigmoid(full())
		case 6:
			v = b.Square(b.Sigmoid(full()))
		case 7:
			v = b.Exp(b.Sigmoid(full()))
		case 8:
			v = b.Rsqrt(b.AddScalar(b.Square(full()), 1))
		case 9:
			v = b.Mean(full())
		case 10:
			x := full()
			v = b.Matmul(x, weight(x.Type.Shape[2], cols[f.pick(3)]))
		case 11:
			x := full()
			k := x.Type.Shape[2]
			p := b.Matmul(x, weight(k, cols[f.pick(3)]))
			pool = append(pool, p)
			v = b.Matmul(x, weight(k, cols[f.pick(3)]))
		case 12:
			x := full()
			k, n := x.Type.Shape[2], cols[f.pick(3)]
			h := b.Mul(b.SiLU(b.Matmul(x, weight(k, n))), b.Matmul(x, weight(k, n)))
			v = b.Matmul(h, weight(n, k))
		case 13:
			v = b.Typecast(b.SiLU(b.Typecast(full(), ir.FP32)), ir.BF16)
		case 14:
			x := full()
			v = b.Reshape(b.SiLU(b.Reshape(x, []int{32, x.Type.Shape[2]})), []int{1, 32, x.Type.Shape[2]})
		case 15:
			v = rmsnorm(full())
		case 17:
			// A tensor-parallel residual: every device's partial product
			// summed, added to the residual stream, often normed.
			x := full()
			k := x.Type.Shape[2]
			a := full()
			h := b.Add(x, b.AllReduce(b.Matmul(a, weight(a.Type.Shape[2], k)), devices))
			switch f.pick(3) {
			case 0:
				pool = append(pool, h)
				v = b.RMSNorm(h, weight(k), 1e-6, float64(f.pick(2)))
			case 1:
				pool = append(pool, h)
				v = rmsnorm(h)
			default:
				v = h
			}
		case 18:
			// A reduce-scatter / all-gather pair over the columns.
			x := full()
			k := x.Type.Shape[2]
			if k%(32*devices) != 0 {
				x = b.Matmul(x, weight(k, 64))
			}
			v = b.AllGather(b.ReduceScatter(x, 2, devices), 2, devices)
		case 16:
			if layer < 2 {
				layer++
				b.Region("mlp", layer)
			}
			continue
		}
		pool = append(pool, v)
	}
	outs := []*ir.Value{pool[len(pool)-1]}
	for range f.pick(3) {
		if o := anyv(); o.Kind == ir.KindResult {
			outs = append(outs, o)
		}
	}
	b.Output(outs...)
	return b.Finish()
}

// FuzzPipeline builds random small graphs (fuzzGraph), runs the default
// pipeline on them and checks that it returns no error (a rule that panics
// is reported as one), that the result verifies, and that the reference
// evaluator in exact math (ref.ExactOptions) gives the same outputs before
// and after (PCC >= 0.9999 per output). Graphs whose unfused outputs are
// not finite or exceed 1e6 in magnitude are only checked for the first
// two properties. `go test` runs the seed corpus; `go test -fuzz
// FuzzPipeline ./passes` explores.
func FuzzPipeline(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{0, 0, 3, 15, 0, 15, 1, 4, 9, 2, 0, 1}, // rmsnorm variants
		{1, 1, 0, 6, 15, 1, 0, 0, 16, 15, 0, 1, 1, 12, 0, 1, 0, 0, 2}, // two regions, SwiGLU
		{0, 2, 12, 11, 1, 0, 1, 1, 2, 10, 1, 1, 13, 2, 14, 0, 15, 1, 1, 2, 2, 2},
		{1, 0, 1, 24, 2, 3, 0, 7, 1, 8, 0, 9, 0, 0, 5, 1, 0, 4, 15, 0, 0, 1, 0, 16, 15, 1, 1, 0, 1, 2, 1, 3, 0},
		[]byte("tcc fusion pipeline fuzz seed: norms, matmuls, and eltwise chains"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g0, err := fuzzGraph(data)
		if err != nil {
			t.Fatalf("generator built an invalid graph (a bug in fuzzGraph): %v", err)
		}
		g1, err := fuzzGraph(data)
		if err != nil {
			t.Fatal(err)
		}
		res, err := passes.Run(g1, passes.Options{})
		if err != nil {
			t.Fatalf("default pipeline: %v\ngraph:\n%s", err, ir.Print(g0))
		}
		if err := ir.Verify(g1); err != nil {
			t.Fatalf("result does not verify: %v", err)
		}
		d := genericData(g0, seedFor(9, string(data)))
		want, err := evalStep(g0, d, ref.ExactOptions())
		if err != nil {
			t.Fatalf("unfused: %v", err)
		}
		for _, o := range want.outputs[0] {
			for _, x := range o.Data {
				if math.IsNaN(float64(x)) || math.Abs(float64(x)) > 1e6 {
					t.Logf("unfused output not finite or above 1e6: numerics not compared")
					return
				}
			}
		}
		got, err := evalStep(g1, d, ref.ExactOptions())
		if err != nil {
			t.Fatalf("fused: %v", err)
		}
		cmp, err := compareSteps(want, got)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range sortedKeys(cmp) {
			if !cmp[k].ok(opPCC) {
				t.Errorf("%s: unfused vs fused %s in exact math, want PCC >= %g\nrules fired:\n%s\nunfused:\n%s\nfused:\n%s",
					k, cmp[k], opPCC, res.Rewrites, ir.Print(g0), ir.Print(g1))
			}
		}
	})
}
