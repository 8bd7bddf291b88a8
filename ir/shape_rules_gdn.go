package ir

import "fmt"

// Shape rules of the fused Gated DeltaNet ops (the fusedGDNOps list of
// ir/opspec/fused.go), produced by passes/fuse_gdn.go. Shapes are per
// device: B users, C = 2*Hk*Dk + H*Dv conv channels (q|k|v), H value
// heads, Hk key heads (H a multiple of Hk), K conv taps.

// gdnFloat reports the first operand whose dtype is not a float dtype.
func gdnFloat(rule string, names []string, in []TensorType) error {
	for i, t := range in {
		if !t.DType.IsFloat() {
			return fmt.Errorf("rule %s-dtype: %s is %s, want a float dtype", rule, names[i], t.DType)
		}
	}
	return nil
}

// gdnRows is a [B*H, 1] gate column cut from v ([B, 1, H]): split on the
// row axis when v is split (the head axis folds into the rows).
func gdnRows(v TensorType, rows int) TensorType {
	t := reshaped(v, Shape{rows, 1}, v.DType)
	if !t.Dist.IsReplicated() {
		t.Dist = Dist{Axis: 0}
	}
	return t
}

// shapeGDNConvGates: conv_state [B, K-1, C], qkv [B, 1, C], taps [K, C],
// a and b [B, 1, H], a_log and dt_bias with H elements; results conv
// [B, 1, C] (qkv's type), new_state (conv_state's type), beta [B*H, 1]
// (b's dtype) and g [B*H, 1] (a's dtype).
func shapeGDNConvGates(in []TensorType, _ Attrs) ([]TensorType, error) {
	names := []string{"conv_state", "qkv", "taps", "a", "b", "a_log", "dt_bias"}
	if err := gdnFloat("gdn-conv", names, in); err != nil {
		return nil, err
	}
	st, x, w, a, b, al, dt := in[0].Shape, in[1].Shape, in[2].Shape, in[3].Shape, in[4].Shape, in[5].Shape, in[6].Shape
	if x.Rank() != 3 || x[1] != 1 {
		return nil, fmt.Errorf("rule gdn-conv-qkv: qkv %s must be [B, 1, C]", x)
	}
	B, C := x[0], x[2]
	if st.Rank() != 3 || st[0] != B || st[2] != C {
		return nil, fmt.Errorf("rule gdn-conv-state: conv_state %s must be [%d, K-1, %d] for qkv %s", st, B, C, x)
	}
	if w.Rank() != 2 || w[0] != st[1]+1 || w[1] != C {
		return nil, fmt.Errorf("rule gdn-conv-taps: taps %s must be [%d, %d] (K = conv_state rows + 1)", w, st[1]+1, C)
	}
	if in[0].DType != in[1].DType {
		return nil, fmt.Errorf("rule gdn-conv-state-dtype: conv_state is %s but qkv is %s", in[0].DType, in[1].DType)
	}
	if a.Rank() != 3 || a[0] != B || a[1] != 1 || !b.Equal(a) {
		return nil, fmt.Errorf("rule gdn-gates: a %s and b %s must both be [%d, 1, H]", a, b, B)
	}
	H := a[2]
	if al.Numel() != H || dt.Numel() != H {
		return nil, fmt.Errorf("rule gdn-gates-vectors: a_log %s and dt_bias %s must have %d elements (value heads)", al, dt, H)
	}
	conv := like(in[1], x.Clone(), in[1].DType)
	state := like(in[0], st.Clone(), in[0].DType)
	return []TensorType{conv, state, gdnRows(in[4], B*H), gdnRows(in[3], B*H)}, nil
}

