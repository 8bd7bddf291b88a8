package runtime

import (
	"bytes"
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// definedDiff compares the chip's copy got of tensor t with the
// simulator's want (both the buffer's page bytes) on the elements a
// program defines: the tensor's logical elements, the rows and columns of
// its shape. A tiled buffer's padding (the rows past the shape's rows in
// its last tile row, the columns past its columns) is not compared: readers
// fetch only live rows, so the rest of a tile holds whatever the core's L1
// held, which is not the same on the chip and in the simulator. It returns
// "" when the defined elements agree, else what differs, naming the first
// differing element; padding says whether bytes outside them differ.
func definedDiff(t Tensor, got, want []byte) (diff string, padding bool) {
	if bytes.Equal(got, want) {
		return "", false
	}
	if len(got) != len(want) {
		return fmt.Sprintf("the chip returned %d bytes, the simulator holds %d", len(got), len(want)), false
	}
	g, w := definedValues(t, got), definedValues(t, want)
	if g == nil || w == nil || len(g) != len(w) {
		// No element view of this buffer: every byte counts.
		k := 0
		for got[k] == want[k] {
			k++
		}
		return fmt.Sprintf("byte %d (page %d) is %#02x on the chip, %#02x on the simulator", k, k/max(t.PageSize, 1), got[k], want[k]), false
	}
	n, first := 0, -1
	var worst int64
	shift, hasULP := ulpShift[t.DType]
	for i := range g {
		if g[i] == w[i] {
			continue
		}
		n++
		if first < 0 {
			first = i
		}
		if hasULP {
			ulp := int64(1) << shift
			d := ordered(math.Float32frombits(g[i]))/ulp - ordered(math.Float32frombits(w[i]))/ulp
			worst = max(worst, d, -d)
		}
	}
	if first < 0 {
		return "", true
	}
	ulps := ""
	if hasULP {
		ulps = fmt.Sprintf(" (at most %d ulp)", worst)
	}
	return fmt.Sprintf("%d of %d defined %s values differ%s; first: element %s is %s on the chip, %s on the simulator",
		n, len(g), t.DType, ulps, position(t.Shape, first), showValue(t, g[first]), showValue(t, w[first])), false
}

// DefinedDiffs lists every defined element of t (definedDiff's elements)
// whose bits differ between the chip's page bytes got and the simulator's
// want, one line each in row-major order: its index, the chip's value and
// the simulator's (bits in the format's own width). It returns nil when
// the defined elements agree, and one line saying so when the bytes
// cannot be read as t.
func DefinedDiffs(t Tensor, got, want []byte) []string {
	g, w := definedValues(t, got), definedValues(t, want)
	if g == nil || w == nil || len(g) != len(w) {
		if bytes.Equal(got, want) {
			return nil
		}
		return []string{fmt.Sprintf("no element view of %s %s %s (%d and %d bytes): the bytes differ", t.Name, t.DType, t.Shape, len(got), len(want))}
	}
	var out []string
	for i := range g {
		if g[i] != w[i] {
			out = append(out, fmt.Sprintf("%s chip %s sim %s", position(t.Shape, i), showValue(t, g[i]), showValue(t, w[i])))
		}
	}
	return out
}

// definedValues are the bits of t's logical elements in row-major order
// (float32 bits for float formats, the integers' own bits otherwise), or
// nil when b cannot be read as t.
func definedValues(t Tensor, b []byte) []uint32 {
	n := t.Shape.Numel()
	if t.Layout != ir.TileLayout {
		eb := t.DType.ElemBytes()
		if eb == 0 || len(b) < n*eb {
			return nil
		}
		v := make([]uint32, n)
		for i := range v {
			switch eb {
			case 4:
				v[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
			case 2:
				v[i] = uint32(b[2*i]) | uint32(b[2*i+1])<<8
				if t.DType == ir.BF16 {
					v[i] <<= 16 // as float32 bits
				}
			case 1:
				v[i] = uint32(b[i])
			default:
				return nil
			}
		}
		return v
	}
	dt := t.DType
	if dt == ir.Int32 || dt == ir.UInt32 {
		dt = ir.FP32 // same tile layout; the bits as they are
	}
	tiles, err := numerics.UnpackTiles(dt, b)
	lead, rows, cols := matrixView(t.Shape)
	if err != nil || len(tiles) != lead*numerics.TilesFor(rows, cols)*numerics.TileElems {
		return nil
	}
	vals := numerics.UntilizeBatch(tiles, lead, rows, cols)
	v := make([]uint32, len(vals))
	for i, x := range vals {
		v[i] = math.Float32bits(x)
	}
	return v
}

// position is the index of row-major element i of shape s, as [i0 i1 ...].
func position(s ir.Shape, i int) string {
	idx := make([]int, len(s))
	for d := len(s) - 1; d >= 0; d-- {
		if s[d] > 0 {
			idx[d] = i % s[d]
			i /= s[d]
		}
	}
	return fmt.Sprint(idx)
}

// showValue prints an element's value and bits.
func showValue(t Tensor, bits uint32) string {
	switch t.DType {
	case ir.Int32:
		return fmt.Sprint(int32(bits))
	case ir.UInt32:
		return fmt.Sprint(bits)
	}
	if shift, ok := ulpShift[t.DType]; ok {
		return fmt.Sprintf("%g (%#x)", math.Float32frombits(bits), bits>>shift)
	}
	return fmt.Sprintf("%g", math.Float32frombits(bits))
}

// ulpShift is how many low float32 bits a stored value of the format lacks;
// one unit in its last place is 1<<ulpShift on ordered().
var ulpShift = map[ir.DType]uint{ir.FP32: 0, ir.BF16: 16}

// ordered maps a float32 to an integer that increases with its value, so
// the distance between two values counts the float32 steps between them.
func ordered(x float32) int64 {
	b := int64(math.Float32bits(x))
	if b&0x80000000 != 0 {
		return -(b & 0x7FFFFFFF)
	}
	return b
}
