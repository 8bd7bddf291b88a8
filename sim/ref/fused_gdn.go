package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
)

// Fused Gated DeltaNet ops (produced by passes/fuse_gdn.go), evaluated from
// their Doc lines, not through their decompositions:
//
//   - gdn_conv_gates: the decode conv shift register, the tap products and
//     their sum, SiLU, and the beta and g gates;
//   - gdn_recurrence: the decode delta rule with the l2 norms of q and k,
//     the state update and readout, then the gated RMSNorm.
//
// At the storage formats gdn_conv_gates' tap sum is reduce_tile's column
// pool (colPoolSum), as both its program and its decomposition's sum over
// axis 1 compute it; and (unless Options.Composed) gdn_recurrence with an
// fp32 state is computed as its program computes it (on the FPU,
// gdnHeadFPU), so that a correct program agrees with it bit for bit.
// Otherwise both reproduce the composed path's rounding points: with
// Options.StorageFormats every intermediate the composed chain stores is
// rounded to the dtype it is stored in (element by element; the rules only
// fuse chains whose intermediates are bf16 or fp32), and every step is
// computed as the composed op's evaluator computes it (eltwise in float32,
// adds and subtracts as deviceAdd,
// reductions and norms in float64 rounded once, contractions as bmm:
// numerics.Matmul with StorageFormats, exact float64 sums without). The
// results are rounded by the caller as usual.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpGDNConvGates:  evalGDNConvGates,
		ir.OpGDNRecurrence: evalGDNRecurrence,
	})
}

// gdnRounder returns the per-element storage rounding of dt when
// opts.StorageFormats is set (bf16: as the packer rounds, half away from
// zero; fp32: none) and
// the identity otherwise. Other dtypes are not stored element by element
// and are an error.
func gdnRounder(dt ir.DType, opts Options) (func(float32) float32, error) {
	id := func(x float32) float32 { return x }
	switch {
	case !opts.StorageFormats || dt == ir.FP32:
		return id, nil
	case dt == ir.BF16:
		return packedBF16, nil
	}
	return nil, fmt.Errorf("rule gdn-intermediate-dtype: intermediates stored as %s are not modelled (want bf16 or fp32)", dt)
}

