package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// rmsnormFused builds the decomposed RMSNorm
//
//	y = x * rsqrt(mean(square(x)) + eps) * (w + offset)
//
// with the Builder and returns an rms_norm op whose Decomp holds those ops,
// the pair FuseRMSNorm's rewrite stands for.
func rmsnormFused(t *testing.T, xt, wt ir.TensorType, eps, offset float64) *ir.Op {
	t.Helper()
	b := ir.NewBuilder("rmsnorm")
	x := b.Input("x", xt)
	w := b.Weight("w", wt)
	b.Region("norm", 0)
	r := b.Rsqrt(b.AddScalar(b.Mean(b.Square(x)), eps))
	scale := w
	if offset != 0 {
		scale = b.AddScalar(w, offset)
	}
	y := b.Mul(b.Mul(x, r), scale)
	b.Output(y)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	attrs := ir.Attrs{"eps": eps, "offset": offset}
	types, err := ir.InferTypes(ir.OpRMSNorm, []*ir.Value{x, w}, attrs)
	if err != nil {
		t.Fatal(err)
	}
	op := &ir.Op{ID: g.NewOpID(), Kind: ir.OpRMSNorm, Operands: []*ir.Value{x, w}, Attrs: attrs, Rule: "test-rmsnorm",
		Decomp: &ir.Decomposition{Inputs: []*ir.Value{x, w}, Ops: g.Regions[0].Ops, Outputs: []*ir.Value{y}}}
	res := g.NewValue(ir.KindResult, "", types[0])
	res.Def = op
	op.Results = []*ir.Value{res}
	return op
}

// TestRMSNormMatchesDecomposition compares rms_norm with the six
// ops it replaces. With storage formats the decomposition rounds to bf16
// after each of its six ops and the fused op once, so they agree to PCC >=
// 0.9999 and max relative error <= 2^-6 (a few bf16 roundings of 2^-9
// each); without, both are float32 math and agree to 1e-5.
func TestRMSNormMatchesDecomposition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, tc := range []struct {
		name   string
		x, w   ir.TensorType
		offset float64
	}{
		{"bf16 offset 0", ir.T(ir.BF16, 2, 7, 128), ir.T(ir.BF16, 128), 0},
		{"bf16 offset 1", ir.T(ir.BF16, 3, 96), ir.T(ir.BF16, 96), 1},
		{"fp32 x, bfp8_b w", ir.T(ir.FP32, 4, 64), ir.T(ir.BFP8B, 1, 64), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := rmsnormFused(t, tc.x, tc.w, 1e-6, tc.offset)
			x := NewTensor(tc.x.Shape)
			for i := range x.Data {
				x.Data[i] = float32(rng.NormFloat64() * 2)
			}
			w := NewTensor(tc.w.Shape)
			for i := range w.Data {
				w.Data[i] = float32(0.5 + rng.Float64())
				if tc.offset != 0 {
					w.Data[i] -= 1
				}
			}
			args := []Tensor{x, w}
			for _, mode := range []struct {
				name     string
				opts     Options
				pcc, rel float64
			}{
				{"formats on", DefaultOptions(), 0.9999, 0x1p-6},
				{"formats off", ExactOptions(), 1 - 1e-9, 1e-5},
			} {
				fused, err := EvalOp(op, args, mode.opts)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := EvalDecompositionWith(op, args, mode.opts)
				if err != nil {
					t.Fatal(err)
				}
				pcc := numerics.PCC(fused[0].Data, dec[0].Data)
				rel := numerics.MaxRelErr(fused[0].Data, dec[0].Data)
				t.Logf("%s: fused vs decomposed PCC %.9f, max rel err %.3g", mode.name, pcc, rel)
				if pcc < mode.pcc || rel > mode.rel {
					t.Errorf("%s: fused vs decomposed PCC %.9f (want >= %g), max rel err %.3g (want <= %.3g)", mode.name, pcc, mode.pcc, rel, mode.rel)
				}
			}
			def, err := EvalDecomposition(op, args)
			if err != nil {
				t.Fatal(err)
			}
			with, err := EvalDecompositionWith(op, args, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(with, def); diff != "" {
				t.Errorf("EvalDecomposition does not use DefaultOptions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFusedOpInGraph checks that a builder-made rms_norm evaluated by Eval
// equals EvalOp on the same inputs and the float64 formula.
func TestFusedOpInGraph(t *testing.T) {
	b := ir.NewBuilder("g")
	x := b.Input("x", ir.T(ir.BF16, 3, 64))
	w := b.Weight("w", ir.T(ir.BF16, 64))
	b.Region("attention", 0)
	y := b.RMSNorm(x, w, 1e-5, 1)
	b.Output(y)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	xt, wt := NewTensor(ir.Shape{3, 64}), NewTensor(ir.Shape{64})
	for i := range xt.Data {
		xt.Data[i] = numerics.RoundBF16(float32(math.Sin(float64(i))))
	}
	for i := range wt.Data {
		wt.Data[i] = numerics.RoundBF16(float32(i) / 128)
	}
	res, err := Eval(g, map[*ir.Value]Tensor{x: xt, w: wt}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	one, err := EvalOp(y.Def, []Tensor{xt, wt}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(one[0], res[y]); diff != "" {
		t.Errorf("Eval vs EvalOp (-want +got):\n%s", diff)
	}
	// The device norm's FPU steps (normRows): squares and x * rsqrt read
	// as tf32 in SrcA, rsqrt and w + 1 in SrcB (TruncTF32, SrcA's last
	// mantissa bit unused), the squares summed by a matmul against a
	// column of ones (numerics.Matmul: the squares through SrcB as tf32,
	// per tile two mvmul lanes of 16 products onto the fp32 DEST); one
	// packer rounding to bf16 at the end (half away from zero).
	srcA := func(v float32) float32 {
		return math.Float32frombits(math.Float32bits(numerics.TruncTF32(v)) &^ 0x3FFF)
	}
	ones := make([]float32, 64)
	for i := range ones {
		ones[i] = 1
	}
	want := make([]float32, 0, 192)
	for r := 0; r < 3; r++ {
		sq := make([]float32, 64)
		for i := range sq {
			v := xt.Data[r*64+i]
			sq[i] = v * v
		}
		ss := numerics.Matmul(sq, ones, 1, 64, 1, ir.HiFi4)[0]
		s := numerics.TruncTF32(numerics.Rsqrt(ss*float32(1.0/64) + float32(1e-5)))
		for c := 0; c < 64; c++ {
			xn := srcA(xt.Data[r*64+c] * s)
			want = append(want, numerics.FromBF16Bits(numerics.PackerBF16(xn*numerics.TruncTF32(wt.Data[c]+1))))
		}
	}
	if diff := cmp.Diff(want, res[y].Data); diff != "" {
		t.Errorf("rms_norm vs the device's FPU steps, packed once to bf16 (-want +got):\n%s", diff)
	}
}
