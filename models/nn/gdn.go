package nn

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// GDNDims are one Gated DeltaNet mixer's sizes on one device.
type GDNDims struct {
	Batch      int // users, one new token each (decode)
	Hidden     int // model width
	KeyHeads   int // key (and query) heads on this device
	ValueHeads int // value heads on this device, a multiple of KeyHeads
	KeyDim     int // key head dim (Dk)
	ValueDim   int // value head dim (Dv)
	ConvKernel int // causal conv width K; the conv state keeps K-1 inputs
	// StateDType is the recurrent state's dtype (fp32 for the 27B); q, k,
	// v, beta and g are typecast to it when it differs from bf16.
	StateDType ir.DType
	Eps        float64 // RMSNorm eps of the output norm, also the l2norm eps
	// Chunk is the chunk length of the chunked delta rule in prefill
	// (0 means ChunkSize).
	Chunk int
}

// KeyWidth is KeyHeads*KeyDim (the q and k blocks of the conv channels).
func (d GDNDims) KeyWidth() int { return d.KeyHeads * d.KeyDim }

// ValueWidth is ValueHeads*ValueDim (the v block, z and the out_proj input).
func (d GDNDims) ValueWidth() int { return d.ValueHeads * d.ValueDim }

// Channels is the conv channel count q|k|v on this device.
func (d GDNDims) Channels() int { return 2*d.KeyWidth() + d.ValueWidth() }

// Group is the number of value heads per key head.
func (d GDNDims) Group() int { return d.ValueHeads / d.KeyHeads }

// Check reports sizes the mixer cannot be built with.
func (d GDNDims) Check() error {
	switch {
	case d.Batch < 1 || d.Hidden < 1 || d.KeyHeads < 1 || d.ValueHeads < 1 || d.KeyDim < 1 || d.ValueDim < 1:
		return fmt.Errorf("gdn: sizes must be positive: %+v", d)
	case d.ValueHeads%d.KeyHeads != 0:
		return fmt.Errorf("gdn: %d value heads per device are not a multiple of %d key heads", d.ValueHeads, d.KeyHeads)
	case d.ConvKernel < 2:
		return fmt.Errorf("gdn: conv kernel %d must be at least 2", d.ConvKernel)
	case !d.StateDType.IsFloat():
		return fmt.Errorf("gdn: state dtype %s is not a float dtype", d.StateDType)
	}
	return nil
}

// GDNWeights are one GDN mixer's parameters on one device (see DeclareGDN).
type GDNWeights struct {
	QKV, Z, A, B *ir.Value // in-projections [hidden, *], column parallel
	Conv         *ir.Value // conv taps [K, channels]: Conv[j, c] = HF conv1d.weight[c, 0, j]
	ALog, DtBias *ir.Value // [value heads]
	Norm         *ir.Value // output norm weight [value dim], replicated, used as is
	Out          *ir.Value // out_proj [value width, hidden], row parallel
}

// DeclareGDN declares the nine weights of prefix+"linear_attn." with their
// HF checkpoint names and per-device shapes. Projections are bfp8_b and
// transposed to [in, out]; the small vectors and the conv taps are bf16.
// Device shares (what a loader cuts from the HF tensors): in_proj_qkv and
// conv1d take this device's heads from each of the q, k and v blocks
// (q|k|v per device, in that order); in_proj_z, in_proj_a, in_proj_b,
// A_log and dt_bias its value heads; out_proj its value heads' rows.
func DeclareGDN(b *ir.Builder, prefix string, d GDNDims, tp TP) GDNWeights {
	p := prefix + "linear_attn."
	mat := func(name string, dt ir.DType, rows, cols, axis int) *ir.Value {
		t := ir.T(dt, rows, cols)
		t.Dist = tp.Split(axis)
		return b.Weight(p+name, t)
	}
	vec := func(name string, n int, dist ir.Dist) *ir.Value {
		t := ir.T(ir.BF16, n)
		t.Dist = dist
		return b.Weight(p+name, t)
	}
	return GDNWeights{
		QKV:    mat("in_proj_qkv.weight", ir.BFP8B, d.Hidden, d.Channels(), 1),
		Z:      mat("in_proj_z.weight", ir.BFP8B, d.Hidden, d.ValueWidth(), 1),
		A:      mat("in_proj_a.weight", ir.BFP8B, d.Hidden, d.ValueHeads, 1),
		B:      mat("in_proj_b.weight", ir.BFP8B, d.Hidden, d.ValueHeads, 1),
		Conv:   mat("conv1d.weight", ir.BF16, d.ConvKernel, d.Channels(), 1),
		ALog:   vec("A_log", d.ValueHeads, tp.Split(0)),
		DtBias: vec("dt_bias", d.ValueHeads, tp.Split(0)),
		Norm:   vec("norm.weight", d.ValueDim, ir.Replicated),
		Out:    mat("out_proj.weight", ir.BFP8B, d.ValueWidth(), d.Hidden, 0),
	}
}

// GDNState is one GDN layer's persistent state on one device.
type GDNState struct {
	// Conv is [B, K-1, channels] bf16: the last K-1 in-projected q|k|v
	// inputs, oldest first.
	Conv *ir.Value
	// Recurrent is [B, value heads, Dk, Dv] in StateDType: S per (user, head).
	Recurrent *ir.Value
}