// gdnRounders returns one rounder per dtype, in order.
func gdnRounders(opts Options, dts ...ir.DType) ([]func(float32) float32, error) {
	out := make([]func(float32) float32, len(dts))
	for i, dt := range dts {
		r, err := gdnRounder(dt, opts)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// evalGDNConvGates: see the gdn_conv_gates Doc line. Intermediates of the
// conv are rounded to the conv result's dtype, those of g to g's dtype.
func evalGDNConvGates(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	st, x, w, a, bg, al, dt := args[0], args[1], args[2], args[3], args[4], args[5], args[6]
	if x.Shape.Rank() != 3 || x.Shape[1] != 1 || st.Shape.Rank() != 3 || st.Shape[0] != x.Shape[0] || st.Shape[2] != x.Shape[2] {
		return nil, fmt.Errorf("rule gdn-conv-shape: want conv_state [B, K-1, C] and qkv [B, 1, C], got %s and %s", st.Shape, x.Shape)
	}
	B, K, C := x.Shape[0], st.Shape[1]+1, x.Shape[2]
	if !w.Shape.Equal(ir.Shape{K, C}) {
		return nil, fmt.Errorf("rule gdn-conv-taps: taps %s must be [%d, %d]", w.Shape, K, C)
	}
	if a.Shape.Rank() != 3 || a.Shape[0] != B || a.Shape[1] != 1 || !bg.Shape.Equal(a.Shape) {
		return nil, fmt.Errorf("rule gdn-gates: a %s and b %s must both be [%d, 1, H]", a.Shape, bg.Shape, B)
	}
	H := a.Shape[2]
	if al.Shape.Numel() != H || dt.Shape.Numel() != H {
		return nil, fmt.Errorf("rule gdn-gates-vectors: a_log %s and dt_bias %s must have %d elements", al.Shape, dt.Shape, H)
	}
	if len(op.Results) != 4 {
		return nil, fmt.Errorf("rule gdn-conv-results: want 4 results, have %d", len(op.Results))
	}
	r, err := gdnRounders(opts, op.Results[0].Type.DType, op.Results[3].Type.DType)
	if err != nil {
		return nil, err
	}
	rc, rg := r[0], r[1]

	conv := NewTensor(x.Shape)
	state := NewTensor(st.Shape)
	win := func(b, j, c int) float32 {
		if j < K-1 {
			return st.Data[(b*(K-1)+j)*C+c]
		}
		return x.Data[b*C+c]
	}
	// sum is the tap sum of the rounded products: at the storage formats
	// reduce_tile's column pool of the products' tile (colPoolSum: an
	// mvmul lane, the taps aligned to the largest), which can differ from
	// one rounding of the exact sum, as the program computes it and as the
	// decomposition's sum over axis 1 does (evalSum; Composed too);
	// otherwise exact, rounded once.
	sum := func(p []float32) float32 {
		if opts.StorageFormats {
			return colPoolSum(len(p), func(i int) float32 { return p[i] }, opts.Fidelity)
		}
		var acc float64
		for _, x := range p {
			acc += float64(x)
		}
		return float32(acc)
	}
	prods := make([]float32, K)
	for b := range B {
		for c := range C {
			for j := range K {
				prods[j] = rc(win(b, j, c) * w.Data[j*C+c])
			}
			conv.Data[b*C+c] = sfpuFor(opts).siluTo(op.Results[0].Type.DType)(rc(sum(prods)))
			for j := 1; j < K; j++ {
				state.Data[(b*(K-1)+j-1)*C+c] = win(b, j, c)
			}
		}
	}

	beta := NewTensor(ir.Shape{B * H, 1})
	g := NewTensor(ir.Shape{B * H, 1})
	for b := range B {
		for h := range H {
			i := b*H + h
			beta.Data[i] = sfpuFor(opts).sigmoid(bg.Data[i])
			negA := rg(sfpuFor(opts).exp(al.Data[h])) * -1
			sp := rg(sfpuFor(opts).softplus(rg(deviceAdd(a.Data[i], dt.Data[h], opts))))
			g.Data[i] = sp * negA
		}
	}
	return []Tensor{conv, state, beta, g}, nil
}

// gdnContract is one batch of bmm: a [m, k] times b [k, n], computed as
// evalBMM computes a batch.
func gdnContract(a, b []float32, m, k, n int, opts Options) []float32 {
	if opts.StorageFormats {
		return numerics.Matmul(a, b, m, k, n, opts.Fidelity)
	}
	out := make([]float32, m*n)
	acc := make([]float64, n)
	for i := range m {
		clear(acc)
		for p := range k {
			av := float64(a[i*k+p])
			for j, bv := range b[p*n : (p+1)*n] {
				acc[j] += av * float64(bv)
			}
		}
		for j, s := range acc {
			out[i*n+j] = float32(s)
		}
	}
	return out
}

// evalGDNRecurrence: see the gdn_recurrence Doc line. Intermediates are
// rounded to the state's dtype, silu(z) and the output to z's dtype.
func evalGDNRecurrence(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	x, beta, g, s, z, nw := args[0], args[1], args[2], args[3], args[4], args[5]
	var attrs [4]float64
	for i, name := range []string{"l2_eps", "l2_scale", "scale", "norm_eps"} {
		v, err := attrFloat(op, name)
		if err != nil {
			return nil, err
		}
		attrs[i] = v
	}
	l2Eps, l2Scale, scale, normEps := attrs[0], float32(attrs[1]), float32(attrs[2]), attrs[3]
	if s.Shape.Rank() != 4 {
		return nil, fmt.Errorf("rule gdn-recurrence-state: state %s must be [B, H, Dk, Dv]", s.Shape)
	}
	B, H, Dk, Dv := s.Shape[0], s.Shape[1], s.Shape[2], s.Shape[3]
	if x.Shape.Rank() != 3 || x.Shape[0] != B || x.Shape[1] != 1 {
		return nil, fmt.Errorf("rule gdn-recurrence-qkv: qkv %s must be [%d, 1, C]", x.Shape, B)
	}
	C := x.Shape[2]
	kw2 := C - H*Dv
	if kw2 <= 0 || kw2%(2*Dk) != 0 || H%(kw2/(2*Dk)) != 0 {
		return nil, fmt.Errorf("rule gdn-recurrence-heads: qkv has %d channels; want 2*Hk*%d + %d*%d with Hk dividing %d", C, Dk, H, Dv, H)
	}
	kw := kw2 / 2
	G := H / (kw / Dk)
	col := ir.Shape{B * H, 1}
	if !beta.Shape.Equal(col) || !g.Shape.Equal(col) || !z.Shape.Equal(ir.Shape{B, 1, H * Dv}) || nw.Shape.Numel() != Dv {
		return nil, fmt.Errorf("rule gdn-recurrence-operands: want beta and g %s, z [%d, 1, %d] and norm_w with %d elements, got %s, %s, %s and %s", col, B, H*Dv, Dv, beta.Shape, g.Shape, z.Shape, nw.Shape)
	}
	if len(op.Results) != 2 {
		return nil, fmt.Errorf("rule gdn-recurrence-results: want 2 results, have %d", len(op.Results))
	}
	r, err := gdnRounders(opts, op.Operands[3].Type.DType, op.Results[0].Type.DType)
	if err != nil {
		return nil, err
	}
	rs, rz := r[0], r[1]
	// silu(z) is rounded to the result's dtype (rz): silu_bf16 for bf16
	zdt := op.Results[0].Type.DType
	sfz := *sfpuFor(opts)
	sfz.silu = sfz.siluTo(zdt)

	out := NewTensor(z.Shape)
	next := NewTensor(s.Shape)
	q, k, v := make([]float32, Dk), make([]float32, Dk), make([]float32, Dv)
	// The L2 norms and the gated norm are the composed rms_norm_plain and
	// rms_norm ops, so they are evaluated exactly as those are (normRows,
	// which models the device's reads at storage formats).
	l2 := func(dst []float32) {
		n := normRows(Tensor{Shape: ir.Shape{1, len(dst)}, Data: dst}, nil, l2Eps, 0, RowSplit{}, opts)
		for i, e := range n.Data {
			dst[i] = rs(rs(e) * l2Scale)
		}
	}
	sd := make([]float32, Dk*Dv)
	fpu := opts.StorageFormats && !opts.Composed && op.Operands[3].Type.DType == ir.FP32
	for b := range B {
		row := x.Data[b*C : (b+1)*C]
		for h := range H {
			kh := h / G
			for i := range Dk {
				q[i] = rs(row[kh*Dk+i])
				k[i] = rs(row[kw+kh*Dk+i])
			}
			for j := range Dv {
				v[j] = rs(row[2*kw+h*Dv+j])
			}
			bt, gt := rs(beta.Data[b*H+h]), rs(g.Data[b*H+h])
			if fpu {
				s0 := s.Data[(b*H+h)*Dk*Dv : (b*H+h+1)*Dk*Dv]
				s1 := next.Data[(b*H+h)*Dk*Dv : (b*H+h+1)*Dk*Dv]
				gdnHeadFPU(q, k, v, s0, s1, out.Data[b*H*Dv+h*Dv:][:Dv], z.Data[b*H*Dv+h*Dv:][:Dv], nw.Data, bt, gt,
					float32(l2Eps), l2Scale, scale, float32(normEps), rz, opts.Fidelity, &sfz)
				continue
			}
			l2(q)
			for i := range q {
				q[i] = rs(q[i] * scale)
			}
			l2(k)

			// Decay, delta, rank-1 update, readout.
			eg := rs(sfpuFor(opts).exp(gt))
			s0 := s.Data[(b*H+h)*Dk*Dv : (b*H+h+1)*Dk*Dv]
			for i, e := range s0 {
				sd[i] = rs(deviceMul(e, eg, opts))
			}
			kS := gdnContract(k, sd, 1, Dk, Dv, opts)
			delta := make([]float32, Dv)
			for j := range Dv {
				delta[j] = rs(deviceSub(v[j], rs(kS[j]), opts))
			}
			outer := gdnContract(k, delta, Dk, 1, Dv, opts)
			s1 := next.Data[(b*H+h)*Dk*Dv : (b*H+h+1)*Dk*Dv]
			for i := range s1 {
				s1[i] = rs(deviceAdd(sd[i], rs(deviceMul(rs(outer[i]), bt, opts)), opts))
			}
			o := gdnContract(q, s1, 1, Dk, Dv, opts)
			for j := range o {
				o[j] = rs(o[j])
			}

			// Gated RMSNorm (weight as is), times silu(z).
			on := normRows(Tensor{Shape: ir.Shape{1, Dv}, Data: o}, nw.Data, normEps, 0, RowSplit{}, opts)
			for j := range Dv {
				i := b*H*Dv + h*Dv + j
				out.Data[i] = deviceMul(rz(sfz.silu(z.Data[i])), rs(on.Data[j]), opts)
			}
		}
	}
	return []Tensor{out, next}, nil
}

// gdnHeadFPU is one head of gdn_recurrence with an fp32 state at the
// storage formats, computed as the program computes it on the FPU (see
// lowerGDNRecurrence's fp32-state path): every fp32 value the FPU reads
// through its source registers is reduced to tf32, products are the FPU's
// at fidelity f, and the sums accumulate onto what DEST already holds:
//
//	l2 norms: r = rsqrt(sum(x^2) / D + eps), the sum a matmul of x with
//	          itself; x * r an eltwise multiply (r read as tf32)
//	decay:    S + S x diag(exp(g) - 1)   (S copied into DEST exactly)
//	delta:    d = -(-v + k^T S)          (k^T S accumulated onto -v)
//	update:   S' = S + k (x) (d * beta)  (accumulated onto S)
//	readout:  o = q^T S'
//	norm:     o * r * norm_w, times the bf16 silu(z)
//
// The fp32 values are thereby read as the device reads them; only the
// sum of squares of the output norm differs in order when the program
// splits a head over several cores (its partial sums are added on the
// SFPU). q, k, v are scratch of the head's key and value dims; s0 is
// the state, s1 receives the new state and out the head's Dv outputs
// before the caller's storage rounding.
func gdnHeadFPU(q, k, v, s0, s1, out, z, nw []float32, bt, gt, l2Eps, l2Scale, scale, normEps float32, rz func(float32) float32, f ir.MathFidelity, sf *sfpuFuncs) {
	Dk, Dv := len(q), len(v)
	tf := numerics.TruncTF32
	mul := func(a, b float32) float32 { return numerics.FPUMul(tf(a), tf(b), 0, f, true) }
	rsqrtOf := func(x []float32, inv, eps float32) float32 {
		ss := numerics.Matmul(x, x, 1, len(x), 1, f)[0]
		return sf.rsqrt(ss*inv + eps)
	}
	l2 := func(x []float32) {
		r := rsqrtOf(x, 1/float32(len(x)), l2Eps)
		for i, e := range x {
			x[i] = mul(e, r) * l2Scale
		}
	}
	l2(q)
	for i := range q {
		q[i] *= scale
	}
	l2(k)

	// The decay: S + S x diag, one 32-column block (a value tile) at a
	// time; the diagonal is the identity times exp(g) - 1 (eltwise).
	ed := sf.exp(gt) + -1
	const T = ir.TileSize
	diag := make([]float32, T*T)
	for i := range T {
		for j := range T {
			e := float32(0)
			if i == j {
				e = 1
			}
			diag[i*T+j] = mul(e, ed)
		}
	}
	for i := range Dk {
		for c := 0; c < Dv; c += T {
			blk := s1[i*Dv+c : i*Dv+c+T] // S' built in place: the decayed state first
			copy(blk, s0[i*Dv+c:i*Dv+c+T])
			row := append([]float32(nil), blk...)
			numerics.MatmulOnto(blk, row, diag, 1, T, T, f)
		}
	}
	d := make([]float32, Dv)
	for j := range Dv {
		d[j] = -v[j]
	}
	numerics.MatmulOnto(d, k, s1, 1, Dk, Dv, f)
	for j := range d {
		d[j] = mul(-d[j], bt)
	}
	numerics.MatmulOnto(s1, k, d, Dk, 1, Dv, f)
	o := numerics.Matmul(q, s1, 1, Dk, Dv, f)

	r := rsqrtOf(o, 1/float32(Dv), normEps)
	for j := range Dv {
		out[j] = mul(rz(sf.silu(z[j])), mul(mul(o[j], r), nw[j]))
	}
}
