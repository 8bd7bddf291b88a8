package passes

import (
	"fmt"
	"slices"

	"github.com/tcc-dev/tcc/ir"
)

// Packing the users' rows (pass pack-rows).
//
// At decode with B > 1 users every per-user activation is [B, 1, X]: in
// tile layout each user's row is its own tile row, so a matmul would
// stream its weights once per user and a norm or collective would move B
// tiles where one holds every user. [B, 1, X] and [1, B, X] hold the same
// elements in the same row-major order, and the row-wise ops (rowWiseOps:
// each output row depends only on the same row of the operands) compute
// the same elements on either. The pass retypes every row-wise op whose
// per-user values are all [B, 1, X] (2 <= B <= 32, split over the mesh at
// most along the last dim) to [1, B, X] — one tile row of B live rows —
// and inserts a reshape wherever a packed value meets an op that needs
// the users as tile rows (the GDN and attention programs), a graph output
// or a state update, and wherever such a value feeds a row-wise op:
//
//	rms_norm(x [B,1,H]) => rms_norm(x [1,B,H])
//	gdn_conv_gates(matmul4(a)[0]) => gdn_conv_gates(matmul4{users: B}(a [1,B,H])[0] [B,1,C])
//
// A sibling matmul (matmul2/3/4) none of whose results feeds a packed op
// reads the packed activation but keeps its per-user results: attribute
// users = B makes its writer store each user's row straight into that
// user's tile row, so no unpacking reshape runs after it (the 27B's GDN
// in-projection and attention q/k/v at B = 8: 112 programs per step).
//
// Values a pass before this one placed (Context.MarkPlaced) are left
// alone. The graph is unchanged at B = 1 and in prefill ([B, S, X], S > 1).

// matmulSiblings are the row-wise ops that can write per-user results
// from packed rows (ir.MatmulUsers).
var matmulSiblings = map[ir.OpKind]bool{ir.OpMatmul2: true, ir.OpMatmul3: true, ir.OpMatmul4: true}

// rowWiseOps are the op kinds whose results' rows are computed from the
// same rows of their operands (weights, norm weights and scalars aside),
// so they may run on packed rows.
var rowWiseOps = map[ir.OpKind]bool{
	ir.OpRMSNorm: true, ir.OpRMSNormPlain: true,
	ir.OpMatmul: true, ir.OpMatmul2: true, ir.OpMatmul3: true, ir.OpMatmul4: true,
	ir.OpMatmulAdd: true, ir.OpRMSNormMatmul: true, ir.OpMatmulSwiGLU: true,
	ir.OpAddRMSNorm: true, ir.OpAllReduce: true, ir.OpAllReduceAdd: true, ir.OpAllReduceAddRMSNorm: true,
	ir.OpAllGather: true, ir.OpArgmax: true, ir.OpArgmaxSharded: true, ir.OpEmbeddingReshape: true,
}

// PackRowsPass is the pass; see the section comment.
var PackRowsPass = Pass{
	Name: "pack-rows",
	Doc:  "at decode with B > 1 users, run the row-wise programs (matmuls, norms, collectives, argmax) on the users' rows packed into one tile row ([1,B,X] for [B,1,X]), with reshapes where the per-user programs need a tile row per user",
	Run: func(ctx *Context, g *ir.Graph) error {
		st, err := PackRows(g, ctx.Placed)
		ctx.Result.PackRows = st
		return err
	},
}

// PackRowsStats counts what PackRows did.
type PackRowsStats struct {
	Ops      int // row-wise ops retyped to packed rows
	Reshapes int // reshapes inserted at the boundaries
	// Unpacking is the sibling matmuls among Ops that write per-user
	// results (attribute users) instead of packed ones.
	Unpacking int
}

// userRows reports whether t is a per-user decode activation [B, 1, X]
// with 2 <= B <= 32 that packing may retype, and returns B.
func userRows(t ir.TensorType) (int, bool) {
	s := t.Shape
	if s.Rank() != 3 || s[1] != 1 || s[0] < 2 || s[0] > ir.TileSize {
		return 0, false
	}
	if !t.Dist.IsReplicated() && t.Dist.Axis != 2 {
		return 0, false
	}
	return s[0], true
}

// rowOperand reports whether operand i of op holds rows of the users'
// activations: every operand but an embedding's ids, whose [B, 1, 1]
// (the device loop's tokens, one per user) index the table and keep their
// shape when the gathered rows are packed (the ids are one page per user
// either way).
func rowOperand(op *ir.Op, i int) bool {
	return op.Kind != ir.OpEmbeddingReshape || i != 0
}

