package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// DType is a tensor element storage format.
type DType uint8

// Storage formats. Block-float formats (_b) share one exponent per 16-value
// face row of a 32x32 tile; see ir/numerics for the exact packing.
const (
	InvalidDType DType = iota
	FP32               // IEEE float32
	BF16               // bfloat16, round-to-nearest-even from fp32
	BFP8B              // block float, 8-bit sign+magnitude mantissas, shared exponent per 16 values
	BFP4B              // block float, 4-bit sign+magnitude mantissas, shared exponent per 16 values
	Int32              // signed 32-bit integer
	UInt32             // unsigned 32-bit integer
)

var dtypeNames = [...]string{InvalidDType: "invalid", FP32: "fp32", BF16: "bf16", BFP8B: "bfp8_b", BFP4B: "bfp4_b", Int32: "int32", UInt32: "uint32"}

// AllDTypes lists every valid DType in declaration order.
var AllDTypes = []DType{FP32, BF16, BFP8B, BFP4B, Int32, UInt32}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", int(d))
}

// ParseDType parses the String form of a DType.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n == s && i != 0 {
			return DType(i), nil
		}
	}
	return InvalidDType, fmt.Errorf("unknown dtype %q (want one of fp32, bf16, bfp8_b, bfp4_b, int32, uint32)", s)
}

// IsFloat reports whether d holds floating-point values.
func (d DType) IsFloat() bool { return d == FP32 || d == BF16 || d == BFP8B || d == BFP4B }

// IsBlockFloat reports whether d is a shared-exponent block format; such
// tensors exist only in tile layout.
func (d DType) IsBlockFloat() bool { return d == BFP8B || d == BFP4B }

// FractionBits is the number of fraction (explicit mantissa) bits of a
// value stored in d: 23 for fp32, 7 for bf16; for the block floats the
// bits of an element at its block's largest exponent (bfp8_b's 7-bit
// magnitude holds 6 after the leading one, bfp4_b's 3-bit one 2); 0 for
// integers.
func (d DType) FractionBits() int {
	switch d {
	case FP32:
		return 23
	case BF16:
		return 7
	case BFP8B:
		return 6
	case BFP4B:
		return 2
	}
	return 0
}

// TileBytes is the size in bytes of one 32x32 tile stored in d.
func (d DType) TileBytes() int {
	switch d {
	case FP32, Int32, UInt32:
		return 4096
	case BF16:
		return 2048
	case BFP8B:
		return 1088
	case BFP4B:
		return 576
	}
	return 0
}

// ElemBytes is the size of one element in row-major layout (0 for block floats).
func (d DType) ElemBytes() int {
	switch d {
	case FP32, Int32, UInt32:
		return 4
	case BF16:
		return 2
	}
	return 0
}

// Layout is how a tensor's elements are arranged in pages.
type Layout uint8

const (
	TileLayout     Layout = iota // 32x32 tiles of four 16x16 faces; last two dims padded to 32
	RowMajorLayout               // one page per row of the last dimension
)

func (l Layout) String() string {
	if l == RowMajorLayout {
		return "row_major"
	}
	return "tile"
}

// ParseLayout parses the String form of a Layout.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "tile":
		return TileLayout, nil
	case "row_major":
		return RowMajorLayout, nil
	}
	return 0, fmt.Errorf("unknown layout %q (want tile or row_major)", s)
}

// MemKind says where a tensor lives and how its pages are distributed.
type MemKind uint8

const (
	DRAMInterleaved  MemKind = iota // pages round-robin over the DRAM banks
	DRAMWidthSharded                // column shards, one per DRAM bank
	L1Interleaved                   // pages round-robin over worker L1s
	L1HeightSharded                 // row shards, one per core of the shard grid
	L1WidthSharded                  // column shards, one per core of the shard grid
	L1BlockSharded                  // 2-D blocks over a core grid
)

var memKindNames = [...]string{"dram_interleaved", "dram_width_sharded", "l1_interleaved", "l1_height_sharded", "l1_width_sharded", "l1_block_sharded"}

func (m MemKind) String() string {
	if int(m) < len(memKindNames) {
		return memKindNames[m]
	}
	return fmt.Sprintf("memkind(%d)", int(m))
}

// IsSharded reports whether the kind needs a ShardSpec.
func (m MemKind) IsSharded() bool { return m != DRAMInterleaved && m != L1Interleaved }

// IsDRAM reports whether the tensor lives in DRAM.
func (m MemKind) IsDRAM() bool { return m == DRAMInterleaved || m == DRAMWidthSharded }

