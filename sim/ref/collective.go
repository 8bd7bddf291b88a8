package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// Collectives (all_reduce, reduce_scatter, all_gather) combine one operand
// per device of a mesh row. They have two evaluators:
//
//   - the single-device one in the evaluators table (Eval, EvalOp): a
//     collective whose devices attribute is 1 is the identity (the sum or
//     concatenation over one device); one over more devices fails with an
//     error pointing to EvalMesh, since one device's operand is not enough
//     to compute it;
//   - the mesh one in meshEvaluators (EvalMesh): it receives the operands
//     of all devices of the row in device order and returns one result per
//     device.
//
// Sums run in device order: with StorageFormats as FPU adds (deviceAdd)
// into an fp32 accumulator, otherwise in float64 rounded once to float32;
// then each device's result is rounded to its storage dtype (a ring
// reduction that rounds to the dtype at every hop can differ from this in
// the last bits when more than two devices take part).
func init() {
	register(map[ir.OpKind]evalFunc{
		ir.OpAllReduce:     evalCollectiveOneDevice,
		ir.OpReduceScatter: evalCollectiveOneDevice,
		ir.OpAllGather:     evalCollectiveOneDevice,
	})
}

// meshFunc computes a collective from its operand on each of the n devices
// of one mesh row (args[c] is device c's operand; all have one shape) and
// returns each device's result before storage rounding, in device order.
// Like evalFunc it validates what it relies on and must not panic.
type meshFunc func(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error)

// meshEvaluators holds the mesh evaluator of every collective op kind.
var meshEvaluators = map[ir.OpKind]meshFunc{
	ir.OpAllReduce:     meshAllReduce,
	ir.OpReduceScatter: meshReduceScatter,
	ir.OpAllGather:     meshAllGather,
}

// IsCollective reports whether op kind k combines the operands of several
// devices (and so needs EvalMesh when it spans more than one device).
func IsCollective(k ir.OpKind) bool {
	_, ok := meshEvaluators[k]
	return ok || isFusedCollective(k)
}

// collectiveDevices reads the devices attribute (>= 1).
func collectiveDevices(op *ir.Op) (int, error) {
	n, err := attrInt(op, "devices")
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("rule collective-devices: devices %d must be >= 1", n)
	}
	return n, nil
}

// collectiveAxis reads and resolves the axis attribute of reduce_scatter
// and all_gather against rank r; all_reduce has none (it returns -1).
func collectiveAxis(op *ir.Op, r int) (int, error) {
	if op.Kind == ir.OpAllReduce {
		return -1, nil
	}
	return attrAxis(op, "axis", r)
}

// oneDevice checks that collective op spans one device: over more, one
// device's operands cannot evaluate it (how: what evaluates it instead).
func oneDevice(op *ir.Op, how string) error {
	n, err := collectiveDevices(op)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("rule collective-single-device: %s over %d devices needs every device's operands; %s", op.Kind, n, how)
	}
	return nil
}

// evalCollectiveOneDevice is the single-device evaluator of a collective:
// the identity when the devices attribute is 1, an error otherwise.
func evalCollectiveOneDevice(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	x := args[0]
	if _, err := collectiveDevices(op); err != nil {
		return nil, err
	}
	if _, err := collectiveAxis(op, x.Shape.Rank()); err != nil {
		return nil, err
	}
	if err := oneDevice(op, "evaluate the graph with EvalMesh"); err != nil {
		return nil, err
	}
	return []Tensor{x.Clone()}, nil
}

// sumDevices returns the element-wise sum of args in device order: FPU
// adds (deviceAdd) with StorageFormats, else float64 rounded once to
// float32.
func sumDevices(args []Tensor, opts Options) Tensor {
	if opts.StorageFormats {
		out := args[0].Clone()
		for _, a := range args[1:] {
			for i, v := range a.Data {
				out.Data[i] = deviceAdd(out.Data[i], v, opts)
			}
		}
		return out
	}
	acc := make([]float64, len(args[0].Data))
	for _, a := range args {
		for i, v := range a.Data {
			acc[i] += float64(v)
		}
	}
	out := NewTensor(args[0].Shape)
	for i, s := range acc {
		out.Data[i] = float32(s)
	}
	return out
}

