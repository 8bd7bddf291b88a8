package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Data movement of the model ops: slice, concat, pad, repeat_interleave,
// transpose and to_memory only copy values (pad also writes its fill
// value, converted to float32), so their results are exact before the
// storage rounding of the result dtype. Placement (memory kind, shard
// spec, layout) has no effect on values in the reference.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpSlice:            evalSlice,
		ir.OpConcat:           evalConcat,
		ir.OpPad:              evalPad,
		ir.OpRepeatInterleave: evalRepeatInterleave,
		ir.OpTranspose:        evalTranspose,
		ir.OpToMemory:         evalToMemory,
	})
}

// rowStrides returns the row-major element strides of s.
func rowStrides(s ir.Shape) []int {
	st := make([]int, len(s))
	n := 1
	for d := len(s) - 1; d >= 0; d-- {
		st[d] = n
		n *= s[d]
	}
	return st
}

// axisView splits s around axis ax: outer is the product of the dims
// before it, n the dim itself and inner the product of the dims after it,
// so element [o, i, j] of the view is at flat offset (o*n + i)*inner + j.
func axisView(s ir.Shape, ax int) (outer, n, inner int) {
	outer, inner = 1, 1
	for _, d := range s[:ax] {
		outer *= d
	}
	for _, d := range s[ax+1:] {
		inner *= d
	}
	return outer, s[ax], inner
}

