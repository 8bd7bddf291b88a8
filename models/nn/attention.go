package nn

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// AttnDims are one gated full-attention mixer's sizes on one device.
type AttnDims struct {
	Batch     int // users, one new token each (decode)
	Hidden    int // model width
	Heads     int // q (and gate) heads on this device
	KVHeads   int // kv heads on this device (a divisor of Heads)
	HeadDim   int // D
	RotaryDim int // leading head dims RoPE rotates (even, <= D)
	MaxSeq    int // KV cache length L
	Eps       float64
}

// Check reports sizes the mixer cannot be built with.
func (d AttnDims) Check() error {
	switch {
	case d.Batch < 1 || d.Hidden < 1 || d.Heads < 1 || d.KVHeads < 1 || d.HeadDim < 1 || d.MaxSeq < 1:
		return fmt.Errorf("attention: sizes must be positive: %+v", d)
	case d.Heads%d.KVHeads != 0:
		return fmt.Errorf("attention: %d q heads per device are not a multiple of %d kv heads", d.Heads, d.KVHeads)
	case d.RotaryDim < 2 || d.RotaryDim%2 != 0 || d.RotaryDim > d.HeadDim:
		return fmt.Errorf("attention: rotary dim %d must be even and in 2..%d", d.RotaryDim, d.HeadDim)
	}
	return nil
}

// AttnWeights are one attention mixer's parameters on one device.
type AttnWeights struct {
	// Q is q_proj [hidden, heads*2*D]: per head D query then D gate columns
	// (the HF layout), column parallel.
	Q     *ir.Value
	K, V  *ir.Value // [hidden, kv heads*D], column parallel
	O     *ir.Value // [heads*D, hidden], row parallel
	QNorm *ir.Value // [D], (1 + w), replicated
	KNorm *ir.Value // [D], (1 + w), replicated
}

// DeclareAttention declares the six weights of prefix+"self_attn." with
// their HF names: projections bfp8_b transposed to [in, out], norms bf16.
// Device shares: q_proj and o_proj this device's q heads; k_proj and
// v_proj its kv heads (on meshes with more devices than kv heads, the one
// kv head its q heads use).
func DeclareAttention(b *ir.Builder, prefix string, d AttnDims, tp TP) AttnWeights {
	p := prefix + "self_attn."
	mat := func(name string, rows, cols, axis int) *ir.Value {
		t := ir.T(ir.BFP8B, rows, cols)
		t.Dist = tp.Split(axis)
		return b.Weight(p+name, t)
	}
	norm := func(name string) *ir.Value { return b.Weight(p+name, ir.T(ir.BF16, d.HeadDim)) }
	return AttnWeights{
		Q:     mat("q_proj.weight", d.Hidden, 2*d.Heads*d.HeadDim, 1),
		K:     mat("k_proj.weight", d.Hidden, d.KVHeads*d.HeadDim, 1),
		V:     mat("v_proj.weight", d.Hidden, d.KVHeads*d.HeadDim, 1),
		O:     mat("o_proj.weight", d.Heads*d.HeadDim, d.Hidden, 0),
		QNorm: norm("q_norm.weight"),
		KNorm: norm("k_norm.weight"),
	}
}

// KVCache is one attention layer's cache on one device: K and V are
// [B, kv heads, MaxSeq, D] state, bf16 or bfp8_b.
type KVCache struct{ K, V *ir.Value }

// DeclareKVCache declares name+".k_cache" and name+".v_cache", bf16.
func DeclareKVCache(b *ir.Builder, name string, d AttnDims, tp TP) KVCache {
	return DeclareKVCacheOf(b, name, d, tp, ir.BF16)
}

// DeclareKVCacheOf is DeclareKVCache with caches of dtype dt (bf16 or
// bfp8_b: the new rows are rounded into the cache, one shared exponent
// per 16 values of a row).
func DeclareKVCacheOf(b *ir.Builder, name string, d AttnDims, tp TP, dt ir.DType) KVCache {
	t := ir.T(dt, d.Batch, d.KVHeads, d.MaxSeq, d.HeadDim)
	t.Dist = tp.Split(1)
	return KVCache{K: b.State(name+".k_cache", t), V: b.State(name+".v_cache", t)}
}

// Rope holds the decode step's position inputs, shared by all attention
// layers: Pos is [B] uint32 (Pos[b] the position of user b's new token;
// users may be at different positions); Cos and Sin are [B, RotaryDim]
// bf16 with, for user b and i < RotaryDim,
// Cos[b, i] = cos(Pos[b] * theta^(-2*(i mod R/2)/R)) (and Sin likewise):
// the rotate-half tables of HF's default RoPE.
type Rope struct{ Pos, Cos, Sin *ir.Value }

