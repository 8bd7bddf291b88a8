package ref

import (
	"fmt"
	"math"
	"slices"

	"github.com/tcc-dev/tcc/ir"
)

// Fused ops of the common fusion families (matmul, MLP, residual,
// collective, eltwise, layout; ir/opspec/fused.go, fusedCommonOps). Each is
// evaluated from its Doc line, not through its decomposition, and rounds
// intermediate values exactly where the Doc line says ("r"), through
// finish: to the storage dtype with StorageFormats, not at all without.
// Those points are the composed ops' result roundings, so with either
// Options a fused op equals its decomposition bit for bit whenever the
// intermediate dtypes are the ones the Doc line names (the rules check
// that). The last rounding of each result is runOp's, as for any op.
//
// The collectives with a residual (all_reduce_add, all_reduce_add_rmsnorm)
// have two evaluators, like the plain collectives: the single-device one
// below (devices 1: the sum over one device is x itself; more devices is an
// error) and meshAllReduceAdd for a whole mesh row, which takes every
// operand of every device (fusedMeshEvaluators).
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpMatmul2:                 evalMatmulMulti,
		ir.OpMatmul3:                 evalMatmulMulti,
		ir.OpMatmul4:                 evalMatmulMulti,
		ir.OpMatmulAdd:               evalMatmulAdd,
		ir.OpRMSNormMatmul:           evalRMSNormMatmul,
		ir.OpMatmulSwiGLU:            evalMatmulSwiGLU,
		ir.OpAddRMSNorm:              evalAddRMSNorm,
		ir.OpAllReduceAdd:            evalAllReduceAddOneDevice,
		ir.OpAllReduceAddRMSNorm:     evalAllReduceAddOneDevice,
		ir.OpArgmaxSharded:           evalArgmaxShardedOneDevice,
		ir.OpEltwiseChain:            evalEltwiseChain,
		ir.OpRMSNormPlainChain:       evalRMSNormPlainChain,
		ir.OpLayoutNormPlainChain:    evalLayoutNormPlainChain,
		ir.OpConvDepthwiseChain:      evalConvDepthwiseChain,
		ir.OpConvDepthwiseStateChain: evalConvDepthwiseStateChain,
		ir.OpEmbeddingReshape:        evalEmbeddingReshape,
		ir.OpLayoutChain:             evalLayoutChain,
		ir.OpBMMTransposeB:           evalBMMTransposeB,
		ir.OpBMMTransposeBMul:        evalBMMTransposeBMul,
		ir.OpBMMScaleB:               evalBMMScaleB,
		ir.OpUnaryMul:                evalUnaryMul,
		ir.OpNormLayoutGate:          evalNormLayoutGate,
	})
}

// meshOpFunc computes a collective that reads several operands per device:
// args[c] holds device c's operands (in operand order) for the devices of
// one mesh row; it returns each device's results before the final storage
// rounding, in device order.
type meshOpFunc func(op *ir.Op, args [][]Tensor, opts Options) ([][]Tensor, error)

// fusedMeshEvaluators are the mesh evaluators of the fused collectives. The
// plain collectives' table (meshEvaluators) passes only operand 0 of each
// device and stores only result 0, so these need EvalMesh to dispatch on
// this table too (see FusedMeshOp).
var fusedMeshEvaluators = map[ir.OpKind]meshOpFunc{
	ir.OpAllReduceAdd:        meshAllReduceAdd,
	ir.OpAllReduceAddRMSNorm: meshAllReduceAdd,
	ir.OpArgmaxSharded:       meshArgmaxSharded,
}

// isFusedCollective reports whether k is a fused collective, evaluated
// over a mesh row by evalFusedCollectiveInto.
func isFusedCollective(k ir.OpKind) bool { _, ok := fusedMeshEvaluators[k]; return ok }

