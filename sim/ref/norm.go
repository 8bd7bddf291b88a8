package ref

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/numerics"
)

// Norms are fused ops: they are evaluated directly from their equation, not
// through their decomposition (EvalDecomposition evaluates the latter).
//
// Without StorageFormats every step is float64, rounded once to float32.
// With StorageFormats the norm follows the device's FPU the way matmul
// does (normRows): the row sums and the scalings are FPU products, whose
// fp32 operands the unpacker reduces to tf32 (numerics.FidelityMul), with
// float32 accumulation and SFPU steps in float32.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpRMSNorm: evalRMSNorm,
	})
}

// evalRMSNorm: out[r, i] = x[r, i] * rsqrt(mean_i(x[r, i]^2) + eps) *
// (w[i] + offset), computed by normRows.
func evalRMSNorm(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	eps, offset, err := normAttrs(op)
	if err != nil {
		return nil, err
	}
	out, err := rmsNormRows(args[0], args[1], eps, offset, opts)
	if err != nil {
		return nil, err
	}
	return []Tensor{out}, nil
}

// rmsNormRows is x * rsqrt(mean(x^2, last) + eps) * (w + offset) per row
// (normRows with a weight); w must have as many elements as x's last dim.
func rmsNormRows(x, w Tensor, eps, offset float64, opts Options) (Tensor, error) {
	if x.Shape.Rank() == 0 || w.Shape.Numel() != x.Shape[len(x.Shape)-1] {
		return Tensor{}, fmt.Errorf("rule norm-weight: weight %s must have as many elements as the last dim of x %s", w.Shape, x.Shape)
	}
	return normRows(x, w.Data, eps, offset, opts), nil
}

// normRows returns x * rsqrt(mean(x^2, last) + eps) per row of x (rank >=
// 1), times (w + offset) when w is not nil (len(w) is x's last dim).
//
// Without opts.StorageFormats every step is float64, rounded once to
// float32. With it, the result is what the norm lowering's FPU pipeline
// (codegen/lower/norm.go, normCBs.row; shared by rms_norm, rmsnorm,
// add_rmsnorm, all_reduce_add_rmsnorm and rmsnorm_matmul) computes from
// the same operands, bit for bit when its x^2 CB is fp32 (it falls back to
// bf16 squares only when a row's tiles do not fit L1):
//
//	ss  = sum_i FidelityMul(float32(x_i^2), 1)      (reduce, SrcA reads x^2 as tf32; float32 sum in column order)
//	rs  = Rsqrt(float32(float32(ss * float32(1/H)) + float32(eps)))  (SFPU, float32)
//	xn  = FidelityMul(x_i, rs)                      (column broadcast, rs in SrcB as tf32)
//	out = FidelityMul(xn, float32(w_i + offset))    (row broadcast, xn in SrcA and w + offset in SrcB as tf32)
//
// all at opts.Fidelity; without a weight out = xn. These tf32 reductions
// are the hardware's (the unpacker truncates fp32 data moved into the
// source registers), as for matmul's fp32 operands.
func normRows(x Tensor, w []float32, eps, offset float64, opts Options) Tensor {
	n := x.Shape.Cols2D()
	out := NewTensor(x.Shape)
	for r := 0; r < x.Shape.Rows2D(); r++ {
		row, o := x.Data[r*n:(r+1)*n], out.Data[r*n:(r+1)*n]
		if !opts.StorageFormats {
			var ss float64
			for _, v := range row {
				ss += float64(v) * float64(v)
			}
			scale := 1 / math.Sqrt(ss/float64(n)+eps)
			for i, v := range row {
				y := float64(v) * scale
				if w != nil {
					y *= float64(w[i]) + offset
				}
				o[i] = float32(y)
			}
			continue
		}
		f := opts.Fidelity
		var ss float32
		for _, v := range row {
			ss += numerics.FidelityMul(v*v, 1, f)
		}
		rs := numerics.Rsqrt(ss*float32(1/float64(n)) + float32(eps))
		for i, v := range row {
			y := numerics.FidelityMul(v, rs, f)
			if w != nil {
				wv := w[i]
				if offset != 0 {
					wv += float32(offset)
				}
				y = numerics.FidelityMul(y, wv, f)
			}
			o[i] = y
		}
	}
	return out
}
