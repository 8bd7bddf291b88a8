package ir

import (
	"fmt"
	"sort"
)

// ValueKind says where a value comes from.
type ValueKind uint8

const (
	KindResult ValueKind = iota // produced by an op
	KindInput                   // activation fed by the host each step (token ids, positions)
	KindWeight                  // parameter, uploaded once; Name is the checkpoint name
	KindState                   // persistent device state updated in place (conv state, KV cache)
)

var valueKindNames = [...]string{"result", "input", "weight", "state"}

func (k ValueKind) String() string { return valueKindNames[k] }

// Dist is how a value is distributed over the devices of a mesh.
type Dist struct {
	// Axis is the tensor dimension split over the mesh columns, or -1 when
	// every device holds the full tensor (replicated).
	Axis int
}

// Replicated is the distribution of a tensor held whole on every device.
var Replicated = Dist{Axis: -1}

// IsReplicated reports whether every device holds the whole tensor.
func (d Dist) IsReplicated() bool { return d.Axis < 0 }

func (d Dist) String() string {
	if d.IsReplicated() {
		return "replicated"
	}
	return fmt.Sprintf("split(%d)", d.Axis)
}

// TensorType is the type of a value on one device.
type TensorType struct {
	Shape  Shape
	DType  DType
	Layout Layout
	Mem    MemoryConfig
	Dist   Dist
	// TilesTransposed: a weight in tile layout whose every 32x32 tile is
	// stored transposed (stored element (r, c) of tile (i, j) is the
	// logical element (j*32+c, i*32+r)), tiles in the usual order, so a
	// block float's 16-value exponent group runs down a column of the
	// logical matrix (along K of a [K, N] matmul weight). It is how a
	// weight fed to SrcB (ir.WeightsOnSrcB) is stored; pages and page
	// size are tile layout's. Printed as layout tile_t.
	TilesTransposed bool
}

// PageLayout is how a buffer of type t is paged: one tile of its dtype per
// page in tile layout (Shape.Tiles pages), one row of the last dimension
// per page in row-major layout (Rows2D pages of Cols2D elements). It fails
// (rule page-layout) for a dtype without a tile size in tile layout, a
// block float in row-major layout, or an unknown layout.
func (t TensorType) PageLayout() (pageSize, pages int, err error) {
	switch t.Layout {
	case TileLayout:
		if t.DType.TileBytes() == 0 {
			return 0, 0, fmt.Errorf("rule page-layout: %s has no tile size", t.DType)
		}
		return t.DType.TileBytes(), t.Shape.Tiles(), nil
	case RowMajorLayout:
		if t.DType.ElemBytes() == 0 {
			return 0, 0, fmt.Errorf("rule page-layout: %s has no row-major form (block floats need tile layout)", t.DType)
		}
		return t.Shape.Cols2D() * t.DType.ElemBytes(), t.Shape.Rows2D(), nil
	}
	return 0, 0, fmt.Errorf("rule page-layout: unknown layout %s", t.Layout)
}

// T is a convenience constructor: a tile-layout, DRAM-interleaved, replicated tensor type.
func T(dt DType, dims ...int) TensorType {
	return TensorType{Shape: Shape(dims), DType: dt, Layout: TileLayout, Mem: DRAM, Dist: Replicated}
}

func (t TensorType) String() string {
	s := fmt.Sprintf("%s %s %s %s", t.Shape, t.DType, t.LayoutText(), t.Mem)
	if !t.Dist.IsReplicated() {
		s += " " + t.Dist.String()
	}
	return s
}

// TransposedTileLayoutText is the layout word of a type with
// TilesTransposed (the text form and programs.json's buffers).
const TransposedTileLayoutText = "tile_t"

// LayoutText is t's layout word: TransposedTileLayoutText with
// TilesTransposed, else t.Layout.String().
func (t TensorType) LayoutText() string {
	if t.TilesTransposed {
		return TransposedTileLayoutText
	}
	return t.Layout.String()
}