// resultDType is the dtype of op's result i; Doc lines of the fused ops
// say which result dtype an intermediate rounds to.
func resultDType(op *ir.Op, i int) (ir.DType, error) {
	if op == nil || i >= len(op.Results) || op.Results[i] == nil {
		return ir.InvalidDType, fmt.Errorf("op has no result %d to take the rounding dtype from", i)
	}
	return op.Results[i].Type.DType, nil
}

// matmulOf is a @ w exactly as the matmul op computes it (evalMatmul).
func matmulOf(a, w Tensor, opts Options) (Tensor, error) {
	out, err := evalMatmul(nil, []Tensor{a, w}, opts)
	if err != nil {
		return Tensor{}, err
	}
	return out[0], nil
}

// evalMatmulMulti: out_i = a @ w_i for every weight operand; with the
// users attribute the [1, B, N] products are viewed as [B, 1, N] (the
// same row-major elements).
func evalMatmulMulti(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	users := 0
	if op != nil {
		var err error
		if users, err = ir.MatmulUsers(op.Attrs); err != nil {
			return nil, err
		}
	}
	outs := make([]Tensor, 0, len(args)-1)
	for i, w := range args[1:] {
		o, err := matmulOf(args[0], w, opts)
		if err != nil {
			return nil, fmt.Errorf("weight %d: %w", i, err)
		}
		if users > 0 {
			if s := o.Shape; s.Rank() != 3 || s[0] != 1 || s[1] != users {
				return nil, fmt.Errorf("rule matmul-users: with users = %d the product must be [1, %d, N], got %s", users, users, s)
			}
			o.Shape = ir.Shape{users, 1, o.Shape[2]}
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// addSame is the element-wise deviceAdd of two tensors of one shape.
func addSame(rule string, a, b Tensor, opts Options) (Tensor, error) {
	if !a.Shape.Equal(b.Shape) {
		return Tensor{}, fmt.Errorf("rule %s: shapes %s and %s must be equal", rule, a.Shape, b.Shape)
	}
	out := NewTensor(a.Shape)
	for i := range out.Data {
		out.Data[i] = deviceAdd(a.Data[i], b.Data[i], opts)
	}
	return out, nil
}

// normAttrs reads eps and offset.
func normAttrs(op *ir.Op) (eps, offset float64, err error) {
	if eps, err = attrFloat(op, "eps"); err != nil {
		return 0, 0, err
	}
	offset, err = attrFloat(op, "offset")
	return eps, offset, err
}

// evalMatmulAdd: out = residual + r(a @ w), r to the result dtype.
func evalMatmulAdd(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	mm, err := matmulOf(args[0], args[1], opts)
	if err != nil {
		return nil, err
	}
	if mm, err = finishResult(dt, mm, opts); err != nil {
		return nil, err
	}
	out, err := addSame("matmul-add-residual", args[2], mm, opts)
	if err != nil {
		return nil, err
	}
	return []Tensor{out}, nil
}

// evalBMMTransposeBMul: out = r(r(bmm_transpose_b(a, b)) * c), r to the
// result dtype: the product rounded as bmm_transpose_b stores it, then
// the FPU's multiply with the product as its first operand (as mul reads
// its operands), rounded by the caller's finish.
func evalBMMTransposeBMul(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	mm, err := evalBMMTransposeB(op, args[:2], opts)
	if err != nil {
		return nil, err
	}
	p, err := finishResult(dt, mm[0], opts)
	if err != nil {
		return nil, err
	}
	c := args[2]
	if !c.Shape.Equal(p.Shape) {
		return nil, fmt.Errorf("rule bmm-mul-operand: c %s must have the product's shape %s", c.Shape, p.Shape)
	}
	out := NewTensor(p.Shape)
	for i := range out.Data {
		out.Data[i] = deviceMul(p.Data[i], c.Data[i], opts)
	}
	return []Tensor{out}, nil
}

// evalBMMScaleB: out = bmm(a, r(b * c)), c [.., K, 1] broadcast over b's
// columns: the multiply as mul computes it (the FPU's, b first), rounded
// to b's dtype r as mul stores it, then bmm; the caller's finish rounds
// the result.
func evalBMMScaleB(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	scaled, err := fpuBinary(deviceMul, false)(op, args[1:3], opts)
	if err != nil {
		return nil, err
	}
	if !scaled[0].Shape.Equal(args[1].Shape) {
		return nil, fmt.Errorf("rule bmm-scale-operand: c %s must broadcast to b %s", args[2].Shape, args[1].Shape)
	}
	if len(op.Operands) < 2 {
		return nil, fmt.Errorf("rule bmm-scale-operand: %s has no operand b", op.Name())
	}
	b, err := finishResult(op.Operands[1].Type.DType, scaled[0], opts)
	if err != nil {
		return nil, err
	}
	return evalBMM(op, []Tensor{args[0], b}, opts)
}

// evalUnaryMul: out = r(r(u(x)) * y): u (attribute op, with its value) as
// its own evaluator computes it, rounded to x's dtype as u stores it, then
// mul's FPU multiply (u(x) first); the caller's finish rounds the result.
func evalUnaryMul(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	name, err := attrString(op, "op")
	if err != nil {
		return nil, err
	}
	kind, ok := ir.LookupOp(name)
	if !ok || !slices.Contains(ir.ChainableOps(), kind) {
		return nil, fmt.Errorf("rule unary-mul-op: %q is not a unary SFPU op", name)
	}
	attrs := ir.Attrs{}
	if v, ok := op.Attrs["value"]; ok {
		attrs["value"] = v
	}
	fn, ok := evaluators[kind]
	if !ok || len(op.Operands) < 1 {
		return nil, fmt.Errorf("rule unary-mul-op: no evaluator for %s", name)
	}
	// the unary's result is rounded to x's dtype (ForBF16Result's op
	// for bf16, sfpuEvalTo)
	u, err := fn(&ir.Op{Kind: kind, Attrs: attrs, Results: []*ir.Value{{Type: op.Operands[0].Type}}}, args[:1], opts)
	if err != nil {
		return nil, err
	}
	ur, err := finishResult(op.Operands[0].Type.DType, u[0], opts)
	if err != nil {
		return nil, err
	}
	return fpuBinary(deviceMul, false)(op, []Tensor{ur, args[1]}, opts)
}

// evalNormLayoutGate: rms_norm(x, w) as evalRMSNorm computes it, rounded
// to x's dtype as the norm stores it, moved by evalLayoutChain (steps, no
// dtype), then evalUnaryMul(z, moved) with z's dtype; the caller's finish
// rounds the result.
func evalNormLayoutGate(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if len(op.Operands) != 3 || len(args) != 3 {
		return nil, fmt.Errorf("rule operands: %s takes x, w and z", op.Name())
	}
	normed, err := evalRMSNorm(op, args[:2], opts)
	if err != nil {
		return nil, err
	}
	nr, err := finishResult(op.Operands[0].Type.DType, normed[0], opts)
	if err != nil {
		return nil, err
	}
	moved, err := evalLayoutChain(&ir.Op{Kind: ir.OpLayoutChain, Attrs: ir.Attrs{"steps": op.Attrs["steps"]}}, []Tensor{nr}, opts)
	if err != nil {
		return nil, err
	}
	gate := &ir.Op{Kind: ir.OpUnaryMul, Attrs: ir.Attrs{"op": op.Attrs["op"]}, Operands: []*ir.Value{op.Operands[2], nil}}
	if v, ok := op.Attrs["value"]; ok {
		gate.Attrs["value"] = v
	}
	return evalUnaryMul(gate, []Tensor{args[2], moved[0]}, opts)
}

// evalRMSNormMatmul: out = r(rmsnorm(x, wn)) @ w, r to the result dtype.
func evalRMSNormMatmul(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	eps, offset, err := normAttrs(op)
	if err != nil {
		return nil, err
	}
	n, err := rmsNormRows(args[0], args[1], eps, offset, opts.rowSplit(op), opts)
	if err != nil {
		return nil, err
	}
	if n, err = finishResult(dt, n, opts); err != nil {
		return nil, err
	}
	out, err := matmulOf(n, args[2], opts)
	if err != nil {
		return nil, err
	}
	return []Tensor{out}, nil
}

// evalMatmulSwiGLU: out = r(silu(r(a @ w_gate))) * r(a @ w_up), r to the
// result dtype; the product is fp32. silu is the device's for a result of
// that dtype (siluTo: silu_bf16's program for bf16).
func evalMatmulSwiGLU(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	gate, err := matmulOf(args[0], args[1], opts)
	if err != nil {
		return nil, fmt.Errorf("w_gate: %w", err)
	}
	up, err := matmulOf(args[0], args[2], opts)
	if err != nil {
		return nil, fmt.Errorf("w_up: %w", err)
	}
	if !gate.Shape.Equal(up.Shape) {
		return nil, fmt.Errorf("rule swiglu-weights: gate %s and up %s products differ in shape", gate.Shape, up.Shape)
	}
	if gate, err = finishResult(dt, gate, opts); err != nil {
		return nil, err
	}
	if up, err = finishResult(dt, up, opts); err != nil {
		return nil, err
	}
	act := NewTensor(gate.Shape)
	silu := sfpuFor(opts).siluTo(dt)
	for i, g := range gate.Data {
		act.Data[i] = silu(g)
	}
	if act, err = finishResult(dt, act, opts); err != nil {
		return nil, err
	}
	out := NewTensor(gate.Shape)
	for i := range out.Data {
		out.Data[i] = act.Data[i] * up.Data[i]
	}
	return []Tensor{out}, nil
}

// evalAddRMSNorm: h = a + b (fp32), normed = rmsnorm(r(h), w); results h
// and normed (runOp rounds both).
func evalAddRMSNorm(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	return addNorm(op, args[0], args[1], &args[2], opts)
}

// addNorm computes h = a + b and, with a weight, normed = rmsnorm(r(h), w)
// with op's eps and offset; r rounds to result 0's dtype. w == nil (no
// norm) returns just h.
func addNorm(op *ir.Op, a, b Tensor, w *Tensor, opts Options) ([]Tensor, error) {
	h, err := addSame("add-operands", a, b, opts)
	if err != nil {
		return nil, err
	}
	if w == nil {
		return []Tensor{h}, nil
	}
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	eps, offset, err := normAttrs(op)
	if err != nil {
		return nil, err
	}
	if h, err = finishResult(dt, h, opts); err != nil {
		return nil, err
	}
	n, err := rmsNormRows(h, *w, eps, offset, opts.rowSplit(op), opts)
	if err != nil {
		return nil, err
	}
	return []Tensor{h, n}, nil
}

// allReduceAddTail finishes all_reduce_add[_rmsnorm] for one device from
// the reduced sum s (before rounding): h = residual + r(s), then the norm
// if the op has one.
func allReduceAddTail(op *ir.Op, s Tensor, dev []Tensor, opts Options) ([]Tensor, error) {
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	if s, err = finishResult(dt, s, opts); err != nil {
		return nil, err
	}
	var w *Tensor
	if op.Kind == ir.OpAllReduceAddRMSNorm {
		if len(dev) < 3 {
			return nil, fmt.Errorf("all_reduce_add_rmsnorm needs a norm weight operand")
		}
		w = &dev[2]
	}
	return addNorm(op, dev[1], s, w, opts)
}

// evalAllReduceAddOneDevice: the single-device evaluator; the sum over one
// device is x itself, more devices need FusedMeshOp.
func evalAllReduceAddOneDevice(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if err := oneDevice(op, "evaluate it with FusedMeshOp (EvalMesh)"); err != nil {
		return nil, err
	}
	return allReduceAddTail(op, args[0].Clone(), args, opts)
}

// meshAllReduceAdd: s = the element-wise sum of every device's x
// (sumDevices), then each device finishes with
// its own residual (and norm weight).
func meshAllReduceAdd(op *ir.Op, args [][]Tensor, opts Options) ([][]Tensor, error) {
	xs := make([]Tensor, len(args))
	for c, dev := range args {
		if len(dev) < 2 {
			return nil, fmt.Errorf("device %d has %d operands, want x and residual", c, len(dev))
		}
		if !dev[0].Shape.Equal(args[0][0].Shape) {
			return nil, fmt.Errorf("rule collective-shapes: every device's x must have one shape; device 0 has %s, device %d has %s", args[0][0].Shape, c, dev[0].Shape)
		}
		xs[c] = dev[0]
	}
	s := sumDevices(xs, opts)
	outs := make([][]Tensor, len(args))
	for c, dev := range args {
		r, err := allReduceAddTail(op, s.Clone(), dev, opts)
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", c, err)
		}
		outs[c] = r
	}
	return outs, nil
}

// FusedMeshOp evaluates one fused collective (all_reduce_add,
// all_reduce_add_rmsnorm) for the devices of one mesh row, as EvalOp does
// for one device: args[c] holds device c's operands in operand order; with
// opts.StorageFormats each is first rounded through its operand's declared
// dtype. It returns each device's results, rounded through the results'
// dtypes with opts.StorageFormats. The devices attribute must equal
// len(args); args is not modified.
func FusedMeshOp(op *ir.Op, args [][]Tensor, opts Options) ([][]Tensor, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if op == nil {
		return nil, fmt.Errorf("ref: FusedMeshOp: op is nil")
	}
	stored := make([][]Tensor, len(args))
	for c, dev := range args {
		if len(dev) != len(op.Operands) {
			return nil, fmt.Errorf("ref: %s: device %d has %d operands, the op takes %d", op.Where(), c, len(dev), len(op.Operands))
		}
		for i, t := range dev {
			st, err := finish(op.Operands[i].Type.DType, t, opts)
			if err != nil {
				return nil, fmt.Errorf("ref: %s: device %d operand %d (%s %s): %w", op.Where(), c, i, op.Operands[i].Type.Shape, op.Operands[i].Type.DType, err)
			}
			stored[c] = append(stored[c], st)
		}
	}
	outs, err := fusedMeshOp(op, stored, opts)
	if err != nil {
		return nil, fmt.Errorf("ref: %w", err)
	}
	return outs, nil
}

// fusedMeshOp is FusedMeshOp without the option check; errors name the op.
func fusedMeshOp(op *ir.Op, args [][]Tensor, opts Options) (outs [][]Tensor, err error) {
	f, ok := fusedMeshEvaluators[op.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: not a fused collective", op.Where())
	}
	n, err := collectiveDevices(op)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.Where(), err)
	}
	if n != len(args) {
		return nil, fmt.Errorf("%s: rule collective-mesh: spans %d devices, got the operands of %d", op.Where(), n, len(args))
	}
	for c, dev := range args {
		if len(dev) != len(op.Operands) {
			return nil, fmt.Errorf("%s: device %d has %d operands, the op takes %d", op.Where(), c, len(dev), len(op.Operands))
		}
		for i, t := range dev {
			if err := t.check(); err != nil {
				return nil, fmt.Errorf("%s: device %d operand %d: %w", op.Where(), c, i, err)
			}
		}
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s%s: internal error in the reference evaluator: %v", op.Where(), shapesOf(args[0]), p)
		}
	}()
	raw, err := f(op, args, opts)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", op.Where(), shapesOf(args[0]), err)
	}
	outs = make([][]Tensor, len(raw))
	for c, res := range raw {
		if len(res) != len(op.Results) {
			return nil, fmt.Errorf("%s: device %d: evaluator returned %d results, op has %d", op.Where(), c, len(res), len(op.Results))
		}
		for i, r := range op.Results {
			if !res[i].Shape.Equal(r.Type.Shape) {
				return nil, fmt.Errorf("%s: device %d result %d has shape %s but its declared type is %s", op.Where(), c, i, res[i].Shape, r.Type)
			}
			st, err := finishResult(r.Type.DType, res[i], opts)
			if err != nil {
				return nil, fmt.Errorf("%s: device %d: storing result %d as %s: %w", op.Where(), c, i, r.Type.DType, err)
			}
			outs[c] = append(outs[c], st)
		}
	}
	return outs, nil
}

