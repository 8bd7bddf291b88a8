package ir

import "fmt"

// Shape rules of the model ops (ir/opspec/model.go). Like the core rules,
// results inherit layout, memory config and distribution from the first
// operand unless the rule says otherwise, with two refinements: a rule
// whose result shape differs from its first operand's places a sharded
// operand's result interleaved in the same memory (L1 or DRAM), since the
// operand's shard spec does not fit the new shape (to_memory re-shards
// explicitly); rules that move dims (transpose) move the split axis with
// them, and collectives set the distribution they produce.

// reshaped is like(t, s, dt) with a sharded placement turned interleaved
// in the same memory when s differs from t's shape.
func reshaped(t TensorType, s Shape, dt DType) TensorType {
	r := like(t, s, dt)
	if r.Mem.Kind.IsSharded() && !s.Equal(t.Shape) {
		if r.Mem.Kind.IsDRAM() {
			r.Mem = DRAM
		} else {
			r.Mem = L1
		}
	}
	return r
}

// normAxis resolves a possibly negative axis against rank r.
func normAxis(axis, r int) (int, error) {
	a := axis
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		return 0, fmt.Errorf("rule axis: axis %d is out of range for rank %d", axis, r)
	}
	return a, nil
}

// shapeSlice: out[d] = end[d] - begin[d].
func shapeSlice(in []TensorType, a Attrs) ([]TensorType, error) {
	x := in[0].Shape
	begin, end := a["begin"].([]int), a["end"].([]int)
	if len(begin) != x.Rank() || len(end) != x.Rank() {
		return nil, fmt.Errorf("rule slice-rank: begin %v and end %v need one entry per dim of %s", begin, end, x)
	}
	s := make(Shape, x.Rank())
	for d := range x {
		if begin[d] < 0 || begin[d] >= end[d] || end[d] > x[d] {
			return nil, fmt.Errorf("rule slice-bounds: dim %d: want 0 <= begin %d < end %d <= %d", d, begin[d], end[d], x[d])
		}
		s[d] = end[d] - begin[d]
	}
	return []TensorType{reshaped(in[0], s, in[0].DType)}, nil
}

// MaxConcatOperands is the most operands one concat has after fusion
// (passes' FlattenConcat stops there) and the most its device program
// takes (codegen gives each operand a scratch CB next to the output's, of
// at most 32 per core).
const MaxConcatOperands = 16

