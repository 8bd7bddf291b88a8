package ref

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Pieces of the Gated DeltaNet prefill (the chunked WY form and the causal
// conv over a sequence): cumsum, tril, tril_inverse and conv_depthwise.
// Without StorageFormats the arithmetic ones are computed in float64 and
// rounded once per result element to float32 ("fp32 math" / "fp32
// accumulation"); with it cumsum, conv_depthwise and tril_inverse are
// computed as their device programs compute them (cumsumFPU,
// evalConvDepthwise, trilInverseFPU). tril only masks.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpCumsum:        evalCumsum,
		ir.OpTril:          evalTril,
		ir.OpTrilInverse:   evalTrilInverse,
		ir.OpConvDepthwise: evalConvDepthwise,
	})
}

// evalCumsum: out[.., i, ..] = sum over j <= i of x[.., j, ..] along axis.
// Without StorageFormats it is a running float64 sum rounded to float32 at
// every output. With StorageFormats it is the device's program
// (codegen/lower/prefill.go lowerCumsum) when axis is one of the last two
// (cumsumFPU); the device has no program for other axes, which keep the
// float64 sum.
func evalCumsum(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	x := args[0]
	if x.Shape.Rank() == 0 {
		return nil, fmt.Errorf("rule rank: cannot take a prefix sum of a scalar")
	}
	ax, err := attrAxis(op, "axis", x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	outer, n, inner := axisView(x.Shape, ax)
	if last := ax == x.Shape.Rank()-1; opts.StorageFormats && (last || ax == x.Shape.Rank()-2) {
		return []Tensor{cumsumFPU(x, outer, n, inner, last, opts.Fidelity)}, nil
	}
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

// cumsumFPU is the prefix sum of x viewed as [outer, n, inner] along n
// (the last axis when last is set, inner == 1; else the second-to-last) as
// the device computes it: a matmul by a ones triangle the reader generates
// as bf16 tiles (exact), each 32x32 result tile accumulated over the inner
// tiles in order by matmul_tiles into an fp32 DEST and packed once
// (numerics.Matmul at fidelity f, so fp32 data is read as tf32):
//
//   - along the last axis out = x @ U, U[r, c] = 1 for r <= c, over
//     all outer rows at once; x is in0, read through SrcB;
//   - along the second-to-last axis out = L @ x per [n, inner] matrix,
//     L[r, c] = 1 for c <= r; x is in1, read through SrcA, whose fidelity
//     split also drops tf32's last mantissa bit.
func cumsumFPU(x Tensor, outer, n, inner int, last bool, f ir.MathFidelity) Tensor {
	tri := make([]float32, n*n)
	for r := range n {
		for c := range n {
			if (last && r <= c) || (!last && c <= r) {
				tri[r*n+c] = 1
			}
		}
	}
	out := NewTensor(x.Shape)
	if last {
		copy(out.Data, numerics.Matmul(x.Data, tri, outer, n, n, f))
		return out
	}
	for o := range outer {
		at := o * n * inner
		copy(out.Data[at:at+n*inner], numerics.Matmul(tri, x.Data[at:at+n*inner], n, n, inner, f))
	}
	return out
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
// strictly lower triangular part of x. With StorageFormats and n <= 32 (the
// device takes one tile per matrix) it is trilInverseFPU, the device
// program's arithmetic. Otherwise, by forward substitution: out is unit lower
// triangular with out[i, j] = -sum_{j <= k < i} L[i, k] * out[k, j] for
// j < i, computed in float64 and rounded once per element.
func evalTrilInverse(_ *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	x := args[0]
	batch, n, cols, err := trailingMatrix(x)
	if err != nil {
		return nil, err
	}
	if n != cols {
		return nil, fmt.Errorf("rule square-matrix: x %s needs square trailing matrices", x.Shape)
	}
	out := NewTensor(x.Shape)
	if opts.StorageFormats && n <= numerics.TileDim {
		for b := range batch {
			trilInverseFPU(out.Data[b*n*n:(b+1)*n*n], x.Data[b*n*n:(b+1)*n*n], n, opts)
		}
		return []Tensor{out}, nil
	}
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

// trilInverseFPU writes to out (row-major [n, n]) the inverse of I + L, L
// the strictly lower part of x ([n, n], n <= 32), as the device program
// computes it (codegen/lower/prefill.go lowerTrilInverse) on one 32x32
// tile with an fp32 DEST. With A = -L, A^32 = 0 and
// (I + L)^-1 = sum_{k<32} A^k = (I + A)(I + A^2)(I + A^4)(I + A^8)(I + A^16):
//  1. The reader keeps L in the tile and writes +0 to every other element
//     (on and above the diagonal, and the padding past n).
//  2. copy_tile unpacks it straight to DEST (an fp32 CB read only by
//     copies, exact) and the SFPU negates it: A = -L exactly (the zeros
//     become -0). A is packed to two fp32 CBs (exact).
//  3. P = I + A: add_tiles with I in SrcA and A in SrcB (deviceAdd: A read
//     as tf32), packed to fp32.
//  4. Four times: A = A x A, a matmul_tiles into a cleared DEST
//     (numerics.Matmul at opts.Fidelity: both operands read as tf32); then
//     F = I + A as in 3; then P = P x F (P is in0, F in1). Each result is
//     packed to an fp32 CB, the last P to the output.
func trilInverseFPU(out, x []float32, n int, opts Options) {
	const T = numerics.TileDim
	a := make([]float32, T*T)
	for i := range a {
		a[i] = float32(math.Copysign(0, -1)) // -(+0)
	}
	for i := range n {
		for j := range i {
			a[i*T+j] = -x[i*n+j]
		}
	}
	plusI := func(a []float32) []float32 {
		f := make([]float32, T*T)
		for i, v := range a {
			var id float32
			if i%(T+1) == 0 {
				id = 1
			}
			f[i] = deviceAdd(id, v, opts)
		}
		return f
	}
	p := plusI(a)
	for range 4 {
		a = numerics.Matmul(a, a, T, T, T, opts.Fidelity)
		p = numerics.Matmul(p, plusI(a), T, T, T, opts.Fidelity)
	}
	for i := range n {
		copy(out[i*n:(i+1)*n], p[i*T:i*T+n])
	}
}

// evalConvDepthwise: out[.., t, c] = sum_{j < K} w[j, c] * x[.., t + j, c]
// for x [.., T, C], w [K, C] and t = 0..T-K (valid convolution along T).
// Without StorageFormats the products are summed in float64 and rounded
// once. With StorageFormats it is the device's program
// (codegen/lower/prefill.go lowerConvDepthwise, fp32 DEST), per element:
//
//  1. acc = x[t] * w[0]: mul_tiles with the shifted x in SrcA and the tap
//     row broadcast from SrcB (deviceMul at opts.Fidelity: fp32 data read
//     as tf32), packed to an fp32 CB (exact);
//  2. for j = 1..K-1: term = x[t+j] * w[j] likewise, packed fp32, then
//     acc = acc + term by add_tiles on the two fp32 tiles (deviceAdd: both
//     read as tf32), packed fp32;
//  3. acc is copied to DEST through SrcA (tf32, subnormals flushed) and
//     packed to the result's dtype.
func evalConvDepthwise(_ *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
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
	if opts.StorageFormats {
		for b := range batch {
			for t := range To {
				o := out.Data[(b*To+t)*C : (b*To+t+1)*C]
				for j := range K {
					xr := x.Data[(b*T+t+j)*C : (b*T+t+j+1)*C]
					for c, wv := range w.Data[j*C : (j+1)*C] {
						p := deviceMul(xr[c], wv, opts)
						if j > 0 {
							p = deviceAdd(o[c], p, opts)
						}
						o[c] = p
					}
				}
				for c, v := range o {
					o[c] = numerics.TruncTF32(v)
				}
			}
		}
		return []Tensor{out}, nil
	}
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
