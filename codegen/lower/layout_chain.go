package lower

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/lower/blocks"
	"github.com/tcc-dev/tcc/ir"
)

// layout_chain (passes FuseLayoutChain): one relayout whose Map is the
// composition of its steps' index maps, applied from the result back to
// the operand: a result element's full index goes through the last step's
// map (result index -> that step's operand index), then the one before,
// down to the operand. The runs are the shortest of the steps' runs (each
// step's SegFor, as its own lowering would take it): a run of that many
// elements starting at a multiple of it stays contiguous and aligned
// through every step. A chain that only re-indexes whole tiles (the GDN
// prefill's head split [B,S,C] -> [B,H,S,D] with D a multiple of 32) reads
// each operand tile once per result tile it fills, where its steps apart
// each gathered rows from many tiles.

// layoutStepMap is one step of a chain: the run length it allows and its
// index map from its result's full index to its operand's.
type layoutStepMap struct {
	seg int
	at  func(b *kir.Builder, idx []kir.Expr) []kir.Expr
}

// layoutStepOf is step st from in to out (full shapes).
func layoutStepOf(st ir.LayoutStep, in, out ir.Shape) (layoutStepMap, error) {
	ri, ro := in.Rank(), out.Rank()
	if ri == 0 || ro == 0 {
		return layoutStepMap{}, fmt.Errorf("rule layout-chain-rank: step %s moves a scalar", st)
	}
	last := ro - 1
	switch st.Op {
	case ir.OpSlice:
		begin, _ := st.Attrs["begin"].([]int)
		if len(begin) != ri {
			return layoutStepMap{}, fmt.Errorf("rule slice-rank: begin %v needs one entry per dim of %s", begin, in)
		}
		return layoutStepMap{seg: blocks.SegFor(out[last], begin[last], in[last]), at: func(_ *kir.Builder, idx []kir.Expr) []kir.Expr {
			for d := range idx {
				if begin[d] != 0 {
					idx[d] = kir.Add(idx[d], kir.Ci(begin[d]))
				}
			}
			return idx
		}}, nil
	case ir.OpReshape:
		ci, co := blocks.ImageOf(in).C, blocks.ImageOf(out).C
		return layoutStepMap{seg: blocks.SegFor(ci, co), at: func(b *kir.Builder, idx []kir.Expr) []kir.Expr {
			f := b.Let("f", kir.Add(kir.Mul(rowOf(idx, out), kir.Ci(out[last])), idx[last]))
			return fullIndex(kir.Div(f, kir.Ci(in[ri-1])), kir.Mod(f, kir.Ci(in[ri-1])), in)
		}}, nil
	case ir.OpRepeatInterleave:
		reps, _ := st.Attrs["repeats"].(int)
		ax, err := ir.LayoutStepAxis(st, "axis", ro)
		if err != nil || reps < 1 {
			return layoutStepMap{}, fmt.Errorf("rule attr: step %s: repeats >= 1 and an axis of a rank-%d tensor", st, ro)
		}
		seg := blocks.SegFor(out[last])
		if ax == last {
			seg = 1
		}
		return layoutStepMap{seg: seg, at: func(_ *kir.Builder, idx []kir.Expr) []kir.Expr {
			idx[ax] = kir.Div(idx[ax], kir.Ci(reps))
			return idx
		}}, nil
	case ir.OpTranspose:
		d0, err0 := ir.LayoutStepAxis(st, "dim0", ro)
		d1, err1 := ir.LayoutStepAxis(st, "dim1", ro)
		if err0 != nil || err1 != nil || d0 == d1 {
			return layoutStepMap{}, fmt.Errorf("rule transpose-dims: step %s: two different dims of a rank-%d tensor", st, ro)
		}
		seg := blocks.SegFor(out[last])
		if max(d0, d1) == last {
			seg = 1
		}
		return layoutStepMap{seg: seg, at: func(_ *kir.Builder, idx []kir.Expr) []kir.Expr {
			idx[d0], idx[d1] = idx[d1], idx[d0]
			return idx
		}}, nil
	}
	return layoutStepMap{}, fmt.Errorf("rule layout-chain-op: step %s is not slice, reshape, repeat_interleave or transpose", st)
}

