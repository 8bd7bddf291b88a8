package ref

import (
	"errors"
	"fmt"
	"sort"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/ir/sfpu"
)

// Options selects how closely the evaluator follows the device's formats.
//
// The zero Options is NOT the default: it means exact float32 values with
// no storage rounding. Start from DefaultOptions (device formats, HiFi4) or
// ExactOptions (pure math) and change fields from there.
type Options struct {
	// StorageFormats rounds every value through its declared dtype's device
	// storage: graph inputs, weights and states on entry, and every op
	// result (see Store). It also makes matmul use the device's FPU
	// products (numerics.Matmul at Fidelity: the FPU datapath). When
	// false, values stay float32, typecasts to float dtypes are the
	// identity, and matmul accumulates exact float32 products in float64.
	StorageFormats bool
	// SFPU is whose SFPU code the device runs, with StorageFormats: the
	// SFPU ops compute as tcc's programs do (sfpu.CodeTCC, the zero value)
	// or as the exact function (sfpu.CodeLLK). Without StorageFormats
	// they are exact.
	SFPU sfpu.Code
	// Fidelity is the math fidelity of matmul products when StorageFormats
	// is set: LoFi, HiFi2, HiFi3 or HiFi4 (HiFi4 is exact for bf16 and
	// block-float operands). It must be a valid fidelity even when
	// StorageFormats is off, where it is otherwise ignored.
	Fidelity ir.MathFidelity
	// Composed, with StorageFormats, evaluates a fused op whose program
	// computes differently from its decomposition (gdn_recurrence with an
	// fp32 state: the program reads the state through tf32 source
	// registers and accumulates onto DEST, see gdnHeadFPU; attn_prologue:
	// its RoPE matmul rounds once where the composed rotary reads its two
	// fp32 products as tf32, see prologue; sdpa_decode_gated and
	// sdpa_prefill_gated: the program's softmax differs from sdpa_decode's,
	// see attender.attendGatedFPU) at the decomposition's rounding points
	// instead of the program's, so that it equals its decomposition bit for
	// bit (the fusion rules' equivalence tests). Off in DefaultOptions: the
	// reference then agrees with the device bit for bit (but for
	// sdpa_decode_gated, whose flash-decoding program rounds in its own
	// chunked order, split over cores: within rounding, see
	// attender.attendGatedFPU).
	Composed bool
	// RowSplit, when set, gives the chunking of a split-row norm op's
	// program (kir.Program.RowSplit, which the caller maps to its op): the
	// device sums each chunk of a row on its own core (matmulRowSum) and
	// adds the chunks' sums in float32 on the exchange's tree; normRows
	// follows it. Nil, or a zero
	// RowSplit for an op: one core per row.
	RowSplit func(op *ir.Op) RowSplit
}

// RowSplit is a split-row norm's chunking: Per tiles of a row per core,
// the chunks' sums added in core order (Fan 0) or per subgroup of Fan
// consecutive cores and then the subgroups' sums in order.
type RowSplit struct{ Per, Fan int }

// rowSplit is op's chunking under o (zero: one core per row).
func (o Options) rowSplit(op *ir.Op) RowSplit {
	if o.RowSplit == nil || op == nil {
		return RowSplit{}
	}
	return o.RowSplit(op)
}

// DefaultOptions is the reference at the device's formats:
// StorageFormats on, Fidelity HiFi4.
func DefaultOptions() Options { return Options{StorageFormats: true, Fidelity: ir.HiFi4} }

// ExactOptions is the pure-math reference: StorageFormats off (Fidelity
// HiFi4, unused).
func ExactOptions() Options { return Options{StorageFormats: false, Fidelity: ir.HiFi4} }

func (o Options) check() error {
	switch o.Fidelity {
	case ir.LoFi, ir.HiFi2, ir.HiFi3, ir.HiFi4:
		return nil
	}
	return fmt.Errorf("ref: options: unknown math fidelity %s (want LoFi, HiFi2, HiFi3 or HiFi4)", o.Fidelity)
}