// meshAllReduce: every device gets the element-wise sum of all operands.
func meshAllReduce(_ *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	s := sumDevices(args, opts)
	outs := make([]Tensor, len(args))
	for d := range outs {
		outs[d] = s.Clone()
	}
	return outs, nil
}

// meshReduceScatter: s = the element-wise sum of all operands; device d
// gets s[.., d*m : (d+1)*m, ..] along axis, m = shape[axis] / devices.
func meshReduceScatter(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	n := len(args)
	x := args[0]
	ax, err := collectiveAxis(op, x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	if x.Shape[ax]%n != 0 {
		return nil, fmt.Errorf("rule reduce-scatter-split: dim %d (%d) is not divisible by %d devices", ax, x.Shape[ax], n)
	}
	s := sumDevices(args, opts)
	outer, size, inner := axisView(x.Shape, ax)
	m := size / n
	shape := x.Shape.Clone()
	shape[ax] = m
	outs := make([]Tensor, n)
	for d := range outs {
		out := NewTensor(shape)
		for o := range outer {
			src := (o*size + d*m) * inner
			copy(out.Data[o*m*inner:(o+1)*m*inner], s.Data[src:src+m*inner])
		}
		outs[d] = out
	}
	return outs, nil
}

// meshAllGather: every device gets the operands of devices 0..n-1 joined
// along axis in device order.
func meshAllGather(op *ir.Op, args []Tensor, _ Options) ([]Tensor, error) {
	n := len(args)
	x := args[0]
	ax, err := collectiveAxis(op, x.Shape.Rank())
	if err != nil {
		return nil, err
	}
	outer, size, inner := axisView(x.Shape, ax)
	shape := x.Shape.Clone()
	shape[ax] *= n
	g := NewTensor(shape)
	for o := range outer {
		for d, a := range args {
			dst := (o*n*size + d*size) * inner
			copy(g.Data[dst:dst+size*inner], a.Data[o*size*inner:(o+1)*size*inner])
		}
	}
	outs := make([]Tensor, n)
	for d := range outs {
		outs[d] = g.Clone()
	}
	return outs, nil
}

// evalArgmaxShardedOneDevice: the single-device evaluator of
// argmax_sharded; over one device the gathered row is x itself, more
// devices need FusedMeshOp (EvalMesh).
func evalArgmaxShardedOneDevice(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	if err := oneDevice(op, "evaluate it with FusedMeshOp (EvalMesh)"); err != nil {
		return nil, err
	}
	return evalArgmax(op, args, opts)
}

// meshArgmaxSharded: argmax of every device's x joined along the last dim
// in device order, as argmax(all_gather(x, axis -1)) computes it: the
// first maximum of the joined row wins, so on a tie the lower device's
// index. Every device gets the same result.
func meshArgmaxSharded(op *ir.Op, args [][]Tensor, opts Options) ([][]Tensor, error) {
	xs := make([]Tensor, len(args))
	for d, dev := range args {
		if len(dev) < 1 {
			return nil, fmt.Errorf("device %d has no operand, want x", d)
		}
		if !dev[0].Shape.Equal(args[0][0].Shape) {
			return nil, fmt.Errorf("rule collective-shapes: every device's x must have one shape; device 0 has %s, device %d has %s", args[0][0].Shape, d, dev[0].Shape)
		}
		xs[d] = dev[0]
	}
	if xs[0].Shape.Rank() == 0 {
		return nil, fmt.Errorf("rule rank: cannot take the argmax of a scalar")
	}
	shape := xs[0].Shape.Clone()
	last := shape[len(shape)-1]
	shape[len(shape)-1] = last * len(xs)
	g := NewTensor(shape)
	rows := xs[0].Shape.Numel() / max(last, 1)
	for r := range rows {
		for d, x := range xs {
			copy(g.Data[(r*len(xs)+d)*last:], x.Data[r*last:(r+1)*last])
		}
	}
	res, err := evalArgmax(op, []Tensor{g}, opts)
	if err != nil {
		return nil, err
	}
	outs := make([][]Tensor, len(xs))
	for d := range outs {
		outs[d] = []Tensor{res[0].Clone()}
	}
	return outs, nil
}
