package ir

import "fmt"

// ChainMovesTiles reports whether the chain from source shape xs through
// steps (steps[i] giving shapes[i]) maps every result tile onto one whole
// source tile with the same in-tile offsets. It follows the two in-tile
// offsets back from the result's last two dims: the row offset lives in
// some dim of each intermediate shape and the column offset in another,
// each at a multiple of 32 in a dim whose size is a multiple of 32. A
// slice keeps them (begins on those dims multiples of 32), a transpose
// moves them, a repeat_interleave keeps them when it repeats another dim,
// a reshape moves an offset to the operand dim with the same flat stride.
// True only when they end on the source's last two dims.
func ChainMovesTiles(xs Shape, steps []LayoutStep, shapes []Shape) bool {
	if len(steps) == 0 || len(shapes) != len(steps) {
		return false
	}
	os := shapes[len(shapes)-1]
	r := os.Rank()
	if r < 2 || xs.Rank() < 2 {
		return false
	}
	rowD, colD := r-2, r-1
	aligned := func(s Shape) bool { return s[rowD]%TileSize == 0 && s[colD]%TileSize == 0 }
	for i := len(steps) - 1; i >= 0; i-- {
		out, in := shapes[i], xs
		if i > 0 {
			in = shapes[i-1]
		}
		if !aligned(out) {
			return false
		}
		st := steps[i]
		switch st.Op {
		case OpSlice:
			begin, _ := st.Attrs["begin"].([]int)
			if len(begin) != in.Rank() || in.Rank() != out.Rank() || begin[rowD]%TileSize != 0 || begin[colD]%TileSize != 0 {
				return false
			}
		case OpRepeatInterleave:
			ax, err := LayoutStepAxis(st, "axis", out.Rank())
			if err != nil || ax == rowD || ax == colD {
				return false
			}
		case OpTranspose:
			d0, err0 := LayoutStepAxis(st, "dim0", out.Rank())
			d1, err1 := LayoutStepAxis(st, "dim1", out.Rank())
			if err0 != nil || err1 != nil {
				return false
			}
			swap := func(d int) int {
				switch d {
				case d0:
					return d1
				case d1:
					return d0
				}
				return d
			}
			rowD, colD = swap(rowD), swap(colD)
		case OpReshape:
			rowD, colD = reshapeOffsetDim(in, out, rowD), reshapeOffsetDim(in, out, colD)
			if rowD < 0 || colD < 0 {
				return false
			}
		default:
			return false
		}
	}
	return rowD == xs.Rank()-2 && colD == xs.Rank()-1 && aligned(xs)
}

// reshapeOffsetDim is the dim of in holding an in-tile offset that lives in
// dim d of out (a reshape from in to out): the dim with d's flat stride,
// its size a multiple of 32 (then a 32-aligned block of d stays a
// 32-aligned block of it, the other dims' indices unchanged); -1 if none.
func reshapeOffsetDim(in, out Shape, d int) int {
	stride := func(s Shape, d int) int {
		n := 1
		for _, v := range s[d+1:] {
			n *= v
		}
		return n
	}
	if out[d]%TileSize != 0 {
		return -1
	}
	for e := range in {
		if in[e]%TileSize == 0 && stride(in, e) == stride(out, d) {
			return e
		}
	}
	return -1
}

// LayoutStepAxis is the axis attribute name of st resolved against rank
// r (negative values counted from the end); it fails when the attribute
// is missing or outside the rank.
func LayoutStepAxis(st LayoutStep, name string, r int) (int, error) {
	v, ok := st.Attrs[name].(int)
	if !ok {
		return 0, fmt.Errorf("missing %s", name)
	}
	if v < 0 {
		v += r
	}
	if v < 0 || v >= r {
		return 0, fmt.Errorf("%s %d outside rank %d", name, v, r)
	}
	return v, nil
}
