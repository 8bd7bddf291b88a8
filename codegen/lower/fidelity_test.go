package lower

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// TestFidelityOverride: an op's "fidelity" attribute sets its compute
// kernels' fidelity, and the reference (which reads the same attribute
// through ir.OpFidelity) still matches the simulator bit for bit; a bad
// value is an error naming the op.
func TestFidelityOverride(t *testing.T) {
	tgt := target.Blackhole()
	for i, tc := range []struct {
		adt, wdt ir.DType
		attr     string
		want     ir.MathFidelity
	}{
		{ir.BF16, ir.BFP8B, "HiFi2", ir.HiFi2},
		{ir.BF16, ir.BFP4B, "LoFi", ir.LoFi},
		{ir.FP32, ir.BFP8B, "HiFi2", ir.HiFi2},
		{ir.BF16, ir.BF16, "", ir.HiFi4},
	} {
		mc := mcase{name: "matmul_" + tc.adt.String() + "_" + tc.wdt.String() + "_" + tc.attr, build: func(b *ir.Builder) *ir.Value {
			out := b.Matmul(fcIn(b, "a", tc.adt, 1, 1, 512), fcW(b, "w", tc.wdt, 512, 256))
			if tc.attr != "" {
				out.Def.Attrs["fidelity"] = tc.attr
			}
			return out
		}}
		t.Run(mc.name, func(t *testing.T) { checkFidelity(t, tgt, mc, tc.want, uint64(i)+700) })
	}
	// The IR verifier rejects a bad value; an op changed after
	// verification is still refused by the lowering.
	_, op := graphOp(t, func(b *ir.Builder) *ir.Value {
		return b.Matmul(fcIn(b, "a", ir.BF16, 1, 1, 64), fcW(b, "w", ir.BF16, 64, 64))
	})
	if _, err := ir.InferTypes(op.Kind, op.Operands, ir.Attrs{ir.FidelityAttr: "HiFi5"}); err == nil || !strings.Contains(err.Error(), "attribute \"fidelity\"") {
		t.Errorf("InferTypes with fidelity HiFi5: err %v, want it refused", err)
	}
	op.Attrs[ir.FidelityAttr] = "HiFi5"
	if _, err := Lower(op, NewContext(tgt)); err == nil || !strings.Contains(err.Error(), "attribute fidelity") || !strings.Contains(err.Error(), "matmul") {
		t.Errorf("fidelity HiFi5: err %v, want an error naming the op and the attribute", err)
	}
}

// TestFidelityPolicy: without a fidelity attribute, the matmul family runs
// at the cheapest fidelity that gives HiFi4's products for its weights'
// formats (ir.ExactMatmulFidelity: HiFi3 for bfp4_b, HiFi4 otherwise; the
// most demanding weight decides), ops with other products stay at HiFi4,
// an attribute wins, and the simulator still matches the reference.
func TestFidelityPolicy(t *testing.T) {
	tgt := target.Blackhole()
	for i, tc := range []struct {
		name  string
		build func(b *ir.Builder) *ir.Value
		want  ir.MathFidelity
	}{
		{"matmul_bf16_bfp4_b", func(b *ir.Builder) *ir.Value {
			return b.Matmul(fcIn(b, "a", ir.BF16, 1, 1, 512), fcW(b, "w", ir.BFP4B, 512, 256))
		}, ir.HiFi3},
		{"matmul_fp32_bfp4_b", func(b *ir.Builder) *ir.Value {
			return b.Matmul(fcIn(b, "a", ir.FP32, 1, 1, 256), fcW(b, "w", ir.BFP4B, 256, 128))
		}, ir.HiFi3},
		{"matmul_bf16_bfp8_b", func(b *ir.Builder) *ir.Value {
			return b.Matmul(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "w", ir.BFP8B, 256, 128))
		}, ir.HiFi4},
		{"matmul2_bfp4_b_bfp4_b", func(b *ir.Builder) *ir.Value {
			return b.Matmul2(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "w0", ir.BFP4B, 256, 128), fcW(b, "w1", ir.BFP4B, 256, 64))[0]
		}, ir.HiFi3},
		{"matmul2_bfp4_b_bfp8_b", func(b *ir.Builder) *ir.Value {
			return b.Matmul2(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "w0", ir.BFP4B, 256, 128), fcW(b, "w1", ir.BFP8B, 256, 64))[0]
		}, ir.HiFi4},
		{"matmul_add_bfp4_b", func(b *ir.Builder) *ir.Value {
			return b.MatmulAdd(fcIn(b, "a", ir.BF16, 2, 256), fcW(b, "w", ir.BFP4B, 256, 128), fcIn(b, "r", ir.BF16, 2, 128))
		}, ir.HiFi3},
		{"rmsnorm_matmul_bfp4_b", func(b *ir.Builder) *ir.Value {
			return b.RMSNormMatmul(fcIn(b, "x", ir.BF16, 1, 1, 256), fcW(b, "wn", ir.BF16, 256), fcW(b, "w", ir.BFP4B, 256, 128), 1e-6, 0)
		}, ir.HiFi4},
		{"matmul_swiglu_bfp4_b", func(b *ir.Builder) *ir.Value {
			return b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "g", ir.BFP4B, 256, 128), fcW(b, "u", ir.BFP4B, 256, 128))
		}, ir.HiFi3},
		{"matmul_swiglu_bfp8_b", func(b *ir.Builder) *ir.Value {
			return b.MatmulSwiGLU(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "g", ir.BFP8B, 256, 128), fcW(b, "u", ir.BFP8B, 256, 128))
		}, ir.HiFi4},
		{"matmul_bfp4_b_attribute", func(b *ir.Builder) *ir.Value {
			out := b.Matmul(fcIn(b, "a", ir.BF16, 1, 1, 256), fcW(b, "w", ir.BFP4B, 256, 128))
			out.Def.Attrs[ir.FidelityAttr] = "HiFi4"
			return out
		}, ir.HiFi4},
	} {
		mc := mcase{name: tc.name, build: tc.build}
		t.Run(tc.name, func(t *testing.T) { checkFidelity(t, tgt, mc, tc.want, uint64(i)+800) })
	}
}

// checkFidelity lowers mc's op, checks every compute kernel runs at want,
// and runs the case on the simulator against the reference (seed seeds
// its inputs).
func checkFidelity(t *testing.T, tgt *target.Target, mc mcase, want ir.MathFidelity, seed uint64) {
	t.Helper()
	_, op := graphOp(t, mc.build)
	p, err := Lower(op, NewContext(tgt))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range p.Kernels {
		if k.Role == kir.RoleCompute && k.Compute.MathFidelity != want {
			t.Errorf("kernel %s runs at %s, want %s", k.Name, k.Compute.MathFidelity, want)
		}
	}
	runCase(t, tgt, mc, seed)
}