// shapeConcat: the operands agree except along axis, where the sizes add.
func shapeConcat(in []TensorType, a Attrs) ([]TensorType, error) {
	x := in[0]
	ax, err := normAxis(a["axis"].(int), x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	s := x.Shape.Clone()
	for _, y := range in[1:] {
		if x.Shape.Rank() != y.Shape.Rank() {
			return nil, fmt.Errorf("rule concat-rank: ranks differ (%s vs %s)", x.Shape, y.Shape)
		}
		if x.DType != y.DType {
			return nil, fmt.Errorf("rule concat-dtype: dtypes differ (%s vs %s)", x.DType, y.DType)
		}
		for d := range s {
			if d == ax {
				s[d] += y.Shape[d]
			} else if x.Shape[d] != y.Shape[d] {
				return nil, fmt.Errorf("rule concat-dims: dim %d differs (%d vs %d); only axis %d may differ", d, x.Shape[d], y.Shape[d], ax)
			}
		}
	}
	return []TensorType{reshaped(x, s, x.DType)}, nil
}

// shapePad: the target shape, no dim smaller than x's.
func shapePad(in []TensorType, a Attrs) ([]TensorType, error) {
	x := in[0].Shape
	s := Shape(append([]int(nil), a["shape"].([]int)...))
	if s.Rank() != x.Rank() {
		return nil, fmt.Errorf("rule pad-rank: target %s has rank %d, x has %d", s, s.Rank(), x.Rank())
	}
	for d := range s {
		if s[d] < x[d] {
			return nil, fmt.Errorf("rule pad-grow: dim %d: target %d is smaller than %d", d, s[d], x[d])
		}
	}
	return []TensorType{reshaped(in[0], s, in[0].DType)}, nil
}

// shapeRepeatInterleave: the axis grows repeats times.
func shapeRepeatInterleave(in []TensorType, a Attrs) ([]TensorType, error) {
	r := a["repeats"].(int)
	if r < 1 {
		return nil, fmt.Errorf("rule repeats: repeats %d must be >= 1", r)
	}
	ax, err := normAxis(a["axis"].(int), in[0].Shape.Rank())
	if err != nil {
		return nil, err
	}
	s := in[0].Shape.Clone()
	s[ax] *= r
	return []TensorType{reshaped(in[0], s, in[0].DType)}, nil
}

// shapeTranspose: two dims swap; a split axis moves with its dim.
func shapeTranspose(in []TensorType, a Attrs) ([]TensorType, error) {
	r := in[0].Shape.Rank()
	d0, err := normAxis(a["dim0"].(int), r)
	if err != nil {
		return nil, err
	}
	d1, err := normAxis(a["dim1"].(int), r)
	if err != nil {
		return nil, err
	}
	if d0 == d1 {
		return nil, fmt.Errorf("rule transpose-dims: dim0 and dim1 are both %d", d0)
	}
	s := in[0].Shape.Clone()
	s[d0], s[d1] = s[d1], s[d0]
	t := reshaped(in[0], s, in[0].DType)
	switch t.Dist.Axis {
	case d0:
		t.Dist.Axis = d1
	case d1:
		t.Dist.Axis = d0
	}
	return []TensorType{t}, nil
}

// shapeToMemory: same shape and dtype, the memory config from the attributes.
func shapeToMemory(in []TensorType, a Attrs) ([]TensorType, error) {
	kind, err := ParseMemKind(a["mem"].(string))
	if err != nil {
		return nil, fmt.Errorf("rule to-memory-kind: %w", err)
	}
	grid, hasGrid := a["grid"].([]int)
	shard, hasShard := a["shard"].([]int)
	t := like(in[0], in[0].Shape.Clone(), in[0].DType)
	t.Mem = MemoryConfig{Kind: kind}
	if !kind.IsSharded() {
		if hasGrid || hasShard {
			return nil, fmt.Errorf("rule to-memory-shard: %s takes no grid or shard", kind)
		}
		return []TensorType{t}, nil
	}
	if !hasGrid || !hasShard || len(grid) != 4 || len(shard) != 2 {
		return nil, fmt.Errorf("rule to-memory-shard: %s needs grid [x0,y0,x1,y1] and shard [rows,cols]", kind)
	}
	g := CoreRange{X0: grid[0], Y0: grid[1], X1: grid[2], Y1: grid[3]}
	if g.X0 < 0 || g.Y0 < 0 || g.X1 < g.X0 || g.Y1 < g.Y0 || shard[0] <= 0 || shard[1] <= 0 {
		return nil, fmt.Errorf("rule to-memory-shard: bad grid %s or shard %dx%d", g, shard[0], shard[1])
	}
	if err := checkShardCover(kind, g, shard, in[0]); err != nil {
		return nil, err
	}
	t.Mem.Shard = &ShardSpec{Grid: g, Shape: [2]int{shard[0], shard[1]}}
	return []TensorType{t}, nil
}

// checkShardCover checks that the shards of a sharded placement cover the
// tensor's flattened 2-D view (padded to whole tiles in tile layout).
func checkShardCover(kind MemKind, g CoreRange, shard []int, t TensorType) error {
	s := t.Shape
	if t.Layout == TileLayout {
		s = s.Padded()
	}
	rows, cols := s.Rows2D(), s.Cols2D()
	gw, gh := g.X1-g.X0+1, g.Y1-g.Y0+1
	var okRows, okCols bool
	switch kind {
	case L1HeightSharded:
		okRows, okCols = shard[0]*g.NumCores() >= rows, shard[1] >= cols
	case L1WidthSharded, DRAMWidthSharded:
		okRows, okCols = shard[0] >= rows, shard[1]*g.NumCores() >= cols
	case L1BlockSharded:
		okRows, okCols = shard[0]*gh >= rows, shard[1]*gw >= cols
	}
	if !okRows || !okCols {
		return fmt.Errorf("rule to-memory-cover: %s shards %dx%d on grid %s do not cover the %dx%d view of %s", kind, shard[0], shard[1], g, rows, cols, t.Shape)
	}
	return nil
}

// shapeSum: the reduced axis becomes 1.
func shapeSum(in []TensorType, a Attrs) ([]TensorType, error) {
	if !in[0].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: %s is not a float dtype", in[0].DType)
	}
	ax, err := normAxis(a["axis"].(int), in[0].Shape.Rank())
	if err != nil {
		return nil, err
	}
	s := in[0].Shape.Clone()
	s[ax] = 1
	return []TensorType{reshaped(in[0], s, in[0].DType)}, nil
}

