package ir

import (
	"errors"
	"fmt"
)

// maxVerifyErrors caps how many problems Verify reports at once.
const maxVerifyErrors = 20

// Verify checks the graph's invariants and returns every violation found (up
// to a cap) joined into one error, each naming op, region and rule:
//   - every operand is a declared input/weight/state or a result of an earlier op (SSA order);
//   - operand counts, attribute kinds and result types agree with the op table's shape rule;
//   - block-float values are in tile layout; sharded memory configs carry a shard spec and vice versa;
//   - value and op IDs are unique; results point back to their op and region;
//   - outputs and state updates are defined values; decoder-layer indices increase.
func Verify(g *Graph) error {
	var errs []error
	add := func(format string, a ...any) {
		if len(errs) < maxVerifyErrors {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	defined := map[*Value]bool{}
	ids := map[int]site{}
	claim := func(id int, what site) {
		if prev, ok := ids[id]; ok {
			add("rule unique-id: id %%%d used by %s and %s", id, prev, what)
		}
		ids[id] = what
	}
	checkType := func(where site, v *Value) {
		t := v.Type
		if t.DType == InvalidDType {
			add("rule dtype: %s: value %s has no dtype", where, v)
		}
		if t.DType.IsBlockFloat() && t.Layout != TileLayout {
			add("rule block-float-layout: %s: value %s is %s in %s layout; block floats need tile layout", where, v, t.DType, t.Layout)
		}
		if t.TilesTransposed && (v.Kind != KindWeight || t.Layout != TileLayout || t.Shape.Rank() != 2) {
			add("rule transposed-tiles: %s: value %s is a %s of %s; only a rank-2 tile-layout weight is stored in transposed tiles", where, v, v.Kind, t)
		}
		if t.Mem.Kind.IsSharded() != (t.Mem.Shard != nil) {
			add("rule shard-spec: %s: value %s has memory %s; sharded kinds need a shard spec and only they", where, v, t.Mem)
		}
		for _, d := range t.Shape {
			if d <= 0 {
				add("rule shape: %s: value %s has non-positive dimension in %s", where, v, t.Shape)
				break
			}
		}
		if !t.Dist.IsReplicated() && t.Dist.Axis >= t.Shape.Rank() {
			add("rule dist: %s: value %s split on axis %d but has rank %d", where, v, t.Dist.Axis, t.Shape.Rank())
		}
	}
	for _, list := range [][]*Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			claim(v.ID, site{v: v})
			defined[v] = true
			checkType(site{v: v}, v)
		}
	}
	lastLayer := -1
	for _, r := range g.Regions {
		if r.IsLayer() {
			if r.Index <= lastLayer {
				add("rule layer-order: region %s follows layer %d", r.Label(), lastLayer)
			}
			lastLayer = r.Index
		}
		for _, op := range r.Ops {
			claim(op.ID, site{op: op})
			if op.Region != r {
				add("rule op-region: %s is listed in %s", op.Where(), r.Label())
			}
			if op.Kind <= InvalidOp || int(op.Kind) >= len(opInfos) {
				add("rule op-kind: op %%%d in %s has invalid kind %d", op.ID, r.Label(), int(op.Kind))
				continue
			}
			for i, v := range op.Operands {
				if v == nil || !defined[v] {
					add("rule ssa-order: %s: operand %d (%s) is not defined before use", op.Where(), i, v)
				}
			}
			want, err := InferTypes(op.Kind, op.Operands, op.Attrs)
			if err != nil {
				add("%s: %v", op.Where(), err)
			} else if len(want) != len(op.Results) {
				add("rule result-count: %s has %d results, want %d", op.Where(), len(op.Results), len(want))
			} else {
				for i, res := range op.Results {
					if !res.Type.Shape.Equal(want[i].Shape) || res.Type.DType != want[i].DType {
						add("rule result-type: %s: result %d is %s %s, shape rule gives %s %s", op.Where(), i, res.Type.Shape, res.Type.DType, want[i].Shape, want[i].DType)
					}
				}
			}
			for _, res := range op.Results {
				claim(res.ID, site{op: op, result: true})
				if res.Def != op || res.Kind != KindResult {
					add("rule result-def: %s: result %s does not point back to its op", op.Where(), res)
				}
				checkType(site{op: op}, res)
				defined[res] = true
			}
			if op.Info().Fused && op.Decomp != nil {
				if len(op.Decomp.Inputs) != len(op.Operands) || len(op.Decomp.Outputs) != len(op.Results) {
					add("rule decomposition: %s: decomposition has %d inputs/%d outputs for %d operands/%d results", op.Where(), len(op.Decomp.Inputs), len(op.Decomp.Outputs), len(op.Operands), len(op.Results))
				}
			}
		}
	}
	for i, v := range g.Outputs {
		if !defined[v] {
			add("rule output: output %d (%s) is not defined", i, v)
		}
	}
	for s, v := range g.StateUpdates {
		if !defined[v] {
			add("rule state-update: new value of state %q is not defined", s.Name)
		}
	}
	return errors.Join(errs...)
}

// site names what Verify found a value or op at, formatted only when an
// error is reported: the op (op.Where()), a result of the op ("result of
// ..."), or a graph input, weight or state (its kind and name).
type site struct {
	op     *Op
	v      *Value
	result bool
}

func (s site) String() string {
	switch {
	case s.op != nil && s.result:
		return "result of " + s.op.Where()
	case s.op != nil:
		return s.op.Where()
	}
	return fmt.Sprintf("%s %q", s.v.Kind, s.v.Name)
}
