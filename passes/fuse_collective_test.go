package passes

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/passes/rewrite"
	"github.com/tcc-dev/tcc/sim/ref"
)

// checkEquivalentMesh is checkEquivalent for a fused collective spanning
// more than one device (all_reduce_add, all_reduce_add_rmsnorm), which one
// device's operands cannot evaluate: every device gets its own random
// operands, the fused op runs on the whole row (ref.FusedMeshOp) and the
// decomposition on a 1xN mesh (ref.EvalMesh); in exact math every
// device's results must agree to 1e-5 of the largest magnitude. It
// reports whether op was such a collective (and so has been checked).
func checkEquivalentMesh(t *testing.T, op *ir.Op) bool {
	t.Helper()
	if (op.Kind != ir.OpAllReduceAdd && op.Kind != ir.OpAllReduceAddRMSNorm) || op.Int("devices") <= 1 {
		return false
	}
	n := op.Int("devices")
	rng := rand.New(rand.NewPCG(1, uint64(op.ID)))
	args := commonMeshArgs(op, n, rng)
	fused, dec, err := commonEvalMeshPair(op, args, ref.ExactOptions())
	if err != nil {
		t.Errorf("%s: %v", op.Where(), err)
		return true
	}
	for d := range fused {
		for k := range fused[d] {
			var scale, worst float64
			for j := range fused[d][k].Data {
				scale = max(scale, math.Abs(float64(dec[d][k].Data[j])))
				worst = max(worst, math.Abs(float64(fused[d][k].Data[j]-dec[d][k].Data[j])))
			}
			if worst > 1e-5*scale {
				t.Errorf("%s: device %d result %d differs from its decomposition by %g (largest magnitude %g)", op.Where(), d, k, worst, scale)
			}
		}
	}
	return true
}

// commonMeshArgs draws N(0, 1) operands for op on each of n devices.
func commonMeshArgs(op *ir.Op, n int, rng *rand.Rand) [][]ref.Tensor {
	args := make([][]ref.Tensor, n)
	for d := range args {
		for _, v := range op.Operands {
			t := ref.NewTensor(v.Type.Shape)
			for j := range t.Data {
				t.Data[j] = float32(rng.NormFloat64())
			}
			args[d] = append(args[d], t)
		}
	}
	return args
}

// commonEvalMeshPair evaluates a fused collective op on per-device
// operands args with ref.FusedMeshOp, and the decomposed graph of
// rewrite.EquivalencePair(op) on a 1xN mesh with ref.EvalMesh; it returns
// both per device, results in order.
func commonEvalMeshPair(op *ir.Op, args [][]ref.Tensor, opts ref.Options) (fused, dec [][]ref.Tensor, err error) {
	fused, err = ref.FusedMeshOp(op, args, opts)
	if err != nil {
		return nil, nil, err
	}
	_, dg, err := rewrite.EquivalencePair(op)
	if err != nil {
		return nil, nil, err
	}
	dg.Mesh = ir.Mesh{Rows: 1, Cols: len(args)}
	envs := make([]map[*ir.Value]ref.Tensor, len(args))
	for d := range envs {
		envs[d] = map[*ir.Value]ref.Tensor{}
		for i, v := range dg.Inputs {
			envs[d][v] = args[d][i]
		}
	}
	vals, err := ref.EvalMesh(dg, envs, opts)
	if err != nil {
		return nil, nil, err
	}
	dec = make([][]ref.Tensor, len(args))
	for d := range vals {
		for _, o := range dg.Outputs {
			dec[d] = append(dec[d], vals[d][o])
		}
	}
	return fused, dec, nil
}