// shapeGDNRecurrence: qkv [B, 1, C], beta and g [B*H, 1], state
// [B, H, Dk, Dv], z [B, 1, H*Dv], norm_w with Dv elements, where
// C - H*Dv = 2*Hk*Dk and H is a multiple of Hk; results out (z's type)
// and new_state (state's type).
func shapeGDNRecurrence(in []TensorType, _ Attrs) ([]TensorType, error) {
	names := []string{"qkv", "beta", "g", "state", "z", "norm_w"}
	if err := gdnFloat("gdn-recurrence", names, in); err != nil {
		return nil, err
	}
	x, beta, g, s, z, w := in[0].Shape, in[1].Shape, in[2].Shape, in[3].Shape, in[4].Shape, in[5].Shape
	if s.Rank() != 4 {
		return nil, fmt.Errorf("rule gdn-recurrence-state: state %s must be [B, H, Dk, Dv]", s)
	}
	B, H, Dk, Dv := s[0], s[1], s[2], s[3]
	if x.Rank() != 3 || x[0] != B || x[1] != 1 {
		return nil, fmt.Errorf("rule gdn-recurrence-qkv: qkv %s must be [%d, 1, C] for state %s", x, B, s)
	}
	kw2 := x[2] - H*Dv
	if kw2 <= 0 || kw2%(2*Dk) != 0 || H%(kw2/(2*Dk)) != 0 {
		return nil, fmt.Errorf("rule gdn-recurrence-heads: qkv has %d channels; want 2*Hk*%d + %d*%d with %d value heads a multiple of Hk", x[2], Dk, H, Dv, H)
	}
	col := Shape{B * H, 1}
	if !beta.Equal(col) || !g.Equal(col) {
		return nil, fmt.Errorf("rule gdn-recurrence-gates: beta %s and g %s must be %s", beta, g, col)
	}
	if !z.Equal(Shape{B, 1, H * Dv}) {
		return nil, fmt.Errorf("rule gdn-recurrence-z: z %s must be [%d, 1, %d]", z, B, H*Dv)
	}
	if w.Numel() != Dv {
		return nil, fmt.Errorf("rule gdn-recurrence-norm: norm_w %s must have %d elements (value head dim)", w, Dv)
	}
	return []TensorType{like(in[4], z.Clone(), in[4].DType), like(in[3], s.Clone(), in[3].DType)}, nil
}

// shapeGDNChunkStep: u [B, H, N, L, Dv], wk and qg [B, H, N, L, Dk], qk
// [B, H, N, L, L], k [B, H, N, L, Dk], g [B, H, N, L] and state [B, H, 1,
// Dk, Dv], all of one float dtype f, and 0 <= chunk < N; results o [B, H,
// 1, L, Dv] (u's placement) and the new state (state's type).
func shapeGDNChunkStep(in []TensorType, attrs Attrs) ([]TensorType, error) {
	names := []string{"u", "wk", "qg", "qk", "k", "g", "state"}
	if err := gdnFloat("gdn-chunk", names, in); err != nil {
		return nil, err
	}
	f := in[6].DType
	for i, t := range in {
		if t.DType != f {
			return nil, fmt.Errorf("rule gdn-chunk-dtype: %s is %s but state is %s; every operand must have the state's dtype", names[i], t.DType, f)
		}
	}
	s := in[6].Shape
	if s.Rank() != 5 || s[2] != 1 {
		return nil, fmt.Errorf("rule gdn-chunk-state: state %s must be [B, H, 1, Dk, Dv]", s)
	}
	B, H, Dk, Dv := s[0], s[1], s[3], s[4]
	g := in[5].Shape
	if g.Rank() != 4 || g[0] != B || g[1] != H {
		return nil, fmt.Errorf("rule gdn-chunk-g: g %s must be [%d, %d, N, L] for state %s", g, B, H, s)
	}
	N, L := g[2], g[3]
	want := []Shape{{B, H, N, L, Dv}, {B, H, N, L, Dk}, {B, H, N, L, Dk}, {B, H, N, L, L}, {B, H, N, L, Dk}}
	for i, w := range want {
		if !in[i].Shape.Equal(w) {
			return nil, fmt.Errorf("rule gdn-chunk-operand: %s %s must be %s (g %s, state %s)", names[i], in[i].Shape, w, g, s)
		}
	}
	c, ok := attrs["chunk"].(int)
	if !ok || c < 0 || c >= N {
		return nil, fmt.Errorf("rule gdn-chunk-index: chunk %v must be an int in [0, %d) (N chunks)", attrs["chunk"], N)
	}
	return []TensorType{like(in[0], Shape{B, H, 1, L, Dv}, f), like(in[6], s.Clone(), f)}, nil
}

