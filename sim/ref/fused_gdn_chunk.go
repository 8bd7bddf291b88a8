package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// gdn_chunk_step (produced by passes/fuse_gdn.go's FuseGDNChunkStep) is one
// step of the GDN prefill's sequential loop over chunks. Its program
// computes every step as the composed op does and stores each
// intermediate as the composed op stores it, so it is evaluated here as
// the composed chain is, with the helpers the composed ops' evaluators
// use, in their order and operand order: bmm as gdnContract (evalBMM's
// batch), sub, add and mul as fpuBinary calls deviceSub, deviceAdd and
// deviceMul (gl - g swapped to -(g - gl), as the first operand is the
// broadcast one), exp as the SFPU table's, every intermediate rounded
// through the state's dtype (gdnRounder). The result equals the composed
// chain bit for bit with any Options, Composed or not.
func init() {
	register(map[ir.OpKind]evalFunc{ir.OpGDNChunkStep: evalGDNChunkStep, ir.OpGDNChunkScan: evalGDNChunkScan})
}

// evalGDNChunkStep: see the gdn_chunk_step Doc line.
func evalGDNChunkStep(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	u, wk, qg, qk, k, g, s := args[0], args[1], args[2], args[3], args[4], args[5], args[6]
	c, err := attrInt(op, "chunk")
	if err != nil {
		return nil, err
	}
	if len(op.Operands) != 7 || len(op.Results) != 2 {
		return nil, fmt.Errorf("rule gdn-chunk-arity: want 7 operands and 2 results, have %d and %d", len(op.Operands), len(op.Results))
	}
	return gdnChunkStepAt(u, wk, qg, qk, k, g, s, c, op.Operands[6].Type.DType, opts)
}

// evalGDNChunkScan: see the gdn_chunk_scan Doc line. Step i is
// gdnChunkStepAt at chunk first+i from the state step i-1 left, rounded
// to f as the composed chain stores it (its o, too, before it goes to
// the result).
func evalGDNChunkScan(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	first, err := attrInt(op, "first")
	if err != nil {
		return nil, err
	}
	count, err := attrInt(op, "count")
	if err != nil {
		return nil, err
	}
	if len(op.Operands) != 7 || len(op.Results) != 2 {
		return nil, fmt.Errorf("rule gdn-chunk-arity: want 7 operands and 2 results, have %d and %d", len(op.Operands), len(op.Results))
	}
	f := op.Operands[6].Type.DType
	kGroup, err := ir.GDNKGroup(op.Attrs)
	if err != nil {
		return nil, err
	}
	if kGroup > 1 { // k [B, H/G, N, L, Dk] per key head: value head h reads key head h/G
		kt, err := ir.GDNKGroupType("k", op.Operands[4].Type, op.Operands[6].Type, kGroup)
		if err != nil {
			return nil, err
		}
		args = append([]Tensor{}, args...)
		args[4] = repeatHeads(args[4], kt.Shape, kGroup)
	}
	r, err := gdnRounder(f, opts)
	if err != nil {
		return nil, err
	}
	if count < 1 {
		return nil, fmt.Errorf("rule gdn-chunk-index: count %d must be at least 1", count)
	}
	s := args[6]
	var o Tensor
	for i := range count {
		out, err := gdnChunkStepAt(args[0], args[1], args[2], args[3], args[4], args[5], s, first+i, f, opts)
		if err != nil {
			return nil, err
		}
		for _, t := range out {
			for j, v := range t.Data {
				t.Data[j] = r(v)
			}
		}
		if i == 0 {
			sh := out[0].Shape.Clone()
			sh[2] = count
			o = NewTensor(sh)
		}
		// o is [B, H, count, L, Dv]: step i's [L, Dv] block of (b, h) at index i.
		blk := out[0].Shape[3] * out[0].Shape[4]
		for bh := range out[0].Shape[0] * out[0].Shape[1] {
			copy(o.Data[(bh*count+i)*blk:(bh*count+i+1)*blk], out[0].Data[bh*blk:(bh+1)*blk])
		}
		s = out[1]
	}
	return []Tensor{o, s}, nil
}

