package passes

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	rw "github.com/tcc-dev/tcc/passes/rewrite"
)

// Matmul family (pass fuse):
//
//   - sibling matmuls reading one activation (the GDN in-projections qkv,
//     z, a, b; the attention q, k, v projections) become one multi-output
//     matmulN program: the activation is read once and every core works
//     on its columns of the weights side by side; the biggest group is
//     tried first;
//   - an RMSNorm whose only reader is a matmul becomes its prologue
//     (rmsnorm_matmul, the final norm + lm_head): in decode every core reads
//     the whole activation row for its K loop anyway and normalises it
//     first;
//   - a matmul whose only reader is a residual add becomes matmul_add (the
//     epilogue adds the residual tile before packing), unless the sum feeds
//     an RMSNorm in the same region: then the residual family's add_rmsnorm
//     takes the add, which saves as many programs and keeps the norm's row
//     reduction out of the matmul;
//   - a bmm_transpose_b whose only reader multiplies it elementwise by a
//     value of its shape and dtype becomes bmm_transpose_b_mul (the GDN
//     prefill's q k^T and (beta k) k^T, each times the decays Γ: the
//     product is packed to an L1 scratch tile and the FPU multiplies it
//     by Γ's tile before the result is written, instead of a mul program
//     reading both back from DRAM; two programs fewer per GDN layer);
//   - a bmm whose second operand b is scaled row by row, mul(x, c) with c
//     [.., K, 1], read by nothing else, becomes bmm_scale_b (the GDN
//     prefill's U = T (beta v) and W = T (beta k exp(g)): compute scales
//     each b tile by c's column on the FPU into an L1 scratch tile and
//     multiplies from there; two programs fewer per GDN layer).
var _ = registerRules("matmul", siblingMatmulRule(4), siblingMatmulRule(3), siblingMatmulRule(2),
	ruleRMSNormMatmul, ruleMatmulAdd, ruleBMMTransposeBMul, ruleBMMScaleB)

var matmulMultiKinds = map[int]ir.OpKind{2: ir.OpMatmul2, 3: ir.OpMatmul3, 4: ir.OpMatmul4}

// siblingMatmulRule returns the constructor of the rule that merges n
// matmuls of one activation into matmul<n>.
func siblingMatmulRule(n int) func() *rw.Rule {
	return func() *rw.Rule {
		w := func(i int) string { return fmt.Sprintf("w%d", i) }
		mm := func(i int) *rw.Pattern { return rw.Op(ir.OpMatmul, rw.Var("a"), rw.Var(w(i))) }
		var extra []*rw.Pattern
		for i := 1; i < n; i++ {
			extra = append(extra, mm(i))
		}
		return &rw.Rule{
			Name:    fmt.Sprintf("FuseSiblingMatmul%d", n),
			Rewrite: fmt.Sprintf("matmul(a, w0), ..., matmul(a, w%d) => matmul%d(a, w0, ..., w%d)", n-1, n, n-1),
			Pattern: mm(0),
			Extra:   extra,
			Where: func(m *rw.Match) bool {
				// Roots in program order, so the weights (and results) keep
				// the model's order, and no result dtype override.
				if !inProgramOrder(m.Roots) {
					return false
				}
				return sameDType(m.Value("a").Type.DType, m.Roots...)
			},
			Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
				ops := []*ir.Value{m.Value("a")}
				for i := range n {
					ops = append(ops, m.Value(w(i)))
				}
				op, err := b.Emit(matmulMultiKinds[n], ops, nil)
				if err != nil {
					return nil, err
				}
				return op.Results, nil
			},
		}
	}
}

// inProgramOrder reports whether ops (all in one region) appear in this
// order in their region.
func inProgramOrder(ops []*ir.Op) bool {
	pos := map[*ir.Op]int{}
	for i, op := range ops[0].Region.Ops {
		pos[op] = i
	}
	for i := 1; i < len(ops); i++ {
		if pos[ops[i]] <= pos[ops[i-1]] {
			return false
		}
	}
	return true
}

// maxPrologueNormTiles bounds the K tiles of a norm folded into the
// matmul that reads it: every matmul core recomputes the whole norm
// (about four tile ops per K tile, ~0.45 us each) while its weight stream
// waits, so past 32 tiles (H = 1024) the prologue costs more than a
// split-row norm program and its launch (~18 us; the 27B head's H = 5120
// took 1,796 us fused against 1,569 us for rms_norm + matmul, tcc perf).
const maxPrologueNormTiles = 32

func ruleRMSNormMatmul() *rw.Rule {
	return &rw.Rule{Name: "FuseRMSNormMatmul", After: "rmsnorm_matmul(x, wn, w)",
		Pattern: rw.Op(ir.OpMatmul, rw.Op(ir.OpRMSNorm, rw.Var("x"), rw.Var("wn")).As("norm"), rw.Var("w")),
		Where: func(m *rw.Match) bool {
			x := m.Value("x")
			return floatIn(x, m.Op("norm"), m.Root) && x.Type.Shape.Cols2D() <= maxPrologueNormTiles*ir.TileSize
		},
		Build: rw.Emit(ir.OpRMSNormMatmul, rw.AttrsOf("norm", "eps", "offset"), "x", "wn", "w")}
}

func ruleMatmulAdd() *rw.Rule {
	return &rw.Rule{Name: "FuseMatmulAdd", After: "matmul_add(a, w, r)",
		Pattern: rw.Op(ir.OpAdd, rw.Var("r"), rw.Op(ir.OpMatmul, rw.Var("a"), rw.Var("w")).As("mm")),
		Where: func(m *rw.Match) bool {
			return sameTensorType(m.Value("r"), m.Op("mm").Result(), m.Root.Result()) && !readByNormInRegion(m.Root.Result(), m.Root.Region)
		},
		Build: rw.Emit(ir.OpMatmulAdd, nil, "a", "w", "r")}
}