// DeclareRope declares the inputs "pos", "rope.cos" and "rope.sin".
func DeclareRope(b *ir.Builder, batch, rotaryDim int) Rope {
	pos := ir.TensorType{Shape: ir.Shape{batch}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated}
	return Rope{
		Pos: b.Input("pos", pos),
		Cos: b.Input("rope.cos", ir.T(ir.BF16, batch, rotaryDim)),
		Sin: b.Input("rope.sin", ir.T(ir.BF16, batch, rotaryDim)),
	}
}

// GatedAttentionDecode is the gated full-attention mixer for one decode
// step: x is the normed hidden state [B, 1, hidden] (replicated); the
// result is [B, 1, hidden], all-reduced. The KV cache is updated at Pos.
// The op sequence mirrors the composed TTNN path (see the package doc);
// ops are charged to the parts qkv_proj, heads, qk_norm, rope, kv_update,
// sdpa, gate and o_proj.
func GatedAttentionDecode(c Ctx, x *ir.Value, w AttnWeights, kv KVCache, rope Rope, d AttnDims) *ir.Value {
	b := c.B
	B, H, Hkv, D := d.Batch, d.Heads, d.KVHeads, d.HeadDim
	heads := c.TP.Split(1)

	qg := b.Matmul(x, w.Q) // [B,1,H*2D]
	k := b.Matmul(x, w.K)  // [B,1,Hkv*D]
	v := b.Matmul(x, w.V)
	c.mark("qkv_proj")

	// Head split: per head D query then D gate columns.
	qg = reshape(b, qg, heads, B, H, 2*D)
	q := b.Slice(qg, []int{0, 0, 0}, []int{B, H, D})
	gate := b.Slice(qg, []int{0, 0, D}, []int{B, H, 2 * D})
	k = reshape(b, k, heads, B, Hkv, D)
	v = reshape(b, v, heads, B, Hkv, D)
	q, k, v = toL1(b, q), toL1(b, k), toL1(b, v)
	c.mark("heads")

	q = RMSNorm(b, q, w.QNorm, d.Eps, 1)
	k = RMSNorm(b, k, w.KNorm, d.Eps, 1)
	c.mark("qk_norm")

	q = partialRope(b, q, rope, d.RotaryDim)
	k = partialRope(b, k, rope, d.RotaryDim)
	c.mark("rope")

	// Into the cache-update layout: heads padded to a whole tile, one
	// user per core; then the in-place cache writes at Pos.
	pad := func(t *ir.Value) *ir.Value {
		return toHeightSharded(b, b.Pad(t, []int{B, roundUpTile(Hkv), D}, 0))
	}
	kp, vp := pad(k), pad(v)
	kc := b.UpdateCache(kv.K, kp, rope.Pos)
	vc := b.UpdateCache(kv.V, vp, rope.Pos)
	b.UpdateState(kv.K, kc)
	b.UpdateState(kv.V, vc)
	c.mark("kv_update")

	o := b.SDPADecode(q, kc, vc, rope.Pos, invSqrt(D))
	c.mark("sdpa")
	o = b.Mul(o, b.Sigmoid(gate))
	c.mark("gate")

	o = reshape(b, o, c.TP.Split(2), B, 1, H*D) // head concat
	y := setDist(b, b.Matmul(o, w.O), ir.Replicated)
	y = c.TP.AllReduce(b, y)
	c.mark("o_proj")
	return y
}

// partialRope applies rotate-half RoPE to the first r of x's last dim (x is
// [B, H, D]) as the composed path does: slice the rotary part, transpose
// to [H, B, r] so each row is one user's position, rotary, transpose back,
// reshard; slice the pass-through part, reshard; concat. With r == D the
// pass-through steps are skipped.
func partialRope(b *ir.Builder, x *ir.Value, rope Rope, r int) *ir.Value {
	s := x.Type.Shape
	B, H, D := s[0], s[1], s[2]
	xr := b.Slice(x, []int{0, 0, 0}, []int{B, H, r})
	xr = b.Transpose(b.Rotary(b.Transpose(xr, 0, 1), rope.Cos, rope.Sin), 0, 1)
	xr = toHeightSharded(b, xr)
	if r == D {
		return xr
	}
	xp := toHeightSharded(b, b.Slice(x, []int{0, 0, r}, []int{B, H, D}))
	return b.Concat(xr, xp, 2)
}