// evalFusedCollectiveInto evaluates fused collective op (a kind of
// fusedMeshEvaluators) once per row of mesh on the operands of the row's
// devices and stores every device's results in its value map: EvalMesh's
// counterpart of evalCollectiveInto for collectives with several operands
// or results.
func evalFusedCollectiveInto(op *ir.Op, mesh ir.Mesh, vals []map[*ir.Value]Tensor, opts Options) error {
	for row := range mesh.Rows {
		args := make([][]Tensor, mesh.Cols)
		for c := range args {
			d := row*mesh.Cols + c
			for i, v := range op.Operands {
				t, ok := vals[d][v]
				if !ok {
					return fmt.Errorf("device %d: %s: operand %d (%s) has no value: it is not defined before use", d, op.Where(), i, v)
				}
				args[c] = append(args[c], t)
			}
		}
		outs, err := fusedMeshOp(op, args, opts)
		if err != nil {
			return err
		}
		for c, res := range outs {
			for i, r := range op.Results {
				vals[row*mesh.Cols+c][r] = res[i]
			}
		}
	}
	return nil
}

// evalEltwiseChain applies the steps of the ops attribute in order, each
// in float32 as its own op computes it, rounding to the result dtype
// between steps (runOp rounds after the last).
func evalEltwiseChain(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	s, err := attrString(op, "ops")
	if err != nil {
		return nil, err
	}
	steps, err := ir.ParseEltwiseChain(s)
	if err != nil {
		return nil, err
	}
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	return chainSteps(steps, dt, args[0].Clone(), opts)
}

