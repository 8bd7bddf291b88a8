package ref

import (
	"errors"

	"github.com/tcc-dev/tcc/ir"
)

// Reductions over the last dimension. Sums accumulate in float64 and round
// once to float32, at least as accurate as the device's fp32 DEST
// accumulation; the reference models storage rounding, not summation order.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpMean:   evalMean,
		ir.OpArgmax: evalArgmax,
	})
}

// reduceLast returns the result shape of a last-dimension reduction (the
// last dimension becomes 1), the number of rows and the row length.
func reduceLast(x Tensor) (ir.Shape, int, int, error) {
	if x.Shape.Rank() == 0 {
		return nil, 0, 0, errors.New("rule rank: cannot reduce a scalar over its last dimension")
	}
	s := x.Shape.Clone()
	n := s[len(s)-1]
	s[len(s)-1] = 1
	return s, x.Shape.Numel() / n, n, nil
}

// evalMean: out[r] = float32(sum_i x[r, i] / n), summed in float64.
func evalMean(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	x := args[0]
	shape, rows, n, err := reduceLast(x)
	if err != nil {
		return nil, err
	}
	out := NewTensor(shape)
	for r := 0; r < rows; r++ {
		var s float64
		for _, v := range x.Data[r*n : (r+1)*n] {
			s += float64(v)
		}
		out.Data[r] = float32(s / float64(n))
	}
	return []Tensor{out}, nil
}

// evalArgmax: out[r] = index of the first maximum of row r. As in PyTorch a
// NaN counts as larger than every number, so the first NaN wins.
func evalArgmax(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	x := args[0]
	shape, rows, n, err := reduceLast(x)
	if err != nil {
		return nil, err
	}
	out := NewTensor(shape)
	for r := 0; r < rows; r++ {
		row := x.Data[r*n : (r+1)*n]
		best := 0
		for i, v := range row {
			if v != v { // NaN
				best = i
				break
			}
			if v > row[best] {
				best = i
			}
		}
		out.Data[r] = float32(best)
	}
	return []Tensor{out}, nil
}