// evalFunc computes an op's results from its operand values. It returns
// float32 values before storage rounding (the caller rounds each result
// through its declared dtype) and errors that need not name the op (the
// caller adds op.Where() and the operand shapes). It must validate every
// shape and attribute it relies on and must not panic on any input.
type evalFunc func(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error)

// evaluators is the op table of the reference evaluator: one entry per op
// kind, registered by the family files (eltwise.go, reduce.go, ...).
var evaluators = map[ir.OpKind]evalFunc{}

// register adds entries to evaluators; it panics on a duplicate kind, a
// programming error caught when the package is initialised.
func register(m map[ir.OpKind]evalFunc) {
	for k, f := range m {
		if _, dup := evaluators[k]; dup {
			panic(fmt.Sprintf("ref: two evaluators registered for op %s", k))
		}
		evaluators[k] = f
	}
}

// HasEvaluator reports whether the reference evaluator implements op kind k.
func HasEvaluator(k ir.OpKind) bool { _, ok := evaluators[k]; return ok }

// Eval runs graph g on the reference evaluator.
//
// env must hold a tensor for every graph input, weight and state, with the
// declared shape; it must not hold other values. With opts.StorageFormats
// each is first rounded through its declared dtype (Store); integer-typed
// values must hold integers in range in either mode. The ops then run in
// program order.
//
// On success the returned map holds every declared value (as rounded on
// entry) and every op result, including all graph outputs and state
// updates; env and its tensors are not modified and no returned tensor
// shares memory with env. Errors name the value or the op (op.Where()), the
// shapes involved and the rule broken.
//
// Eval runs one device's program: a collective over one device is the
// identity and one over more devices fails; EvalMesh runs every device.
func Eval(g *ir.Graph, env map[*ir.Value]Tensor, opts Options) (map[*ir.Value]Tensor, error) {
	if g == nil {
		return nil, errors.New("ref: Eval: graph is nil")
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	vals, err := bindEnv(g, env, opts)
	if err != nil {
		return nil, fmt.Errorf("ref: graph %q: %w", g.Name, err)
	}
	for _, op := range g.Ops() {
		if err := evalInto(op, vals, opts); err != nil {
			return nil, fmt.Errorf("ref: graph %q: %w", g.Name, err)
		}
	}
	if err := checkComputed(g, vals); err != nil {
		return nil, fmt.Errorf("ref: graph %q: %w", g.Name, err)
	}
	return vals, nil
}

// bindEnv checks env against g's declared inputs, weights and states and
// returns a new map holding each of them as the device stores it (bind).
// It fails when a declared value is missing or malformed, or when env
// holds a value g does not declare (the one with the lowest ID is named).
func bindEnv(g *ir.Graph, env map[*ir.Value]Tensor, opts Options) (map[*ir.Value]Tensor, error) {
	vals := make(map[*ir.Value]Tensor, len(env))
	declared := map[*ir.Value]bool{}
	for _, list := range [][]*ir.Value{g.Inputs, g.Weights, g.States} {
		for _, v := range list {
			declared[v] = true
			t, ok := env[v]
			if !ok {
				return nil, fmt.Errorf("env has no tensor for %s %q (%s, %s)", v.Kind, v.Name, v, v.Type.Shape)
			}
			st, err := bind(v, t, opts)
			if err != nil {
				return nil, err
			}
			vals[v] = st
		}
	}
	var extra []*ir.Value
	for v := range env {
		if !declared[v] {
			extra = append(extra, v)
		}
	}
	if len(extra) > 0 {
		id := func(v *ir.Value) int {
			if v == nil {
				return -1
			}
			return v.ID
		}
		sort.Slice(extra, func(i, j int) bool { return id(extra[i]) < id(extra[j]) })
		v := extra[0]
		name := "<nil>"
		if v != nil {
			name = fmt.Sprintf("%s %q (%s)", v.Kind, v.Name, v)
		}
		return nil, fmt.Errorf("env holds %d value(s) the graph does not declare as input, weight or state, first %s", len(extra), name)
	}
	return vals, nil
}

// checkComputed fails unless vals holds every graph output and every new
// state value.
func checkComputed(g *ir.Graph, vals map[*ir.Value]Tensor) error {
	for i, v := range g.Outputs {
		if _, ok := vals[v]; !ok {
			return fmt.Errorf("output %d (%s) is not computed by any op", i, v)
		}
	}
	states := make([]*ir.Value, 0, len(g.StateUpdates))
	for s := range g.StateUpdates {
		states = append(states, s)
	}
	sort.Slice(states, func(i, j int) bool { return states[i].ID < states[j].ID }) // deterministic messages
	for _, s := range states {
		v := g.StateUpdates[s]
		if _, ok := vals[v]; !ok {
			return fmt.Errorf("new value %s of state %q is not computed by any op", v, s.Name)
		}
	}
	return nil
}

// bind checks t against declared value v and rounds it as the device
// stores v (StoreAs: in transposed tiles for a weight so stored); the
// result shares no memory with t and carries v's TilesTransposed.
func bind(v *ir.Value, t Tensor, opts Options) (Tensor, error) {
	if v == nil {
		return Tensor{}, errors.New("declared value is nil")
	}
	if !t.Shape.Equal(v.Type.Shape) {
		return Tensor{}, fmt.Errorf("%s %q (%s) is declared %s, got a tensor of shape %s", v.Kind, v.Name, v, v.Type.Shape, t.Shape)
	}
	var st Tensor
	var err error
	if opts.StorageFormats && v.Type.TilesTransposed {
		st, err = StoreAs(v.Type, t)
	} else {
		st, err = finish(v.Type.DType, t, opts)
	}
	if err != nil {
		return Tensor{}, fmt.Errorf("%s %q (%s %s): %w", v.Kind, v.Name, v.Type.Shape, v.Type.DType, err)
	}
	st.TilesTransposed = v.Type.TilesTransposed
	return st, nil
}

// finishResult is finish for an op's result: with StorageFormats a bf16
// result is what the packer writes from DEST, rounded half away from zero
// (numerics.PackerBF16), where host-stored values (finish) round to even;
// a bfp8_b or bfp4_b result is what the packer writes from an fp32 DEST
// (numerics.QuantizeMatrixDevice; tcc's programs packing block floats all
// accumulate in fp32), where host-stored values round exactly.
func finishResult(dt ir.DType, t Tensor, opts Options) (Tensor, error) {
	if !opts.StorageFormats || (dt != ir.BF16 && !dt.IsBlockFloat()) {
		return finish(dt, t, opts)
	}
	if err := t.check(); err != nil {
		return Tensor{}, err
	}
	if dt.IsBlockFloat() {
		return Tensor{Shape: t.Shape.Clone(), Data: numerics.QuantizeMatrixDevice(dt, t.Data, t.Shape.Rows2D(), t.Shape.Cols2D(), true)}, nil
	}
	out := Tensor{Shape: t.Shape.Clone(), Data: make([]float32, len(t.Data))}
	for i, v := range t.Data {
		out.Data[i] = packedBF16(v)
	}
	return out, nil
}

// packedBF16 is the bf16 value the packer writes for x.
func packedBF16(x float32) float32 { return numerics.FromBF16Bits(numerics.PackerBF16(x)) }

// finish applies a host-stored value's storage: Store with StorageFormats,
// otherwise a copy (integer dtypes are still checked). The result shares no
// memory with t.
func finish(dt ir.DType, t Tensor, opts Options) (Tensor, error) {
	if opts.StorageFormats {
		return Store(dt, t)
	}
	if err := t.check(); err != nil {
		return Tensor{}, err
	}
	if dt == ir.Int32 || dt == ir.UInt32 {
		if err := checkInts(dt, t); err != nil {
			return Tensor{}, err
		}
	}
	return t.Clone(), nil
}

// evalInto evaluates op with operands looked up in vals and stores its
// results there.
func evalInto(op *ir.Op, vals map[*ir.Value]Tensor, opts Options) error {
	if op == nil {
		return errors.New("op is nil")
	}
	args := make([]Tensor, len(op.Operands))
	for i, v := range op.Operands {
		t, ok := vals[v]
		if !ok {
			return fmt.Errorf("%s: operand %d (%s) has no value: it is not defined before use", op.Where(), i, v)
		}
		args[i] = t
	}
	outs, err := runOp(op, args, opts)
	if err != nil {
		return err
	}
	for i, r := range op.Results {
		vals[r] = outs[i]
	}
	return nil
}

// EvalOpData is EvalOp on operand data (one slice per operand, in order,
// each holding the operand's elements row-major in its declared shape).
func EvalOpData(op *ir.Op, data [][]float32, opts Options) ([]Tensor, error) {
	if len(data) != len(op.Operands) {
		return nil, fmt.Errorf("ref: %s: %d operand slices for %d operands", op.Where(), len(data), len(op.Operands))
	}
	args := make([]Tensor, len(data))
	for i, v := range op.Operands {
		args[i] = Tensor{Shape: v.Type.Shape, Data: data[i]}
	}
	return EvalOp(op, args, opts)
}

// EvalOp evaluates one op on operand values args (one per operand, in
// order). With opts.StorageFormats the operands are first rounded through
// their declared dtypes (a no-op for values already stored that way; in
// transposed tiles for a value so stored, as bind: StoreAs) and the
// results through theirs. It returns one tensor per op result, with the
// result's declared shape.
func EvalOp(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if op == nil {
		return nil, errors.New("ref: EvalOp: op is nil")
	}
	if len(args) != len(op.Operands) {
		return nil, fmt.Errorf("ref: %s has %d operands, got %d values", op.Where(), len(op.Operands), len(args))
	}
	in := make([]Tensor, len(args))
	for i, v := range op.Operands {
		if v == nil {
			return nil, fmt.Errorf("ref: %s: operand %d is nil", op.Where(), i)
		}
		t, err := bindOperand(v, args[i], opts)
		if err != nil {
			return nil, fmt.Errorf("ref: %s: operand %d (%s %s): %w", op.Where(), i, v.Type.Shape, v.Type.DType, err)
		}
		in[i] = t
	}
	outs, err := runOp(op, in, opts)
	if err != nil {
		return nil, fmt.Errorf("ref: %w", err)
	}
	return outs, nil
}

// bindOperand rounds an op's operand t as the device stores operand v
// (EvalOp and EvalMeshOp): StoreAs, in transposed tiles, for a weight so
// stored, else finish; the result carries v's TilesTransposed, so a
// matmul multiplies it on SrcB (numerics.MatmulSrcB) as the device does.
func bindOperand(v *ir.Value, t Tensor, opts Options) (Tensor, error) {
	var st Tensor
	var err error
	if opts.StorageFormats && v.Type.TilesTransposed {
		st, err = StoreAs(v.Type, t) // stored in transposed tiles, as bind
	} else {
		st, err = finish(v.Type.DType, t, opts)
	}
	if err != nil {
		return Tensor{}, err
	}
	st.TilesTransposed = v.Type.TilesTransposed
	return st, nil
}

// runOp dispatches op to its evaluator, checks the results against the
// op's declared result types and applies their storage. Errors name the op
// and the operand shapes. A panic inside an evaluator (a bug) is turned into
// an error naming the op.
func runOp(op *ir.Op, args []Tensor, opts Options) (outs []Tensor, err error) {
	fn, ok := evaluators[op.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: the reference evaluator has no semantics for op kind %s", op.Where(), op.Kind)
	}
	if opts.StorageFormats {
		// The device's fidelity for this op (ir.OpFidelity); without
		// storage formats products are exact anyway.
		if opts.Fidelity, err = ir.OpFidelity(op, opts.Fidelity); err != nil {
			return nil, err
		}
	}
	info := op.Kind.Info()
	n := len(info.Operands)
	if (!info.Variadic && len(args) != n) || (info.Variadic && len(args) < n) {
		return nil, fmt.Errorf("%s%s: takes %d operands (%v), got %d", op.Where(), shapesOf(args), n, info.Operands, len(args))
	}
	if len(op.Results) != info.Results {
		return nil, fmt.Errorf("%s%s: has %d results, the op table says %d", op.Where(), shapesOf(args), len(op.Results), info.Results)
	}
	for i, r := range op.Results {
		if r == nil {
			return nil, fmt.Errorf("%s: result %d is nil", op.Where(), i)
		}
	}
	for i, a := range args {
		if err := a.check(); err != nil {
			return nil, fmt.Errorf("%s: operand %d: %w", op.Where(), i, err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			outs, err = nil, fmt.Errorf("%s%s: internal error in the reference evaluator: %v", op.Where(), shapesOf(args), p)
		}
	}()
	raw, err := fn(op, args, opts)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", op.Where(), shapesOf(args), err)
	}
	if len(raw) != len(op.Results) {
		return nil, fmt.Errorf("%s%s: evaluator returned %d results, op has %d", op.Where(), shapesOf(args), len(raw), len(op.Results))
	}
	outs = make([]Tensor, len(raw))
	for i, r := range op.Results {
		if !raw[i].Shape.Equal(r.Type.Shape) {
			return nil, fmt.Errorf("%s%s: result %d has shape %s but its declared type is %s", op.Where(), shapesOf(args), i, raw[i].Shape, r.Type)
		}
		t, err := finishResult(r.Type.DType, raw[i], opts)
		if err != nil {
			return nil, fmt.Errorf("%s%s: storing result %d as %s: %w", op.Where(), shapesOf(args), i, r.Type.DType, err)
		}
		outs[i] = t
	}
	return outs, nil
}

// EvalDecomposition evaluates the decomposition a fused op replaced
// (op.Decomp) on args with DefaultOptions; see EvalDecompositionWith.
func EvalDecomposition(op *ir.Op, args []Tensor) ([]Tensor, error) {
	return EvalDecompositionWith(op, args, DefaultOptions())
}

// EvalDecompositionWith evaluates op.Decomp: its Inputs placeholders are
// bound positionally to args (rounded through the placeholders' dtypes with
// opts.StorageFormats), its Ops run in order, each rounding its results as
// in Eval, and the values of its Outputs are returned in order. Comparing
// the result with EvalOp(op, args, opts) checks a fused op against the ops
// it replaced. It fails when op has no decomposition, when len(args) differs
// from the number of placeholders, or when a decomposition op reads a value
// that is neither a placeholder nor an earlier decomposition result.
func EvalDecompositionWith(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if op == nil {
		return nil, errors.New("ref: EvalDecomposition: op is nil")
	}
	d := op.Decomp
	if d == nil {
		return nil, fmt.Errorf("ref: %s has no decomposition", op.Where())
	}
	if len(args) != len(d.Inputs) {
		return nil, fmt.Errorf("ref: decomposition of %s has %d inputs, got %d values", op.Where(), len(d.Inputs), len(args))
	}
	vals := make(map[*ir.Value]Tensor, len(d.Inputs)+len(d.Ops))
	for i, v := range d.Inputs {
		t, err := bind(v, args[i], opts)
		if err != nil {
			return nil, fmt.Errorf("ref: decomposition of %s: input %d: %w", op.Where(), i, err)
		}
		vals[v] = t
	}
	for _, sub := range d.Ops {
		if err := evalInto(sub, vals, opts); err != nil {
			return nil, fmt.Errorf("ref: decomposition of %s: %w", op.Where(), err)
		}
	}
	outs := make([]Tensor, len(d.Outputs))
	for i, v := range d.Outputs {
		t, ok := vals[v]
		if !ok {
			return nil, fmt.Errorf("ref: decomposition of %s: output %d (%s) is not computed by its ops", op.Where(), i, v)
		}
		outs[i] = t
	}
	return outs, nil
}