// evalConvDepthwiseChain: conv_depthwise as its evaluator computes it,
// rounded to the result's dtype as the composed conv stores it, then the
// chain's steps as evalEltwiseChain computes them.
func evalConvDepthwiseChain(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	conv, err := evalConvDepthwise(&ir.Op{Kind: ir.OpConvDepthwise}, args, opts)
	if err != nil {
		return nil, err
	}
	return thenChain(op, conv[0], opts)
}

// evalConvDepthwiseStateChain: conv_depthwise_chain as
// evalConvDepthwiseChain computes it on the row concat of state and x
// (evalConcat along rank-2), the composed form it replaces.
func evalConvDepthwiseStateChain(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if len(args) != 3 || args[1].Shape.Rank() < 2 {
		return nil, fmt.Errorf("rule conv-state-shape: %s wants state, x [.., T, C] and taps", op.Name())
	}
	joined, err := evalConcat(&ir.Op{Kind: ir.OpConcat, Attrs: ir.Attrs{"axis": args[1].Shape.Rank() - 2}}, args[:2], opts)
	if err != nil {
		return nil, err
	}
	return evalConvDepthwiseChain(op, []Tensor{joined[0], args[2]}, opts)
}

// thenChain rounds first (the fused op's first stage) to op's result
// dtype, as the composed op stores it, then applies op's "ops" chain to
// it as evalEltwiseChain does.
func thenChain(op *ir.Op, first Tensor, opts Options) ([]Tensor, error) {
	dt, err := resultDType(op, 0)
	if err != nil {
		return nil, err
	}
	cur, err := finishResult(dt, first, opts)
	if err != nil {
		return nil, err
	}
	s, err := attrString(op, "ops")
	if err != nil {
		return nil, err
	}
	steps, err := ir.ParseChainSteps(s)
	if err != nil {
		return nil, err
	}
	return chainSteps(steps, dt, cur, opts)
}

