package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// gdn_chunk_wy (passes/fuse_gdn_wy.go FuseGDNChunkWY) is the GDN prefill's
// per-chunk WY products: k scaled by beta, the decayed A = (kb k^T) * Γ,
// its triangular inverse T, and u = T (v beta), wk = T (kb exp(g)). Its
// program computes each as the composed op computes it and stores each
// intermediate as the composed op stores it, so it is evaluated here as
// the composed chain is, with the composed ops' evaluators in their order
// and operand order (mul as fpuBinary's deviceMul, bmm_transpose_b,
// tril_inverse, bmm), every intermediate rounded to the operands' dtype
// f through finishResult. The result equals the composed chain bit for
// bit with any Options.
func init() {
	register(map[ir.OpKind]evalFunc{ir.OpGDNChunkWY: evalGDNChunkWY, ir.OpGDNChunkPrep: evalGDNChunkPrep})
}

// evalGDNChunkPrep: see the gdn_chunk_prep Doc line: with exp_g first
// eg = r(exp(g)) (the exp op's evaluator), with decay Γ as the sub, exp
// and tril evaluators compute it, then gdn_chunk_wy's results,
// then qg as mul computes it and qk as bmm_transpose_b_mul
// does (the caller's finish rounds the results).
func evalGDNChunkPrep(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if len(op.Operands) != 7 || len(args) != 7 {
		return nil, fmt.Errorf("rule gdn-chunk-prep-arity: want 7 operands, have %d", len(op.Operands))
	}
	f := op.Operands[1].Type.DType
	types := make([]ir.TensorType, len(op.Operands))
	for i, v := range op.Operands {
		types[i] = v.Type
	}
	kGroup, err := ir.GDNKGroup(op.Attrs)
	if err != nil {
		return nil, err
	}
	if kGroup > 1 { // kx and k [B, H/G, N, L, Dk] per key head: value head h reads key head h/G
		args = append([]Tensor{}, args...)
		for i, name := range []string{"kx", "k"} {
			if types[i], err = ir.GDNKGroupType(name, types[i], types[2], kGroup); err != nil {
				return nil, err
			}
			args[i] = repeatHeads(args[i], types[i].Shape, kGroup)
		}
	}
	expG, err := ir.GDNChunkPrepExpG(op.Attrs)
	if err != nil {
		return nil, err
	}
	rows, err := ir.GDNChunkPrepRows(op.Attrs)
	if err != nil {
		return nil, err
	}
	if rows { // eg is g [B, H, N, L]: its reshapes to the column and row forms (gamma's values are not read)
		want, err := ir.GDNChunkPrepRowTypes(types)
		if err != nil {
			return nil, err
		}
		args = append([]Tensor{}, args...)
		args[5] = Tensor{Shape: want[5].Shape.Clone(), Data: args[4].Data}
		args[4] = Tensor{Shape: want[4].Shape.Clone(), Data: args[4].Data}
	}
	betaSeq, err := ir.GDNChunkPrepBetaSeq(op.Attrs)
	if err != nil {
		return nil, err
	}
	if betaSeq { // beta [B, S, H] tokens first: its column form [B, H, N, L, 1] (transpose, reshape)
		bt, err := ir.GDNChunkPrepBetaSeqType(op.Operands[3].Type, types[1])
		if err != nil {
			return nil, err
		}
		B, H, S := bt.Shape[0], bt.Shape[1], bt.Shape[2]*bt.Shape[3]
		col := NewTensor(bt.Shape)
		for b := range B {
			for h := range H {
				for t := range S {
					col.Data[(b*H+h)*S+t] = args[3].Data[(b*S+t)*H+h]
				}
			}
		}
		args = append([]Tensor{}, args...)
		args[3] = col
	}
	qGroup, err := ir.GDNChunkPrepQGroup(op.Attrs)
	if err != nil {
		return nil, err
	}
	if qGroup > 1 { // q [B, H/G, N, L, Dk] per key head: value head h reads key head h/G
		qt, err := ir.GDNChunkPrepQGroupType(op.Operands[6].Type, types[1], qGroup)
		if err != nil {
			return nil, err
		}
		args = append([]Tensor{}, args...)
		args[6] = repeatHeads(args[6], qt.Shape, qGroup)
	}
	if expG { // operand 4 is g: eg = r(exp(g)) as the exp op computes it
		exp, _, ok := sfpuEval(ir.OpExp, opts)
		if !ok {
			return nil, fmt.Errorf("rule gdn-chunk-prep-exp-g: the SFPU table has no exp")
		}
		eg, err := unary(func(x float32) float32 { return exp(x, 0) })(op, args[4:5], opts)
		if err != nil {
			return nil, err
		}
		e, err := finishResult(f, eg[0], opts)
		if err != nil {
			return nil, err
		}
		g := args[4]
		args = append(append(append([]Tensor{}, args[:4]...), e), args[5:]...)
		decay, err := ir.GDNChunkPrepDecay(op.Attrs)
		if err != nil {
			return nil, err
		}
		if decay { // operand 5 is g's row form: Γ = tril(r(exp(r(g - row))))
			d, err := fpuBinary(deviceSub, true)(op, []Tensor{g, args[5]}, opts)
			if err != nil {
				return nil, err
			}
			ds, err := finishResult(f, d[0], opts)
			if err != nil {
				return nil, err
			}
			x, err := unary(func(x float32) float32 { return exp(x, 0) })(op, []Tensor{ds}, opts)
			if err != nil {
				return nil, err
			}
			gamma, err := finishResult(f, x[0], opts)
			if err != nil {
				return nil, err
			}
			batch, rows, cols, err := trailingMatrix(gamma)
			if err != nil {
				return nil, err
			}
			for b := range batch {
				for i := range rows {
					clear(gamma.Data[(b*rows+i)*cols+min(i+1, cols) : (b*rows+i+1)*cols])
				}
			}
			args[5] = gamma
		}
	}
	wy, err := gdnChunkWY(op, args[:6], opts)
	if err != nil {
		return nil, err
	}
	k, eg, gamma, q := args[1], args[4], args[5], args[6]
	qg, err := fpuBinary(deviceMul, false)(op, []Tensor{q, eg}, opts)
	if err != nil {
		return nil, err
	}
	qk, err := decayedProduct(q, k, gamma, f, op, opts)
	if err != nil {
		return nil, err
	}
	return append(wy, qg[0], qk), nil
}

