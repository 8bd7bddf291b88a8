package ref

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Tensor is a logical tensor value: Data holds Shape.Numel() values in
// row-major order (last dimension fastest), with no tile padding. Integer
// tensors (token ids, argmax indices) hold their integers exactly as float32
// values; integers beyond 2^24 in magnitude are not all representable.
type Tensor struct {
	Shape ir.Shape
	Data  []float32
	// TilesTransposed marks a weight bound from a value stored in
	// transposed tiles (ir.TensorType.TilesTransposed): a matmul feeds it
	// to SrcB (numerics.MatmulSrcB).
	TilesTransposed bool
}

// NewTensor returns a zero-filled tensor of the given shape.
func NewTensor(shape ir.Shape) Tensor {
	return Tensor{Shape: shape.Clone(), Data: make([]float32, shape.Numel())}
}

// Clone returns a copy that shares no memory with t.
func (t Tensor) Clone() Tensor {
	return Tensor{Shape: t.Shape.Clone(), Data: append([]float32(nil), t.Data...), TilesTransposed: t.TilesTransposed}
}

// check reports why t is not a well-formed tensor: a non-positive dimension
// or a data length that differs from the shape's element count.
func (t Tensor) check() error {
	for _, d := range t.Shape {
		if d <= 0 {
			return fmt.Errorf("shape %s has a non-positive dimension", t.Shape)
		}
	}
	if len(t.Data) != t.Shape.Numel() {
		return fmt.Errorf("shape %s needs %d values, data has %d", t.Shape, t.Shape.Numel(), len(t.Data))
	}
	return nil
}

// Store rounds t through dt's device storage, exactly as the device stores
// a tensor of that dtype, and returns a new tensor (t is not modified):
//
//   - fp32: unchanged;
//   - bf16: every value rounded to nearest even (numerics.RoundBF16);
//   - bfp8_b, bfp4_b: the flattened [Rows2D, last dim] matrix packed into
//     tiles with zero padding and unpacked again (numerics.QuantizeMatrix),
//     so each 16-value face row shares one exponent;
//   - int32, uint32: every value must already be an integer in the type's
//     range, otherwise Store fails; values are unchanged.
//
// Store fails on a malformed tensor or a dtype that is not a storage format.
// For every storage dtype, Store(dt, Store(dt, t)) == Store(dt, t).
func Store(dt ir.DType, t Tensor) (Tensor, error) {
	if err := t.check(); err != nil {
		return Tensor{}, err
	}
	out := Tensor{Shape: t.Shape.Clone()}
	switch dt {
	case ir.FP32:
		out.Data = append([]float32(nil), t.Data...)
	case ir.BF16:
		out.Data = make([]float32, len(t.Data))
		for i, v := range t.Data {
			out.Data[i] = numerics.RoundBF16(v)
		}
	case ir.BFP8B, ir.BFP4B:
		out.Data = quantized(dt, t.Data, t.Shape.Rows2D(), t.Shape.Cols2D(), false)
	case ir.Int32, ir.UInt32:
		if err := checkInts(dt, t); err != nil {
			return Tensor{}, err
		}
		out.Data = append([]float32(nil), t.Data...)
	default:
		return Tensor{}, fmt.Errorf("%s is not a storage format (want one of fp32, bf16, bfp8_b, bfp4_b, int32, uint32)", dt)
	}
	return out, nil
}

// StoreAs is Store through value type typ's storage: typ.DType's, in
// transposed tiles when typ.TilesTransposed (block floats then share
// exponents down 16 rows of a column: numerics.QuantizeMatrixTransposed),
// and the result carries typ.TilesTransposed. It fails as Store does.
func StoreAs(typ ir.TensorType, t Tensor) (Tensor, error) {
	if !typ.TilesTransposed {
		return Store(typ.DType, t)
	}
	if typ.DType.IsBlockFloat() {
		if err := t.check(); err != nil {
			return Tensor{}, err
		}
		return Tensor{Shape: t.Shape.Clone(), Data: quantized(typ.DType, t.Data, t.Shape.Rows2D(), t.Shape.Cols2D(), true), TilesTransposed: true}, nil
	}
	out, err := Store(typ.DType, t)
	out.TilesTransposed = err == nil
	return out, err
}

// intRange is the closed range of integers an integer dtype holds.
func intRange(dt ir.DType) (lo, hi float64) {
	if dt == ir.Int32 {
		return math.MinInt32, math.MaxInt32
	}
	return 0, math.MaxUint32
}

// checkInts fails, naming the first offending element, unless every value
// of t is an integer inside dt's range.
func checkInts(dt ir.DType, t Tensor) error {
	lo, hi := intRange(dt)
	for i, v := range t.Data {
		f := float64(v)
		if f != math.Trunc(f) || f < lo || f > hi {
			return fmt.Errorf("element %d of %s tensor %s is %v; %s values must be integers in [%.0f, %.0f]", i, dt, t.Shape, v, dt, lo, hi)
		}
	}
	return nil
}

// shapesOf formats tensor shapes for error messages: "([2,3], [3])".
func shapesOf(ts []Tensor) string {
	s := "("
	for i, t := range ts {
		if i > 0 {
			s += ", "
		}
		s += t.Shape.String()
	}
	return s + ")"
}

// quantized is numerics.QuantizeMatrix(dt, data, rows, cols) (with
// transposed, numerics.QuantizeMatrixTransposed) in a fresh slice,
// memoized: evaluating a graph binds its block-float weights, and a
// model run binds the same weight tensors at every step. An entry is used
// only while the caller's slice still holds the bits it was computed from
// (same backing array, same length, every value bit-equal), so a tensor
// mutated in place is quantized again. The cache holds at most
// quantCacheElems input values and is emptied when a new entry would
// exceed that.
func quantized(dt ir.DType, data []float32, rows, cols int, transposed bool) []float32 {
	q := numerics.QuantizeMatrix
	if transposed {
		q = numerics.QuantizeMatrixTransposed
	}
	if len(data) == 0 {
		return q(dt, data, rows, cols)
	}
	key := quantKey{dt, &data[0], len(data), rows, cols, transposed}
	quantCache.Lock()
	e, ok := quantCache.m[key]
	quantCache.Unlock()
	if ok && sameBits(e.in, data) {
		return slices.Clone(e.out)
	}
	out := q(dt, data, rows, cols)
	if len(data) > quantCacheElems {
		return out
	}
	quantCache.Lock()
	defer quantCache.Unlock()
	if quantCache.m == nil || quantCache.elems+len(data) > quantCacheElems {
		quantCache.m, quantCache.elems = map[quantKey]quantEntry{}, 0
	}
	if old, ok := quantCache.m[key]; ok {
		quantCache.elems -= len(old.in)
	}
	quantCache.m[key] = quantEntry{in: slices.Clone(data), out: slices.Clone(out)}
	quantCache.elems += len(data)
	return out
}

// quantCacheElems bounds the values quantized keeps (two float32 slices
// per entry: 16M values are 128 MB).
const quantCacheElems = 1 << 24

type quantKey struct {
	dt            ir.DType
	first         *float32
	n, rows, cols int
	transposed    bool
}

type quantEntry struct{ in, out []float32 }

var quantCache struct {
	sync.Mutex
	m     map[quantKey]quantEntry
	elems int
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
