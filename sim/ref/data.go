package ref

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Data-movement and layout ops: they copy values; only typecast to an
// integer dtype changes them.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpEmbedding: evalEmbedding,
		ir.OpTypecast:  evalTypecast,
		ir.OpReshape:   evalReshape,
	})
}

// evalEmbedding: out[t, :] = table[ids[t], :] for ids of any shape and a
// [V, H] table. Every id must be an integer in [0, V).
func evalEmbedding(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	ids, table := args[0], args[1]
	if table.Shape.Rank() != 2 {
		return nil, fmt.Errorf("rule embedding-table: table must be [vocab, hidden], got %s", table.Shape)
	}
	v, h := table.Shape[0], table.Shape[1]
	out := NewTensor(append(ids.Shape.Clone(), h))
	for t, id := range ids.Data {
		f := float64(id)
		if f != math.Trunc(f) || f < 0 || f >= float64(v) {
			return nil, fmt.Errorf("rule embedding-id: id %v at position %d is not a row of the %d-row table %s (want an integer in [0, %d))", id, t, v, table.Shape, v)
		}
		r := int(f)
		copy(out.Data[t*h:(t+1)*h], table.Data[r*h:(r+1)*h])
	}
	return []Tensor{out}, nil
}

// evalTypecast converts x to the dtype attribute. To int32/uint32 it rounds
// to nearest even and saturates to the type's range (NaN becomes 0), in
// every mode. To a float dtype it returns x unchanged; the rounding to that
// dtype is the result's storage, applied with StorageFormats.
func evalTypecast(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	dt, err := attrDType(op, "dtype")
	if err != nil {
		return nil, err
	}
	x := args[0]
	switch {
	case dt == ir.Int32 || dt == ir.UInt32:
		return []Tensor{{Shape: x.Shape.Clone(), Data: numerics.Quantize(dt, x.Data)}}, nil
	case dt.IsFloat():
		return []Tensor{x.Clone()}, nil
	}
	return nil, fmt.Errorf("rule typecast-dtype: cannot convert to %s", dt)
}

// evalReshape returns x's values, in row-major order, with the shape attribute.
func evalReshape(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	s, err := attrInts(op, "shape")
	if err != nil {
		return nil, err
	}
	x := args[0]
	shape := ir.Shape(append([]int(nil), s...))
	for _, d := range shape {
		if d <= 0 {
			return nil, fmt.Errorf("rule reshape-shape: target shape %s has a non-positive dimension", shape)
		}
	}
	if shape.Numel() != x.Shape.Numel() {
		return nil, fmt.Errorf("rule reshape-numel: cannot reshape %s (%d elements) to %s (%d elements)", x.Shape, x.Shape.Numel(), shape, shape.Numel())
	}
	return []Tensor{{Shape: shape, Data: append([]float32(nil), x.Data...)}}, nil
}
