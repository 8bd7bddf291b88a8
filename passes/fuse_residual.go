package passes

import (
	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Residual family (pass fuse): a residual add whose sum is normalised by
// the next RMSNorm becomes one add_rmsnorm program with two results, the
// new residual stream h and norm(h). Both roots (the add and the norm) are
// replaced, so h keeps its other readers (the next residual add).
//
// Where the sum comes from an all-reduce the collective family's
// all_reduce_add_rmsnorm takes the whole chain first (its rule is
// anchored at the same add and comes earlier in rule order); this rule
// covers the single-device case and the graph with the collective rules
// disabled. The two-result op goes before the first outside reader of h
// (the engine's multi-root insertion point).
//
// Layer boundaries: a decoder layer's last residual add and the next
// layer's first RMSNorm are in different regions, and rewrites never
// cross regions (a fused op would move work between layers, which the
// per-layer reports, placement and codegen rely on not happening). The
// boundary is therefore handled from the producing side: the layer's last
// add is folded into the collective (all_reduce_add) or the down
// projection (matmul_add) that produces it, so a layer ends in one program
// that writes h, and the next layer opens with one rms_norm program. At
// TP > 1 the fuse-boundaries pass (fuse_boundary.go) then joins that
// all_reduce_add with the next layer's rms_norm into one
// all_reduce_add_rmsnorm of the closing layer; at TP = 1 (matmul_add) the
// boundary stays two programs. (The matmul family's rmsnorm_matmul
// prologue applies only where the norm's one reader is a plain matmul, as
// in the head; the layer's input norm feeds the multi-output in-projection.)
var _ = registerRules("residual", ruleAddRMSNorm)

func ruleAddRMSNorm() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseAddRMSNorm",
		Rewrite: "add(a, b) and rms_norm(that sum, w) => add_rmsnorm(a, b, w) -> (h, normed)",
		Pattern: rw.Op(ir.OpAdd, rw.Var("a"), rw.Var("b")).As("add"),
		Extra:   []*rw.Pattern{normOfAdd()},
		Where: func(m *rw.Match) bool {
			a, b, h := m.Value("a"), m.Value("b"), m.Op("add").Result()
			if !a.Type.Shape.Equal(b.Type.Shape) || !h.Type.Shape.Equal(a.Type.Shape) || !a.Type.DType.IsFloat() {
				return false
			}
			return a.Type.DType == b.Type.DType && sameDType(a.Type.DType, m.Op("add"), m.Op("norm"))
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			n := m.Op("norm")
			op, err := b.Emit(ir.OpAddRMSNorm, []*ir.Value{m.Value("a"), m.Value("b"), m.Value("w")},
				ir.Attrs{"eps": n.Float("eps"), "offset": n.Float("offset")})
			if err != nil {
				return nil, err
			}
			// Roots: the add (h), then the norm (normed).
			return op.Results, nil
		},
	}
}