// packed is [1, B, X] for [B, 1, X]; unpacked the reverse.
func packed(s ir.Shape) ir.Shape   { return ir.Shape{1, s[0], s[2]} }
func unpacked(s ir.Shape) ir.Shape { return ir.Shape{s[1], 1, s[2]} }

// PackRows packs the users' rows of g's row-wise ops as the section comment
// describes; placed (may be nil) names values to leave alone. Afterwards
// the graph verifies if it did before, and computes the same elements.
func PackRows(g *ir.Graph, placed func(*ir.Value) bool) (PackRowsStats, error) {
	var st PackRowsStats
	keep := func(v *ir.Value) bool { return placed != nil && placed(v) }
	// Candidates: row-wise ops whose rank-3 values are all [B, 1, X] of one
	// B and whose shape rule accepts the packed operands with the packed
	// results.
	cand := map[*ir.Op]bool{}
	for _, op := range g.Ops() {
		if !rowWiseOps[op.Kind] {
			continue
		}
		users, ok := 0, true
		var vals []*ir.Value
		for i, v := range op.Operands {
			if rowOperand(op, i) {
				vals = append(vals, v)
			}
		}
		for _, v := range append(vals, op.Results...) {
			if v.Type.Shape.Rank() != 3 {
				continue
			}
			b, isUser := userRows(v.Type)
			if !isUser || keep(v) || users != 0 && b != users {
				ok = false
				break
			}
			users = b
		}
		if !ok || users == 0 || !packsExactly(op) {
			continue
		}
		cand[op] = true
	}
	if len(cand) == 0 {
		return st, nil
	}
	// Sibling matmuls whose results all go to unpacked consumers write
	// them per user (attribute users).
	uses := g.Uses()
	unpacking := map[*ir.Op]int{}
	for op := range cand {
		if !matmulSiblings[op.Kind] {
			continue
		}
		if _, set := op.Attrs["users"]; set {
			continue
		}
		ok := true
		for _, v := range op.Results {
			for _, u := range uses[v] {
				ok = ok && !cand[u]
			}
		}
		if ok {
			b, _ := userRows(op.Results[0].Type)
			unpacking[op] = b
		}
	}

	// One reshape per value and direction, inserted before its first use.
	conv := map[*ir.Value]*ir.Value{} // original value -> its other form
	isPacked := map[*ir.Value]bool{}  // values retyped to [1, B, X]
	reshape := func(r *ir.Region, out *[]*ir.Op, v *ir.Value, shape ir.Shape) (*ir.Value, error) {
		if c := conv[v]; c != nil {
			return c, nil
		}
		ts, err := ir.InferTypes(ir.OpReshape, []*ir.Value{v}, ir.Attrs{"shape": []int(shape)})
		if err != nil {
			return nil, fmt.Errorf("pack-rows: reshape %s %s to %s: %w", v, v.Type.Shape, shape, err)
		}
		res := g.NewValue(ir.KindResult, "", ts[0])
		*out = append(*out, reshapeOp(g, r, v, shape, res))
		conv[v] = res
		st.Reshapes++
		return res, nil
	}
	for _, r := range g.Regions {
		var out []*ir.Op
		for _, op := range r.Ops {
			for i, v := range op.Operands {
				_, isUser := userRows(v.Type)
				switch {
				case cand[op] && isUser && !isPacked[v] && rowOperand(op, i):
					p, err := reshape(r, &out, v, packed(v.Type.Shape))
					if err != nil {
						return st, err
					}
					op.Operands[i] = p
				case !cand[op] && isPacked[v]:
					u, err := reshape(r, &out, v, unpacked(v.Type.Shape))
					if err != nil {
						return st, err
					}
					op.Operands[i] = u
				}
			}
			switch {
			case unpacking[op] > 0:
				op.Attrs["users"] = unpacking[op]
				wrapDecomposition(g, op)
				st.Ops++
				st.Unpacking++
			case cand[op]:
				packOp(g, op)
				for _, v := range op.Results {
					if v.Type.Shape.Rank() == 3 {
						isPacked[v] = true
					}
				}
				st.Ops++
			}
			out = append(out, op)
		}
		r.Ops = out
	}
	// Graph outputs and state updates keep their declared shapes.
	last := g.Regions[len(g.Regions)-1]
	fix := func(v *ir.Value) (*ir.Value, error) {
		if !isPacked[v] {
			return v, nil
		}
		return reshape(last, &last.Ops, v, unpacked(v.Type.Shape))
	}
	for i, v := range g.Outputs {
		u, err := fix(v)
		if err != nil {
			return st, err
		}
		g.Outputs[i] = u
	}
	states := make([]*ir.Value, 0, len(g.StateUpdates))
	for s := range g.StateUpdates {
		states = append(states, s)
	}
	slices.SortFunc(states, func(a, b *ir.Value) int { return a.ID - b.ID })
	for _, s := range states {
		u, err := fix(g.StateUpdates[s])
		if err != nil {
			return st, err
		}
		g.StateUpdates[s] = u
	}
	return st, nil
}

