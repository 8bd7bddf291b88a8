package ref

import (
	"fmt"
	"math"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// Eltwise ops compute each element in float32 (one rounding per element, as
// an fp32 DEST holds it); transcendental functions are the shared SFPU
// helpers of package numerics (float64 formula rounded once to float32).
// With StorageFormats, add, sub and mul are the FPU's (deviceAdd,
// deviceMul): fp32 operands are read as tf32. Scalar attributes are converted to float32 first, as the device
// receives them as 32-bit arguments.
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpAdd: fpuBinary(deviceAdd, false),
		ir.OpSub: fpuBinary(deviceSub, true),
		ir.OpMul: fpuBinary(deviceMul, false),
	})
	// The SFPU ops: their ir/sfpu element function under the options'
	// SFPU code for the result's dtype (sfpuEvalTo).
	sfpuOps := map[ir.OpKind]evalFunc{}
	for _, k := range ir.ChainableOps() {
		if _, param, ok := sfpuEval(k, DefaultOptions()); ok {
			sfpuOps[k] = func(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
				dt, err := resultDType(op, 0)
				if err != nil {
					return nil, err
				}
				eval, _, _ := sfpuEvalTo(k, dt, opts)
				if param {
					return scalar(eval)(op, args, opts)
				}
				return unary(func(x float32) float32 { return eval(x, 0) })(op, args, opts)
			}
		}
	}
	register(sfpuOps)
}

// sfpuEval is the element function of SFPU op k (the ir/sfpu Table entry
// of its name) and whether it takes the value attribute. With
// StorageFormats it is the device's: tcc's program executed instruction
// by instruction (opts.SFPU sfpu.CodeTCC) or the exact function
// (sfpu.CodeLLK, whose tt-metal calls the simulator models exactly);
// without, the exact function.
func sfpuEval(k ir.OpKind, opts Options) (eval func(x, p float32) float32, param, ok bool) {
	op, ok := sfpu.ByName(k.String())
	if !ok {
		return nil, false, false
	}
	return op.Func(sfpuCode(opts)), op.HasParam(), true
}

// sfpuEvalTo is sfpuEval for a result rounded to dt: for bf16, the op
// sfpu.Op.ForBF16Result names (silu_bf16 for silu when
// sfpu.SiLUBF16ForBF16Results is set; else the op itself), as the
// lowerings run it (codegen/lower lowerUnary, chainSFPUSteps).
func sfpuEvalTo(k ir.OpKind, dt ir.DType, opts Options) (eval func(x, p float32) float32, param, ok bool) {
	op, ok := sfpu.ByName(k.String())
	if !ok {
		return nil, false, false
	}
	if dt == ir.BF16 {
		op = op.ForBF16Result()
	}
	return op.Func(sfpuCode(opts)), op.HasParam(), true
}

// sfpuCode is the SFPU code the reference computes with under opts: the
// device's with StorageFormats, the exact functions without.
func sfpuCode(opts Options) sfpu.Code {
	if !opts.StorageFormats {
		return sfpu.CodeLLK
	}
	return opts.SFPU
}

// sfpuFuncs are the SFPU element functions the fused ops' references
// compute with, as sfpuEval chooses them under the options (the device's
// SFPU code with StorageFormats, the exact functions without).
type sfpuFuncs struct {
	exp, recip, rsqrt, sigmoid, silu, softplus func(float32) float32
	// siluBF16 is silu where the result is rounded to bf16
	// (sfpu.Op.ForBF16Result; the exact function under CodeLLK): siluTo
	// picks it by the result's dtype. sigmoid has no such use yet.
	siluBF16 func(float32) float32
	// expSoftmax is the flash prefill softmax's exp (sfpu.ExpSoftmax).
	expSoftmax func(float32) float32
	// neg (unary), add, mul and min (of two DEST tiles'
	// elements, x op y with x the tile the result overwrites) and
	// mulScalar (x times the parameter y): the plain arithmetic steps of
	// the flash prefill attention's online softmax
	// (attender.attendFlashFPU).
	neg                      func(float32) float32
	add, mul, min, mulScalar func(x, y float32) float32
}

var sfpuFuncsByCode = func() map[sfpu.Code]*sfpuFuncs {
	m := map[sfpu.Code]*sfpuFuncs{}
	for _, c := range sfpu.Codes {
		f := func(o sfpu.Op) func(float32) float32 {
			e := o.Func(c)
			return func(x float32) float32 { return e(x, 0) }
		}
		m[c] = &sfpuFuncs{exp: f(sfpu.Exp), recip: f(sfpu.Recip), rsqrt: f(sfpu.Rsqrt), sigmoid: f(sfpu.Sigmoid), silu: f(sfpu.SiLU), softplus: f(sfpu.Softplus),
			siluBF16: f(sfpu.SiLUBF16), expSoftmax: f(sfpu.ExpSoftmax),
			neg: f(sfpu.Negative), add: sfpu.AddBinary.Func(c), mul: sfpu.MulBinary.Func(c), min: sfpu.MinBinary.Func(c), mulScalar: sfpu.MulScalar.Func(c)}
	}
	return m
}()

// siluTo is silu for a result rounded to dt: siluBF16 for bf16.
func (f *sfpuFuncs) siluTo(dt ir.DType) func(float32) float32 {
	if dt == ir.BF16 && sfpu.SiLU.ForBF16Result() == sfpu.SiLUBF16 {
		return f.siluBF16
	}
	return f.silu
}

