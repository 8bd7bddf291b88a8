package nn

import "github.com/tcc-dev/tcc/ir"

// RMSNorm is the norm as the composed path issues it: one rms_norm op,
// x * rsqrt(mean(x^2) + eps) * (w + offset) over x's last dim. offset is 1
// for Qwen's zero-centred (1 + w) weights and 0 for weights used as is.
// RMSNormDecomposed writes the same norm out.
func RMSNorm(b *ir.Builder, x, w *ir.Value, eps, offset float64) *ir.Value {
	return b.RMSNorm(x, w, eps, offset)
}

// RMSNormDecomposed writes the same norm as seven elementwise and
// reduction ops (square, mean, +eps, rsqrt, multiply, w+offset, multiply;
// tiny-mlp's form): the form the norm rules (FuseRMSNorm,
// FuseRMSNormOffset) fold into the one rms_norm op RMSNorm writes.
func RMSNormDecomposed(b *ir.Builder, x, w *ir.Value, eps, offset float64) *ir.Value {
	r := b.Rsqrt(b.AddScalar(b.Mean(b.Square(x)), eps))
	return b.Mul(b.Mul(x, r), b.AddScalar(w, offset))
}

// L2Norm is x / sqrt(sum(x^2 over the last dim) + eps) as the composed
// path issues it: rms_norm without weight (eps/D, so that the mean's 1/D
// cancels) then a multiply by D^-1/2, D being x's last dim.
func L2Norm(b *ir.Builder, x *ir.Value, eps float64) *ir.Value {
	d := x.Type.Shape[x.Type.Shape.Rank()-1]
	return b.MulScalar(b.RMSNormPlain(x, eps/float64(d)), invSqrt(d))
}
