package passes

import (
	"fmt"
	"maps"
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
//   - FlattenConcat: concat(concat(x1, .., xn), y) along one axis, whose
//     inner concat nothing else reads, is concat(x1, .., xn, y): one
//     program that copies each operand once. The GDN prefill's chunk loop
//     appends each chunk's output to the running output; N chunks were
//     N-1 concats copying O(N^2) tiles, now one concat of N operands (at
//     most maxConcatOperands; a longer chain ends in a few concats).
//   - FuseBMMTransposeB: bmm(a, transpose(b)) with the transpose swapping
//     the last two dims is bmm_transpose_b(a, b): the matmul unpacks b's
//     tiles transposed (matmul_tiles with in1 transposed), so no program
//     moves b (the GDN prefill's k k^T and q k^T products each had a
//     transpose of [B,H,N,L,Dk] fp32 before them).
//   - FuseEmbeddingReshape: reshape(embedding(ids, table)) is one
//     embedding_reshape: the gather writes each row at its place in the
//     reshaped result (same row-major order, so only the output's page
//     indices change).
//   - FuseLayoutChain<Op>: two data movements in a row (slice, reshape,
//     repeat_interleave, transpose, or a layout_chain of them), whose
//     intermediate nothing else reads, are one layout_chain: one program
//     that assembles each result tile straight from the operand's tiles
//     through the composed index map. The GDN prefill's head split
//     (slice, reshape, repeat_interleave, transpose: [B,S,C] ->
//     [B,H,S,D]) then copies whole tiles, where its steps each gathered
//     rows from many tiles. Left out: reshape(reshape) (CollapseReshape)
//     and transposes of the last two dims that are not fp32 (those run
//     transpose_wh_tile on the compute kernel).
//   - FuseLayoutChainTypecast: typecast(layout_chain(x), fp32) of bf16
//     values is one layout_chain with dtype fp32: the program packs each assembled tile as fp32 (exact), where
//     the typecast read and wrote every tile again. The GDN prefill's q,
//     k and v head splits are cast to the fp32 state dtype so.
//   - DropInnerTril: tril(u(tril(x, d)), d) with u an elementwise unary op
//     (SFPU op or eltwise_chain) is tril(u(x), d): the outer tril keeps
//     exactly the elements the inner one kept and zeroes the others
//     whatever u made of them, so the values are the same bit for bit.
//     The GDN prefill's decays tril(exp(tril(g_i - g_j))) lose a masked
//     copy (a relayout of single elements) of [B,H,N,L,L] fp32.
//   - NormBeforeLayout: an RMSNorm of moved rows is the moved RMSNorm of
//     the rows, when the movement keeps every row whole (no step touches
//     the last dim): each row is normed on its own, so the values are the
//     same bit for bit. The GDN prefill's gated norm then reads [B,H,S,D]
//     and the transpose to [B,S,H,D] joins the reshape to [B,S,H*D] after
//     it in one whole-tile layout_chain.
var _ = registerRules("layout", append([]func() *rw.Rule{ruleDropToMemory, ruleCollapseReshape, ruleCollapseTypecast, ruleFlattenConcat, ruleSliceOfConcat, ruleFuseBMMTransposeB, ruleFuseEmbeddingReshape, ruleNormBeforeLayout, ruleLayoutChainTypecast, ruleDropInnerTril}, layoutChainRules()...)...)

// keepsRows reports whether a data movement from in to out (full shapes)
// keeps every row (last-dim run) whole and in order: the last dims are
// equal and no step moves along it.
func keepsRows(st ir.LayoutStep, in, out ir.Shape) bool {
	r := in.Rank()
	if r == 0 || out.Rank() == 0 || in[r-1] != out[out.Rank()-1] {
		return false
	}
	last := out.Rank() - 1
	axis := func(name string) int {
		v, _ := st.Attrs[name].(int)
		if v < 0 {
			v += out.Rank()
		}
		return v
	}
	switch st.Op {
	case ir.OpReshape, ir.OpSlice:
		return true // the last dims are equal: rows move whole
	case ir.OpRepeatInterleave:
		return axis("axis") != last
	case ir.OpTranspose:
		return axis("dim0") != last && axis("dim1") != last
	}
	return false
}

func ruleNormBeforeLayout() *rw.Rule {
	var alts []*rw.Pattern
	for _, k := range append(ir.LayoutChainOps(), ir.OpLayoutChain) {
		alts = append(alts, rw.Op(k, rw.Var("y")).As("move"))
	}
	return &rw.Rule{
		Name:    "NormBeforeLayout",
		Rewrite: "rms_norm(m(y), w) with m data movements keeping rows whole => m(rms_norm(y, w))",
		Pattern: rw.Op(ir.OpRMSNorm, rw.OneOf(alts...), rw.Var("w")),
		Where: func(m *rw.Match) bool {
			y, move := m.Value("y"), m.Op("move")
			steps, ok := layoutStepsOf(move)
			if !ok || y.Type.Layout != ir.TileLayout || y.Type.DType != m.Root.Result().Type.DType {
				return false
			}
			types, err := ir.LayoutChainTypes(y.Type, steps)
			if err != nil {
				return false
			}
			in := y.Type.Shape
			for i, st := range steps {
				if !keepsRows(st, in, types[i].Shape) {
					return false
				}
				in = types[i].Shape
			}
			return true
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			n, err := b.Emit1(ir.OpRMSNorm, []*ir.Value{m.Value("y"), m.Value("w")}, m.Root.Attrs)
			if err != nil {
				return nil, err
			}
			// The movement as its steps (a fused layout_chain emitted here
			// would record this match as its decomposition); FuseLayoutChain
			// joins them again.
			steps, _ := layoutStepsOf(m.Op("move"))
			for _, st := range steps {
				if n, err = b.Emit1(st.Op, []*ir.Value{n}, st.Attrs); err != nil {
					return nil, err
				}
			}
			return []*ir.Value{n}, nil
		},
	}
}

// layoutChainRules are the FuseLayoutChain rules, one per kind of the
// chain's last step (a layout_chain last: FuseLayoutChainMerge).
func layoutChainRules() []func() *rw.Rule {
	var rules []func() *rw.Rule
	for _, k := range append(ir.LayoutChainOps(), ir.OpLayoutChain) {
		rules = append(rules, layoutChainRule(k))
	}
	return rules
}

// layoutStepsOf returns the data movements op stands for: its steps
// attribute for a layout_chain, else the op itself as one step.
func layoutStepsOf(op *ir.Op) ([]ir.LayoutStep, bool) {
	if op.Kind == ir.OpLayoutChain {
		s, err := ir.ParseLayoutChain(op.Str("steps"))
		return s, err == nil
	}
	attrs := ir.Attrs{}
	for _, a := range op.Kind.Info().Attrs {
		if v, ok := op.Attrs[a.Name]; ok {
			attrs[a.Name] = v
		}
	}
	return []ir.LayoutStep{{Op: op.Kind, Attrs: attrs}}, true
}

// tileTranspose reports whether op transposes the last two dims of a
// tensor that is not fp32 (lowered with transpose_wh_tile, not moved).
func tileTranspose(op *ir.Op) bool {
	if op.Kind != ir.OpTranspose {
		return false
	}
	return swapsLastTwo(op) && op.Result().Type.DType != ir.FP32
}

// swapsLastTwo reports whether transpose op swaps its operand's last two
// dims (of at least two).
func swapsLastTwo(op *ir.Op) bool {
	r := op.Result().Type.Shape.Rank()
	d0, d1 := op.Int("dim0"), op.Int("dim1")
	if d0 < 0 {
		d0 += r
	}
	if d1 < 0 {
		d1 += r
	}
	return r >= 2 && min(d0, d1) == r-2 && max(d0, d1) == r-1
}

// layoutChainRule returns the constructor of the rule rooted at kind.
func layoutChainRule(kind ir.OpKind) func() *rw.Rule {
	name := "FuseLayoutChain" + goName(kind)
	if kind == ir.OpLayoutChain {
		name = "FuseLayoutChainMerge"
	}
	return func() *rw.Rule {
		var alts []*rw.Pattern
		for _, k := range append(ir.LayoutChainOps(), ir.OpLayoutChain) {
			alts = append(alts, rw.Op(k, rw.Var("x")).As("inner"))
		}
		return &rw.Rule{
			Name:    name,
			Rewrite: kind.String() + "(m(x)) with m a data movement or a layout_chain => layout_chain(x) {steps = steps of m, then of " + kind.String() + "}",
			Pattern: rw.Op(kind, rw.OneOf(alts...)),
			Where: func(m *rw.Match) bool {
				x, inner, root := m.Value("x"), m.Op("inner"), m.Root
				for _, v := range []*ir.Value{x, inner.Result(), root.Result()} {
					if v.Type.Layout != ir.TileLayout {
						return false
					}
				}
				if inner.Kind == ir.OpReshape && root.Kind == ir.OpReshape || tileTranspose(inner) || tileTranspose(root) {
					return false
				}
				_, ok1 := layoutStepsOf(inner)
				_, ok2 := layoutStepsOf(root)
				return ok1 && ok2
			},
			Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
				first, _ := layoutStepsOf(m.Op("inner"))
				last, _ := layoutStepsOf(m.Root)
				steps := append(append([]ir.LayoutStep(nil), first...), last...)
				attrs := ir.Attrs{"steps": ir.FormatLayoutChain(steps)}
				if dt := m.Root.Result().Type.DType; dt != m.Value("x").Type.DType {
					attrs["dtype"] = dt // an inner chain that converts (FuseLayoutChainTypecast)
				}
				v, err := b.Emit1(ir.OpLayoutChain, []*ir.Value{m.Value("x")}, attrs)
				return []*ir.Value{v}, err
			},
		}
	}
}

