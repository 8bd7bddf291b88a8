package ref

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
)

// Norms are fused ops: they are evaluated directly from their equation with
// one rounding of the result (to float32, then to the result's storage), not
// through their decomposition; EvalDecomposition evaluates the latter.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpRMSNorm: evalRMSNorm,
	})
}

// evalRMSNorm: out[r, i] = x[r, i] * rsqrt(mean_i(x[r, i]^2) + eps) *
// (w[i] + offset), every step in float64, rounded once to float32.
func evalRMSNorm(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	eps, err := attrFloat(op, "eps")
	if err != nil {
		return nil, err
	}
	offset, err := attrFloat(op, "offset")
	if err != nil {
		return nil, err
	}
	x, w := args[0], args[1]
	if x.Shape.Rank() == 0 || w.Shape.Numel() != x.Shape[len(x.Shape)-1] {
		return nil, fmt.Errorf("rule norm-weight: weight %s must have as many elements as the last dim of x %s", w.Shape, x.Shape)
	}
	n := x.Shape.Cols2D()
	out := NewTensor(x.Shape)
	for r := 0; r < x.Shape.Rows2D(); r++ {
		row := x.Data[r*n : (r+1)*n]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(n)+eps)
		for i, v := range row {
			out.Data[r*n+i] = float32(float64(v) * scale * (float64(w.Data[i]) + offset))
		}
	}
	return []Tensor{out}, nil
}
