package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/sim/numerics"
)

// Eltwise ops compute each element in float32 (one rounding per element, as
// an fp32 DEST holds it); transcendental functions are the shared SFPU
// helpers of package numerics (float64 formula rounded once to float32).
// Multiplication is the exact float32 product, which equals the FPU's HiFi4
// product for bf16 and block-float operands; eltwise fidelity is not
// modelled. Scalar attributes are converted to float32 first, as the device
// receives them as 32-bit arguments.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpAdd: fpuBinary(deviceAdd),
		ir.OpSub: fpuBinary(deviceSub),
		ir.OpMul: binary(func(a, b float32) float32 { return a * b }),
	})
	// The SFPU ops: the semantics of their kir.SFPUTable entry.
	sfpu := map[ir.OpKind]evalFunc{}
	for _, k := range ir.ChainableOps() {
		if eval, param, ok := sfpuEval(k); ok && param {
			sfpu[k] = scalar(eval)
		} else if ok {
			sfpu[k] = unary(func(x float32) float32 { return eval(x, 0) })
		}
	}
	register(sfpu)
}

// sfpuEval is the element function of SFPU op k (the kir.SFPUTable entry
// of its name) and whether it takes the value attribute.
func sfpuEval(k ir.OpKind) (eval func(x, p float32) float32, param, ok bool) {
	op, ok := kir.SFPUByName(k.String())
	if !ok {
		return nil, false, false
	}
	return op.Spec().Eval, op.HasParam(), true
}

// unary applies f to every element of the single operand.
func unary(f func(float32) float32) evalFunc {
	return func(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
		x := args[0]
		out := NewTensor(x.Shape)
		for i, v := range x.Data {
			out.Data[i] = f(v)
		}
		return []Tensor{out}, nil
	}
}

// scalar applies f(x, float32(value)) to every element.
func scalar(f func(x, s float32) float32) evalFunc {
	return func(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
		v, err := attrFloat(op, "value")
		if err != nil {
			return nil, err
		}
		s := float32(v)
		x := args[0]
		out := NewTensor(x.Shape)
		for i, xv := range x.Data {
			out.Data[i] = f(xv, s)
		}
		return []Tensor{out}, nil
	}
}

// binary applies f element-wise with numpy broadcasting.
func binary(f func(a, b float32) float32) evalFunc {
	return func(_ *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
		out, err := broadcast2(args[0], args[1], f)
		if err != nil {
			return nil, err
		}
		return []Tensor{out}, nil
	}
}

// deviceAdd is a + b as an FPU add computes it. With StorageFormats and
// two bf16 operands (bf16 or block-float data) it is the eltwise datapath
// numerics.FPUAdd into an fp32 DEST: the smaller operand aligned to the
// larger in 11 bits, rounded half up. Otherwise it is float32 addition:
// what an fp32 operand goes through depends on the kernel (truncated to
// tf32 in a source register, or kept exact in DEST), which the graph does
// not say.
func deviceAdd(a, b float32, opts Options) float32 {
	if !opts.StorageFormats || !numerics.IsBF16(a) || !numerics.IsBF16(b) {
		return a + b
	}
	return numerics.FPUAdd(a, b, true)
}

// deviceSub is a - b as deviceAdd computes a + (-b).
func deviceSub(a, b float32, opts Options) float32 { return deviceAdd(a, -b, opts) }

// fpuBinary applies an FPU eltwise op element-wise with broadcasting.
func fpuBinary(f func(a, b float32, opts Options) float32) evalFunc {
	return func(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
		return binary(func(a, b float32) float32 { return f(a, b, opts) })(op, args, opts)
	}
}

// broadcastShape applies numpy broadcasting: shapes are aligned at their
// last dimension and each pair of dimensions must be equal or contain a 1.
func broadcastShape(a, b ir.Shape) (ir.Shape, error) {
	n := max(len(a), len(b))
	out := make(ir.Shape, n)
	for i := range out {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("rule broadcast: shapes %s and %s differ at output dim %d (%d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}

// broadcastStrides returns, per dimension of out, the stride of s (aligned
// at the last dimension), 0 where s has size 1 or lacks the dimension.
func broadcastStrides(s, out ir.Shape) []int {
	st := make([]int, len(out))
	stride := 1
	for i := len(s) - 1; i >= 0; i-- {
		j := len(out) - len(s) + i
		if s[i] != 1 {
			st[j] = stride
		}
		stride *= s[i]
	}
	return st
}

// broadcast2 computes f(a[i], b[i]) over the broadcast shape of a and b.
func broadcast2(a, b Tensor, f func(a, b float32) float32) (Tensor, error) {
	shape, err := broadcastShape(a.Shape, b.Shape)
	if err != nil {
		return Tensor{}, err
	}
	out := NewTensor(shape)
	if a.Shape.Equal(b.Shape) {
		for i := range out.Data {
			out.Data[i] = f(a.Data[i], b.Data[i])
		}
		return out, nil
	}
	sa, sb := broadcastStrides(a.Shape, shape), broadcastStrides(b.Shape, shape)
	idx := make([]int, len(shape))
	ia, ib := 0, 0
	for i := range out.Data {
		out.Data[i] = f(a.Data[ia], b.Data[ib])
		// Advance the multi-index, last dimension fastest.
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			ia += sa[d]
			ib += sb[d]
			if idx[d] < shape[d] {
				break
			}
			ia -= sa[d] * shape[d]
			ib -= sb[d] * shape[d]
			idx[d] = 0
		}
	}
	return out, nil
}