// ruleLayoutChainTypecast: a widening typecast (bf16 to fp32, exact) of
// values a layout_chain moved is the chain storing them as fp32: one
// program that assembles each result tile in bf16 and packs it as fp32,
// where the typecast was a program of its own reading and writing every
// tile again. (A single data movement before the typecast is left alone:
// a chain has at least two steps; the model's head splits are chains.)
func ruleLayoutChainTypecast() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseLayoutChainTypecast",
		Rewrite: "typecast(layout_chain(x), fp32) with x bf16 => layout_chain(x) {steps = the chain's, dtype = fp32}",
		Pattern: rw.Op(ir.OpTypecast, rw.Op(ir.OpLayoutChain, rw.Var("x")).As("inner")),
		Where: func(m *rw.Match) bool {
			x, inner, root := m.Value("x"), m.Op("inner"), m.Root
			for _, v := range []*ir.Value{x, inner.Result(), root.Result()} {
				if v.Type.Layout != ir.TileLayout {
					return false
				}
			}
			if x.Type.DType != ir.BF16 || inner.Result().Type.DType != ir.BF16 || root.Result().Type.DType != ir.FP32 || tileTranspose(inner) {
				return false
			}
			_, ok := layoutStepsOf(inner)
			return ok
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			steps, _ := layoutStepsOf(m.Op("inner"))
			v, err := b.Emit1(ir.OpLayoutChain, []*ir.Value{m.Value("x")}, ir.Attrs{"steps": ir.FormatLayoutChain(steps), "dtype": ir.FP32})
			return []*ir.Value{v}, err
		},
	}
}

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

