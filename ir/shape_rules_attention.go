package ir

import "fmt"

// Shape rules of the attention family's fused ops (fusedAttentionOps in
// ir/opspec/fused.go). Per-head results follow the model rules: a result
// whose shape differs from the operand it is derived from is placed
// interleaved in the same memory when that operand is sharded (reshaped),
// and a split operand gives a result split on its head axis.

// headsDist is the distribution of a per-head result derived from x: split
// on axis when x is split over the mesh, else replicated.
func headsDist(x TensorType, axis int) Dist {
	if x.Dist.IsReplicated() {
		return Replicated
	}
	return Dist{Axis: axis}
}

// shapeAttnPrologue: qg [B,1,H*2D], k and v [B,1,Hkv*D] of qg's float
// dtype, q_norm and k_norm with D elements, cos and sin [B,R] (R even,
// 2 <= R <= D), k_cache and v_cache [B,Hkv,L,D] of k's dtype or both
// bfp8_b (checkCacheDTypes), pos [1] or [B] uint32 -> q and gate [B,H,D] in qg's
// dtype, then the two caches' types.
func shapeAttnPrologue(in []TensorType, _ Attrs) ([]TensorType, error) {
	qg, k, v, qw, kw, cos, sin, kc, vc, pos := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9]
	D := qw.Shape.Numel()
	if D < 2 || kw.Shape.Numel() != D {
		return nil, fmt.Errorf("rule prologue-norms: q_norm %s and k_norm %s must both hold the head dim D >= 2 elements", qw.Shape, kw.Shape)
	}
	if !qg.DType.IsFloat() || k.DType != qg.DType || v.DType != qg.DType {
		return nil, fmt.Errorf("rule prologue-dtype: qg, k and v must share one float dtype, got %s, %s, %s", qg.DType, k.DType, v.DType)
	}
	s := qg.Shape
	if s.Rank() != 3 || s[1] != 1 || s[2]%(2*D) != 0 {
		return nil, fmt.Errorf("rule prologue-qg: qg %s must be [B,1,H*2*%d] (per head %d query then %d gate columns)", s, D, D, D)
	}
	B, H := s[0], s[2]/(2*D)
	if k.Shape.Rank() != 3 || !k.Shape.Equal(v.Shape) || k.Shape[0] != B || k.Shape[1] != 1 || k.Shape[2]%D != 0 {
		return nil, fmt.Errorf("rule prologue-kv: k %s and v %s must both be [%d,1,Hkv*%d]", k.Shape, v.Shape, B, D)
	}
	Hkv := k.Shape[2] / D
	for i, t := range []TensorType{cos, sin} {
		name := [2]string{"cos", "sin"}[i]
		if !t.DType.IsFloat() || t.Shape.Rank() != 2 || t.Shape[0] != B || t.Shape[1]%2 != 0 || t.Shape[1] < 2 || t.Shape[1] > D {
			return nil, fmt.Errorf("rule prologue-rope: %s %s %s must be float [%d,R] with R even in 2..%d", name, t.Shape, t.DType, B, D)
		}
	}
	if !cos.Shape.Equal(sin.Shape) {
		return nil, fmt.Errorf("rule prologue-rope: cos %s and sin %s differ", cos.Shape, sin.Shape)
	}
	c := kc.Shape
	if c.Rank() != 4 || !c.Equal(vc.Shape) || c[0] != B || c[1] != Hkv || c[3] != D {
		return nil, fmt.Errorf("rule prologue-cache: k_cache %s and v_cache %s must both be [%d,%d,L,%d]", c, vc.Shape, B, Hkv, D)
	}
	if err := checkCacheDTypes(k, kc, vc); err != nil {
		return nil, err
	}
	if err := checkDecodePos(pos, B); err != nil {
		return nil, err
	}
	q := reshaped(qg, Shape{B, H, D}, qg.DType)
	q.Dist = headsDist(qg, 1)
	return []TensorType{q, q, like(kc, c.Clone(), kc.DType), like(vc, c.Clone(), vc.DType)}, nil
}

// shapeSDPADecodeGated: q [B,H,D], k and v [B,Hkv,L,D] (as sdpa_decode),
// gate like q -> [B,1,H*D] in q's dtype.
func shapeSDPADecodeGated(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := shapeSDPADecode(in[:4], a); err != nil {
		return nil, err
	}
	q, gate := in[0], in[4]
	if !gate.Shape.Equal(q.Shape) || gate.DType != q.DType {
		return nil, fmt.Errorf("rule sdpa-gate: gate %s %s must have q's shape and dtype %s %s", gate.Shape, gate.DType, q.Shape, q.DType)
	}
	s := q.Shape
	t := reshaped(q, Shape{s[0], 1, s[1] * s[2]}, q.DType)
	t.Dist = headsDist(q, 2)
	return []TensorType{t}, nil
}

