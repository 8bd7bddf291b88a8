package nn

import "github.com/tcc-dev/tcc/ir"

// DeclareRopePrefill declares the prefill position inputs: "pos" [1]
// uint32 (the position of the first of the S new tokens of every user) and
// "rope.cos", "rope.sin" [S, 1, RotaryDim] bf16, row s holding the tables
// of Rope for position pos+s.
func DeclareRopePrefill(b *ir.Builder, seq, rotaryDim int) Rope {
	pos := ir.TensorType{Shape: ir.Shape{1}, DType: ir.UInt32, Layout: ir.RowMajorLayout, Mem: ir.DRAM, Dist: ir.Replicated}
	return Rope{
		Pos: b.Input("pos", pos),
		Cos: b.Input("rope.cos", ir.T(ir.BF16, seq, 1, rotaryDim)),
		Sin: b.Input("rope.sin", ir.T(ir.BF16, seq, 1, rotaryDim)),
	}
}

// GatedAttentionPrefill is the gated attention mixer for a prefill step:
// x is [B, S, hidden] (replicated), the S new tokens of every user at
// positions pos..pos+S-1 (rope from DeclareRopePrefill); the result is
// [B, S, hidden], all-reduced. The caches get the S new keys and values
// and every token attends causally to the cache up to its own position.
// Ops are charged to qkv_proj, heads, qk_norm, rope, kv_update, sdpa, gate
// and o_proj.
func GatedAttentionPrefill(c Ctx, x *ir.Value, w AttnWeights, kv KVCache, rope Rope, d AttnDims) *ir.Value {
	b := c.B
	s := x.Type.Shape
	B, S := s[0], s[1]
	H, Hkv, D, R := d.Heads, d.KVHeads, d.HeadDim, d.RotaryDim
	heads := c.TP.Split(2)

	qg := b.Matmul(x, w.Q)
	k := b.Matmul(x, w.K)
	v := b.Matmul(x, w.V)
	c.mark("qkv_proj")

	qg = reshape(b, qg, heads, B, S, H, 2*D)
	q := b.Slice(qg, []int{0, 0, 0, 0}, []int{B, S, H, D})
	gate := b.Slice(qg, []int{0, 0, 0, D}, []int{B, S, H, 2 * D})
	k = reshape(b, k, heads, B, S, Hkv, D)
	v = reshape(b, v, heads, B, S, Hkv, D)
	c.mark("heads")

	q = RMSNorm(b, q, w.QNorm, d.Eps, 1)
	k = RMSNorm(b, k, w.KNorm, d.Eps, 1)
	c.mark("qk_norm")

	ropeOf := func(t *ir.Value, n int) *ir.Value {
		r := b.Rotary(b.Slice(t, []int{0, 0, 0, 0}, []int{B, S, n, R}), rope.Cos, rope.Sin)
		if R < D {
			r = b.Concat(r, b.Slice(t, []int{0, 0, 0, R}, []int{B, S, n, D}), 3)
		}
		return b.Transpose(r, 1, 2) // [B, n, S, D]
	}
	q, k = ropeOf(q, H), ropeOf(k, Hkv)
	c.mark("rope")

	kc := b.FillCache(kv.K, k, rope.Pos)
	vc := b.FillCache(kv.V, b.Transpose(v, 1, 2), rope.Pos)
	b.UpdateState(kv.K, kc)
	b.UpdateState(kv.V, vc)
	c.mark("kv_update")

	o := b.Transpose(b.SDPAPrefill(q, kc, vc, rope.Pos, invSqrt(D)), 1, 2) // [B,S,H,D]
	c.mark("sdpa")
	o = b.Mul(o, b.Sigmoid(gate))
	c.mark("gate")

	o = reshape(b, o, heads, B, S, H*D)
	y := setDist(b, b.Matmul(o, w.O), ir.Replicated)
	y = c.TP.AllReduce(b, y)
	c.mark("o_proj")
	return y
}

// RopeFromTables is the decode step's Rope when the host writes nothing
// between steps: pos is [B] uint32 state (user b at pos[b]) and cosTable,
// sinTable are [MaxSeq, RotaryDim] bf16 weights whose row p holds the
// DeclareRope tables of position p; the step's Cos and Sin rows are
// gathered from them by pos on the device (embedding), so they equal the
// host-written tables bit for bit.
func RopeFromTables(b *ir.Builder, pos, cosTable, sinTable *ir.Value) Rope {
	return Rope{Pos: pos, Cos: b.Embedding(pos, cosTable), Sin: b.Embedding(pos, sinTable)}
}

// AdvancePos ends a device-loop decode step: state pos holds pos + 1 (every
// user one position further) after the step. Emit it after the last op that
// reads pos (the state is updated in place).
func AdvancePos(b *ir.Builder, pos *ir.Value) {
	b.UpdateState(pos, b.AddScalar(pos, 1))
}