// shapeGDNChunkScan: the operands as shapeGDNChunkStep's (k as its
// repeat with k_group), and chunks first .. first+count-1 within [0, N)
// with count >= 1; results o [B, H,
// count, L, Dv] (u's placement) and the new state (state's type).
func shapeGDNChunkScan(in []TensorType, attrs Attrs) ([]TensorType, error) {
	first, ok1 := attrs["first"].(int)
	count, ok2 := attrs["count"].(int)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rule gdn-chunk-scan-attrs: first %v and count %v must be ints", attrs["first"], attrs["count"])
	}
	kGroup, err := GDNKGroup(attrs)
	if err != nil {
		return nil, err
	}
	if kGroup > 1 && len(in) == 7 { // k per key head: as its repeat (the state has the value heads)
		in = append([]TensorType{}, in...)
		if in[4], err = GDNKGroupType("k", in[4], in[6], kGroup); err != nil {
			return nil, err
		}
	}
	out, err := shapeGDNChunkStep(in, Attrs{"chunk": first})
	if err != nil {
		return nil, err
	}
	N := in[5].Shape[2]
	if count < 1 || first+count > N {
		return nil, fmt.Errorf("rule gdn-chunk-index: chunks %d .. %d must lie in [0, %d) (N chunks)", first, first+count-1, N)
	}
	out[0].Shape[2] = count
	return out, nil
}

// shapeGDNPrefillGates: a and b [B, S, H] (float dtypes), a_log and
// dt_bias with H elements, dtype fp32 (the operands convert to it
// exactly); results g (a's type) and beta (b's type), both of dtype.
func shapeGDNPrefillGates(in []TensorType, attrs Attrs) ([]TensorType, error) {
	names := []string{"a", "b", "a_log", "dt_bias"}
	if err := gdnFloat("gdn-prefill-gates", names, in); err != nil {
		return nil, err
	}
	f, ok := attrs["dtype"].(DType)
	if !ok || f != FP32 {
		return nil, fmt.Errorf("rule gdn-prefill-gates-dtype: dtype must be fp32 (the gates' composed typecasts widen exactly), got %v", attrs["dtype"])
	}
	a, b, al, dt := in[0].Shape, in[1].Shape, in[2].Shape, in[3].Shape
	if a.Rank() != 3 || !b.Equal(a) {
		return nil, fmt.Errorf("rule gdn-prefill-gates-shape: a %s and b %s must both be [B, S, H]", a, b)
	}
	if H := a[2]; al.Numel() != H || dt.Numel() != H {
		return nil, fmt.Errorf("rule gdn-gates-vectors: a_log %s and dt_bias %s must have %d elements (value heads)", al, dt, H)
	}
	return []TensorType{like(in[0], a.Clone(), f), like(in[1], b.Clone(), f)}, nil
}

// shapeGDNChunkWY: kx and k [B, H, N, L, Dk], v [B, H, N, L, Dv], beta
// and eg [B, H, N, L, 1] and gamma [B, H, N, L, L], all of one float
// dtype f; results u (v's type) and wk (k's type).
func shapeGDNChunkWY(in []TensorType, _ Attrs) ([]TensorType, error) {
	names := []string{"kx", "k", "v", "beta", "eg", "gamma"}
	if err := gdnFloat("gdn-chunk-wy", names, in); err != nil {
		return nil, err
	}
	f := in[1].DType
	for i, t := range in {
		if t.DType != f {
			return nil, fmt.Errorf("rule gdn-chunk-wy-dtype: %s is %s but k is %s; every operand must have k's dtype", names[i], t.DType, f)
		}
	}
	k := in[1].Shape
	if k.Rank() != 5 {
		return nil, fmt.Errorf("rule gdn-chunk-wy-shape: k %s must be [B, H, N, L, Dk]", k)
	}
	B, H, N, L, Dk := k[0], k[1], k[2], k[3], k[4]
	v := in[2].Shape
	if v.Rank() != 5 {
		return nil, fmt.Errorf("rule gdn-chunk-wy-shape: v %s must be [%d, %d, %d, %d, Dv]", v, B, H, N, L)
	}
	want := []Shape{{B, H, N, L, Dk}, k, {B, H, N, L, v[4]}, {B, H, N, L, 1}, {B, H, N, L, 1}, {B, H, N, L, L}}
	for i, w := range want {
		if !in[i].Shape.Equal(w) {
			return nil, fmt.Errorf("rule gdn-chunk-wy-operand: %s %s must be %s (k %s, v %s)", names[i], in[i].Shape, w, k, v)
		}
	}
	return []TensorType{like(in[2], v.Clone(), f), like(in[1], Shape{B, H, N, L, Dk}, f)}, nil
}