// maxConcatOperands bounds the operands FlattenConcat gives one concat.
const maxConcatOperands = ir.MaxConcatOperands

func ruleFlattenConcat() *rw.Rule {
	// The inner concat with 2..maxConcatOperands-1 operands.
	alts := concatPatterns(maxConcatOperands-1, "inner")
	return &rw.Rule{
		Name:    "FlattenConcat",
		Rewrite: "concat(concat(x1, .., xn), y) along one axis => concat(x1, .., xn, y)",
		Pattern: rw.Op(ir.OpConcat, rw.OneOf(alts...), rw.Var("y")),
		Where: func(m *rw.Match) bool {
			inner, r := m.Op("inner"), m.Root.Result().Type.Shape.Rank()
			a0, a1 := inner.Int("axis"), m.Root.Int("axis")
			if a0 < 0 {
				a0 += r
			}
			if a1 < 0 {
				a1 += r
			}
			return a0 == a1 && !pinnedValue(m.Graph, inner.Result())
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			xs := append(append([]*ir.Value(nil), m.Op("inner").Operands...), m.Value("y"))
			v, err := b.Emit1(ir.OpConcat, xs, ir.Attrs{"axis": m.Root.Int("axis")})
			return []*ir.Value{v}, err
		},
	}
}

// concatPatterns are the patterns of a concat of 2..most operands x0,
// x1, ... named name (a pattern matches a fixed operand count).
func concatPatterns(most int, name string) []*rw.Pattern {
	var alts []*rw.Pattern
	for n := 2; n <= most; n++ {
		xs := make([]*rw.Pattern, n)
		for i := range xs {
			xs[i] = rw.Var(fmt.Sprintf("x%d", i))
		}
		alts = append(alts, rw.Op(ir.OpConcat, xs...).As(name))
	}
	return alts
}

// sliceOfConcatPart returns the operand index of the concat cat whose
// rows along cat's axis hold the whole range [begin, end) of slice s on
// that axis, and that range within the operand; ok is false when the
// range spans two operands or cat's axis is out of range.
func sliceOfConcatPart(cat, s *ir.Op) (part, begin, end int, ok bool) {
	r := cat.Result().Type.Shape.Rank()
	axis := cat.Int("axis")
	if axis < 0 {
		axis += r
	}
	b, e := s.Ints("begin"), s.Ints("end")
	if axis < 0 || axis >= r || len(b) != r || len(e) != r {
		return 0, 0, 0, false
	}
	off := 0
	for i, x := range cat.Operands {
		n := x.Type.Shape[axis]
		if b[axis] >= off && e[axis] <= off+n {
			return i, b[axis] - off, e[axis] - off, true
		}
		off += n
	}
	return 0, 0, 0, false
}

