package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Pieces of the Gated DeltaNet prefill (the chunked WY form and the causal
// conv over a sequence): cumsum, tril, tril_inverse and conv_depthwise.
// The arithmetic ones are computed in float64 and rounded once per result
// element to float32 ("fp32 math" / "fp32 accumulation"); tril only masks.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpCumsum:        evalCumsum,
		ir.OpTril:          evalTril,
		ir.OpTrilInverse:   evalTrilInverse,
		ir.OpConvDepthwise: evalConvDepthwise,
	})
}

// evalCumsum: out[.., i, ..] = sum over j <= i of x[.., j, ..] along axis,
// a running float64 sum rounded to float32 at every output.
func evalCumsum(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	x := args[0]
	if x.Shape.Rank() == 0 {
		return nil, fmt.Errorf("rule rank: cannot take a prefix sum of a scalar")
	}
	ax, err := attrAxis(op, "axis", x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	outer, n, inner := axisView(x.Shape, ax)
	out := NewTensor(x.Shape)
	acc := make([]float64, inner)
	for o := range outer {
		clear(acc)
		for i := range n {
			off := (o*n + i) * inner
			for j, v := range x.Data[off : off+inner] {
				acc[j] += float64(v)
				out.Data[off+j] = float32(acc[j])
			}
		}
	}
	return []Tensor{out}, nil
}

// trailingMatrix returns the number of trailing [rows, cols] matrices of
// a tensor of rank >= 2 and their size.
func trailingMatrix(x Tensor) (batch, rows, cols int, err error) {
	r := x.Shape.Rank()
	if r < 2 {
		return 0, 0, 0, fmt.Errorf("rule matrix-rank: x %s needs rank >= 2", x.Shape)
	}
	rows, cols = x.Shape[r-2], x.Shape[r-1]
	return x.Shape.Numel() / (rows * cols), rows, cols, nil
}

// evalTril: out[.., i, j] = x[.., i, j] where j - i <= diagonal, else 0.
func evalTril(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	diag, err := attrInt(op, "diagonal")
	if err != nil {
		return nil, err
	}
	x := args[0]
	batch, rows, cols, err := trailingMatrix(x)
	if err != nil {
		return nil, err
	}
	out := NewTensor(x.Shape)
	for b := range batch {
		for i := range rows {
			off := (b*rows + i) * cols
			n := min(max(i+diag+1, 0), cols) // columns j <= i + diagonal
			copy(out.Data[off:off+n], x.Data[off:off+n])
		}
	}
	return []Tensor{out}, nil
}

// evalTrilInverse: out = (I + L)^-1 for every trailing [n, n] matrix, L the
// strictly lower triangular part of x. By forward substitution, out is unit
// lower triangular with out[i, j] = -sum_{j <= k < i} L[i, k] * out[k, j]
// for j < i, computed in float64 and rounded once per element.
func evalTrilInverse(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	x := args[0]
	batch, n, cols, err := trailingMatrix(x)
	if err != nil {
		return nil, err
	}
	if n != cols {
		return nil, fmt.Errorf("rule square-matrix: x %s needs square trailing matrices", x.Shape)
	}
	out := NewTensor(x.Shape)
	inv := make([]float64, n*n)
	for b := range batch {
		l := x.Data[b*n*n : (b+1)*n*n]
		clear(inv)
		for i := range n {
			inv[i*n+i] = 1
			for j := range i {
				var s float64
				for k := j; k < i; k++ {
					s += float64(l[i*n+k]) * inv[k*n+j]
				}
				inv[i*n+j] = -s
			}
		}
		for i, v := range inv {
			out.Data[b*n*n+i] = float32(v)
		}
	}
	return []Tensor{out}, nil
}

// evalConvDepthwise: out[.., t, c] = sum_{j < K} w[j, c] * x[.., t + j, c]
// for x [.., T, C], w [K, C] and t = 0..T-K (valid convolution along T),
// summed in float64 and rounded once.
func evalConvDepthwise(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	x, w := args[0], args[1]
	r := x.Shape.Rank()
	if r < 2 || w.Shape.Rank() != 2 || w.Shape[1] != x.Shape[r-1] || w.Shape[0] > x.Shape[r-2] {
		return nil, fmt.Errorf("rule conv-shape: want x [.., T, C] and w [K, C] with K <= T, got %s and %s", x.Shape, w.Shape)
	}
	T, C, K := x.Shape[r-2], x.Shape[r-1], w.Shape[0]
	To := T - K + 1
	shape := x.Shape.Clone()
	shape[r-2] = To
	out := NewTensor(shape)
	batch := x.Shape.Numel() / (T * C)
	acc := make([]float64, C)
	for b := range batch {
		for t := range To {
			clear(acc)
			for j := range K {
				xr := x.Data[(b*T+t+j)*C : (b*T+t+j+1)*C]
				for c, wv := range w.Data[j*C : (j+1)*C] {
					acc[c] += float64(wv) * float64(xr[c])
				}
			}
			for c, s := range acc {
				out.Data[(b*To+t)*C+c] = float32(s)
			}
		}
	}
	return []Tensor{out}, nil
}
