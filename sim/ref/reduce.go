package ref

import (
	"errors"
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Reductions: mean over the last dimension, sum over any axis and argmax.
//
// Without StorageFormats the sums accumulate in float64 in index order and
// round once to float32. With StorageFormats they are what the reduce
// lowering (codegen/lower/reduce.go) computes, rounding point by rounding
// point, in an fp32 DEST:
//
//   - over the last dim, matmul_tiles against the ones column tile folds
//     the operand tiles one after the other, in index order, into one
//     DEST tile (matmulRowSum: numerics.Matmul, the operand through SrcB
//     as tf32). The zeroed tile padding adds +0;
//   - over the second-to-last dim, reduce_tile<SUM, REDUCE_COL> against
//     a scaler tile of 1.0 pools each operand tile's columns into DEST
//     row 0, tile after tile (colPoolSum: GAPOOL, an mvmul lane of 16
//     products per face, numerics.PoolTile; x in SrcA, where fp32 data
//     keeps tf32's bits). The zeroed tile padding adds +0;
//   - over a leading dim the tiles are copied into DEST and added there on
//     the SFPU, a float32 running sum in index order (sumLead);
//   - mean is the last-dim sum times float32(1/N) on the SFPU.
//
// The result is then packed to its dtype by the caller (runOp).
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpSum:    evalSum,
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

// evalMean: out[r] = sum_i x[r, i] / n. Without StorageFormats the sum is
// float64, divided and rounded once; with it the device's row sum
// (matmulRowSum) times float32(1/n) in float32 (the SFPU's
// mul_unary_tile).
func evalMean(_ *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	x := args[0]
	shape, rows, n, err := reduceLast(x)
	if err != nil {
		return nil, err
	}
	out := NewTensor(shape)
	inv := float32(1 / float64(n))
	for r := 0; r < rows; r++ {
		row := x.Data[r*n : (r+1)*n]
		if opts.StorageFormats {
			out.Data[r] = matmulRowSum(n, func(i int) float32 { return row[i] }, opts.Fidelity) * inv
			continue
		}
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		out.Data[r] = float32(s / float64(n))
	}
	return []Tensor{out}, nil
}

// evalSum: out[.., 0, ..] = sum over axis of x, the axis kept with size 1.
// Without StorageFormats it is summed in float64 in index order and
// rounded once to float32. With StorageFormats it is the device's: over
// the last dim the row sum by matmul (matmulRowSum), over the
// second-to-last reduce_tile's column pool (colPoolSum), over a leading
// dim sumLead.
func evalSum(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	x := args[0]
	if x.Shape.Rank() == 0 {
		return nil, fmt.Errorf("rule rank: cannot sum a scalar over an axis")
	}
	ax, err := attrAxis(op, "axis", x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	shape := x.Shape.Clone()
	shape[ax] = 1
	outer, n, inner := axisView(x.Shape, ax)
	out := NewTensor(shape)
	lead := ax < x.Shape.Rank()-2
	acc := make([]float64, inner)
	vals := make([]float32, n)
	for o := range outer {
		if !opts.StorageFormats {
			clear(acc)
			for i := range n {
				for j, v := range x.Data[(o*n+i)*inner : (o*n+i+1)*inner] {
					acc[j] += float64(v)
				}
			}
			for j, s := range acc {
				out.Data[o*inner+j] = float32(s)
			}
			continue
		}
		for j := range inner {
			for i := range n {
				vals[i] = x.Data[(o*n+i)*inner+j]
			}
			if lead {
				out.Data[o*inner+j] = sumLead(vals, op.Operands[0].Type.DType)
				continue
			}
			if ax == x.Shape.Rank()-1 { // the last dim: a row reduction (inner is 1)
				out.Data[o] = matmulRowSum(n, func(i int) float32 { return vals[i] }, opts.Fidelity)
				continue
			}
			out.Data[o*inner+j] = colPoolSum(n, func(i int) float32 { return vals[i] }, opts.Fidelity)
		}
	}
	return []Tensor{out}, nil
}

// matmulRowSum is what a row sum by matmul (a norm's sum of squares, sum
// and mean over the last dim) leaves in an fp32 DEST for a
// row of n elements (at(i) the i-th; the tile padding past n adds +0): matmul_tiles of
// every tile of the row (in0, fed to SrcB as tf32) against the bf16 ones
// column tile (in1: 1.0 in column 0, fed to SrcA) accumulated in column
// order onto one DEST tile (numerics.Matmul: per tile and fidelity phase
// two mvmul lanes of 16 products). Unlike reduce_tile<SUM, REDUCE_ROW>,
// whose running sum passes through a bf16 SrcB after every tile
// (numerics.ReduceRowOut; tcc's programs no longer sum rows with it), the
// sum never leaves DEST, so it keeps all of fp32's bits.
func matmulRowSum(n int, at func(i int) float32, f ir.MathFidelity) float32 {
	a, ones := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], ones[i] = at(i), 1
	}
	return numerics.Matmul(a, ones, 1, n, 1, f)[0]
}

