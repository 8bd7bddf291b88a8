package ref

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Norms: rms_norm (x * rsqrt(mean(x^2) + eps) * (w + offset)) and
// rms_norm_plain (without the weight), one evaluator each, evaluated from
// their equation; the fused norms (add_rmsnorm, all_reduce_add_rmsnorm,
// rmsnorm_matmul, fused_common.go) reuse normRows.
//
// Without StorageFormats every step is float64, rounded once to float32.
// With StorageFormats the norm is the norm lowering's pipeline step by
// step (normRows): the squares on the SFPU from x as copy_tile reads it,
// the row sums a reduce_tile running sum, the scalings eltwise FPU
// multiplies on source-register (tf32) reads of their fp32 operands.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpRMSNorm:      evalRMSNorm,
		ir.OpRMSNormPlain: evalRMSNormPlain,
	})
}

// evalRMSNorm: out[r, i] = x[r, i] * rsqrt(mean_i(x[r, i]^2) + eps) *
// (w[i] + offset), computed by normRows.
func evalRMSNorm(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	eps, offset, err := normAttrs(op)
	if err != nil {
		return nil, err
	}
	out, err := rmsNormRows(args[0], args[1], eps, offset, opts.rowSplit(op), opts)
	if err != nil {
		return nil, err
	}
	return []Tensor{out}, nil
}

// evalRMSNormPlain: out[r, i] = x[r, i] * rsqrt(mean_i(x[r, i]^2) + eps),
// computed by normRows (float64 math without StorageFormats, the norm
// lowering's FPU steps with it).
func evalRMSNormPlain(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	eps, err := attrFloat(op, "eps")
	if err != nil {
		return nil, err
	}
	x := args[0]
	if x.Shape.Rank() == 0 {
		return nil, fmt.Errorf("rule rank: cannot normalise a scalar over its last dimension")
	}
	return []Tensor{normRows(x, nil, eps, 0, opts.rowSplit(op), opts)}, nil
}

// rmsNormRows is x * rsqrt(mean(x^2, last) + eps) * (w + offset) per row
// (normRows with a weight); w must have as many elements as x's last dim.
func rmsNormRows(x, w Tensor, eps, offset float64, split RowSplit, opts Options) (Tensor, error) {
	if x.Shape.Rank() == 0 || w.Shape.Numel() != x.Shape[len(x.Shape)-1] {
		return Tensor{}, fmt.Errorf("rule norm-weight: weight %s must have as many elements as the last dim of x %s", w.Shape, x.Shape)
	}
	return normRows(x, w.Data, eps, offset, split, opts), nil
}

// normRows returns x * rsqrt(mean(x^2, last) + eps) per row of x (rank >=
// 1), times (w + offset) when w is not nil (len(w) is x's last dim).
//
// Without opts.StorageFormats every step is float64, rounded once to
// float32. With it, the result is what the norm lowering's pipeline
// (codegen/lower/norm.go, normCBs.row; shared by rms_norm,
// rms_norm_plain, add_rmsnorm, all_reduce_add_rmsnorm and
// rmsnorm_matmul) computes in an fp32 DEST at opts.Fidelity, bit for bit
// when the row is on one core and its x^2 CB is fp32 (it falls back to
// bf16 squares only when a row's tiles do not fit L1). Per row, with tf
// the unpacker's tf32 read of fp32 data (numerics.TruncTF32; bf16 data
// passes unchanged):
//
//	sq_i = tf(x_i) * tf(x_i)             copy_tile of x through SrcA, square_tile on the SFPU, packed fp32
//	ss   = matmulRowSum over i of sq_i      matmul_tiles of sq (SrcB, tf32) against the ones column (SrcA), column order, fp32 DEST
//	rs   = Rsqrt(float32(ss * float32(1/H)) + float32(eps))   mul_unary, add_unary, rsqrt on the SFPU, packed fp32
//	xn_i = FPUMul(tf(x_i), tf(rs))        mul_tiles_bcast_cols: x in SrcA, rs in SrcB
//	out_i = FPUMul(tf(xn_i), tf(wo_i))    with a weight: xn packed fp32, mul_tiles_bcast_rows
//
// where wo_i = float32(w_i + float32(offset)) (add_unary on the SFPU,
// packed fp32) when offset != 0 and w_i otherwise; without a weight out =
// xn. When a row is split over several cores (norm_split.go: few tile
// rows) each core sums its chunk of tiles and the row sum is the chunk
// sums added in fp32 in core order (with many cores on a two-level tree:
// per subgroup of consecutive cores, then the subgroups' sums in order;
// multicore.Exchange): opts.RowSplit gives that chunking, and normRows
// adds as the device does (without it, one core's running sum, which
// differs in the last bits of ss and in the result only where tf(rs)
// crosses a truncation step: see the Numerics paragraph of
// codegen/lower/norm.go).
func normRows(x Tensor, w []float32, eps, offset float64, split RowSplit, opts Options) Tensor {
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
		f, tf := opts.Fidelity, numerics.TruncTF32
		mul := func(a, b float32) float32 { return numerics.FPUMul(tf(a), tf(b), 0, f, true) }
		ss := splitRowSum(n, func(i int) float32 { v := tf(row[i]); return v * v }, f, split)
		rs := sfpuFor(opts).rsqrt(float32(ss*float32(1/float64(n))) + float32(eps))
		for i, v := range row {
			y := mul(v, rs)
			if w != nil {
				wv := w[i]
				if offset != 0 {
					wv += float32(offset)
				}
				y = mul(y, wv)
			}
			o[i] = y
		}
	}
	return out
}