// sfpuFor is the SFPU element functions under opts.
func sfpuFor(opts Options) *sfpuFuncs {
	if !opts.StorageFormats {
		return sfpuFuncsByCode[sfpu.CodeLLK]
	}
	return sfpuFuncsByCode[opts.SFPU]
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

// deviceAdd is a + b as an FPU add computes it: with StorageFormats, the
// eltwise datapath numerics.FPUAdd into an fp32 DEST on source-register
// operands (bf16 and block-float data exact, fp32 data truncated to tf32 by
// the unpacker: every binary eltwise program reads its operands through
// SrcA and SrcB, codegen/lower/eltwise.go). The sum is symmetric in its
// operands.
func deviceAdd(a, b float32, opts Options) float32 {
	if !opts.StorageFormats {
		return a + b
	}
	return numerics.FPUAdd(numerics.TruncTF32(a), numerics.TruncTF32(b), true)
}

// deviceSub is a - b as deviceAdd computes a + (-b).
func deviceSub(a, b float32, opts Options) float32 { return deviceAdd(a, -b, opts) }

// deviceMul is a * b as mul_tiles computes it with a in SrcA and b in
// SrcB: with StorageFormats, numerics.FPUMul at opts.Fidelity on tf32
// reads of fp32 data (SrcA drops tf32's last mantissa bit, so the order
// matters for fp32 operands; the exact float32 product for bf16 ones at
// HiFi4). A zero operand gives +0 whatever the other's sign: the FPU's
// arithmetic never writes -0 (ELWMUL of a zero source word adds nothing to
// the cleared DEST; ttsim's vectors in ir/numerics/testdata), where IEEE
// float32 gives -0 for a negative times zero.
func deviceMul(a, b float32, opts Options) float32 {
	if !opts.StorageFormats {
		return a * b
	}
	if a == 0 || b == 0 { // -x * 0 => +0, as FPUMul gives
		return 0
	}
	// Fast path: at HiFi4 the product of two bf16 values well inside the
	// normal range is the exact float32 product (TestDeviceMulFastPath;
	// near underflow and overflow the FPU's products differ).
	if p := a * b; opts.Fidelity == ir.HiFi4 && numerics.IsBF16(a) && numerics.IsBF16(b) && midRange(a) && midRange(b) && midRange(p) {
		return p
	}
	return numerics.FPUMul(numerics.TruncTF32(a), numerics.TruncTF32(b), 0, opts.Fidelity, true)
}

// midRange reports whether x is zero or of magnitude in [2^-64, 2^64].
func midRange(x float32) bool {
	ax := math.Abs(float64(x))
	return x == 0 || (ax >= 0x1p-64 && ax <= 0x1p64)
}

// fpuBinary applies an FPU eltwise op element-wise with broadcasting. The
// FPU broadcasts only its second operand (SrcB), so when the first operand
// alone broadcasts inside a tile the device swaps them
// (codegen/lower/eltwise.go lowerBinary): f then gets (b, a) for add and
// mul, and sub computes -(b - a). When both broadcast, a sub whose second
// operand broadcasts its row alone also computes -(b - a) (the device
// expands b and subtracts a's broadcast from it). The negation is the
// SFPU's sign flip, so b - a = +0 gives -0 there.
func fpuBinary(f func(a, b float32, opts Options) float32, sub bool) evalFunc {
	return func(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
		out, err := broadcastShape(args[0].Shape, args[1].Shape)
		if err != nil {
			return nil, err
		}
		bcA, bcB := inTileBroadcast(args[0].Shape, out), inTileBroadcast(args[1].Shape, out)
		if sub && bcA && bcB && rowBroadcastOnly(args[1].Shape, out) { // a - rows(b) => -(rows(b) - a)
			return binary(func(a, b float32) float32 { return -f(b, a, opts) })(op, args, opts)
		}
		if !bcA || bcB {
			return binary(func(a, b float32) float32 { return f(a, b, opts) })(op, args, opts)
		}
		return binary(func(a, b float32) float32 {
			if sub {
				return -f(b, a, opts)
			}
			return f(b, a, opts)
		})(op, args, opts)
	}
}

// inTileBroadcast reports whether an operand of shape in broadcasts along
// the rows or columns of a tile of the result shape out (its second-to-last
// or last dimension is 1 where out's is larger; a missing dimension counts
// as 1), the broadcasts the FPU applies to SrcB.
func inTileBroadcast(in, out ir.Shape) bool {
	dim := func(s ir.Shape, fromEnd int) int {
		if i := len(s) - fromEnd; i >= 0 {
			return s[i]
		}
		return 1
	}
	for e := 1; e <= 2; e++ {
		if dim(in, e) == 1 && dim(out, e) > 1 {
			return true
		}
	}
	return false
}

// rowBroadcastOnly reports whether an operand of shape in broadcasts its
// row over a tile of the result shape out and not its column (the FPU's
// bcast rows; both is bcast scalar).
func rowBroadcastOnly(in, out ir.Shape) bool {
	dim := func(s ir.Shape, fromEnd int) int {
		if i := len(s) - fromEnd; i >= 0 {
			return s[i]
		}
		return 1
	}
	bcast := func(e int) bool { return dim(in, e) == 1 && dim(out, e) > 1 }
	return bcast(2) && !bcast(1)
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
