package ref

import (
	"errors"
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// EvalMesh runs the per-device graph g on every device of g.Mesh in
// lockstep: op by op in program order, each op on device 0, 1, ... before
// the next op. Device d is row d / g.Mesh.Cols, column d % g.Mesh.Cols.
//
// envs[d] is device d's env, with the same contract as Eval's env (a
// tensor for every input, weight and state of g, with its declared
// per-device shape, rounded on entry with opts.StorageFormats); len(envs)
// must be g.Mesh.Devices(). Replicated values are simply given to every
// device; split ones carry each device's share.
//
// A non-collective op runs on each device's own values exactly as in Eval.
// A collective (IsCollective) spans the devices of one mesh row: its
// devices attribute must equal g.Mesh.Cols, and the operands of the row's
// devices, in column order, are combined as the op's Doc line says
// (all_reduce: everyone gets the sum; reduce_scatter: the sum, device c
// keeps chunk c along axis; all_gather: the operands joined along axis in
// device order). Each device's result is then rounded through the result's
// declared dtype as any op result.
//
// On success result[d] holds device d's declared values (as rounded on
// entry) and op results, including every output and state update; no
// returned tensor shares memory with envs or with another device's
// results. Errors name the device or the op, the shapes and the rule.
func EvalMesh(g *ir.Graph, envs []map[*ir.Value]Tensor, opts Options) ([]map[*ir.Value]Tensor, error) {
	if g == nil {
		return nil, errors.New("ref: EvalMesh: graph is nil")
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	if g.Mesh.Rows < 1 || g.Mesh.Cols < 1 {
		return nil, fmt.Errorf("ref: graph %q: mesh %s has no devices", g.Name, g.Mesh)
	}
	n := g.Mesh.Devices()
	if len(envs) != n {
		return nil, fmt.Errorf("ref: graph %q: EvalMesh needs one env per device of mesh %s (%d), got %d", g.Name, g.Mesh, n, len(envs))
	}
	vals := make([]map[*ir.Value]Tensor, n)
	for d, env := range envs {
		v, err := bindEnv(g, env, opts)
		if err != nil {
			return nil, fmt.Errorf("ref: graph %q: device %d: %w", g.Name, d, err)
		}
		vals[d] = v
	}
	for _, op := range g.Ops() {
		if op != nil && isFusedCollective(op.Kind) {
			if err := evalFusedCollectiveInto(op, g.Mesh, vals, opts); err != nil {
				return nil, fmt.Errorf("ref: graph %q: %w", g.Name, err)
			}
			continue
		}
		if op != nil && IsCollective(op.Kind) {
			if err := evalCollectiveInto(op, g.Mesh, vals, opts); err != nil {
				return nil, fmt.Errorf("ref: graph %q: %w", g.Name, err)
			}
			continue
		}
		for d := range vals {
			if err := evalInto(op, vals[d], opts); err != nil {
				return nil, fmt.Errorf("ref: graph %q: device %d: %w", g.Name, d, err)
			}
		}
	}
	for d := range vals {
		if err := checkComputed(g, vals[d]); err != nil {
			return nil, fmt.Errorf("ref: graph %q: device %d: %w", g.Name, d, err)
		}
	}
	return vals, nil
}

// evalCollectiveInto evaluates collective op once per mesh row on the
// operands of the row's devices and stores each device's result in its
// value map.
func evalCollectiveInto(op *ir.Op, mesh ir.Mesh, vals []map[*ir.Value]Tensor, opts Options) error {
	info := op.Kind.Info()
	if len(op.Operands) != len(info.Operands) {
		return fmt.Errorf("%s: takes %d operands (%v), got %d", op.Where(), len(info.Operands), info.Operands, len(op.Operands))
	}
	if len(op.Results) != info.Results || op.Results[0] == nil {
		return fmt.Errorf("%s: has %d results, the op table says %d", op.Where(), len(op.Results), info.Results)
	}
	n, err := collectiveDevices(op)
	if err != nil {
		return fmt.Errorf("%s: %w", op.Where(), err)
	}
	if n != mesh.Cols {
		return fmt.Errorf("%s: rule collective-mesh: spans %d devices, but a collective spans one row of mesh %s (%d devices)", op.Where(), n, mesh, mesh.Cols)
	}
	x := op.Operands[0]
	for row := range mesh.Rows {
		args := make([]Tensor, n)
		for c := range args {
			d := row*mesh.Cols + c
			t, ok := vals[d][x]
			if !ok {
				return fmt.Errorf("device %d: %s: operand 0 (%s) has no value: it is not defined before use", d, op.Where(), x)
			}
			args[c] = t
		}
		outs, err := runMeshOp(op, args, opts)
		if err != nil {
			return err
		}
		for c, t := range outs {
			vals[row*mesh.Cols+c][op.Results[0]] = t
		}
	}
	return nil
}

// runMeshOp checks the operands of one collective (one per device of a
// row, in order), runs its mesh evaluator and rounds every device's result
// through the result's declared dtype. A panic in the evaluator becomes an
// error naming the op.
func runMeshOp(op *ir.Op, args []Tensor, opts Options) (outs []Tensor, err error) {
	for c, a := range args {
		if err := a.check(); err != nil {
			return nil, fmt.Errorf("%s: operand 0 of device %d: %w", op.Where(), c, err)
		}
		if !a.Shape.Equal(args[0].Shape) {
			return nil, fmt.Errorf("%s%s: rule collective-shapes: every device's operand must have one shape; device 0 has %s, device %d has %s", op.Where(), shapesOf(args), args[0].Shape, c, a.Shape)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			outs, err = nil, fmt.Errorf("%s%s: internal error in the reference evaluator: %v", op.Where(), shapesOf(args), p)
		}
	}()
	raw, err := meshEvaluators[op.Kind](op, args, opts)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", op.Where(), shapesOf(args), err)
	}
	if len(raw) != len(args) {
		return nil, fmt.Errorf("%s%s: mesh evaluator returned %d results for %d devices", op.Where(), shapesOf(args), len(raw), len(args))
	}
	r := op.Results[0]
	outs = make([]Tensor, len(raw))
	for c, t := range raw {
		if !t.Shape.Equal(r.Type.Shape) {
			return nil, fmt.Errorf("%s%s: result of device %d has shape %s but its declared type is %s", op.Where(), shapesOf(args), c, t.Shape, r.Type)
		}
		st, err := finishResult(r.Type.DType, t, opts)
		if err != nil {
			return nil, fmt.Errorf("%s%s: storing the result of device %d as %s: %w", op.Where(), shapesOf(args), c, r.Type.DType, err)
		}
		outs[c] = st
	}
	return outs, nil
}

// EvalMeshOp evaluates one op of a graph on mesh on every device's
// operand values (args[d][i] is device d's value of operand i; weights as
// stored, states as they were before the op). A collective runs once per
// mesh row on its row's operands, any other op on each device alone. It
// returns res[d][i], device d's value of result i, rounded through the
// result's dtype at storage formats, exactly as EvalMesh computes it within
// the graph.
func EvalMeshOp(op *ir.Op, mesh ir.Mesh, args [][]Tensor, opts Options) ([][]Tensor, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if op == nil {
		return nil, errors.New("ref: EvalMeshOp: op is nil")
	}
	if len(args) != mesh.Devices() {
		return nil, fmt.Errorf("ref: EvalMeshOp: %s: want operands for the %d devices of mesh %s, got %d", op.Where(), mesh.Devices(), mesh, len(args))
	}
	vals := make([]map[*ir.Value]Tensor, len(args))
	for d, a := range args {
		if len(a) != len(op.Operands) {
			return nil, fmt.Errorf("ref: EvalMeshOp: %s has %d operands, device %d has %d values", op.Where(), len(op.Operands), d, len(a))
		}
		vals[d] = map[*ir.Value]Tensor{}
		for i, v := range op.Operands {
			t, err := bindOperand(v, a[i], opts)
			if err != nil {
				return nil, fmt.Errorf("ref: %s: device %d: operand %d (%s %s): %w", op.Where(), d, i, v.Type.Shape, v.Type.DType, err)
			}
			vals[d][v] = t
		}
	}
	var err error
	switch {
	case isFusedCollective(op.Kind):
		err = evalFusedCollectiveInto(op, mesh, vals, opts)
	case IsCollective(op.Kind):
		err = evalCollectiveInto(op, mesh, vals, opts)
	default:
		for d := range vals {
			if err = evalInto(op, vals[d], opts); err != nil {
				err = fmt.Errorf("device %d: %w", d, err)
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ref: %w", err)
	}
	res := make([][]Tensor, len(vals))
	for d := range vals {
		for _, r := range op.Results {
			res[d] = append(res[d], vals[d][r])
		}
	}
	return res, nil
}
