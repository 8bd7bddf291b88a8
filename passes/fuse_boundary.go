package passes

import (
	"fmt"
	"slices"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
)

// Layer boundaries (pass fuse-boundaries).
//
// The rewrite engine never matches across regions, so after fuse a decoder
// layer ends in all_reduce_add (the MLP down projection's all-reduce plus
// the residual: the layer's output h) and the next layer opens with the
// input RMSNorm of that h. This pass joins the two into one
// all_reduce_add_rmsnorm program owned by the closing layer:
//
//	all_reduce_add(x, r) -> h [layer L]; rms_norm(h, w) [layer L+1] => all_reduce_add_rmsnorm(x, r, w) -> (h, normed) [layer L]
//
// The fused op keeps both result values (h keeps its readers in layer
// L+1, the next residual add among them; normed is the old norm's result),
// so nothing else in the graph changes: layer L+1 starts with its
// projections, one program fewer per boundary, and the reports charge the
// norm to layer L. Its decomposition is the two ops it replaced (the
// all_reduce_add with its own decomposition), so the reference checks see the same chain.
// The first layer's input norm (it reads the embedding) and the head's
// final norm (folded into the lm_head matmul) are not at such a boundary.

// BoundaryRule names the fused ops this pass creates (ir.Op.Rule) and its
// firing count in Result.Rewrites.
const BoundaryRule = "FuseLayerBoundaryNorm"

// FuseBoundariesPass is the pass; see the section comment.
var FuseBoundariesPass = Pass{
	Name: "fuse-boundaries",
	Doc:  "join a layer's closing all_reduce_add and the next layer's input rms_norm into one all_reduce_add_rmsnorm program of the closing layer",
	Run: func(ctx *Context, g *ir.Graph) error {
		n, err := FuseBoundaries(g)
		if ctx.Result.Rewrites != nil {
			for _, r := range n {
				ctx.Result.Rewrites.Add(BoundaryRule, r)
			}
		}
		return err
	},
}

// FuseBoundaries rewrites every layer boundary of g as the section
// comment describes and returns the closing region of each rewrite, in
// graph order. The graph computes the same values afterwards and verifies
// if it did before.
func FuseBoundaries(g *ir.Graph) ([]*ir.Region, error) {
	var done []*ir.Region
	uses := g.Uses()
	for ri := 0; ri+1 < len(g.Regions); ri++ {
		closing, next := g.Regions[ri], g.Regions[ri+1]
		if !closing.IsLayer() || !next.IsLayer() {
			continue
		}
		for ai, add := range closing.Ops {
			if add.Kind != ir.OpAllReduceAdd {
				continue
			}
			h := add.Result()
			norm := boundaryNorm(h, uses[h], next)
			if norm == nil {
				continue
			}
			fused, err := boundaryOp(g, add, norm)
			if err != nil {
				return done, err
			}
			closing.Ops[ai] = fused
			next.Ops = slices.DeleteFunc(next.Ops, func(o *ir.Op) bool { return o == norm })
			done = append(done, closing)
			break
		}
	}
	if len(done) > 0 {
		g.Renumber()
	}
	return done, nil
}

// boundaryNorm is the RMSNorm of region next that normalises h, among h's
// readers, or nil: it must read h as its input, keep h's dtype and have a
// weight operand.
func boundaryNorm(h *ir.Value, readers []*ir.Op, next *ir.Region) *ir.Op {
	for _, op := range readers {
		if op.Region != next || op.Kind != ir.OpRMSNorm {
			continue
		}
		if op.Operands[0] != h || op.Operands[1].Kind != ir.KindWeight || !sameDType(h.Type.DType, op) {
			continue
		}
		return op
	}
	return nil
}

// boundaryOp is the all_reduce_add_rmsnorm standing for add then norm,
// in add's region, whose results are add's and norm's result values and
// whose decomposition is the two ops (rewrite.Decompose).
func boundaryOp(g *ir.Graph, add, norm *ir.Op) (*ir.Op, error) {
	operands := []*ir.Value{add.Operands[0], add.Operands[1], norm.Operands[1]}
	attrs := ir.Attrs{"devices": add.Int("devices"), "eps": norm.Float("eps"), "offset": norm.Float("offset")}
	ts, err := ir.InferTypes(ir.OpAllReduceAddRMSNorm, operands, attrs)
	if err != nil {
		return nil, fmt.Errorf("fuse-boundaries: %s and %s: %w", add.Where(), norm.Where(), err)
	}
	h, normed := add.Result(), norm.Result()
	if len(ts) != 2 || !ts[0].Equal(h.Type) || !ts[1].Equal(normed.Type) {
		return nil, fmt.Errorf("fuse-boundaries: %s and %s: all_reduce_add_rmsnorm would give %v, the ops give %s and %s", add.Where(), norm.Where(), ts, h.Type, normed.Type)
	}
	op := &ir.Op{ID: g.NewOpID(), Kind: ir.OpAllReduceAddRMSNorm, Operands: operands, Attrs: attrs, Region: add.Region, Rule: BoundaryRule,
		Results: []*ir.Value{h, normed}}
	if op.Decomp, err = rewrite.Decompose(op, []*ir.Op{add, norm}); err != nil {
		return nil, fmt.Errorf("fuse-boundaries: %s and %s: %w", add.Where(), norm.Where(), err)
	}
	h.Def, normed.Def = op, op
	return op, nil
}