// ParseMemKind parses the String form of a MemKind.
func ParseMemKind(s string) (MemKind, error) {
	for i, n := range memKindNames {
		if n == s {
			return MemKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown memory kind %q (want one of %s)", s, strings.Join(memKindNames[:], ", "))
}

// CoreRange is an inclusive rectangle of logical worker cores (x is the column).
type CoreRange struct{ X0, Y0, X1, Y1 int }

// NumCores is the number of cores in the rectangle.
func (c CoreRange) NumCores() int { return (c.X1 - c.X0 + 1) * (c.Y1 - c.Y0 + 1) }

func (c CoreRange) String() string { return fmt.Sprintf("(%d,%d)-(%d,%d)", c.X0, c.Y0, c.X1, c.Y1) }

// ShardSpec describes a sharded placement: the core grid and the shard shape
// in elements (rows, cols of the flattened 2-D view).
type ShardSpec struct {
	Grid  CoreRange
	Shape [2]int
}

// MemoryConfig is a tensor's placement.
type MemoryConfig struct {
	Kind  MemKind
	Shard *ShardSpec // non-nil exactly when Kind.IsSharded()
}

func (m MemoryConfig) String() string {
	if m.Shard == nil {
		return m.Kind.String()
	}
	return fmt.Sprintf("%s<%s %dx%d>", m.Kind, m.Shard.Grid, m.Shard.Shape[0], m.Shard.Shape[1])
}

// Equal reports whether two memory configs are the same placement.
func (m MemoryConfig) Equal(o MemoryConfig) bool {
	if m.Kind != o.Kind || (m.Shard == nil) != (o.Shard == nil) {
		return false
	}
	return m.Shard == nil || *m.Shard == *o.Shard
}

// DRAM is the default placement: DRAM interleaved.
var DRAM = MemoryConfig{Kind: DRAMInterleaved}

// L1 is L1 interleaved placement.
var L1 = MemoryConfig{Kind: L1Interleaved}

// Shape is a tensor shape in elements, outermost dimension first.
type Shape []int

// Rank is the number of dimensions.
func (s Shape) Rank() int { return len(s) }

// Numel is the number of elements (1 for a scalar).
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether two shapes have the same dimensions.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns an independent copy.
func (s Shape) Clone() Shape { return append(Shape(nil), s...) }

// TileSize is the edge of a square tile.
const TileSize = 32

// RoundUpTile rounds n up to a multiple of TileSize.
func RoundUpTile(n int) int { return (n + TileSize - 1) / TileSize * TileSize }

// Padded returns the shape with its last two dimensions rounded up to whole
// tiles (a rank-1 shape is treated as [1, n]).
func (s Shape) Padded() Shape {
	p := s.Clone()
	if len(p) == 0 {
		return Shape{TileSize, TileSize}
	}
	p[len(p)-1] = RoundUpTile(p[len(p)-1])
	if len(p) >= 2 {
		p[len(p)-2] = RoundUpTile(p[len(p)-2])
	}
	return p
}

// Rows2D and Cols2D give the flattened 2-D view: all leading dims times the
// second-to-last make the rows; the last dim is the columns.
func (s Shape) Rows2D() int {
	if len(s) == 0 {
		return 1
	}
	return s.Numel() / s[len(s)-1]
}

// Cols2D is the last dimension (1 for a scalar).
func (s Shape) Cols2D() int {
	if len(s) == 0 {
		return 1
	}
	return s[len(s)-1]
}

// Tiles is the number of 32x32 tiles the shape occupies in tile layout: the
// leading dims times padded rows/32 times padded cols/32.
func (s Shape) Tiles() int {
	if len(s) == 0 {
		return 1
	}
	lead := 1
	for _, d := range s[:max(0, len(s)-2)] {
		lead *= d
	}
	rows := 1
	if len(s) >= 2 {
		rows = s[len(s)-2]
	}
	return lead * (RoundUpTile(rows) / TileSize) * (RoundUpTile(s[len(s)-1]) / TileSize)
}

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// Mesh is a 2-D arrangement of cards.
type Mesh struct{ Rows, Cols int }

// Devices is the number of cards in the mesh.
func (m Mesh) Devices() int { return m.Rows * m.Cols }

func (m Mesh) String() string { return fmt.Sprintf("%dx%d", m.Rows, m.Cols) }

// ParseMesh parses "RxC" (for example "1x2").
func ParseMesh(s string) (Mesh, error) {
	var m Mesh
	parts := strings.Split(strings.ToLower(s), "x")
	if len(parts) == 2 {
		r, err1 := strconv.Atoi(parts[0])
		c, err2 := strconv.Atoi(parts[1])
		if err1 == nil && err2 == nil && r > 0 && c > 0 {
			if r > MaxMeshDevices || c > MaxMeshDevices || r*c > MaxMeshDevices {
				return m, fmt.Errorf("bad mesh %q: at most %d devices", s, MaxMeshDevices)
			}
			return Mesh{r, c}, nil
		}
	}
	return m, fmt.Errorf("bad mesh %q: want RxC with positive integers, for example 1x2", s)
}

// MaxMeshDevices is the largest mesh ParseMesh accepts (a 32-card Galaxy
// twice over).
const MaxMeshDevices = 64

// MathFidelity is the number of multiplier passes in FPU multiplies.
type MathFidelity uint8

// Fidelity codes as tt-metal numbers them.
const (
	LoFi  MathFidelity = 0
	HiFi2 MathFidelity = 2
	HiFi3 MathFidelity = 3
	HiFi4 MathFidelity = 4
)

func (f MathFidelity) String() string {
	switch f {
	case LoFi:
		return "LoFi"
	case HiFi2:
		return "HiFi2"
	case HiFi3:
		return "HiFi3"
	case HiFi4:
		return "HiFi4"
	}
	return fmt.Sprintf("fidelity(%d)", int(f))
}

// Passes is the number of multiplier passes (fidelity phases) f runs:
// tt-metal's get_math_num_fidelity_phases, LoFi counting as one pass. It
// is 0 for a value that is not a fidelity.
func (f MathFidelity) Passes() int {
	switch f {
	case LoFi:
		return 1
	case HiFi2, HiFi3, HiFi4:
		return int(f)
	}
	return 0
}

// ParseMathFidelity parses the String form of a MathFidelity.
func ParseMathFidelity(s string) (MathFidelity, error) {
	for _, f := range []MathFidelity{LoFi, HiFi2, HiFi3, HiFi4} {
		if f.String() == s {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown math fidelity %q (want LoFi, HiFi2, HiFi3 or HiFi4)", s)
}
