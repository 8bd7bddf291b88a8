package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// binadeColumns is a [32, 32] matrix whose column c holds values of binade
// c-16 with at most 6 fraction bits: exact in bfp8_b when the exponent
// groups run down columns, not when they run along rows.
func binadeColumns() []float32 {
	w := make([]float32, 32*32)
	for r := range 32 {
		for c := range 32 {
			w[r*32+c] = float32((1 + float64(r%16)/64) * math.Exp2(float64(c-16)))
		}
	}
	return w
}

// StoreAs rounds a weight stored in transposed tiles with its exponents
// shared down columns (the binade-per-column tile is stored exactly) and
// marks the result; Store (today's tile layout) does not keep it.
func TestStoreAsTransposedTiles(t *testing.T) {
	w := binadeColumns()
	typ := ir.T(ir.BFP8B, 32, 32)
	typ.TilesTransposed = true
	got, err := StoreAs(typ, Tensor{Shape: ir.Shape{32, 32}, Data: w})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Tensor{Shape: ir.Shape{32, 32}, Data: w, TilesTransposed: true}, got); diff != "" {
		t.Errorf("StoreAs tile_t (-want +got):\n%s", diff)
	}
	old, err := Store(ir.BFP8B, Tensor{Shape: ir.Shape{32, 32}, Data: w})
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(w, old.Data) {
		t.Error("Store in tile layout keeps the tile exactly too; the test does not tell the layouts apart")
	}
}

// A matmul whose weight is stored in transposed tiles is evaluated with
// the weight on SrcB: its weight rounded in transposed tiles
// (numerics.QuantizeMatrixTransposed), the product numerics.MatmulSrcB at
// ExactMatmulFidelityOn's SrcB fidelity (HiFi2 for bfp8_b), for the
// matmul op and for a fused matmul2 (both weights); the same graph with
// the weights in tile layout gives other values.
func TestMatmulWeightsOnSrcB(t *testing.T) {
	const m, k, n = 32, 64, 32
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4)))
		}
		return out
	}
	xd, w0, w1 := rnd(m*k), rnd(k*n), rnd(k*n)
	eval := func(transposed bool) (mm, m2a, m2b []float32) {
		b := ir.NewBuilder("srcb")
		x := b.Input("x", ir.T(ir.FP32, m, k))
		wt := ir.T(ir.BFP8B, k, n)
		wt.TilesTransposed = transposed
		a, c, d := b.Weight("a", wt), b.Weight("c", wt), b.Weight("d", wt)
		b.Region("test", 0)
		y := b.Matmul(x, a)
		ys := b.Matmul2(x, c, d)
		b.Output(y)
		b.Output(ys[0])
		b.Output(ys[1])
		g, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		env := map[*ir.Value]Tensor{x: {Shape: ir.Shape{m, k}, Data: xd}, a: {Shape: ir.Shape{k, n}, Data: w0},
			c: {Shape: ir.Shape{k, n}, Data: w0}, d: {Shape: ir.Shape{k, n}, Data: w1}}
		res, err := Eval(g, env, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return res[y].Data, res[ys[0]].Data, res[ys[1]].Data
	}
	mm, m2a, m2b := eval(true)
	want0 := numerics.MatmulSrcB(xd, numerics.QuantizeMatrixTransposed(ir.BFP8B, w0, k, n), m, k, n, ir.HiFi2)
	want1 := numerics.MatmulSrcB(xd, numerics.QuantizeMatrixTransposed(ir.BFP8B, w1, k, n), m, k, n, ir.HiFi2)
	for _, c := range []struct {
		name      string
		want, got []float32
	}{{"matmul", want0, mm}, {"matmul2 out 0", want0, m2a}, {"matmul2 out 1", want1, m2b}} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s with the weight on SrcB (-want +got):\n%s", c.name, diff)
		}
	}
	if old, _, _ := eval(false); cmp.Equal(old, mm) {
		t.Error("the weights in tile layout give the same values; the test does not tell the placements apart")
	}
}

// The single-op evaluators (EvalOp, and EvalMeshOp, which `tcc run
// --check` uses to check each program on the operands the device held)
// bind a weight stored in transposed tiles as Eval does: rounded in
// transposed tiles and multiplied on SrcB. Rounding it in tile layout
// instead (EvalMeshOp once did) re-quantizes the device's values along N
// and multiplies them on SrcA: for bfp4_b a program PCC near 0.99.
func TestSingleOpWeightsOnSrcB(t *testing.T) {
	const m, k, n = 32, 64, 32
	r := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4)))
		}
		return out
	}
	xd, wd := rnd(m*k), rnd(k*n)
	for _, dt := range []ir.DType{ir.BFP8B, ir.BFP4B} {
		b := ir.NewBuilder("srcb")
		x := b.Input("x", ir.T(ir.FP32, m, k))
		wt := ir.T(dt, k, n)
		wt.TilesTransposed = true
		w := b.Weight("w", wt)
		b.Region("test", 0)
		y := b.Matmul(x, w)
		b.Output(y)
		g, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		op := g.Regions[0].Ops[0]
		want := numerics.MatmulSrcB(xd, numerics.QuantizeMatrixTransposed(dt, wd, k, n), m, k, n, ir.ExactMatmulFidelityOn(dt, ir.WeightsOnSrcB))
		args := []Tensor{{Shape: ir.Shape{m, k}, Data: xd}, {Shape: ir.Shape{k, n}, Data: wd}}
		for _, c := range []struct {
			name string
			eval func() ([]Tensor, error)
		}{
			{"EvalOp", func() ([]Tensor, error) { return EvalOp(op, args, DefaultOptions()) }},
			{"EvalMeshOp", func() ([]Tensor, error) {
				res, err := EvalMeshOp(op, ir.Mesh{Rows: 1, Cols: 1}, [][]Tensor{args}, DefaultOptions())
				if err != nil {
					return nil, err
				}
				return res[0], nil
			}},
		} {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				got, err := c.eval()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got[0].Data); diff != "" {
					t.Errorf("matmul with a %s weight in transposed tiles (-want +got):\n%s", dt, diff)
				}
			})
		}
	}
}