// shapeBMM: [.., M, K] x [.., K, N] -> [.., M, N] with equal leading dims.
func shapeBMM(in []TensorType, a Attrs) ([]TensorType, error) {
	x, y := in[0].Shape, in[1].Shape
	if x.Rank() < 2 || x.Rank() != y.Rank() {
		return nil, fmt.Errorf("rule bmm-rank: want operands of equal rank >= 2, got %s and %s", x, y)
	}
	r := x.Rank()
	for d := 0; d < r-2; d++ {
		if x[d] != y[d] {
			return nil, fmt.Errorf("rule bmm-batch: leading dim %d differs (%d vs %d)", d, x[d], y[d])
		}
	}
	if x[r-1] != y[r-2] {
		return nil, fmt.Errorf("rule bmm-inner: a %s has K=%d, b %s has K=%d", x, x[r-1], y, y[r-2])
	}
	if !in[0].DType.IsFloat() || !in[1].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: bmm needs float dtypes, got %s and %s", in[0].DType, in[1].DType)
	}
	s := x.Clone()
	s[r-1] = y[r-1]
	dt := in[0].DType
	if d, ok := a["dtype"].(DType); ok {
		dt = d
	}
	return []TensorType{reshaped(in[0], s, dt)}, nil
}

// shapeBMMTransposeB: shapeBMM of a and b with b's last two dims swapped.
func shapeBMMTransposeB(in []TensorType, a Attrs) ([]TensorType, error) {
	bt := in[1]
	if r := bt.Shape.Rank(); r >= 2 {
		bt.Shape = bt.Shape.Clone()
		bt.Shape[r-2], bt.Shape[r-1] = bt.Shape[r-1], bt.Shape[r-2]
	}
	return shapeBMM([]TensorType{in[0], bt}, a)
}

// shapeBMMTransposeBMul: typed as bmm_transpose_b(a, b); c must have the
// product's shape and dtype.
func shapeBMMTransposeBMul(in []TensorType, a Attrs) ([]TensorType, error) {
	mm, err := shapeBMMTransposeB(in[:2], a)
	if err != nil {
		return nil, err
	}
	if err := sameShapeDType("bmm-mul-operand", "bmm_transpose_b(a, b)", "c", mm[0], in[2]); err != nil {
		return nil, err
	}
	return mm, nil
}

// shapeBMMScaleB: typed as bmm(a, b); c must be b's shape with a last dim
// of 1 and b's dtype.
func shapeBMMScaleB(in []TensorType, a Attrs) ([]TensorType, error) {
	b, c := in[1], in[2]
	want := b.Shape.Clone()
	if r := want.Rank(); r > 0 {
		want[r-1] = 1
	}
	if !c.Shape.Equal(want) || c.DType != b.DType {
		return nil, fmt.Errorf("rule bmm-scale-operand: c %s %s must be b's shape with a last dim of 1 (%s) and b's dtype %s", c.Shape, c.DType, want, b.DType)
	}
	return shapeBMM(in[:2], a)
}