// GDNChunkPrepExpG reports gdn_chunk_prep's exp_g attribute: true when
// its eg operand is the log decays g whose exp the op computes (attribute
// 1), false when absent or 0; any other value is an error naming the rule.
func GDNChunkPrepExpG(a Attrs) (bool, error) {
	v, ok := a["exp_g"]
	if !ok {
		return false, nil
	}
	n, isInt := v.(int)
	if !isInt || (n != 0 && n != 1) {
		return false, fmt.Errorf("rule gdn-chunk-prep-exp-g: exp_g %v must be 0 or 1", v)
	}
	return n == 1, nil
}

// GDNChunkPrepDecay reports gdn_chunk_prep's decay attribute: true when
// its gamma operand is the log decays' row form [B, H, N, 1, L] from which
// the op computes Γ (attribute 1; exp_g must be 1 too), false when absent
// or 0; any other value is an error naming the rule.
func GDNChunkPrepDecay(a Attrs) (bool, error) {
	v, ok := a["decay"]
	if !ok {
		return false, nil
	}
	n, isInt := v.(int)
	if !isInt || (n != 0 && n != 1) {
		return false, fmt.Errorf("rule gdn-chunk-prep-decay: decay %v must be 0 or 1", v)
	}
	if expG, err := GDNChunkPrepExpG(a); n == 1 && (err != nil || !expG) {
		return false, fmt.Errorf("rule gdn-chunk-prep-decay: decay = 1 needs exp_g = 1 (Γ is computed from g)")
	}
	return n == 1, nil
}

// GDNChunkPrepRows reports gdn_chunk_prep's rows attribute: true when its
// eg operand is g [B, H, N, L] (chunk n's values in row n), from which the
// op takes both the column and the row form, and gamma is g again, not
// read (attribute 1, decay must be 1 too), false when absent or 0; any
// other value is an error naming the rule.
func GDNChunkPrepRows(a Attrs) (bool, error) {
	v, ok := a["rows"]
	if !ok {
		return false, nil
	}
	n, isInt := v.(int)
	if !isInt || (n != 0 && n != 1) {
		return false, fmt.Errorf("rule gdn-chunk-prep-rows: rows %v must be 0 or 1", v)
	}
	if decay, err := GDNChunkPrepDecay(a); n == 1 && (err != nil || !decay) {
		return false, fmt.Errorf("rule gdn-chunk-prep-rows: rows = 1 needs decay = 1 (eg and gamma are both g)")
	}
	return n == 1, nil
}

// GDNChunkPrepBetaSeq reports gdn_chunk_prep's beta_seq attribute: true
// when its beta operand is [B, N*L, H], tokens first as the gates write it
// (attribute 1; rows must be 1 too), false when absent or 0; any other
// value is an error naming the rule.
func GDNChunkPrepBetaSeq(a Attrs) (bool, error) {
	v, ok := a["beta_seq"]
	if !ok {
		return false, nil
	}
	n, isInt := v.(int)
	if !isInt || (n != 0 && n != 1) {
		return false, fmt.Errorf("rule gdn-chunk-prep-beta-seq: beta_seq %v must be 0 or 1", v)
	}
	if rows, err := GDNChunkPrepRows(a); n == 1 && (err != nil || !rows) {
		return false, fmt.Errorf("rule gdn-chunk-prep-beta-seq: beta_seq = 1 needs rows = 1")
	}
	return n == 1, nil
}

// GDNChunkPrepQGroup is gdn_chunk_prep's q_group attribute G: 1 when
// absent (q has k's heads); an error names the rule when it is not a
// positive int.
func GDNChunkPrepQGroup(a Attrs) (int, error) {
	v, ok := a["q_group"]
	if !ok {
		return 1, nil
	}
	n, isInt := v.(int)
	if !isInt || n < 1 {
		return 0, fmt.Errorf("rule gdn-chunk-prep-q-group: q_group %v must be a positive int", v)
	}
	return n, nil
}

