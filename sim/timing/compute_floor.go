package timing

import (
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// The compute floor of a build: the time the grid's matrix units need for
// the step's contractions alone, every worker core multiplying tiles at
// its program's math fidelity (Params.MatmulCycles per 32x32x32 tile
// product) without a stall. It counts the tile products the math needs —
// of matmul, bmm and the attention's q k^T and p v — from the ops' shapes
// (a fused op: those of the decomposition it stands for), not what a
// kernel happens to compute; causal attention counts the key tiles each
// query tile row sees at the step's positions. Element-wise work, data
// movement and DRAM are not in it: a prefill step far above it is bound
// by something else (DRAM is the other floor, Report.FloorUS).

// tileProducts is the 32x32x32 tile products op's math needs at step
// (nil: attention at position 0).
func tileProducts(op *ir.Op, step *Step) int64 {
	tiles := func(n int) int64 { return int64((n + ir.TileSize - 1) / ir.TileSize) }
	switch op.Kind {
	case ir.OpMatmul, ir.OpBMM, ir.OpBMMTransposeB:
		a, b := op.Operands[0].Type.Shape, op.Operands[1].Type.Shape
		if a.Rank() < 2 || b.Rank() < 2 {
			return 0
		}
		batch := int64(a.Numel() / (a[a.Rank()-2] * a[a.Rank()-1]))
		n := b[b.Rank()-1]
		if op.Kind == ir.OpBMMTransposeB {
			n = b[b.Rank()-2]
		}
		return batch * tiles(a[a.Rank()-2]) * tiles(a[a.Rank()-1]) * tiles(n)
	case ir.OpSDPAPrefill, ir.OpSDPADecode:
		q := op.Operands[0].Type.Shape
		pos := 0
		if step != nil {
			pos = step.Pos
		}
		d := tiles(q[q.Rank()-1])
		heads := int64(q.Numel() / q[q.Rank()-1])
		if op.Kind == ir.OpSDPADecode {
			// One query row per (user, head) against the keys 0..pos.
			return heads * 2 * tiles(pos+1) * d
		}
		S := q[q.Rank()-2]
		heads /= int64(S)
		var keyTiles int64
		for r := 0; r*ir.TileSize < S; r++ {
			keyTiles += tiles(pos + min((r+1)*ir.TileSize, S))
		}
		// q k^T and p v: Dt products per key tile each.
		return heads * 2 * keyTiles * d
	}
	var n int64
	if op.Decomp != nil {
		for _, o := range op.Decomp.Ops {
			n += tileProducts(o, step)
		}
	}
	return n
}

// ComputeFloor is b's compute floor in us at b.Step and its tile
// products: each program's products at its compute kernel's fidelity
// (HiFi4 without one) over the target's worker cores. It simulates
// nothing.
func ComputeFloor(b *Build, prm *Params) (float64, int64) { return ComputeFloorAt(b, prm, b.Step) }

// ComputeFloorAt is ComputeFloor with the step's positions given (nil:
// attention at position 0), so one Build serves every step of a prompt.
func ComputeFloorAt(b *Build, prm *Params, step *Step) (float64, int64) {
	var cycles float64
	var products int64
	for _, p := range b.Programs {
		n := tileProducts(p.Op, step)
		if n == 0 {
			continue
		}
		f := ir.HiFi4
		for _, k := range p.Kernel.Kernels {
			if k.Role == kir.RoleCompute {
				f = k.Compute.MathFidelity
			}
		}
		products += n
		cycles += float64(n) * prm.MatmulCycles[f]
	}
	return cycles / float64(b.Target.NumWorkers()) / prm.ClockHz * 1e6, products
}