// Equal reports whether two types are identical.
func (t TensorType) Equal(o TensorType) bool {
	return t.Shape.Equal(o.Shape) && t.DType == o.DType && t.Layout == o.Layout && t.Mem.Equal(o.Mem) && t.Dist == o.Dist && t.TilesTransposed == o.TilesTransposed
}

// Value is an SSA value. Exactly one of Def (for KindResult) or a graph-level
// declaration (inputs, weights, state) defines it.
type Value struct {
	ID   int    // unique within the graph, assigned at creation
	Name string // checkpoint name for weights, user name for inputs/state, optional hint otherwise
	Kind ValueKind
	Type TensorType
	Def  *Op // defining op for results
}

func (v *Value) String() string { return fmt.Sprintf("%%%d", v.ID) }

// Attrs holds an op's attribute values: int, float64, string, []int or DType.
type Attrs map[string]any

// Keys returns the attribute names in sorted order.
func (a Attrs) Keys() []string {
	ks := make([]string, 0, len(a))
	for k := range a {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Op is one graph operation; after passes, one device program per device.
type Op struct {
	ID       int
	Kind     OpKind
	Operands []*Value
	Results  []*Value
	Attrs    Attrs
	Region   *Region
	// Decomp is the subgraph a fused op replaced (nil for unfused ops).
	Decomp *Decomposition
	// Rule names the fusion rule that created this op ("" if none).
	Rule string
}

// Decomposition is the original ops a fused op stands for. Inputs are
// placeholders bound positionally to the fused op's operands; Outputs map
// positionally to its results.
type Decomposition struct {
	Inputs  []*Value
	Ops     []*Op
	Outputs []*Value
}

// Info returns the op table entry of the op's kind.
func (o *Op) Info() *OpInfo { return o.Kind.Info() }

// Name is the op's table name.
func (o *Op) Name() string { return o.Kind.String() }

// Result returns the op's single result; it panics if the op has several.
func (o *Op) Result() *Value { return o.Results[0] }

// Int returns an int attribute (0 if absent).
func (o *Op) Int(name string) int { v, _ := o.Attrs[name].(int); return v }

// Float returns a float attribute (0 if absent).
func (o *Op) Float(name string) float64 { v, _ := o.Attrs[name].(float64); return v }

// Str returns a string attribute ("" if absent).
func (o *Op) Str(name string) string { v, _ := o.Attrs[name].(string); return v }

// Ints returns an []int attribute (nil if absent).
func (o *Op) Ints(name string) []int { v, _ := o.Attrs[name].([]int); return v }

// DTypeAttr returns a DType attribute and whether it is set.
func (o *Op) DTypeAttr(name string) (DType, bool) { v, ok := o.Attrs[name].(DType); return v, ok }

// Where describes the op for error messages: kind, id and region.
func (o *Op) Where() string {
	if o.Region != nil {
		return fmt.Sprintf("op %s %%%d in %s", o.Name(), o.ID, o.Region.Label())
	}
	return fmt.Sprintf("op %s %%%d", o.Name(), o.ID)
}

// RegionKind classifies a region for reports.
type RegionKind string

// Region is an ordered list of ops: one decoder layer, or the prologue/epilogue.
type Region struct {
	Kind  RegionKind // "embed", "head", or a layer kind such as "mlp", "gdn", "attention"
	Index int        // decoder layer index, -1 for prologue/epilogue
	Ops   []*Op
}

// Label names the region in messages, e.g. "layer 3 (attention)".
func (r *Region) Label() string {
	if r.Index >= 0 {
		return fmt.Sprintf("layer %d (%s)", r.Index, r.Kind)
	}
	return string(r.Kind)
}

// IsLayer reports whether the region is a decoder layer.
func (r *Region) IsLayer() bool { return r.Index >= 0 }

// Graph is a whole model step.
type Graph struct {
	Name    string
	Mesh    Mesh
	Inputs  []*Value // host-fed activations
	Weights []*Value
	States  []*Value
	Regions []*Region
	Outputs []*Value
	// StateUpdates maps a persistent state value to the value that holds its
	// new contents at the end of the step (written back in place).
	StateUpdates map[*Value]*Value
	nextID       int
}

// NewGraph returns an empty graph on a 1x1 mesh.
func NewGraph(name string) *Graph {
	return &Graph{Name: name, Mesh: Mesh{1, 1}, StateUpdates: map[*Value]*Value{}}
}

// NewValue allocates a value with a fresh ID.
func (g *Graph) NewValue(kind ValueKind, name string, t TensorType) *Value {
	v := &Value{ID: g.nextID, Name: name, Kind: kind, Type: t}
	g.nextID++
	return v
}

// NewOpID returns a fresh ID for an op (ops and values share one ID space).
func (g *Graph) NewOpID() int { id := g.nextID; g.nextID++; return id }

// Ops returns every op in program order (regions in order).
func (g *Graph) Ops() []*Op {
	var ops []*Op
	for _, r := range g.Regions {
		ops = append(ops, r.Ops...)
	}
	return ops
}

// NumOps is the number of ops in the graph.
func (g *Graph) NumOps() int {
	n := 0
	for _, r := range g.Regions {
		n += len(r.Ops)
	}
	return n
}

// Layers returns the decoder-layer regions in order.
func (g *Graph) Layers() []*Region {
	var ls []*Region
	for _, r := range g.Regions {
		if r.IsLayer() {
			ls = append(ls, r)
		}
	}
	return ls
}

// Uses returns, for every value, the ops that read it, in program order.
func (g *Graph) Uses() map[*Value][]*Op {
	u := map[*Value][]*Op{}
	for _, op := range g.Ops() {
		for _, v := range op.Operands {
			u[v] = append(u[v], op)
		}
	}
	return u
}

// Renumber assigns dense IDs to declared values, then ops and results in
// program order, so printed graphs are canonical.
func (g *Graph) Renumber() {
	id := 0
	for _, list := range [][]*Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			v.ID = id
			id++
		}
	}
	for _, op := range g.Ops() {
		op.ID = id
		id++
		for _, r := range op.Results {
			r.ID = id
			id++
		}
	}
	g.nextID = id
}

