package ir

import (
	"fmt"
	"math"
)

// Shape rules: each returns the result types of one op class or an error
// naming the broken rule. Results inherit layout, memory config and
// distribution from the first operand unless the rule says otherwise.

func like(t TensorType, s Shape, dt DType) TensorType {
	return TensorType{Shape: s, DType: dt, Layout: t.Layout, Mem: t.Mem, Dist: t.Dist}
}

// shapeSame: one result with the first operand's type.
func shapeSame(in []TensorType, _ Attrs) ([]TensorType, error) {
	if !in[0].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: %s is not a float dtype", in[0].DType)
	}
	return []TensorType{like(in[0], in[0].Shape.Clone(), in[0].DType)}, nil
}

// shapeAddScalar: shapeSame, or for a uint32 or int32 operand the same
// type when the value is an integer.
func shapeAddScalar(in []TensorType, a Attrs) ([]TensorType, error) {
	if dt := in[0].DType; dt == UInt32 || dt == Int32 {
		v, ok := a["value"].(float64)
		if !ok || v != math.Trunc(v) || math.Abs(v) > 1<<31 {
			return nil, fmt.Errorf("rule int-scalar: add_scalar on %s takes an integral value, got %v", dt, a["value"])
		}
		return []TensorType{like(in[0], in[0].Shape.Clone(), dt)}, nil
	}
	return shapeSame(in, a)
}

// broadcastShapes applies numpy broadcasting to two shapes.
func broadcastShapes(a, b Shape) (Shape, error) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("rule broadcast: shapes %s and %s differ at dim %d (%d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}

// shapeBroadcast: binary eltwise with numpy broadcasting; dtype of the first operand.
func shapeBroadcast(in []TensorType, _ Attrs) ([]TensorType, error) {
	if !in[0].DType.IsFloat() || !in[1].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: eltwise needs float dtypes, got %s and %s", in[0].DType, in[1].DType)
	}
	s, err := broadcastShapes(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, err
	}
	return []TensorType{like(in[0], s, in[0].DType)}, nil
}

// shapeReduceLast: the last dimension becomes 1.
func shapeReduceLast(in []TensorType, _ Attrs) ([]TensorType, error) {
	if in[0].Shape.Rank() == 0 {
		return nil, fmt.Errorf("rule rank: cannot reduce a scalar")
	}
	s := in[0].Shape.Clone()
	s[len(s)-1] = 1
	return []TensorType{like(in[0], s, in[0].DType)}, nil
}

// shapeArgmax: the last dimension becomes 1, dtype uint32, row-major.
func shapeArgmax(in []TensorType, a Attrs) ([]TensorType, error) {
	out, err := shapeReduceLast(in, a)
	if err != nil {
		return nil, err
	}
	out[0].DType = UInt32
	out[0].Layout = RowMajorLayout
	return out, nil
}

// shapeMatmul: [..., M, K] x [K, N] -> [..., M, N].
func shapeMatmul(in []TensorType, a Attrs) ([]TensorType, error) {
	x, w := in[0].Shape, in[1].Shape
	if x.Rank() < 2 || w.Rank() != 2 {
		return nil, fmt.Errorf("rule matmul-rank: want a of rank >= 2 and w of rank 2, got %s and %s", x, w)
	}
	if x[len(x)-1] != w[0] {
		return nil, fmt.Errorf("rule matmul-inner: inner dims differ: a %s has K=%d, w %s has K=%d", x, x[len(x)-1], w, w[0])
	}
	if !in[0].DType.IsFloat() || !in[1].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: matmul needs float dtypes, got %s and %s", in[0].DType, in[1].DType)
	}
	if in[1].Layout != TileLayout {
		return nil, fmt.Errorf("rule matmul-layout: weights must be in tile layout")
	}
	s := x.Clone()
	s[len(s)-1] = w[1]
	dt := in[0].DType
	if d, ok := a["dtype"].(DType); ok {
		dt = d
	}
	t := like(in[0], s, dt)
	if !in[1].Dist.IsReplicated() && in[1].Dist.Axis == 1 {
		t.Dist = Dist{Axis: len(s) - 1}
	}
	return []TensorType{t}, nil
}

// shapeNorm: out like x; w is a vector over x's last dimension.
func shapeNorm(in []TensorType, _ Attrs) ([]TensorType, error) {
	x, w := in[0].Shape, in[1].Shape
	if x.Rank() == 0 || w.Numel() != x[len(x)-1] {
		return nil, fmt.Errorf("rule norm-weight: weight %s must have as many elements as the last dim of x %s", w, x)
	}
	return shapeSame(in[:1], nil)
}

// shapeEmbedding: ids [...] (uint32/int32) and table [V, H] -> [..., H] in the table's dtype.
func shapeEmbedding(in []TensorType, _ Attrs) ([]TensorType, error) {
	ids, tab := in[0], in[1]
	if ids.DType != UInt32 && ids.DType != Int32 {
		return nil, fmt.Errorf("rule embedding-ids: ids must be uint32 or int32, got %s", ids.DType)
	}
	if tab.Shape.Rank() != 2 {
		return nil, fmt.Errorf("rule embedding-table: table must be [vocab, hidden], got %s", tab.Shape)
	}
	s := append(ids.Shape.Clone(), tab.Shape[1])
	return []TensorType{{Shape: s, DType: tab.DType, Layout: TileLayout, Mem: ids.Mem, Dist: Replicated}}, nil
}

// shapeTypecast: same shape, dtype from the attribute.
func shapeTypecast(in []TensorType, a Attrs) ([]TensorType, error) {
	dt := a["dtype"].(DType)
	t := like(in[0], in[0].Shape.Clone(), dt)
	if dt.IsBlockFloat() && t.Layout != TileLayout {
		return nil, fmt.Errorf("rule block-float-layout: %s needs tile layout", dt)
	}
	return []TensorType{t}, nil
}

// shapeReshape: same element count, new shape.
func shapeReshape(in []TensorType, a Attrs) ([]TensorType, error) {
	s := Shape(append([]int(nil), a["shape"].([]int)...))
	if s.Numel() != in[0].Shape.Numel() {
		return nil, fmt.Errorf("rule reshape-numel: cannot reshape %s (%d elements) to %s (%d elements)", in[0].Shape, in[0].Shape.Numel(), s, s.Numel())
	}
	t := like(in[0], s, in[0].DType)
	if d := t.Dist; !d.IsReplicated() && len(s) != in[0].Shape.Rank() {
		// The split axis keeps its position from the end when the rank
		// changes (models that fold heads into rows set Dist themselves).
		t.Dist.Axis = d.Axis - in[0].Shape.Rank() + len(s)
		if t.Dist.Axis < 0 || t.Dist.Axis >= len(s) {
			t.Dist = Replicated
		}
	}
	return []TensorType{t}, nil
}