// GDNChunkPrepQGroupType is the type gdn_chunk_prep's q operand [B, H/G,
// N, L, Dk] with q_group = G stands for: its repeat by G on axis 1, [B, H,
// N, L, Dk]; an error names the rule when q's heads times G are not k's H
// or its other dims differ from k's.
func GDNChunkPrepQGroupType(q, k TensorType, g int) (TensorType, error) {
	qs, ks := q.Shape, k.Shape
	if qs.Rank() != 5 || ks.Rank() != 5 || qs[1]*g != ks[1] || qs[0] != ks[0] || qs[2] != ks[2] || qs[3] != ks[3] || qs[4] != ks[4] {
		return TensorType{}, fmt.Errorf("rule gdn-chunk-prep-q-group: q %s must be [B, H/%d, N, L, Dk] (k %s)", qs, g, ks)
	}
	return like(q, Shape{qs[0], ks[1], qs[2], qs[3], qs[4]}, q.DType), nil
}

// GDNKGroup is gdn_chunk_prep's and gdn_chunk_scan's k_group attribute
// G: 1 when absent (k has the value heads); an error names the rule when
// it is not a positive int.
func GDNKGroup(a Attrs) (int, error) {
	v, ok := a["k_group"]
	if !ok {
		return 1, nil
	}
	n, isInt := v.(int)
	if !isInt || n < 1 {
		return 0, fmt.Errorf("rule gdn-k-group: k_group %v must be a positive int", v)
	}
	return n, nil
}

// GDNKGroupType is the type an operand x [B, H/G, N, L, D] given per key
// head (k_group = G) stands for: its repeat by G on axis 1, [B, H, N, L,
// D], with H the value heads of ref ([B, H, N, ...]: v, or the state); an
// error names the rule and operand when x's heads times G are not H or
// its batch differs from ref's.
func GDNKGroupType(name string, x, ref TensorType, g int) (TensorType, error) {
	xs, rs := x.Shape, ref.Shape
	if xs.Rank() != 5 || rs.Rank() < 2 || xs[1]*g != rs[1] || xs[0] != rs[0] {
		return TensorType{}, fmt.Errorf("rule gdn-k-group: %s %s must be [B, H/%d, N, L, Dk] for %d value heads (%s)", name, xs, g, rs[1], rs)
	}
	return like(x, Shape{xs[0], rs[1], xs[2], xs[3], xs[4]}, x.DType), nil
}

// GDNChunkPrepBetaSeqType is the type gdn_chunk_prep's beta operand with
// beta_seq = 1 stands for: the column form [B, H, N, L, 1] of beta [B,
// N*L, H] (k's dtype); an error names the rule when beta does not fit k
// [B, H, N, L, Dk].
func GDNChunkPrepBetaSeqType(beta, k TensorType) (TensorType, error) {
	s := k.Shape
	if s.Rank() != 5 || !beta.Shape.Equal(Shape{s[0], s[2] * s[3], s[1]}) || beta.DType != k.DType {
		return TensorType{}, fmt.Errorf("rule gdn-chunk-prep-beta-seq: beta %s %s must be [B, N*L, H] of k's dtype (k %s %s)", beta.Shape, beta.DType, s, k.DType)
	}
	return like(beta, Shape{s[0], s[1], s[2], s[3], 1}, k.DType), nil
}