// ReplaceAllUses rewires every operand, output and state update reading old to read new.
func (g *Graph) ReplaceAllUses(old, new *Value) {
	for _, op := range g.Ops() {
		for i, v := range op.Operands {
			if v == old {
				op.Operands[i] = new
			}
		}
	}
	for i, v := range g.Outputs {
		if v == old {
			g.Outputs[i] = new
		}
	}
	for s, v := range g.StateUpdates {
		if v == old {
			g.StateUpdates[s] = new
		}
	}
}

// Join joins the row-major per-device contents shards (device order, each
// of per-device shape s) of a value with distribution d along d.Axis,
// as an all_gather would: the whole tensor, row-major. A replicated value
// is device 0's contents.
func (d Dist) Join(s Shape, shards [][]float32) ([]float32, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("join: no shards")
	}
	if d.IsReplicated() || len(shards) == 1 {
		return shards[0], nil
	}
	if d.Axis >= s.Rank() {
		return nil, fmt.Errorf("join: axis %d of a rank-%d shape %s", d.Axis, s.Rank(), s)
	}
	size, inner := s[d.Axis], 1
	for _, v := range s[d.Axis+1:] {
		inner *= v
	}
	run := size * inner
	outer := 0
	if run > 0 {
		outer = s.Numel() / run
	}
	out := make([]float32, 0, outer*run*len(shards))
	for i, sh := range shards {
		if len(sh) != s.Numel() {
			return nil, fmt.Errorf("join: device %d holds %d values, want %d (shape %s)", i, len(sh), s.Numel(), s)
		}
	}
	for o := range outer {
		for _, sh := range shards {
			out = append(out, sh[o*run:(o+1)*run]...)
		}
	}
	return out, nil
}