// splitRowSum is a split-row norm's row sum (matmulRowSum on one core when
// split.Per is 0 or covers the row): every core's chunk of split.Per
// tiles summed by matmulRowSum, the chunks' sums added in float32 (the
// SFPU's add_binary) in core order, on two levels when 0 < split.Fan < the
// number of chunks (each subgroup of Fan consecutive chunks summed, then
// the subgroups' sums in order: multicore.Exchange).
func splitRowSum(n int, at func(i int) float32, f ir.MathFidelity, split RowSplit) float32 {
	chunk := split.Per * numerics.TileDim
	if split.Per <= 0 || chunk >= n {
		return matmulRowSum(n, at, f)
	}
	var parts []float32
	for c := 0; c < n; c += chunk {
		parts = append(parts, matmulRowSum(min(chunk, n-c), func(i int) float32 { return at(c + i) }, f))
	}
	fan := split.Fan
	if fan <= 0 || fan >= len(parts) {
		fan = len(parts)
	}
	var total float32
	for g := 0; g < len(parts); g += fan {
		sub := parts[g]
		for _, p := range parts[g+1 : min(g+fan, len(parts))] {
			sub += p
		}
		if g == 0 {
			total = sub
		} else {
			total += sub
		}
	}
	return total
}

// colPoolSum is what reduce_tile<SUM, REDUCE_COL> against a scaler of 1.0
// leaves in an fp32 DEST element for a column of n elements (at(i) the
// i-th, in row order; the tile padding past n adds +0): per operand tile
// the column's 32 values pooled onto the running DEST value
// (numerics.PoolTile: GAPOOL is an mvmul lane, each face's 16 products
// aligned to the largest of their group of eight and summed in fixed
// point, rows 0..15 and then 16..31 at every fidelity phase). The sum
// never leaves DEST (unlike REDUCE_ROW's, numerics.ReduceRowOut), but it
// is not a float32 running sum: a term far below its group's largest is
// aligned away.
func colPoolSum(n int, at func(i int) float32, f ir.MathFidelity) float32 {
	line := make([]float32, numerics.TileDim)
	var acc float32
	for t := 0; t < n; t += numerics.TileDim {
		for r := range line {
			line[r] = 0
			if t+r < n {
				line[r] = at(t + r)
			}
		}
		acc = numerics.PoolTile(acc, line, 1, f, true)
	}
	return acc
}

// sumLead is the sum of vals (one element of each of the n operand tiles
// folded into one result tile, in index order) as the reduce lowering adds
// tiles over a leading dim: every tile is copied into DEST (copy_tile:
// fp32 data, only ever copied, unpacks to DEST exactly; bf16 passes SrcA
// unchanged but for subnormals, which flush to zero, as TruncTF32 does)
// and added to the running sum in DEST[0] on the SFPU (add_binary_tile):
// a float32 running sum.
func sumLead(vals []float32, dt ir.DType) float32 {
	copied := func(v float32) float32 {
		if dt == ir.FP32 {
			return v
		}
		return numerics.TruncTF32(v)
	}
	var s float32
	for i, v := range vals {
		if i == 0 {
			s = copied(v)
			continue
		}
		s += copied(v)
	}
	return s
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
