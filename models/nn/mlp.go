package nn

import (
	"github.com/tcc-dev/tcc/ir"
)

// MLPWeights are one SwiGLU MLP's projections, per device.
type MLPWeights struct {
	Gate, Up *ir.Value // [hidden, intermediate/devices], column parallel (split 1)
	Down     *ir.Value // [intermediate/devices, hidden], row parallel (split 0)
}

// DeclareMLP declares prefix+"mlp.{gate,up,down}_proj.weight" with
// per-device intermediate width inter (the caller's config.Shard value).
// Gate and up are bfp4_b, down bfp8_b (the reference stack's dtypes). Each
// IR weight is the HF [out, in] tensor transposed to [in, out] and cut to
// this device's share of the intermediate features.
func DeclareMLP(b *ir.Builder, prefix string, hidden, inter int, tp TP) MLPWeights {
	return DeclareMLPDType(b, prefix, hidden, inter, tp, ir.BFP4B)
}

// DeclareMLPDType is DeclareMLP with gate and up stored as gateUp
// (bfp4_b or bfp8_b: a model's dtype policy).
func DeclareMLPDType(b *ir.Builder, prefix string, hidden, inter int, tp TP, gateUp ir.DType) MLPWeights {
	col := ir.T(gateUp, hidden, inter)
	col.Dist = tp.Split(1)
	row := ir.T(ir.BFP8B, inter, hidden)
	row.Dist = tp.Split(0)
	return MLPWeights{
		Gate: b.Weight(prefix+"mlp.gate_proj.weight", col),
		Up:   b.Weight(prefix+"mlp.up_proj.weight", col),
		Down: b.Weight(prefix+"mlp.down_proj.weight", row),
	}
}

// SwiGLU is down(silu(x @ gate) * (x @ up)) for x [.., hidden] replicated,
// as the composed path issues it: a copy of x into L1, the gate matmul, SiLU,
// the up matmul, the multiply, the down matmul and (on several devices) a
// reduce_scatter over the hidden axis. The result is split on its last
// axis when reduce-scattered (TP.Gather makes it whole), replicated
// otherwise. Ops are charged to the part "mlp".
func SwiGLU(c Ctx, x *ir.Value, w MLPWeights) *ir.Value {
	b := c.B
	x = toL1(b, x)
	h := b.Mul(b.SiLU(b.Matmul(x, w.Gate)), b.Matmul(x, w.Up))
	y := b.Matmul(h, w.Down)
	y = setDist(b, y, ir.Replicated) // partial sum until the collective
	y = c.TP.ReduceScatter(b, y, -1)
	c.mark("mlp")
	return y
}
