package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Collective family (pass fuse):
//
//   - reduce_scatter then all_gather on the same axis and devices is an
//     all_reduce (the MLP's down projection): one collective program
//     instead of two, same values (the scattered sum is rounded once,
//     gathering copies);
//
//   - an all-reduce (or that reduce_scatter/all_gather pair) whose only
//     reader is a residual add becomes all_reduce_add: the collective's
//     last step adds the residual before writing, so the layer's new
//     residual stream comes out of the collective program;
//
//   - when an rms_norm (the post-attention norm) reads that sum in the same
//     region, all_reduce_add_rmsnorm also writes norm(h): results h and
//     normed. Both roots (add and norm) are replaced, so h keeps its other
//     reader, the layer's last residual add. This rule is anchored at the
//     add and tried before all_reduce_add; a written-out norm the norm
//     family has not fused to rms_norm yet makes all_reduce_add wait
//     (normPending).
//
//   - the argmax of gathered logits, argmax(all_gather(x) on the last
//     axis), becomes argmax_sharded(x): each card scans its own shard and
//     the cards exchange one (key, index) per row instead of the logits
//     (the head's vocab-sharded lm_head at decode). It fires only when
//     the argmax is the gathered value's only reader.
//
// In a decode layer at TP=2 this leaves two collective programs per layer:
// mixer out-projection all-reduce + residual + post-attention norm, and MLP
// down all-reduce + residual (the layer's output h; the rewrite engine
// cannot reach the next layer's input norm, see fuse_residual.go; the
// fuse-boundaries pass joins the two afterwards).
var _ = registerRules("collective", ruleAllReduceAddRMSNorm, ruleAllReduceAdd, ruleReduceScatterAllGather, ruleArgmaxSharded)

// reducedSum matches the all-reduced value of x: all_reduce(x) named "ar",
// or all_gather(reduce_scatter(x)) named "ag" and "rs".
func reducedSum() *rw.Pattern {
	return rw.OneOf(
		rw.Op(ir.OpAllReduce, rw.Var("x")).As("ar"),
		rw.Op(ir.OpAllGather, rw.Op(ir.OpReduceScatter, rw.Var("x")).As("rs")).As("ag"))
}

// reducedDevices is the devices attribute of the matched collective(s),
// or 0 when the reduce_scatter/all_gather pair is not an all-reduce: the
// two must span the same devices along the same axis.
func reducedDevices(m *rw.Match) int {
	if ar := m.Op("ar"); ar != nil {
		return ar.Int("devices")
	}
	rs, ag := m.Op("rs"), m.Op("ag")
	if rs == nil || ag == nil {
		return 0
	}
	rank := rs.Operands[0].Type.Shape.Rank()
	ra, ok1 := resolvedAxis(rs.Int("axis"), rank)
	ga, ok2 := resolvedAxis(ag.Int("axis"), rank)
	if !ok1 || !ok2 || ra != ga || rs.Int("devices") != ag.Int("devices") {
		return 0
	}
	return rs.Int("devices")
}

func resolvedAxis(a, rank int) (int, bool) {
	if a < 0 {
		a += rank
	}
	return a, a >= 0 && a < rank
}

// reducedApplies checks the collective side of a match: a valid
// all-reduce pattern whose result has x's shape and dtype.
func reducedApplies(m *rw.Match, sum *ir.Value) bool {
	x := m.Value("x")
	return reducedDevices(m) > 0 && sum.Type.Shape.Equal(x.Type.Shape) && sum.Type.DType == x.Type.DType
}

// residualAdd matches add(residual, reduced sum), the add named "add".
func residualAdd() *rw.Pattern {
	return rw.Op(ir.OpAdd, rw.Var("r"), reducedSum()).As("add")
}

// residualApplies: residual and sum have one shape and dtype (no
// broadcasting), and the add keeps that dtype.
func residualApplies(m *rw.Match) bool {
	add := m.Op("add")
	r, sum := m.Value("r"), add.Operands[0]
	if sum == r {
		sum = add.Operands[1]
	}
	if !reducedApplies(m, sum) {
		return false
	}
	return r.Type.Shape.Equal(sum.Type.Shape) && r.Type.DType == sum.Type.DType && add.Result().Type.DType == r.Type.DType
}

func ruleAllReduceAddRMSNorm() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseAllReduceAddRMSNorm",
		Rewrite: "add(residual, all_reduce(x)) and rms_norm(that sum, w) => all_reduce_add_rmsnorm(x, residual, w) -> (h, normed)",
		Pattern: residualAdd(),
		Extra:   []*rw.Pattern{normOfAdd()},
		Where: func(m *rw.Match) bool {
			return residualApplies(m) && sameDType(m.Value("r").Type.DType, m.Op("norm"))
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			n := m.Op("norm")
			op, err := b.Emit(ir.OpAllReduceAddRMSNorm, []*ir.Value{m.Value("x"), m.Value("r"), m.Value("w")},
				ir.Attrs{"devices": reducedDevices(m), "eps": n.Float("eps"), "offset": n.Float("offset")})
			if err != nil {
				return nil, err
			}
			// Roots: the add (h), then the norm (normed).
			return op.Results, nil
		},
	}
}

// normOfAdd matches the rms_norm reading the add already matched as "add"
// (the second root of the add + norm rules), named "norm".
func normOfAdd() *rw.Pattern {
	return rw.Op(ir.OpRMSNorm, rw.Op(ir.OpAdd, rw.Any(), rw.Any()).As("add"), rw.Var("w")).As("norm")
}

func ruleAllReduceAdd() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseAllReduceAdd",
		Rewrite: "add(residual, all_reduce(x)) => all_reduce_add(x, residual)",
		Pattern: residualAdd(),
		Where: func(m *rw.Match) bool {
			return residualApplies(m) && !normPending(m.Root.Result(), m.Root.Region)
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpAllReduceAdd, []*ir.Value{m.Value("x"), m.Value("r")}, ir.Attrs{"devices": reducedDevices(m)})
			return []*ir.Value{v}, err
		},
	}
}

func ruleReduceScatterAllGather() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseReduceScatterAllGather",
		Rewrite: "all_gather(reduce_scatter(x) {axis, devices}) {axis, devices} => all_reduce(x) {devices}",
		Pattern: rw.Op(ir.OpAllGather, rw.Op(ir.OpReduceScatter, rw.Var("x")).As("rs")).As("ag"),
		Where:   func(m *rw.Match) bool { return reducedApplies(m, m.Root.Result()) },
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpAllReduce, []*ir.Value{m.Value("x")}, ir.Attrs{"devices": reducedDevices(m)})
			return []*ir.Value{v}, err
		},
	}
}

func ruleArgmaxSharded() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseArgmaxSharded",
		Rewrite: "argmax(all_gather(x) {axis = last, devices}) => argmax_sharded(x) {devices}",
		Pattern: rw.Op(ir.OpArgmax, rw.Op(ir.OpAllGather, rw.Var("x")).As("ag")).As("am"),
		Where: func(m *rw.Match) bool {
			ag := m.Op("ag")
			rank := ag.Operands[0].Type.Shape.Rank()
			ax, ok := resolvedAxis(ag.Int("axis"), rank)
			return ok && ax == rank-1 && ag.Int("devices") > 0
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpArgmaxSharded, []*ir.Value{m.Value("x")}, ir.Attrs{"devices": m.Op("ag").Int("devices")})
			return []*ir.Value{v}, err
		},
	}
}