// ruleBMMTransposeBMul: mul(bmm_transpose_b(a, b), c) => bmm_transpose_b_mul(a, b, c).
// The product is mul's first operand (the FPU's srcA/srcB assignment, so
// the values are the composed ones bit for bit), c has the product's
// shape and dtype (no broadcast), and neither op carries a fidelity
// override (the fused kernel has one fidelity).
func ruleBMMTransposeBMul() *rw.Rule {
	return &rw.Rule{Name: "FuseBMMTransposeBMul", After: "bmm_transpose_b_mul(a, b, c)",
		Pattern: rw.Op(ir.OpMul, rw.Op(ir.OpBMMTransposeB, rw.Var("a"), rw.Var("b")).As("mm"), rw.Var("c")),
		Where: func(m *rw.Match) bool {
			mm := m.Op("mm")
			if m.Root.Operands[0] != mm.Result() {
				return false // mul is tried both ways round; the FPU's product is not symmetric in its sources
			}
			for _, op := range []*ir.Op{mm, m.Root} {
				if _, ok := op.Attrs[ir.FidelityAttr]; ok {
					return false
				}
			}
			c := m.Value("c")
			return gdnFloatStorage(c.Type.DType) && sameTensorType(c, mm.Result(), m.Root.Result())
		},
		Build: rw.Emit(ir.OpBMMTransposeBMul, func(m *rw.Match) ir.Attrs {
			if dt, ok := m.Op("mm").Attrs["dtype"]; ok {
				return ir.Attrs{"dtype": dt}
			}
			return nil
		}, "a", "b", "c")}
}

// ruleBMMScaleB: bmm(a, mul(x, c)) => bmm_scale_b(a, x, c) with c [.., K, 1]
// (x's shape with a last dim of 1, x's dtype) broadcast over x's columns,
// x a whole number of tiles along K (the padding rows of a scaled tile
// would multiply c's padding), the scaled x read by the bmm alone, and no
// fidelity override on either op.
func ruleBMMScaleB() *rw.Rule {
	return &rw.Rule{Name: "FuseBMMScaleB", After: "bmm_scale_b(a, x, c)",
		Pattern: rw.Op(ir.OpBMM, rw.Var("a"), rw.Op(ir.OpMul, rw.Var("x"), rw.Var("c")).As("scale")),
		Where: func(m *rw.Match) bool {
			sc, x, c := m.Op("scale"), m.Value("x"), m.Value("c")
			if sc.Operands[0] != x {
				return false // mul is tried both ways round; the FPU broadcasts its second source
			}
			for _, op := range []*ir.Op{sc, m.Root} {
				if _, ok := op.Attrs[ir.FidelityAttr]; ok {
					return false
				}
			}
			xs := x.Type.Shape
			r := xs.Rank()
			if r < 2 || !gdnFloatStorage(x.Type.DType) || c.Type.DType != x.Type.DType || sc.Result().Type.DType != x.Type.DType || xs[r-2]%ir.TileSize != 0 {
				return false
			}
			want := xs.Clone()
			want[r-1] = 1
			return c.Type.Shape.Equal(want) && sc.Result().Type.Shape.Equal(xs)
		},
		Build: rw.Emit(ir.OpBMMScaleB, func(m *rw.Match) ir.Attrs {
			if dt, ok := m.Root.Attrs["dtype"]; ok {
				return ir.Attrs{"dtype": dt}
			}
			return nil
		}, "a", "x", "c")}
}

// sameTensorType reports whether every value has the first's shape and dtype.
func sameTensorType(v *ir.Value, others ...*ir.Value) bool {
	for _, o := range others {
		if !o.Type.Shape.Equal(v.Type.Shape) || o.Type.DType != v.Type.DType {
			return false
		}
	}
	return true
}

// floatIn reports whether x is a float value and ops all produce its dtype.
func floatIn(x *ir.Value, ops ...*ir.Op) bool {
	return x.Type.DType.IsFloat() && sameDType(x.Type.DType, ops...)
}

// readByNormInRegion reports whether an RMSNorm of region r normalises v:
// an rms_norm reading v, or a written-out one the norm family
// has yet to fuse (normPending).
func readByNormInRegion(v *ir.Value, r *ir.Region) bool {
	for _, op := range r.Ops {
		if op.Kind == ir.OpRMSNorm && op.Operands[0] == v {
			return true
		}
	}
	return normPending(v, r)
}

// normPending reports whether region r holds the start of a written-out
// RMSNorm of v, mean(square(v)) or mean(mul(v, v)), which the norm family
// will fuse to rms_norm later in the same pass. Rules that would take v's
// producing add away from the residual and collective norm rules wait for
// it.
func normPending(v *ir.Value, r *ir.Region) bool {
	sq := map[*ir.Value]bool{}
	for _, op := range r.Ops {
		switch {
		case op.Kind == ir.OpSquare && op.Operands[0] == v,
			op.Kind == ir.OpMul && op.Operands[0] == v && op.Operands[1] == v:
			sq[op.Result()] = true
		case op.Kind == ir.OpMean && sq[op.Operands[0]]:
			return true
		}
	}
	return false
}

// sameDType reports whether every result of ops has dtype dt.
func sameDType(dt ir.DType, ops ...*ir.Op) bool {
	for _, op := range ops {
		for _, r := range op.Results {
			if r.Type.DType != dt {
				return false
			}
		}
	}
	return true
}