// layoutChainSteps are op's layout steps (its "steps" attribute) and the
// shape after each, and the type the last gives operand 0 (the result's
// shape); it fails naming the rule when the steps do not parse or give
// another shape.
func layoutChainSteps(op *ir.Op) ([]ir.LayoutStep, []ir.Shape, ir.TensorType, error) {
	x, out := op.Operands[0], op.Result()
	steps, err := ir.ParseLayoutChain(op.Str("steps"))
	if err != nil {
		return nil, nil, ir.TensorType{}, err
	}
	types, err := ir.LayoutChainTypes(x.Type, steps)
	if err != nil {
		return nil, nil, ir.TensorType{}, err
	}
	last := types[len(types)-1]
	if !last.Shape.Equal(out.Type.Shape) {
		return nil, nil, ir.TensorType{}, fmt.Errorf("rule layout-chain-shape: the steps give %s, the result is %s", last.Shape, out.Type.Shape)
	}
	shapes := make([]ir.Shape, len(types))
	for i, tt := range types {
		shapes[i] = tt.Shape
	}
	return steps, shapes, last, nil
}

func lowerLayoutChain(op *ir.Op, ctx *Context) (*kir.Program, error) {
	steps, shapes, _, err := layoutChainSteps(op)
	if err != nil {
		return nil, err
	}
	return relayoutSteps(op, ctx, op.Operands[0], steps, shapes)
}

// relayoutSteps is the relayout program of op's result from x through
// steps, steps[i] giving shapes[i] (the last: the result's): the composed
// index map with the shortest of the steps' runs. A single layout op that
// moves values is one step (lowerSlice, lowerRepeatInterleave,
// lowerTranspose), a layout_chain several.
func relayoutSteps(op *ir.Op, ctx *Context, x *ir.Value, steps []ir.LayoutStep, shapes []ir.Shape) (*kir.Program, error) {
	maps, seg, err := composeLayoutSteps(x.Type.Shape, steps, shapes)
	if err != nil {
		return nil, err
	}
	xs, os := x.Type.Shape, shapes[len(shapes)-1]
	if op.Kind == ir.OpLayoutChain && chainMovesTiles(xs, steps, shapes) {
		return tileRelayoutProgram(op, ctx, x, tileSourcePage(maps, xs, os))
	}
	return relayoutProgram(op, ctx, []*ir.Value{x}, seg, false, 0, gatherMap(maps, xs, os))
}

// composeLayoutSteps is the index map of each step (steps[i] from the
// previous shape, xs first, to shapes[i]) and the shortest of their runs.
func composeLayoutSteps(xs ir.Shape, steps []ir.LayoutStep, shapes []ir.Shape) ([]layoutStepMap, int, error) {
	maps := make([]layoutStepMap, len(steps))
	seg := ir.TileSize
	in := xs
	for i, st := range steps {
		var err error
		if maps[i], err = layoutStepOf(st, in, shapes[i]); err != nil {
			return nil, 0, err
		}
		seg = min(seg, maps[i].seg)
		in = shapes[i]
	}
	return maps, seg, nil
}

// sourceIndex is the full index in the chain's operand of the result
// element at full index idx: the steps' maps applied last to first.
func sourceIndex(b *kir.Builder, maps []layoutStepMap, idx []kir.Expr) []kir.Expr {
	for i := len(maps) - 1; i >= 0; i-- {
		idx = maps[i].at(b, idx)
	}
	return idx
}

// tileSourcePage is, for a chain that moves whole tiles (chainMovesTiles)
// from shape xs to os, the operand page that result page p is.
func tileSourcePage(maps []layoutStepMap, xs, os ir.Shape) func(b *kir.Builder, p kir.Expr) kir.Expr {
	return func(b *kir.Builder, p kir.Expr) kir.Expr {
		oim := blocks.ImageOf(os)
		tc := kir.Mod(p, kir.Ci(oim.Ct))
		q := kir.Div(p, kir.Ci(oim.Ct))
		row := kir.Add(kir.Mul(kir.Div(q, kir.Ci(oim.Rt)), kir.Ci(oim.R)), kir.Mul(kir.Mod(q, kir.Ci(oim.Rt)), kir.Ci(ir.TileSize)))
		idx := sourceIndex(b, maps, fullIndex(b.Let("row", row), b.Let("col", kir.Mul(tc, kir.Ci(ir.TileSize))), os))
		return blocks.ImageOf(xs).Page(rowOf(idx, xs), idx[len(idx)-1])
	}
}

// gatherMap is the blocks.Gather map of a chain from shape xs to os: the
// run at result element (row, col) comes from source 0 at its source
// index.
func gatherMap(maps []layoutStepMap, xs, os ir.Shape) func(b *kir.Builder, row, col kir.Var) []blocks.Run {
	return func(b *kir.Builder, row, col kir.Var) []blocks.Run {
		idx := sourceIndex(b, maps, fullIndex(row, col, os))
		return []blocks.Run{{Src: 0, Row: rowOf(idx, xs), Col: idx[len(idx)-1]}}
	}
}
