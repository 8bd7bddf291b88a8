package passes

import (
	"slices"

	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Layout family (pass fuse-layout): layout ops that survive the block
// rules fold into the addressing of the program next to them. Every rule
// replaces values by values equal element for element, so the graph stays
// type-correct (same shapes and dtypes; only memory placements of the
// remaining values change, and the place pass decides those anyway):
//
//   - DropToMemory: a move to an interleaved placement (DRAM or L1) is
//     dropped; its readers read the source placement, which any kernel
//     addresses the same way (interleaved pages). Sharded moves are kept
//     (their readers may rely on the shard layout), as are moves of
//     persistent state (a later in-place state update could overwrite the
//     source before the reader runs) and moves whose result is a graph
//     output or state update (the copy is the write into the persistent
//     buffer).
//   - CollapseReshape: reshape(reshape(x)) is one reshape; a reshape to x's
//     own shape is x. The remaining reshape is one program that rewrites
//     page indices.
//   - CollapseTypecast: typecast(typecast(x, fp32), dt) is typecast(x, dt)
//     when x is bf16 (bf16 -> fp32 is exact), and x when dt is bf16; a
//     typecast to x's own dtype is x.
//   - FuseEmbeddingReshape: reshape(embedding(ids, table)) is one
//     embedding_reshape: the gather writes each row at its place in the
//     reshaped result (same row-major order, so only the output's page
//     indices change).
var _ = registerRules("layout", ruleDropToMemory, ruleCollapseReshape, ruleCollapseTypecast, ruleFuseEmbeddingReshape)

// pinnedValue reports whether v is a graph output or a state update.
func pinnedValue(g *ir.Graph, v *ir.Value) bool {
	if slices.Contains(g.Outputs, v) {
		return true
	}
	for _, u := range g.StateUpdates {
		if u == v {
			return true
		}
	}
	return false
}

func ruleDropToMemory() *rw.Rule {
	return &rw.Rule{Name: "DropToMemory", After: "x", Pattern: rw.Op(ir.OpToMemory, rw.Var("x")),
		Where: func(m *rw.Match) bool {
			x, out := m.Value("x"), m.Root.Result()
			return !out.Type.Mem.Kind.IsSharded() && x.Kind != ir.KindState && !pinnedValue(m.Graph, out) && sameTensorType(x, out)
		},
		Build: func(_ *rw.Builder, m *rw.Match) ([]*ir.Value, error) { return []*ir.Value{m.Value("x")}, nil }}
}

func ruleCollapseReshape() *rw.Rule {
	return &rw.Rule{
		Name:    "CollapseReshape",
		Rewrite: "reshape(reshape(x, s1), s2) => reshape(x, s2), or x when s2 is the shape of x",
		Pattern: rw.Op(ir.OpReshape, rw.OneOf(rw.Op(ir.OpReshape, rw.Var("x")).As("inner"), rw.Var("x"))),
		Where: func(m *rw.Match) bool {
			out := m.Root.Result()
			if m.Op("inner") == nil {
				// Identity reshape only.
				return out.Type.Shape.Equal(m.Value("x").Type.Shape) && !pinnedValue(m.Graph, out)
			}
			return true
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			x, out := m.Value("x"), m.Root.Result()
			if out.Type.Shape.Equal(x.Type.Shape) && !pinnedValue(m.Graph, out) {
				return []*ir.Value{x}, nil
			}
			v, err := b.Emit1(ir.OpReshape, []*ir.Value{x}, ir.Attrs{"shape": []int(out.Type.Shape.Clone())})
			return []*ir.Value{v}, err
		},
	}
}

func ruleCollapseTypecast() *rw.Rule {
	return &rw.Rule{
		Name:    "CollapseTypecast",
		Rewrite: "typecast(typecast(x bf16, fp32), dt) or typecast(x, dt) => typecast(x, dt), or x when dt is the dtype of x",
		Pattern: rw.Op(ir.OpTypecast, rw.OneOf(rw.Op(ir.OpTypecast, rw.Var("x")).As("inner"), rw.Var("x"))),
		Where: func(m *rw.Match) bool {
			x, out := m.Value("x"), m.Root.Result()
			if inner := m.Op("inner"); inner != nil {
				return x.Type.DType == ir.BF16 && inner.Result().Type.DType == ir.FP32 &&
					(out.Type.DType != ir.BF16 || !pinnedValue(m.Graph, out))
			}
			return out.Type.DType == x.Type.DType && !pinnedValue(m.Graph, out)
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			x, out := m.Value("x"), m.Root.Result()
			if out.Type.DType == x.Type.DType {
				return []*ir.Value{x}, nil
			}
			v, err := b.Emit1(ir.OpTypecast, []*ir.Value{x}, ir.Attrs{"dtype": out.Type.DType})
			return []*ir.Value{v}, err
		},
	}
}

func ruleFuseEmbeddingReshape() *rw.Rule {
	return &rw.Rule{Name: "FuseEmbeddingReshape", After: "embedding_reshape(ids, table) {shape}",
		Pattern: rw.Op(ir.OpReshape, rw.Op(ir.OpEmbedding, rw.Var("ids"), rw.Var("table"))),
		Build:   rw.Emit(ir.OpEmbeddingReshape, rw.RootShape("shape"), "ids", "table")}
}