// shapeUnaryMul: x and y of one shape, float dtypes; out typed as x.
func shapeUnaryMul(in []TensorType, _ Attrs) ([]TensorType, error) {
	x, y := in[0], in[1]
	if !x.DType.IsFloat() || !y.DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: unary_mul of %s and %s", x.DType, y.DType)
	}
	if !x.Shape.Equal(y.Shape) {
		return nil, fmt.Errorf("rule unary-mul-shape: x %s and y %s must have one shape", x.Shape, y.Shape)
	}
	return []TensorType{like(x, x.Shape.Clone(), x.DType)}, nil
}

// shapeRotary: out like x; cos and sin have x's (even) last dim and
// broadcast to x.
func shapeRotary(in []TensorType, _ Attrs) ([]TensorType, error) {
	x := in[0].Shape
	if x.Rank() == 0 || x[x.Rank()-1]%2 != 0 {
		return nil, fmt.Errorf("rule rotary-even: x %s needs an even last dim", x)
	}
	for i, name := range []string{"cos", "sin"} {
		t := in[1+i]
		if !t.DType.IsFloat() {
			return nil, fmt.Errorf("rule float-operand: %s is %s", name, t.DType)
		}
		if t.Shape.Rank() == 0 || t.Shape[t.Shape.Rank()-1] != x[x.Rank()-1] {
			return nil, fmt.Errorf("rule rotary-table: %s %s must have last dim %d", name, t.Shape, x[x.Rank()-1])
		}
		b, err := broadcastShapes(x, t.Shape)
		if err != nil {
			return nil, err
		}
		if !b.Equal(x) {
			return nil, fmt.Errorf("rule rotary-broadcast: %s %s must broadcast to x %s, not widen it", name, t.Shape, x)
		}
	}
	return shapeSame(in[:1], nil)
}

// checkPos checks a prefill position operand: [1] uint32.
func checkPos(t TensorType) error {
	if t.DType != UInt32 || !t.Shape.Equal(Shape{1}) {
		return fmt.Errorf("rule decode-pos: pos must be [1] uint32, got %s %s", t.Shape, t.DType)
	}
	return nil
}

// checkDecodePos checks a decode position operand of a batch of B users:
// [1] uint32 (every user at one position) or [B] uint32 (a position per
// user).
func checkDecodePos(t TensorType, B int) error {
	if t.DType != UInt32 || (!t.Shape.Equal(Shape{1}) && !t.Shape.Equal(Shape{B})) {
		return fmt.Errorf("rule decode-pos: pos must be [1] or [%d] (one position per user) uint32, got %s %s", B, t.Shape, t.DType)
	}
	return nil
}

// checkCacheDType: new is in the cache's dtype, or the cache is bfp8_b and
// new a float (its rows are rounded into the cache's block floats).
func checkCacheDType(cache, nw TensorType) error {
	if cache.DType != nw.DType && (cache.DType != BFP8B || !nw.DType.IsFloat()) {
		return fmt.Errorf("rule cache-dtype: cache is %s, new is %s (want the cache's dtype, or a float into a bfp8_b cache)", cache.DType, nw.DType)
	}
	return nil
}