// chainSteps applies steps to cur in place as evalEltwiseChain does,
// rounding to dt between steps.
func chainSteps(steps []ir.ChainStep, dt ir.DType, cur Tensor, opts Options) ([]Tensor, error) {
	var err error
	for i, st := range steps {
		if i > 0 {
			if cur, err = finishResult(dt, cur, opts); err != nil {
				return nil, err
			}
		}
		f, err := chainFunc(st, dt, opts)
		if err != nil {
			return nil, err
		}
		for j, v := range cur.Data {
			cur.Data[j] = f(v)
		}
	}
	return []Tensor{cur}, nil
}

// evalRMSNormPlainChain: rms_norm_plain as its evaluator computes it,
// rounded to the result's dtype as the composed norm stores it, then the
// chain's steps as evalEltwiseChain computes them.
func evalRMSNormPlainChain(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	eps, err := attrFloat(op, "eps")
	if err != nil {
		return nil, err
	}
	normed, err := evalRMSNormPlain(&ir.Op{Kind: ir.OpRMSNormPlain, Attrs: ir.Attrs{"eps": eps}}, args, opts)
	if err != nil {
		return nil, err
	}
	return thenChain(op, normed[0], opts)
}

// evalLayoutNormPlainChain: the layout_chain as evalLayoutChain moves it
// (a bf16 to fp32 dtype keeps every value), then evalRMSNormPlainChain on
// the moved values.
func evalLayoutNormPlainChain(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	moved, err := evalLayoutChain(op, args, opts)
	if err != nil {
		return nil, err
	}
	return evalRMSNormPlainChain(op, moved, opts)
}

