package nn

import (
	"github.com/tcc-dev/tcc/ir"
)

// ChunkSize is the chunk length of the chunked gated delta rule: one
// tile, so each chunk's triangular inverse (I + strict_lower(...))^-1 is a
// 32x32 matrix the device inverts in one tile (codegen/lower
// lowerTrilInverse). A prompt of any length is whole chunks plus one
// zero-padded chunk (zero k, beta and log decay leave the state as it
// was). flash-linear-attention's 64 would need the inverse of a 64x64
// matrix, four tiles by block substitution, for half the sequential
// chunk steps.
const ChunkSize = 32

// GDNPrefill is the Gated DeltaNet mixer for a prefill step of S tokens per
// user: x is the normed hidden state [B, S, hidden] (replicated); the result
// is [B, S, hidden], all-reduced. The conv runs over the kept K-1 inputs and
// the S new ones; the delta rule runs in the chunked (WY) form over chunks
// of min(S, d.Chunk or ChunkSize) tokens (S padded with zeros to whole chunks), which
// equals S decode steps: per chunk, with g the in-chunk cumulative sum of
// the log decays, Γ[i,j] = exp(g_i - g_j) for j <= i (else 0),
//
//	T  = (I + strict_lower((β k) k^T ∘ Γ))^-1      (tril_inverse)
//	U  = T (β v),  W = T (β k ∘ exp(g))
//	o  = (q ∘ exp(g)) S + (q k^T ∘ Γ) (U - W S)
//	S' = exp(g_last) S + (k ∘ exp(g_last - g))^T (U - W S)
//
// with q already l2-normed and scaled by Dk^-1/2 and k l2-normed. The log
// decays g = -exp(A_log) * softplus(a + dt_bias) are computed in
// d.StateDType (a, A_log and dt_bias cast first), as HF computes them in
// fp32: their in-chunk sums reach hundreds with strong decays, and every
// decay exp(g_i - g_j) carries g's relative error times |g|, which a bf16 g
// made cost a 700-token prompt's logits PCC 0.9867 against fp32 math. Ops are
// charged to the parts in_proj, conv, split, gates, chunk_prep, chunks,
// state_copy, norm_gate and out_proj.
func GDNPrefill(c Ctx, x *ir.Value, w GDNWeights, st GDNState, d GDNDims) *ir.Value {
	b := c.B
	s := x.Type.Shape
	B, S := s[0], s[1]
	Hk, Hv, Dk, Dv := d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim
	kw, C, K := d.KeyWidth(), d.Channels(), d.ConvKernel
	heads := c.TP.Split(1)

	qkv := b.Matmul(x, w.QKV) // [B,S,C]
	z := b.Matmul(x, w.Z)     // [B,S,Vw]
	a := b.Matmul(x, w.A)     // [B,S,Hv]
	beta := b.Matmul(x, w.B)  // [B,S,Hv]
	c.mark("in_proj")

	win := b.Concat(st.Conv, qkv, 1)             // [B,S+K-1,C]
	conv := b.SiLU(b.ConvDepthwise(win, w.Conv)) // [B,S,C]
	// The state update after the conv: a conv that reads the old state
	// itself (passes FuseConvDepthwiseStateChain) runs before it is
	// overwritten in place.
	b.UpdateState(st.Conv, b.Slice(win, []int{0, S, 0}, []int{B, S + K - 1, C}))
	c.mark("conv")

	// Heads to [B, Hv, S, D] (GQA repeats each key head Group times).
	headsOf := func(lo, hi, n, dim int, repeat bool) *ir.Value {
		t := b.Slice(conv, []int{0, 0, lo}, []int{B, S, hi})
		t = reshape(b, t, c.TP.Split(2), B, S, n, dim)
		if repeat && d.Group() > 1 {
			t = b.RepeatInterleave(t, d.Group(), 2)
		}
		return b.Transpose(t, 1, 2)
	}
	q := headsOf(0, kw, Hk, Dk, true)
	k := headsOf(kw, 2*kw, Hk, Dk, true)
	v := headsOf(2*kw, C, Hv, Dv, false)
	c.mark("split")

	f := d.StateDType
	cast := func(v *ir.Value) *ir.Value {
		if v.Type.DType == f {
			return v
		}
		return b.Typecast(v, f)
	}
	// Both gates per token, then both transposes to [B,Hv,S] (beta cast to
	// StateDType before its transpose: the same values, and the gates of
	// a token stay together for the fused gdn_prefill_gates).
	negA := b.MulScalar(b.Exp(cast(w.ALog)), -1)
	g := b.Mul(b.Softplus(b.Add(cast(a), cast(w.DtBias))), negA) // [B,S,Hv], in StateDType
	beta = cast(b.Sigmoid(beta))                                 // [B,S,Hv]
	g, beta = b.Transpose(g, 1, 2), b.Transpose(beta, 1, 2)      // [B,Hv,S]
	c.mark("gates")

	q, k, v = cast(q), cast(k), cast(v)
	q = b.MulScalar(L2Norm(b, q, d.Eps), invSqrt(Dk))
	k = L2Norm(b, k, d.Eps)

	// Pad to whole chunks and split the sequence into N chunks of L.
	L := ChunkSize
	if d.Chunk > 0 {
		L = d.Chunk
	}
	L = min(S, L)
	N := (S + L - 1) / L
	if P := N * L; P > S {
		q = b.Pad(q, []int{B, Hv, P, Dk}, 0)
		k = b.Pad(k, []int{B, Hv, P, Dk}, 0)
		v = b.Pad(v, []int{B, Hv, P, Dv}, 0)
		beta = b.Pad(beta, []int{B, Hv, P}, 0)
		g = b.Pad(g, []int{B, Hv, P}, 0)
	}
	chunks := func(t *ir.Value, dim int) *ir.Value { return reshape(b, t, heads, B, Hv, N, L, dim) }
	beta5 := reshape(b, beta, heads, B, Hv, N, L, 1)
	kb := b.Mul(chunks(k, Dk), beta5)
	vb := b.Mul(chunks(v, Dv), beta5)
	q5, k5 := chunks(q, Dk), chunks(k, Dk)
	g4 := b.Cumsum(reshape(b, g, heads, B, Hv, N, L), -1) // [B,Hv,N,L]
	gcol := reshape(b, g4, heads, B, Hv, N, L, 1)
	decay := b.Sub(gcol, reshape(b, g4, heads, B, Hv, N, 1, L)) // g_i - g_j
	decay = b.Tril(b.Exp(b.Tril(decay, 0)), 0)                  // Γ
	t := b.TrilInverse(b.Mul(b.BMM(kb, b.Transpose(k5, -1, -2)), decay))
	u := b.BMM(t, vb)                                      // [B,Hv,N,L,Dv]
	eg := b.Exp(gcol)                                      // [B,Hv,N,L,1]
	wk := b.BMM(t, b.Mul(kb, eg))                          // [B,Hv,N,L,Dk]
	qg := b.Mul(q5, eg)                                    // q ∘ exp(g)
	qk := b.Mul(b.BMM(q5, b.Transpose(k5, -1, -2)), decay) // causal: Γ is 0 above the diagonal
	c.mark("chunk_prep")

	state := reshape(b, toL1(b, st.Recurrent), heads, B, Hv, 1, Dk, Dv)
	chunk := func(t *ir.Value, i int) *ir.Value {
		sh := t.Type.Shape
		begin := make([]int, sh.Rank())
		end := sh.Clone()
		begin[2], end[2] = i, i+1
		return b.Slice(t, begin, end)
	}
	var out *ir.Value
	for i := 0; i < N; i++ {
		vNew := b.Sub(chunk(u, i), b.BMM(chunk(wk, i), state)) // [B,Hv,1,L,Dv]
		oi := b.Add(b.BMM(chunk(qg, i), state), b.BMM(chunk(qk, i), vNew))
		if out == nil {
			out = oi
		} else {
			out = b.Concat(out, oi, 2)
		}
		gi := chunk(g4, i)                                              // [B,Hv,1,L]
		gLast := b.Slice(gi, []int{0, 0, 0, L - 1}, []int{B, Hv, 1, L}) // [B,Hv,1,1]
		kd := b.Mul(chunk(k5, i), reshape(b, b.Exp(b.Sub(gLast, gi)), heads, B, Hv, 1, L, 1))
		state = b.Add(b.Mul(state, reshape(b, b.Exp(gLast), heads, B, Hv, 1, 1, 1)),
			b.BMM(b.Transpose(kd, -1, -2), vNew))
	}
	c.mark("chunks")
	b.UpdateState(st.Recurrent, toDRAM(b, reshape(b, state, heads, B, Hv, Dk, Dv)))
	c.mark("state_copy")

	o := reshape(b, out, heads, B, Hv, N*L, Dv)
	if N*L > S {
		o = b.Slice(o, []int{0, 0, 0, 0}, []int{B, Hv, S, Dv})
	}
	o = b.Transpose(o, 1, 2) // [B,S,Hv,Dv]
	o = RMSNorm(b, o, w.Norm, d.Eps, 0)
	o = reshape(b, o, c.TP.Split(2), B, S, d.ValueWidth())
	o = b.Mul(b.SiLU(z), o)
	c.mark("norm_gate")

	y := setDist(b, b.Matmul(o, w.Out), ir.Replicated)
	y = c.TP.AllReduce(b, y)
	c.mark("out_proj")
	return y
}