// shapeAttnProloguePrefill: qg [B,S,H*2D], k and v [B,S,Hkv*D] of qg's
// float dtype, q_norm and k_norm with D elements, cos and sin [S,1,R] (R
// even, 2 <= R <= D), k_cache and v_cache [B,Hkv,L >= S,D] of k's dtype
// or both bfp8_b, pos [1] uint32 -> q [B,H,S,D] and gate [B,S,H,D] in qg's dtype, then
// the two caches' types.
func shapeAttnProloguePrefill(in []TensorType, _ Attrs) ([]TensorType, error) {
	qg, k, v, qw, kw, cos, sin, kc, vc, pos := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9]
	D := qw.Shape.Numel()
	if D < 2 || kw.Shape.Numel() != D {
		return nil, fmt.Errorf("rule prologue-norms: q_norm %s and k_norm %s must both hold the head dim D >= 2 elements", qw.Shape, kw.Shape)
	}
	if !qg.DType.IsFloat() || k.DType != qg.DType || v.DType != qg.DType {
		return nil, fmt.Errorf("rule prologue-dtype: qg, k and v must share one float dtype, got %s, %s, %s", qg.DType, k.DType, v.DType)
	}
	s := qg.Shape
	if s.Rank() != 3 || s[2]%(2*D) != 0 {
		return nil, fmt.Errorf("rule prologue-qg: qg %s must be [B,S,H*2*%d] (per head %d query then %d gate columns)", s, D, D, D)
	}
	B, S, H := s[0], s[1], s[2]/(2*D)
	if k.Shape.Rank() != 3 || !k.Shape.Equal(v.Shape) || k.Shape[0] != B || k.Shape[1] != S || k.Shape[2]%D != 0 {
		return nil, fmt.Errorf("rule prologue-kv: k %s and v %s must both be [%d,%d,Hkv*%d]", k.Shape, v.Shape, B, S, D)
	}
	Hkv := k.Shape[2] / D
	for i, t := range []TensorType{cos, sin} {
		name := [2]string{"cos", "sin"}[i]
		if !t.DType.IsFloat() || t.Shape.Rank() != 3 || t.Shape[0] != S || t.Shape[1] != 1 || t.Shape[2]%2 != 0 || t.Shape[2] < 2 || t.Shape[2] > D {
			return nil, fmt.Errorf("rule prologue-rope: %s %s %s must be float [%d,1,R] with R even in 2..%d", name, t.Shape, t.DType, S, D)
		}
	}
	if !cos.Shape.Equal(sin.Shape) {
		return nil, fmt.Errorf("rule prologue-rope: cos %s and sin %s differ", cos.Shape, sin.Shape)
	}
	c := kc.Shape
	if c.Rank() != 4 || !c.Equal(vc.Shape) || c[0] != B || c[1] != Hkv || c[2] < S || c[3] != D {
		return nil, fmt.Errorf("rule prologue-cache: k_cache %s and v_cache %s must both be [%d,%d,L>=%d,%d]", c, vc.Shape, B, Hkv, S, D)
	}
	if err := checkCacheDTypes(k, kc, vc); err != nil {
		return nil, err
	}
	if err := checkPos(pos); err != nil {
		return nil, err
	}
	q := reshaped(qg, Shape{B, H, S, D}, qg.DType)
	q.Dist = headsDist(qg, 1)
	gate := reshaped(qg, Shape{B, S, H, D}, qg.DType)
	gate.Dist = headsDist(qg, 2)
	return []TensorType{q, gate, like(kc, c.Clone(), kc.DType), like(vc, c.Clone(), vc.DType)}, nil
}

// shapeSDPAPrefillGated: q [B,H,S,D], k and v [B,Hkv,L,D] (as
// sdpa_prefill), gate [B,S,H,D] of q's dtype -> [B,S,H*D] in q's dtype.
func shapeSDPAPrefillGated(in []TensorType, a Attrs) ([]TensorType, error) {
	if _, err := shapeSDPAPrefill(in[:4], a); err != nil {
		return nil, err
	}
	q, gate := in[0], in[4]
	s := q.Shape
	if !gate.Shape.Equal(Shape{s[0], s[2], s[1], s[3]}) || gate.DType != q.DType {
		return nil, fmt.Errorf("rule sdpa-gate: gate %s %s must be [%d,%d,%d,%d] %s (q %s with heads and tokens swapped)", gate.Shape, gate.DType, s[0], s[2], s[1], s[3], q.DType, s)
	}
	t := reshaped(q, Shape{s[0], s[2], s[1] * s[3]}, q.DType)
	t.Dist = headsDist(q, 2)
	return []TensorType{t}, nil
}

// checkCacheDTypes: the two caches share one dtype, k's or bfp8_b (a KV
// cache stored as block floats: the new rows are rounded into it).
func checkCacheDTypes(k, kc, vc TensorType) error {
	if kc.DType != vc.DType || (kc.DType != k.DType && kc.DType != BFP8B) {
		return fmt.Errorf("rule prologue-cache: caches %s and %s must both hold k's dtype %s or both bfp8_b", kc.DType, vc.DType, k.DType)
	}
	return nil
}