// gdnChunkStepAt is gdn_chunk_step at chunk c with state s of dtype f.
func gdnChunkStepAt(u, wk, qg, qk, k, g, s Tensor, c int, f ir.DType, opts Options) ([]Tensor, error) {
	args := []Tensor{u, wk, qg, qk, k, g, s}
	ss, gs := s.Shape, g.Shape
	if ss.Rank() != 5 || ss[2] != 1 || gs.Rank() != 4 || gs[0] != ss[0] || gs[1] != ss[1] {
		return nil, fmt.Errorf("rule gdn-chunk-state: want state [B, H, 1, Dk, Dv] and g [B, H, N, L], got %s and %s", ss, gs)
	}
	B, H, Dk, Dv, N, L := ss[0], ss[1], ss[3], ss[4], gs[2], gs[3]
	for i, w := range []ir.Shape{{B, H, N, L, Dv}, {B, H, N, L, Dk}, {B, H, N, L, Dk}, {B, H, N, L, L}, {B, H, N, L, Dk}} {
		if !args[i].Shape.Equal(w) {
			return nil, fmt.Errorf("rule gdn-chunk-operand: operand %d is %s, want %s", i, args[i].Shape, w)
		}
	}
	if c < 0 || c >= N {
		return nil, fmt.Errorf("rule gdn-chunk-index: chunk %d is outside [0, %d)", c, N)
	}
	r, err := gdnRounder(f, opts)
	if err != nil {
		return nil, err
	}
	expOf, _, ok := sfpuEval(ir.OpExp, opts)
	if !ok {
		return nil, fmt.Errorf("rule gdn-chunk-exp: the SFPU table has no exp")
	}
	rs := func(x []float32) []float32 {
		for i, v := range x {
			x[i] = r(v)
		}
		return x
	}

	o := NewTensor(ir.Shape{B, H, 1, L, Dv})
	next := NewTensor(ss.Clone())
	e := make([]float32, L)
	kdT := make([]float32, Dk*L)
	sd := make([]float32, Dk*Dv)
	for bh := range B * H {
		// chunk c of a [B, H, N, L, d] operand, and the state.
		at := func(t Tensor, d int) []float32 { return t.Data[(bh*N+c)*L*d : (bh*N+c+1)*L*d] }
		s0 := s.Data[bh*Dk*Dv : (bh+1)*Dk*Dv]
		uc, wkc, qgc, qkc, kc, gc := at(u, Dv), at(wk, Dk), at(qg, Dk), at(qk, L), at(k, Dk), at(g, 1)

		// vNew = r(u_c - r(wk_c S)).
		vNew := rs(gdnContract(wkc, s0, L, Dk, Dv, opts))
		for i := range vNew {
			vNew[i] = r(deviceSub(uc[i], vNew[i], opts))
		}
		// o = r(r(qg_c S) + r(qk_c vNew)).
		p2 := rs(gdnContract(qgc, s0, L, Dk, Dv, opts))
		p3 := rs(gdnContract(qkc, vNew, L, L, Dv, opts))
		oc := o.Data[bh*L*Dv : (bh+1)*L*Dv]
		for i := range oc {
			oc[i] = deviceAdd(p2[i], p3[i], opts)
		}
		// kd = r(k_c * r(exp(r(gl - g_c)))), transposed.
		gl := gc[L-1]
		for j := range L {
			e[j] = r(expOf(r(-deviceSub(gc[j], gl, opts)), 0))
		}
		for j := range L {
			for d := range Dk {
				kdT[d*L+j] = r(deviceMul(kc[j*Dk+d], e[j], opts))
			}
		}
		// S' = r(r(S * r(exp(gl))) + r(kd^T vNew)).
		egl := r(expOf(gl, 0))
		for i, v := range s0 {
			sd[i] = r(deviceMul(v, egl, opts))
		}
		p4 := rs(gdnContract(kdT, vNew, Dk, L, Dv, opts))
		s1 := next.Data[bh*Dk*Dv : (bh+1)*Dk*Dv]
		for i := range s1 {
			s1[i] = deviceAdd(sd[i], p4[i], opts)
		}
	}
	return []Tensor{o, next}, nil
}
