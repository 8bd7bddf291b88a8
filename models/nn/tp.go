package nn

import (
	"math"

	"github.com/tcc-dev/tcc/ir"
)

// TP is tensor parallelism over a 1xDevices mesh row (Megatron style):
// column-parallel projections split their output features, row-parallel
// projections split their input features and leave a partial sum on every
// device that a collective completes.
type TP struct {
	// Devices is the number of cards (>= 1). With one device no collective
	// is emitted and every value is replicated.
	Devices int
}

// Split returns the distribution of a value split on axis, or Replicated
// when there is only one device.
func (tp TP) Split(axis int) ir.Dist {
	if tp.Devices <= 1 {
		return ir.Replicated
	}
	return ir.Dist{Axis: axis}
}

// AllReduce completes a partial sum: an all_reduce over the devices, or x
// itself on one device. The result is replicated.
func (tp TP) AllReduce(b *ir.Builder, x *ir.Value) *ir.Value {
	if tp.Devices <= 1 {
		return x
	}
	return b.AllReduce(x, tp.Devices)
}

// ReduceScatter completes a partial sum and leaves each device its
// 1/Devices of axis (a reduce_scatter). When the axis does not split into
// whole tiles per device (or there is one device) it falls back to
// AllReduce; the result's Dist says which happened.
func (tp TP) ReduceScatter(b *ir.Builder, x *ir.Value, axis int) *ir.Value {
	if tp.Devices <= 1 {
		return x
	}
	s := x.Type.Shape
	ax := axis
	if ax < 0 {
		ax += s.Rank()
	}
	if ax < 0 || ax >= s.Rank() || s[ax]%(ir.TileSize*tp.Devices) != 0 {
		return tp.AllReduce(b, x)
	}
	return b.ReduceScatter(x, axis, tp.Devices)
}

// Gather makes a value split on its last axis whole again (an all_gather);
// a replicated value is returned as is.
func (tp TP) Gather(b *ir.Builder, x *ir.Value) *ir.Value {
	if tp.Devices <= 1 || x.Type.Dist.IsReplicated() {
		return x
	}
	return b.AllGather(x, x.Type.Dist.Axis, tp.Devices)
}

// Ctx carries what every block needs: the builder, the parallelism and an
// optional Tally that attributes emitted ops to named parts.
type Ctx struct {
	B     *ir.Builder
	TP    TP
	Tally *Tally // may be nil
}

func (c Ctx) mark(part string) { c.Tally.Mark(part) }

// Part is the number of ops one named part of a block emitted.
type Part struct {
	Name string
	Ops  int
}

// Tally attributes ops to parts: Mark(name) charges every op emitted into
// the graph since the previous Mark (or since NewTally) to name. A nil
// *Tally ignores marks.
type Tally struct {
	g     *ir.Graph
	last  int
	Parts []Part
}

// NewTally starts counting ops emitted into g from now on.
func NewTally(g *ir.Graph) *Tally { return &Tally{g: g, last: g.NumOps()} }

// Mark charges the ops emitted since the previous mark to part.
func (t *Tally) Mark(part string) {
	if t == nil {
		return
	}
	n := t.g.NumOps()
	t.Parts = append(t.Parts, Part{Name: part, Ops: n - t.last})
	t.last = n
}

// Sum is the number of ops charged to parts whose name is in names (all
// parts when names is empty).
func (t *Tally) Sum(names ...string) int {
	if t == nil {
		return 0
	}
	n := 0
	for _, p := range t.Parts {
		if len(names) == 0 {
			n += p.Ops
			continue
		}
		for _, want := range names {
			if p.Name == want {
				n += p.Ops
			}
		}
	}
	return n
}

// reshape emits a reshape and records the distribution of its result
// (the core shape rule keeps the operand's axis number, which is wrong
// once dims move).
func reshape(b *ir.Builder, x *ir.Value, d ir.Dist, shape ...int) *ir.Value {
	y := b.Reshape(x, shape)
	if b.Err() == nil {
		y.Type.Dist = d
	}
	return y
}

// setDist records the distribution of a freshly emitted value whose shape
// rule cannot know it (a partial sum, a folded head axis).
func setDist(b *ir.Builder, v *ir.Value, d ir.Dist) *ir.Value {
	if b.Err() == nil {
		v.Type.Dist = d
	}
	return v
}

// toL1 moves x to L1 interleaved (a memory move of the composed path).
func toL1(b *ir.Builder, x *ir.Value) *ir.Value { return b.ToMemory(x, ir.L1Interleaved.String()) }

// toDRAM moves x to DRAM interleaved.
func toDRAM(b *ir.Builder, x *ir.Value) *ir.Value {
	return b.ToMemory(x, ir.DRAMInterleaved.String())
}

// Worker grid used for sharded placements (a Blackhole worker grid is 11x10;
// shards use at most an 8x10 rectangle so the grid stays a rectangle).
const (
	shardGridW = 8
	shardGridH = 10
)

// HeightSharded returns the to_memory options of an L1 height-sharded
// placement of t: whole 32-row tiles spread over at most 8x10 cores, each
// shard holding ceil(tiles/cores) tile rows and every column.
func HeightSharded(t ir.TensorType) []ir.Option {
	s := t.Shape.Padded()
	tiles := s.Rows2D() / ir.TileSize
	cores := min(tiles, shardGridW*shardGridH)
	w := min(cores, shardGridW)
	h := (cores + w - 1) / w
	per := (tiles + w*h - 1) / (w * h)
	return []ir.Option{
		ir.With("grid", []int{0, 0, w - 1, h - 1}),
		ir.With("shard", []int{per * ir.TileSize, s.Cols2D()}),
	}
}

// toHeightSharded moves x to L1 height sharded (HeightSharded).
func toHeightSharded(b *ir.Builder, x *ir.Value) *ir.Value {
	return b.ToMemory(x, ir.L1HeightSharded.String(), HeightSharded(x.Type)...)
}

func invSqrt(n int) float64 { return 1 / math.Sqrt(float64(n)) }

func roundUpTile(n int) int { return ir.RoundUpTile(n) }