// shapeUpdateCache: out like cache [B, Hc, L, D]; new is [B, Hn >= Hc, D].
func shapeUpdateCache(in []TensorType, _ Attrs) ([]TensorType, error) {
	c, n := in[0].Shape, in[1].Shape
	if c.Rank() != 4 || n.Rank() != 3 {
		return nil, fmt.Errorf("rule cache-rank: want cache [B,H,L,D] and new [B,H,D], got %s and %s", c, n)
	}
	if n[0] != c[0] || n[1] < c[1] || n[2] != c[3] {
		return nil, fmt.Errorf("rule cache-shape: new %s does not fit cache %s (want [%d, >=%d, %d])", n, c, c[0], c[1], c[3])
	}
	if err := checkCacheDType(in[0], in[1]); err != nil {
		return nil, err
	}
	if err := checkDecodePos(in[2], c[0]); err != nil {
		return nil, err
	}
	return []TensorType{like(in[0], c.Clone(), in[0].DType)}, nil
}

// shapeSDPADecode: out like q [B, Hq, D]; k, v [B, Hkv, L, D], Hkv divides Hq.
func shapeSDPADecode(in []TensorType, _ Attrs) ([]TensorType, error) {
	q, k, v := in[0].Shape, in[1].Shape, in[2].Shape
	if q.Rank() != 3 || k.Rank() != 4 || !k.Equal(v) {
		return nil, fmt.Errorf("rule sdpa-rank: want q [B,Hq,D] and k, v [B,Hkv,L,D] equal, got %s, %s, %s", q, k, v)
	}
	if q[0] != k[0] || q[2] != k[3] || q[1]%k[1] != 0 {
		return nil, fmt.Errorf("rule sdpa-shape: q %s and cache %s disagree (batch, head dim, or q heads not a multiple of kv heads)", q, k)
	}
	if !in[0].DType.IsFloat() || !in[1].DType.IsFloat() || !in[2].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: sdpa needs float q, k, v")
	}
	if err := checkDecodePos(in[3], q[0]); err != nil {
		return nil, err
	}
	return []TensorType{like(in[0], q.Clone(), in[0].DType)}, nil
}

func checkDevices(a Attrs) (int, error) {
	n := a["devices"].(int)
	if n < 1 {
		return 0, fmt.Errorf("rule collective-devices: devices %d must be >= 1", n)
	}
	return n, nil
}

// shapeAllReduce: same shape, replicated.
func shapeAllReduce(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := checkDevices(a); err != nil {
		return nil, err
	}
	if !in[0].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: %s is not a float dtype", in[0].DType)
	}
	t := like(in[0], in[0].Shape.Clone(), in[0].DType)
	t.Dist = Replicated
	return []TensorType{t}, nil
}

// shapeReduceScatter: the axis shrinks devices times; split on it.
func shapeReduceScatter(in []TensorType, a Attrs) ([]TensorType, error) {
	n, err := checkDevices(a)
	if err != nil {
		return nil, err
	}
	if !in[0].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: %s is not a float dtype", in[0].DType)
	}
	ax, err := normAxis(a["axis"].(int), in[0].Shape.Rank())
	if err != nil {
		return nil, err
	}
	s := in[0].Shape.Clone()
	if s[ax]%n != 0 {
		return nil, fmt.Errorf("rule reduce-scatter-split: dim %d (%d) is not divisible by %d devices", ax, s[ax], n)
	}
	s[ax] /= n
	t := reshaped(in[0], s, in[0].DType)
	t.Dist = Dist{Axis: ax}
	return []TensorType{t}, nil
}

// shapeAllGather: the axis grows devices times; replicated.
func shapeAllGather(in []TensorType, a Attrs) ([]TensorType, error) {
	n, err := checkDevices(a)
	if err != nil {
		return nil, err
	}
	ax, err := normAxis(a["axis"].(int), in[0].Shape.Rank())
	if err != nil {
		return nil, err
	}
	s := in[0].Shape.Clone()
	s[ax] *= n
	t := reshaped(in[0], s, in[0].DType)
	t.Dist = Replicated
	return []TensorType{t}, nil
}

// shapeSumLike: same shape as x (float), after checking the axis.
func shapeSumLike(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := normAxis(a["axis"].(int), in[0].Shape.Rank()); err != nil {
		return nil, err
	}
	return shapeSame(in, a)
}