// GDNChunkPrepRowTypes is the operand types gdn_chunk_prep with rows = 1
// stands for: eg as the column form [B, H, N, L, 1] and gamma as the row
// form [B, H, N, 1, L] of its [B, H, N, L] operands (k's dtype), the
// other operands unchanged; an error names the operand whose shape or
// dtype does not fit k [B, H, N, L, Dk].
func GDNChunkPrepRowTypes(in []TensorType) ([]TensorType, error) {
	if len(in) != 7 {
		return nil, fmt.Errorf("rule gdn-chunk-prep-arity: want 7 operands, have %d", len(in))
	}
	k := in[1]
	if k.Shape.Rank() != 5 {
		return nil, fmt.Errorf("rule gdn-chunk-prep-rows: k %s must be [B, H, N, L, Dk]", k.Shape)
	}
	s := k.Shape
	rowShape := Shape{s[0], s[1], s[2], s[3]}
	out := append([]TensorType{}, in...)
	for i, name := range []string{4: "eg", 5: "gamma"} {
		if i < 4 {
			continue
		}
		if !in[i].Shape.Equal(rowShape) || in[i].DType != k.DType {
			return nil, fmt.Errorf("rule gdn-chunk-prep-rows: %s %s %s must be [B, H, N, L] = %s of dtype %s (k %s)", name, in[i].Shape, in[i].DType, rowShape, k.DType, s)
		}
	}
	out[4] = like(in[4], Shape{s[0], s[1], s[2], s[3], 1}, k.DType)
	out[5] = like(in[5], Shape{s[0], s[1], s[2], 1, s[3]}, k.DType)
	return out, nil
}

// shapeGDNChunkPrep: the operands of shapeGDNChunkWY and q (k's type),
// kx and k taken as their repeats with k_group and q as its with q_group;
// results u and wk (as shapeGDNChunkWY's), qg (k's type) and qk [B, H, N,
// L, L] (k's placement).
func shapeGDNChunkPrep(in []TensorType, a Attrs) ([]TensorType, error) {
	if len(in) != 7 {
		return nil, fmt.Errorf("rule gdn-chunk-prep-arity: want 7 operands, have %d", len(in))
	}
	kGroup, err := GDNKGroup(a)
	if err != nil {
		return nil, err
	}
	if kGroup > 1 { // kx and k per key head: as their repeats (v has the value heads)
		in = append([]TensorType{}, in...)
		for i, name := range []string{"kx", "k"} {
			if in[i], err = GDNKGroupType(name, in[i], in[2], kGroup); err != nil {
				return nil, err
			}
		}
	}
	decay, err := GDNChunkPrepDecay(a)
	if err != nil {
		return nil, err
	}
	if _, err := GDNChunkPrepExpG(a); err != nil {
		return nil, err
	}
	rows, err := GDNChunkPrepRows(a)
	if err != nil {
		return nil, err
	}
	if rows {
		if in, err = GDNChunkPrepRowTypes(in); err != nil {
			return nil, err
		}
	}
	betaSeq, err := GDNChunkPrepBetaSeq(a)
	if err != nil {
		return nil, err
	}
	if betaSeq {
		if in[3], err = GDNChunkPrepBetaSeqType(in[3], in[1]); err != nil {
			return nil, err
		}
	}
	qGroup, err := GDNChunkPrepQGroup(a)
	if err != nil {
		return nil, err
	}
	if qGroup > 1 {
		in = append([]TensorType{}, in...)
		if in[6], err = GDNChunkPrepQGroupType(in[6], in[1], qGroup); err != nil {
			return nil, err
		}
	}
	wy := in[:6]
	if decay { // gamma is g's row form: check it, then as the [.., L, L] Γ
		k, gr := in[1].Shape, in[5]
		if k.Rank() != 5 || !gr.Shape.Equal(Shape{k[0], k[1], k[2], 1, k[3]}) || gr.DType != in[1].DType {
			return nil, fmt.Errorf("rule gdn-chunk-prep-decay: decay's g row %s %s must be [B, H, N, 1, L] of k's dtype (k %s %s)", gr.Shape, gr.DType, k, in[1].DType)
		}
		wy = append(append([]TensorType{}, in[:5]...), like(gr, Shape{k[0], k[1], k[2], k[3], k[3]}, gr.DType))
	}
	out, err := shapeGDNChunkWY(wy, a)
	if err != nil {
		return nil, err
	}
	k, q := in[1], in[6]
	if !q.Shape.Equal(k.Shape) || q.DType != k.DType {
		return nil, fmt.Errorf("rule gdn-chunk-prep-operand: q %s %s must be k's shape and dtype %s %s", q.Shape, q.DType, k.Shape, k.DType)
	}
	s := k.Shape
	return append(out, like(q, s.Clone(), q.DType), like(k, Shape{s[0], s[1], s[2], s[3], s[3]}, k.DType)), nil
}