// chainFunc is one chain step's element function, as the standalone op's
// evaluator computes it (its ir/sfpu Table entry), for a result rounded to
// dt: sfpu.Op.ForBF16Result's op for bf16 (codegen/lower chainSFPUSteps
// runs the same); scalar values are converted to float32 first, as the
// device receives them.
func chainFunc(st ir.ChainStep, dt ir.DType, opts Options) (func(float32) float32, error) {
	eval, _, ok := sfpuEvalTo(st.Op, dt, opts)
	if !ok || !st.Op.Info().SFPU {
		return nil, fmt.Errorf("rule eltwise-chain-op: %s is not a chainable op", st.Op)
	}
	s := float32(st.Value)
	return func(x float32) float32 { return eval(x, s) }, nil
}

// evalEmbeddingReshape: out = table rows gathered by ids, in ids' order,
// viewed with the shape attribute.
func evalEmbeddingReshape(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	shape, err := attrInts(op, "shape")
	if err != nil {
		return nil, err
	}
	ids, table := args[0], args[1]
	if table.Shape.Rank() != 2 {
		return nil, fmt.Errorf("rule embedding-table: table must be [vocab, hidden], got %s", table.Shape)
	}
	v, h := table.Shape[0], table.Shape[1]
	out := NewTensor(ir.Shape(shape))
	if len(out.Data) != len(ids.Data)*h {
		return nil, fmt.Errorf("rule reshape-numel: %d ids x %d columns do not fill shape %v", len(ids.Data), h, shape)
	}
	for t, id := range ids.Data {
		f := float64(id)
		if f != math.Trunc(f) || f < 0 || f >= float64(v) {
			return nil, fmt.Errorf("rule embedding-id: id %v at position %d is not a row of the %d-row table %s (want an integer in [0, %d))", id, t, v, table.Shape, v)
		}
		copy(out.Data[t*h:(t+1)*h], table.Data[int(id)*h:(int(id)+1)*h])
	}
	return []Tensor{out}, nil
}

// evalLayoutChain applies the steps of op's steps attribute in order, each
// with its own op's evaluator (data movement only: values unchanged).
func evalLayoutChain(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	s, err := attrString(op, "steps")
	if err != nil {
		return nil, err
	}
	steps, err := ir.ParseLayoutChain(s)
	if err != nil {
		return nil, err
	}
	cur := args[0]
	for i, st := range steps {
		out, err := evaluators[st.Op](&ir.Op{Kind: st.Op, Attrs: st.Attrs}, []Tensor{cur}, opts)
		if err != nil {
			return nil, fmt.Errorf("layout_chain step %d (%s): %w", i, st, err)
		}
		cur = out[0]
	}
	return []Tensor{cur}, nil
}