// decayedProduct is r(a b^T) * gamma as bmm_transpose_b_mul computes it,
// r rounding to f (the last rounding is the caller's).
func decayedProduct(a, b, gamma Tensor, f ir.DType, op *ir.Op, opts Options) (Tensor, error) {
	mm, err := evalBMMTransposeB(op, []Tensor{a, b}, opts)
	if err != nil {
		return Tensor{}, err
	}
	p, err := finishResult(f, mm[0], opts)
	if err != nil {
		return Tensor{}, err
	}
	if !gamma.Shape.Equal(p.Shape) {
		return Tensor{}, fmt.Errorf("rule gdn-chunk-wy-operand: gamma %s must have the product's shape %s", gamma.Shape, p.Shape)
	}
	out := NewTensor(p.Shape)
	for i := range out.Data {
		out.Data[i] = deviceMul(p.Data[i], gamma.Data[i], opts)
	}
	return out, nil
}

// evalGDNChunkWY: see the gdn_chunk_wy Doc line.
func evalGDNChunkWY(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if len(op.Operands) != 6 || len(args) != 6 {
		return nil, fmt.Errorf("rule gdn-chunk-wy-arity: want 6 operands, have %d", len(op.Operands))
	}
	return gdnChunkWY(op, args, opts)
}

// gdnChunkWY is gdn_chunk_wy's u and wk from its six operands (op's
// operand 1 gives the dtype f).
func gdnChunkWY(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	kx, k, v, beta, eg, gamma := args[0], args[1], args[2], args[3], args[4], args[5]
	f := op.Operands[1].Type.DType
	r := func(t []Tensor, err error) (Tensor, error) {
		if err != nil {
			return Tensor{}, err
		}
		return finishResult(f, t[0], opts)
	}
	mul := fpuBinary(deviceMul, false)
	kb, err := r(mul(op, []Tensor{kx, beta}, opts))
	if err != nil {
		return nil, err
	}
	a, err := decayedProduct(kb, k, gamma, f, op, opts)
	if err != nil {
		return nil, err
	}
	if a, err = finishResult(f, a, opts); err != nil {
		return nil, err
	}
	t, err := r(evalTrilInverse(op, []Tensor{a}, opts))
	if err != nil {
		return nil, err
	}
	vb, err := r(mul(op, []Tensor{v, beta}, opts))
	if err != nil {
		return nil, err
	}
	kbe, err := r(mul(op, []Tensor{kb, eg}, opts))
	if err != nil {
		return nil, err
	}
	u, err := evalBMM(op, []Tensor{t, vb}, opts)
	if err != nil {
		return nil, err
	}
	wk, err := evalBMM(op, []Tensor{t, kbe}, opts)
	if err != nil {
		return nil, err
	}
	return []Tensor{u[0], wk[0]}, nil
}

// repeatHeads is x [B, H/g, ...] given per key head as its
// repeat_interleave by g on axis 1, of shape [B, H, ...]: head h is x's
// head h/g.
func repeatHeads(x Tensor, shape ir.Shape, g int) Tensor {
	B, H := shape[0], shape[1]
	per := shape.Numel() / (B * H)
	rep := NewTensor(shape)
	for b := range B {
		for h := range H {
			src := (b*(H/g) + h/g) * per
			copy(rep.Data[(b*H+h)*per:(b*H+h+1)*per], x.Data[src:src+per])
		}
	}
	return rep
}