// shapeTrailingMatrix: same shape as x (float, rank >= 2).
func shapeTrailingMatrix(in []TensorType, a Attrs) ([]TensorType, error) {
	if in[0].Shape.Rank() < 2 {
		return nil, fmt.Errorf("rule matrix-rank: x %s needs rank >= 2", in[0].Shape)
	}
	return shapeSame(in, a)
}

// shapeSquareMatrix: same shape as x, whose last two dims are equal.
func shapeSquareMatrix(in []TensorType, a Attrs) ([]TensorType, error) {
	s := in[0].Shape
	if s.Rank() < 2 || s[s.Rank()-1] != s[s.Rank()-2] {
		return nil, fmt.Errorf("rule square-matrix: x %s needs square trailing matrices", s)
	}
	return shapeSame(in, a)
}

// shapeConvDepthwise: x [.., T, C] and w [K, C] -> [.., T-K+1, C].
func shapeConvDepthwise(in []TensorType, _ Attrs) ([]TensorType, error) {
	x, w := in[0].Shape, in[1].Shape
	if x.Rank() < 2 || w.Rank() != 2 || w[1] != x[x.Rank()-1] || w[0] > x[x.Rank()-2] {
		return nil, fmt.Errorf("rule conv-shape: want x [.., T, C] and w [K, C] with K <= T, got %s and %s", x, w)
	}
	if !in[0].DType.IsFloat() || !in[1].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: conv needs float dtypes, got %s and %s", in[0].DType, in[1].DType)
	}
	s := x.Clone()
	s[s.Rank()-2] -= w[0] - 1
	return []TensorType{reshaped(in[0], s, in[0].DType)}, nil
}

// shapeFillCache: out like cache [B, H, L, D]; new is [B, H, S <= L, D].
func shapeFillCache(in []TensorType, _ Attrs) ([]TensorType, error) {
	c, n := in[0].Shape, in[1].Shape
	if c.Rank() != 4 || n.Rank() != 4 || n[0] != c[0] || n[1] != c[1] || n[2] > c[2] || n[3] != c[3] {
		return nil, fmt.Errorf("rule cache-shape: new %s does not fit cache %s (want [%d, %d, <=%d, %d])", n, c, c[0], c[1], c[2], c[3])
	}
	if err := checkCacheDType(in[0], in[1]); err != nil {
		return nil, err
	}
	if err := checkPos(in[2]); err != nil {
		return nil, err
	}
	return []TensorType{like(in[0], c.Clone(), in[0].DType)}, nil
}

// shapeSDPAPrefill: out like q [B, Hq, S, D]; k, v [B, Hkv, L >= S, D].
func shapeSDPAPrefill(in []TensorType, _ Attrs) ([]TensorType, error) {
	q, k, v := in[0].Shape, in[1].Shape, in[2].Shape
	if q.Rank() != 4 || k.Rank() != 4 || !k.Equal(v) {
		return nil, fmt.Errorf("rule sdpa-rank: want q [B,Hq,S,D] and k, v [B,Hkv,L,D] equal, got %s, %s, %s", q, k, v)
	}
	if q[0] != k[0] || q[3] != k[3] || q[1]%k[1] != 0 || q[2] > k[2] {
		return nil, fmt.Errorf("rule sdpa-shape: q %s and cache %s disagree (batch, head dim, q heads not a multiple of kv heads, or S > L)", q, k)
	}
	if !in[0].DType.IsFloat() || !in[1].DType.IsFloat() || !in[2].DType.IsFloat() {
		return nil, fmt.Errorf("rule float-operand: sdpa needs float q, k, v")
	}
	if err := checkPos(in[3]); err != nil {
		return nil, err
	}
	return []TensorType{like(in[0], q.Clone(), in[0].DType)}, nil
}