// DeclareGDNState declares name+".conv" and name+".recurrent".
func DeclareGDNState(b *ir.Builder, name string, d GDNDims, tp TP) GDNState {
	conv := ir.T(ir.BF16, d.Batch, d.ConvKernel-1, d.Channels())
	conv.Dist = tp.Split(2)
	rec := ir.T(d.StateDType, d.Batch, d.ValueHeads, d.KeyDim, d.ValueDim)
	rec.Dist = tp.Split(1)
	return GDNState{Conv: b.State(name+".conv", conv), Recurrent: b.State(name+".recurrent", rec)}
}

// GDNDecode is the Gated DeltaNet mixer for one decode step: x is the
// normed hidden state [B, 1, hidden] (replicated); the result is the
// mixer output [B, 1, hidden], all-reduced (replicated). Both states are
// updated. The op sequence mirrors the composed TTNN path (see the package
// doc); ops are charged to the parts in_proj, conv, split, gates,
// recurrence, state_copy, norm_gate and out_proj.
func GDNDecode(c Ctx, x *ir.Value, w GDNWeights, st GDNState, d GDNDims) *ir.Value {
	b := c.B
	B, Hk, Hv, Dk, Dv := d.Batch, d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim
	kw, C, K := d.KeyWidth(), d.Channels(), d.ConvKernel
	heads, flat := c.TP.Split(1), c.TP.Split(0)

	// In-projections: one matmul per checkpoint tensor.
	qkv := b.Matmul(x, w.QKV) // [B,1,C]
	z := b.Matmul(x, w.Z)     // [B,1,Vw]
	a := b.Matmul(x, w.A)     // [B,1,Hv]
	beta := b.Matmul(x, w.B)  // [B,1,Hv]
	c.mark("in_proj")

	// Causal depthwise conv: window = the K-1 kept inputs and the new one;
	// the state keeps the newest K-1; out = silu(sum_j taps[j] * window[j]).
	win := b.Concat(st.Conv, qkv, 1) // [B,K,C]
	b.UpdateState(st.Conv, b.Slice(win, []int{0, 1, 0}, []int{B, K, C}))
	conv := b.SiLU(b.Sum(b.Mul(win, w.Conv), 1)) // [B,1,C]
	c.mark("conv")

	// q|k|v split into heads; GQA repeats each key head Group times; the
	// rows are then folded to one row per (user, value head).
	q := b.Slice(conv, []int{0, 0, 0}, []int{B, 1, kw})
	k := b.Slice(conv, []int{0, 0, kw}, []int{B, 1, 2 * kw})
	v := b.Slice(conv, []int{0, 0, 2 * kw}, []int{B, 1, C})
	q = reshape(b, q, heads, B, Hk, Dk)
	k = reshape(b, k, heads, B, Hk, Dk)
	v = reshape(b, v, heads, B, Hv, Dv)
	if g := d.Group(); g > 1 {
		q = b.RepeatInterleave(q, g, 1)
		k = b.RepeatInterleave(k, g, 1)
	}
	q = reshape(b, q, flat, B*Hv, Dk)
	k = reshape(b, k, flat, B*Hv, Dk)
	v = reshape(b, v, flat, B*Hv, Dv)
	c.mark("split")

	// Gates: beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias).
	beta = reshape(b, b.Sigmoid(beta), flat, B*Hv, 1)
	negA := b.MulScalar(b.Exp(w.ALog), -1)
	g := b.Mul(b.Softplus(b.Add(a, w.DtBias)), negA)
	g = reshape(b, g, flat, B*Hv, 1)
	c.mark("gates")

	// Gated delta rule, one step, in StateDType.
	f := d.StateDType
	cast := func(v *ir.Value) *ir.Value {
		if v.Type.DType == f {
			return v
		}
		return b.Typecast(v, f)
	}
	q, k, v, beta, g = cast(q), cast(k), cast(v), cast(beta), cast(g)
	q = L2Norm(b, q, d.Eps)
	k = L2Norm(b, k, d.Eps)
	q = b.MulScalar(q, invSqrt(Dk))
	q4 := reshape(b, q, heads, B, Hv, 1, Dk)
	k4 := reshape(b, k, heads, B, Hv, 1, Dk)
	v4 := reshape(b, v, heads, B, Hv, 1, Dv)
	beta4 := reshape(b, beta, heads, B, Hv, 1, 1)
	g4 := reshape(b, g, heads, B, Hv, 1, 1)
	s := toL1(b, st.Recurrent)
	s = b.Mul(s, b.Exp(g4))                    // decay
	delta := b.Sub(v4, b.BMM(k4, s))           // v - S^T k, as rows [B,Hv,1,Dv]
	kcol := reshape(b, k, heads, B, Hv, Dk, 1) // k as a column for the outer product
	kcol, delta = toL1(b, kcol), toL1(b, delta)
	s = b.Add(s, b.Mul(b.BMM(kcol, delta), beta4)) // S + beta * k (x) delta
	o := b.BMM(q4, s)                              // S^T q, [B,Hv,1,Dv]
	c.mark("recurrence")
	b.UpdateState(st.Recurrent, toDRAM(b, s))
	c.mark("state_copy")

	// Gated RMSNorm per head (weight as is), then * silu(z).
	o = reshape(b, o, flat, B*Hv, Dv)
	o = RMSNorm(b, o, w.Norm, d.Eps, 0)
	o = reshape(b, o, c.TP.Split(2), B, 1, d.ValueWidth())
	o = b.Mul(b.SiLU(z), o) // bf16, like z
	c.mark("norm_gate")

	y := setDist(b, b.Matmul(o, w.Out), ir.Replicated) // partial sum
	y = c.TP.AllReduce(b, y)
	c.mark("out_proj")
	return y
}