// ruleSliceOfConcat: a slice lying wholly inside one operand of a concat
// reads that operand (the GDN prefill's conv-state shift, the last K-1
// rows of concat(conv_state, qkv), reads qkv's last K-1 rows), leaving
// the concat fewer readers. Data movement only: values unchanged.
func ruleSliceOfConcat() *rw.Rule {
	alts := concatPatterns(maxConcatOperands, "cat")
	return &rw.Rule{
		Name: "SliceOfConcat",
		// the concat stays for its other readers
		AllowSharedInterior: true,
		Rewrite:             "slice(concat(x1, .., xn)) {begin, end within xi along the axis} => slice(xi) {begin, end shifted by xi's offset}",
		Pattern:             rw.Op(ir.OpSlice, rw.OneOf(alts...)),
		Where: func(m *rw.Match) bool {
			_, _, _, ok := sliceOfConcatPart(m.Op("cat"), m.Root)
			return ok
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			cat := m.Op("cat")
			part, lo, hi, _ := sliceOfConcatPart(cat, m.Root)
			axis := cat.Int("axis")
			if axis < 0 {
				axis += cat.Result().Type.Shape.Rank()
			}
			begin := slices.Clone(m.Root.Ints("begin"))
			end := slices.Clone(m.Root.Ints("end"))
			begin[axis], end[axis] = lo, hi
			v, err := b.Emit1(ir.OpSlice, []*ir.Value{cat.Operands[part]}, ir.Attrs{"begin": begin, "end": end})
			return []*ir.Value{v}, err
		},
	}
}

func ruleFuseBMMTransposeB() *rw.Rule {
	return &rw.Rule{
		Name:    "FuseBMMTransposeB",
		Rewrite: "bmm(a, transpose(b, -1, -2)) => bmm_transpose_b(a, b)",
		Pattern: rw.Op(ir.OpBMM, rw.Var("a"), rw.Op(ir.OpTranspose, rw.Var("b")).As("t")),
		Where: func(m *rw.Match) bool {
			b := m.Value("b")
			return swapsLastTwo(m.Op("t")) && b.Type.Layout == ir.TileLayout
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			v, err := b.Emit1(ir.OpBMMTransposeB, []*ir.Value{m.Value("a"), m.Value("b")}, m.Root.Attrs)
			return []*ir.Value{v}, err
		},
	}
}

// ruleDropInnerTril drops the inner tril of tril(u(tril(x, d)), d) (see
// the family doc): tril selects, it does not multiply, so the elements u
// computes from masked zeros are discarded by the outer tril.
func ruleDropInnerTril() *rw.Rule {
	var alts []*rw.Pattern
	for _, k := range append(ir.ChainableOps(), ir.OpEltwiseChain) {
		alts = append(alts, rw.Op(k, rw.Op(ir.OpTril, rw.Var("x")).As("inner")).As("u"))
	}
	return &rw.Rule{
		Name:    "DropInnerTril",
		Rewrite: "tril(u(tril(x, d)), d) with u elementwise unary => tril(u(x), d)",
		Pattern: rw.Op(ir.OpTril, rw.OneOf(alts...)),
		Where: func(m *rw.Match) bool {
			inner, u, x := m.Op("inner"), m.Op("u"), m.Value("x")
			d, ok1 := inner.Attrs["diagonal"].(int)
			e, ok2 := m.Root.Attrs["diagonal"].(int)
			if !ok1 || !ok2 || d != e || len(u.Results) != 1 {
				return false
			}
			if _, ok := u.Attrs[ir.FidelityAttr]; ok {
				return false
			}
			// u keeps x's type (shape and dtype): u(x) is u(tril(x))'s type.
			return sameTensorType(x, inner.Result()) && u.Result().Type.DType == x.Type.DType
		},
		Build: func(b *rw.Builder, m *rw.Match) ([]*ir.Value, error) {
			u := m.Op("u")
			v, err := b.Emit1(u.Kind, []*ir.Value{m.Value("x")}, maps.Clone(u.Attrs))
			if err != nil {
				return nil, err
			}
			t, err := b.Emit1(ir.OpTril, []*ir.Value{v}, maps.Clone(m.Root.Attrs))
			return []*ir.Value{t}, err
		},
	}
}