// packOp retypes op's per-user results to packed rows and its embedding
// view attribute (its operands were rewired already), and wraps its
// decomposition in reshapes, so the decomposition still takes the fused
// op's operands and gives its results.
func packOp(g *ir.Graph, op *ir.Op) {
	if op.Kind == ir.OpEmbeddingReshape {
		op.Attrs["shape"] = []int(packed(ir.Shape(op.Ints("shape"))))
	}
	for _, v := range op.Results {
		if v.Type.Shape.Rank() == 3 {
			v.Type.Shape = packed(v.Type.Shape)
		}
	}
	wrapDecomposition(g, op)
}

// wrapDecomposition wraps op's decomposition in reshapes from op's
// operand shapes to the placeholders' and from the decomposition's
// results to op's result shapes, where they differ, so the decomposition
// takes op's operands and gives its results.
func wrapDecomposition(g *ir.Graph, op *ir.Op) {
	d := op.Decomp
	if d == nil || len(d.Inputs) != len(op.Operands) || len(d.Outputs) != len(op.Results) {
		return
	}
	var pre, post []*ir.Op
	for i, v := range d.Inputs {
		if want := op.Operands[i].Type; !v.Type.Shape.Equal(want.Shape) {
			// The placeholder becomes the view of a new packed placeholder.
			t := v.Type
			t.Shape = want.Shape.Clone()
			p := g.NewValue(v.Kind, v.Name, t)
			v.Kind = ir.KindResult
			pre = append(pre, reshapeOp(g, op.Region, p, v.Type.Shape, v))
			d.Inputs[i] = p
		}
	}
	for i, o := range d.Outputs {
		if want := op.Results[i].Type; !o.Type.Shape.Equal(want.Shape) {
			t := o.Type
			t.Shape = want.Shape.Clone()
			res := g.NewValue(ir.KindResult, "", t)
			post = append(post, reshapeOp(g, op.Region, o, want.Shape, res))
			d.Outputs[i] = res
		}
	}
	d.Ops = append(append(pre, d.Ops...), post...)
}

// reshapeOp is a new reshape of x to shape in region r whose result is
// res (res.Def is set to it).
func reshapeOp(g *ir.Graph, r *ir.Region, x *ir.Value, shape ir.Shape, res *ir.Value) *ir.Op {
	op := &ir.Op{ID: g.NewOpID(), Kind: ir.OpReshape, Operands: []*ir.Value{x}, Attrs: ir.Attrs{"shape": []int(shape.Clone())}, Region: r, Results: []*ir.Value{res}}
	res.Def = op
	return op
}

// packsExactly reports whether op's shape rule, given its per-user
// operands packed, infers its per-user results packed (and nothing else
// changes), so retyping keeps the graph well typed.
func packsExactly(op *ir.Op) bool {
	ops := make([]*ir.Value, len(op.Operands))
	for i, v := range op.Operands {
		ops[i] = v
		if _, ok := userRows(v.Type); ok && rowOperand(op, i) {
			t := v.Type
			t.Shape = packed(t.Shape)
			ops[i] = &ir.Value{Kind: v.Kind, Type: t}
		}
	}
	attrs := op.Attrs
	if op.Kind == ir.OpEmbeddingReshape {
		attrs = ir.Attrs{}
		for k, v := range op.Attrs {
			attrs[k] = v
		}
		attrs["shape"] = []int(packed(ir.Shape(op.Ints("shape"))))
	}
	ts, err := ir.InferTypes(op.Kind, ops, attrs)
	if err != nil || len(ts) != len(op.Results) {
		return false
	}
	for i, v := range op.Results {
		want := v.Type
		if want.Shape.Rank() == 3 {
			want.Shape = packed(want.Shape)
		}
		if !ts[i].Shape.Equal(want.Shape) || ts[i].DType != want.DType {
			return false
		}
	}
	return true
}