// copyBox copies the box of size box (one entry per dim) from src, where
// it starts at index srcAt, into dst, where it starts at dstAt. Both
// tensors have the box's rank and contain the box at those corners.
func copyBox(dst Tensor, dstAt []int, src Tensor, srcAt []int, box ir.Shape) {
	r := len(box)
	if r == 0 {
		dst.Data[0] = src.Data[0]
		return
	}
	ds, ss := rowStrides(dst.Shape), rowStrides(src.Shape)
	idx := make([]int, r) // index inside the box; the last dim is copied whole
	rows := box.Numel() / box[r-1]
	for range rows {
		do, so := 0, 0
		for d := 0; d < r; d++ {
			do += (dstAt[d] + idx[d]) * ds[d]
			so += (srcAt[d] + idx[d]) * ss[d]
		}
		copy(dst.Data[do:do+box[r-1]], src.Data[so:so+box[r-1]])
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			if idx[d] < box[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// evalSlice: out = x[begin[0]:end[0], ..., begin[r-1]:end[r-1]] with
// 0 <= begin[d] < end[d] <= x.shape[d].
func evalSlice(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	begin, err := attrInts(op, "begin")
	if err != nil {
		return nil, err
	}
	end, err := attrInts(op, "end")
	if err != nil {
		return nil, err
	}
	x := args[0]
	r := x.Shape.Rank()
	if len(begin) != r || len(end) != r {
		return nil, fmt.Errorf("rule slice-rank: begin %v and end %v need one entry per dim of %s", begin, end, x.Shape)
	}
	box := make(ir.Shape, r)
	for d := range box {
		if begin[d] < 0 || begin[d] >= end[d] || end[d] > x.Shape[d] {
			return nil, fmt.Errorf("rule slice-bounds: dim %d: want 0 <= begin %d < end %d <= %d", d, begin[d], end[d], x.Shape[d])
		}
		box[d] = end[d] - begin[d]
	}
	out := NewTensor(box)
	copyBox(out, make([]int, r), x, begin, box)
	return []Tensor{out}, nil
}

// evalConcat: out = the operands joined along axis in order; every other
// dim equal.
func evalConcat(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	a := args[0]
	ax, err := attrAxis(op, "axis", a.Shape.Rank())
	if err != nil {
		return nil, err
	}
	shape := a.Shape.Clone()
	for _, b := range args[1:] {
		if a.Shape.Rank() != b.Shape.Rank() {
			return nil, fmt.Errorf("rule concat-rank: ranks differ (%s vs %s)", a.Shape, b.Shape)
		}
		for d := range shape {
			if d == ax {
				shape[d] += b.Shape[d]
			} else if a.Shape[d] != b.Shape[d] {
				return nil, fmt.Errorf("rule concat-dims: dim %d differs (%d vs %d); only axis %d may differ", d, a.Shape[d], b.Shape[d], ax)
			}
		}
	}
	outer, _, inner := axisView(a.Shape, ax)
	out := NewTensor(shape)
	// Each operand's slab of outer block o lands after the slabs before it.
	off := 0
	for _, b := range args {
		n := b.Shape[ax] * inner
		for o := range outer {
			copy(out.Data[o*shape[ax]*inner+off:], b.Data[o*n:(o+1)*n])
		}
		off += n
	}
	return []Tensor{out}, nil
}

// evalPad: out has the shape attribute (no dim smaller than x's), x at the
// low corner and float32(value) everywhere else.
func evalPad(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	s, err := attrInts(op, "shape")
	if err != nil {
		return nil, err
	}
	value, err := attrFloat(op, "value")
	if err != nil {
		return nil, err
	}
	x := args[0]
	shape := ir.Shape(append([]int(nil), s...))
	if shape.Rank() != x.Shape.Rank() {
		return nil, fmt.Errorf("rule pad-rank: target %s has rank %d, x has %d", shape, shape.Rank(), x.Shape.Rank())
	}
	for d := range shape {
		if shape[d] < x.Shape[d] {
			return nil, fmt.Errorf("rule pad-grow: dim %d: target %d is smaller than %d", d, shape[d], x.Shape[d])
		}
	}
	out := NewTensor(shape)
	v := float32(value)
	for i := range out.Data {
		out.Data[i] = v
	}
	copyBox(out, make([]int, shape.Rank()), x, make([]int, shape.Rank()), x.Shape)
	return []Tensor{out}, nil
}

// evalRepeatInterleave: out[.., i, ..] = x[.., i / repeats, ..] along axis.
func evalRepeatInterleave(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	reps, err := attrInt(op, "repeats")
	if err != nil {
		return nil, err
	}
	if reps < 1 {
		return nil, fmt.Errorf("rule repeats: repeats %d must be >= 1", reps)
	}
	x := args[0]
	ax, err := attrAxis(op, "axis", x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	shape := x.Shape.Clone()
	shape[ax] *= reps
	outer, n, inner := axisView(x.Shape, ax)
	out := NewTensor(shape)
	for o := range outer {
		for i := range n * reps {
			src := (o*n + i/reps) * inner
			dst := (o*n*reps + i) * inner
			copy(out.Data[dst:dst+inner], x.Data[src:src+inner])
		}
	}
	return []Tensor{out}, nil
}

// evalTranspose: out = x with dims dim0 and dim1 swapped.
func evalTranspose(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	x := args[0]
	r := x.Shape.Rank()
	d0, err := attrAxis(op, "dim0", r)
	if err != nil {
		return nil, err
	}
	d1, err := attrAxis(op, "dim1", r)
	if err != nil {
		return nil, err
	}
	if d0 == d1 {
		return nil, fmt.Errorf("rule transpose-dims: dim0 and dim1 are both %d", d0)
	}
	shape := x.Shape.Clone()
	shape[d0], shape[d1] = shape[d1], shape[d0]
	// in[d] is the stride in x of output dim d.
	in := rowStrides(x.Shape)
	in[d0], in[d1] = in[d1], in[d0]
	out := NewTensor(shape)
	idx := make([]int, r)
	src := 0
	for i := range out.Data {
		out.Data[i] = x.Data[src]
		for d := r - 1; d >= 0; d-- { // odometer over the output index
			idx[d]++
			src += in[d]
			if idx[d] < shape[d] {
				break
			}
			src -= in[d] * shape[d]
			idx[d] = 0
		}
	}
	return []Tensor{out}, nil
}

// evalToMemory returns x unchanged; the mem attribute must name a memory
// kind (the placement itself does not affect values).
func evalToMemory(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	mem, err := attrString(op, "mem")
	if err != nil {
		return nil, err
	}
	if _, err := ir.ParseMemKind(mem); err != nil {
		return nil, fmt.Errorf("rule to-memory-kind: %w", err)
	}
	return []Tensor{args[0].Clone()}, nil
}
