package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Arithmetic model ops: the activation x activation batched matmul (bmm).
// Without StorageFormats it is computed in float64 and rounded once to
// float32. With StorageFormats it follows matmul: its products are the
// FPU's (numerics.Matmul at Options.Fidelity, fp32 operands reduced to
// tf32, float32 accumulation). The caller then rounds to the result's
// storage dtype. Sum is a reduction (reduce.go), the norms are in norm.go.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpBMM: evalBMM,
	})
}

// evalBMM: out[.., m, n] = sum_k a[.., m, k] * b[.., k, n] for a [.., M, K]
// and b [.., K, N] of equal rank >= 2 and equal leading dims. Each batch is
// computed as evalMatmul computes its batches: numerics.Matmul at
// opts.Fidelity with StorageFormats, exact products summed in float64
// without.
// evalBMMTransposeB is evalBMM of a and b with b's last two dims swapped
// (a data movement: the values, and so the products, are the same).
func evalBMMTransposeB(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	b := args[1]
	r := b.Shape.Rank()
	if r < 2 {
		return nil, fmt.Errorf("rule bmm-rank: want operands of equal rank >= 2, got %s and %s", args[0].Shape, b.Shape)
	}
	n, k := b.Shape[r-2], b.Shape[r-1]
	shape := b.Shape.Clone()
	shape[r-2], shape[r-1] = k, n
	bt := NewTensor(shape)
	for bi := range b.Shape.Numel() / (n * k) {
		src, dst := b.Data[bi*n*k:(bi+1)*n*k], bt.Data[bi*n*k:(bi+1)*n*k]
		for i := range n {
			for j := range k {
				dst[j*n+i] = src[i*k+j]
			}
		}
	}
	return evalBMM(op, []Tensor{args[0], bt}, opts)
}

func evalBMM(_ *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	a, b := args[0], args[1]
	r := a.Shape.Rank()
	if r < 2 || r != b.Shape.Rank() {
		return nil, fmt.Errorf("rule bmm-rank: want operands of equal rank >= 2, got %s and %s", a.Shape, b.Shape)
	}
	for d := 0; d < r-2; d++ {
		if a.Shape[d] != b.Shape[d] {
			return nil, fmt.Errorf("rule bmm-batch: leading dim %d differs (%d vs %d)", d, a.Shape[d], b.Shape[d])
		}
	}
	m, k, n := a.Shape[r-2], a.Shape[r-1], b.Shape[r-1]
	if b.Shape[r-2] != k {
		return nil, fmt.Errorf("rule bmm-inner: a %s has K=%d, b %s has K=%d", a.Shape, k, b.Shape, b.Shape[r-2])
	}
	shape := a.Shape.Clone()
	shape[r-1] = n
	out := NewTensor(shape)
	batches := a.Shape.Numel() / (m * k)
	acc := make([]float64, n)
	for bi := range batches {
		ab := a.Data[bi*m*k : (bi+1)*m*k]
		bb := b.Data[bi*k*n : (bi+1)*k*n]
		ob := out.Data[bi*m*n : (bi+1)*m*n]
		if opts.StorageFormats {
			copy(ob, numerics.Matmul(ab, bb, m, k, n, opts.Fidelity))
			continue
		}
		for i := range m {
			clear(acc)
			for p := range k {
				av := float64(ab[i*k+p])
				for j, bv := range bb[p*n : (p+1)*n] {
					acc[j] += av * float64(bv) // exact: 24x24-bit significands fit float64
				}
			}
			for j, s := range acc {
				ob[i*n+j] = float32(s)
			}
		}
	}
	return []Tensor{out}, nil
}
