package ref

import (
	"fmt"

	"github.com/tcc-dev/tcc/ir"
)

// gdn_prefill_gates (passes/fuse_gdn_gates.go) is evaluated from its Doc
// line as its composed chain computes it: the operands' conversion to
// fp32 is exact, the add and multiply are the FPU's (deviceAdd,
// deviceMul with the broadcast vector second, as the composed ops put
// it), exp, softplus and sigmoid the SFPU's; sigmoid(b) is rounded to b's
// dtype as the composed sigmoid stores it (with StorageFormats). The
// other intermediates are fp32, which an fp32 DEST holds exactly.
func init() {
	register(map[ir.OpKind]evalFunc{ir.OpGDNPrefillGates: evalGDNPrefillGates})
}

// evalGDNPrefillGates: see the gdn_prefill_gates Doc line.
func evalGDNPrefillGates(op *ir.Op, args []Tensor, opts Options) ([]Tensor, error) {
	a, bg, al, dt := args[0], args[1], args[2], args[3]
	if a.Shape.Rank() != 3 || !bg.Shape.Equal(a.Shape) {
		return nil, fmt.Errorf("rule gdn-prefill-gates-shape: a %s and b %s must both be [B, S, H]", a.Shape, bg.Shape)
	}
	H := a.Shape[2]
	if al.Shape.Numel() != H || dt.Shape.Numel() != H {
		return nil, fmt.Errorf("rule gdn-gates-vectors: a_log %s and dt_bias %s must have %d elements", al.Shape, dt.Shape, H)
	}
	if len(op.Results) != 2 || len(op.Operands) != 4 {
		return nil, fmt.Errorf("rule gdn-prefill-gates-results: want 4 operands and 2 results, have %d and %d", len(op.Operands), len(op.Results))
	}
	rb, err := gdnRounder(op.Operands[1].Type.DType, opts)
	if err != nil {
		return nil, err
	}
	f := sfpuFor(opts)
	negA := make([]float32, H)
	for h := range H {
		negA[h] = f.exp(al.Data[h]) * -1
	}
	g, beta := NewTensor(a.Shape), NewTensor(a.Shape)
	for i := range a.Data {
		h := i % H
		g.Data[i] = deviceMul(f.softplus(deviceAdd(a.Data[i], dt.Data[h], opts)), negA[h], opts)
		beta.Data[i] = rb(f.sigmoid(bg.Data[i]))
	}
	return []Tensor{g, beta}, nil
}
