package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpMatmul: evalMatmul,
	})
}

// evalMatmul: out[b, m, n] = sum_k a[b, m, k] * w[k, n] for a [..., M, K]
// and w [K, N]. With StorageFormats each batch is numerics.Matmul at
// opts.Fidelity (numerics.MatmulSrcB, the weight on SrcB, for a weight
// stored in transposed tiles: w.TilesTransposed): the device's
// source-register reduction (fp32 operands truncate to tf32),
// fidelity-limited products and the FPU datapath's accumulation in order
// of increasing k. Without it, the exact products of the float32
// values are summed in float64 and rounded once to float32.
func evalMatmul(_ *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	a, w := args[0], args[1]
	if a.Shape.Rank() < 2 || w.Shape.Rank() != 2 {
		return nil, fmt.Errorf("rule matmul-rank: want a of rank >= 2 and w of rank 2, got %s and %s", a.Shape, w.Shape)
	}
	m, k := a.Shape[len(a.Shape)-2], a.Shape[len(a.Shape)-1]
	if w.Shape[0] != k {
		return nil, fmt.Errorf("rule matmul-inner: a %s has K=%d, w %s has K=%d", a.Shape, k, w.Shape, w.Shape[0])
	}
	n := w.Shape[1]
	shape := a.Shape.Clone()
	shape[len(shape)-1] = n
	out := NewTensor(shape)
	batches := a.Shape.Numel() / (m * k)
	for b := 0; b < batches; b++ {
		ab := a.Data[b*m*k : (b+1)*m*k]
		ob := out.Data[b*m*n : (b+1)*m*n]
		if opts.StorageFormats {
			mm := numerics.Matmul
			if w.TilesTransposed {
				mm = numerics.MatmulSrcB // the weight on SrcB
			}
			copy(ob, mm(ab, w.Data, m, k, n, opts.Fidelity))
			continue
		}
		acc := make([]float64, n)
		for i := 0; i < m; i++ {
			clear(acc)
			for p := 0; p < k; p++ {
				av := ab[i*k+p]
				wrow := w.Data[p*n : (p+1)*n]
				for j, wv := range wrow {
					acc[j] += float64(av) * float64(wv) // exact: 24x24-bit significands fit float64
				}
			}
			for j, s := range acc {
				ob[i*n+j] = float32(s)
			}
		}
	}
	return []Tensor{out}, nil
}
